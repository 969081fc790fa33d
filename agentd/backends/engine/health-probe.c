/* SPDX-License-Identifier: MIT */
#include <curl/curl.h>

#include "health-probe.h"
#include "macro.h"

#define PROBE_TIMEOUT_MS 2000L

struct HealthProbe {
        CurlEvent *curl;
        CURL *easy;
        health_probe_done_t done;
        void *userdata;
};

static size_t discard(char *data, size_t size, size_t n, void *userdata) {
        return size * n;
}

int health_probe_new(CurlEvent *g, const char *runtime_url, health_probe_done_t done, void *userdata,
                     HealthProbe **ret) {
        _cleanup_free_ char *url = NULL;
        HealthProbe *p;

        if (asprintf(&url, "%s/health", runtime_url) < 0)
                return -ENOMEM;
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        *p = (HealthProbe) { .curl = g, .done = done, .userdata = userdata, .easy = curl_easy_init() };
        if (!p->easy) {
                free(p);
                return -ENOMEM;
        }
        curl_easy_setopt(p->easy, CURLOPT_URL, url); /* libcurl copies it */
        curl_easy_setopt(p->easy, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(p->easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(p->easy, CURLOPT_TIMEOUT_MS, PROBE_TIMEOUT_MS);
        curl_easy_setopt(p->easy, CURLOPT_NOPROXY, "*");
        *ret = p;
        return 0;
}

static void on_done(CurlEvent *g, CURL *easy, CURLcode result, void *userdata) {
        HealthProbe *p = userdata;
        long status = 0;

        if (result == CURLE_OK)
                curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
        p->done(p->userdata, status == 200); /* last: it may free p */
}

int health_probe_start(HealthProbe *p) {
        return curl_event_add(p->curl, p->easy, on_done, p);
}

HealthProbe *health_probe_free(HealthProbe *p) {
        if (!p)
                return NULL;
        curl_event_remove(p->curl, p->easy); /* a no-op unless one is in flight */
        curl_easy_cleanup(p->easy);
        free(p);
        return NULL;
}
