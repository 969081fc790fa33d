/* SPDX-License-Identifier: MIT */
#include <string.h>
#include <sys/socket.h>

#include <jansson.h>

#include "buffer.h"
#include "macro.h"
#include "runtime-hold.h"

#define HOLD_TIMEOUT_MS 10000
#define ANSWER_MAX 4096 /* the part of an answer kept for the error */

struct RuntimeHold {
        CurlEvent *curl;
        CURL *easy;
        struct curl_slist *headers;
        Buffer answer;
        runtime_hold_done_t done;
        void *userdata;
        char errbuf[CURL_ERROR_SIZE];
};

static size_t on_write(char *data, size_t size, size_t n, void *userdata) {
        RuntimeHold *h = userdata;
        size_t len = size * n, keep = h->answer.len < ANSWER_MAX ? MIN(len, ANSWER_MAX - h->answer.len) : 0;

        if (keep > 0 && buffer_append(&h->answer, data, keep) < 0)
                return 0;
        return len;
}

/* Every connection of the hold ends with a reset, not a FIN (see runtime-hold.h). */
static int on_socket(void *userdata, curl_socket_t fd, curlsocktype purpose) {
        (void) setsockopt(fd, SOL_SOCKET, SO_LINGER, &(struct linger) { .l_onoff = 1, .l_linger = 0 },
                          sizeof(struct linger));
        return CURL_SOCKOPT_OK;
}

static void on_done(CurlEvent *g, CURL *easy, CURLcode result, void *userdata) {
        RuntimeHold *h = userdata;
        _cleanup_free_ char *error = NULL;
        unsigned retry_after = 0;
        long status = 0;

        (void) curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
        if (result != CURLE_OK)
                (void) asprintf(&error, "its runtime could not be asked to hold still: %s",
                                h->errbuf[0] ? h->errbuf : curl_easy_strerror(result));
        else if (status != 200) {
                /* The sandbox's text goes into a D-Bus error: printable ASCII only (sd-bus refuses
                 * a message that is not UTF-8, and the caller would wait for nothing). */
                uint8_t *a = buffer_data(&h->answer);
                for (size_t i = 0; i < h->answer.len; i++)
                        if (a[i] < 0x20 || a[i] > 0x7e)
                                a[i] = '?';
                (void) asprintf(&error, "its runtime cannot hold still (HTTP %ld): %.*s", status,
                                (int) h->answer.len, (const char *) a);
        }
        if (result == CURLE_OK && status == 409) {
                _cleanup_(json_decrefp) json_t *j = json_loadb((const char *) buffer_data(&h->answer), h->answer.len, 0,
                                                               NULL);
                json_int_t after = json_integer_value(json_object_get(j, "retry_after"));

                if (after > 0 && after <= 3600)
                        retry_after = (unsigned) after;
        }
        /* The connection goes (with a reset) before the caller takes the next step. */
        curl_easy_cleanup(TAKE_PTR(h->easy));
        h->done(result == CURLE_OK && status == 200, error ?: (result == CURLE_OK && status == 200 ? NULL : "out of memory"),
                retry_after, h->userdata);
        runtime_hold_free(h);
}

int runtime_hold_start(CurlEvent *curl, const char *runtime_url, const char *token, runtime_hold_done_t done,
                       void *userdata, RuntimeHold **ret) {
        _cleanup_free_ char *url = NULL, *auth = NULL;
        RuntimeHold *h;
        int r;

        if (!runtime_url || !token)
                return -ENOTCONN;
        h = calloc(1, sizeof(*h));
        if (!h || asprintf(&url, "%s/runtime/hold", runtime_url) < 0 || asprintf(&auth, "X-Access-Token: %s", token) < 0) {
                free(h);
                return -ENOMEM;
        }
        *h = (RuntimeHold) { .curl = curl, .done = done, .userdata = userdata };
        h->easy = curl_easy_init();
        h->headers = curl_slist_append(NULL, auth);
        explicit_bzero(auth, strlen(auth));
        if (!h->easy || !h->headers || curl_easy_setopt(h->easy, CURLOPT_URL, url) != CURLE_OK ||
            curl_easy_setopt(h->easy, CURLOPT_HTTPHEADER, h->headers) != CURLE_OK ||
            curl_easy_setopt(h->easy, CURLOPT_POST, 1L) != CURLE_OK ||
            curl_easy_setopt(h->easy, CURLOPT_POSTFIELDS, "") != CURLE_OK ||
            curl_easy_setopt(h->easy, CURLOPT_WRITEFUNCTION, on_write) != CURLE_OK ||
            curl_easy_setopt(h->easy, CURLOPT_WRITEDATA, h) != CURLE_OK ||
            curl_easy_setopt(h->easy, CURLOPT_SOCKOPTFUNCTION, on_socket) != CURLE_OK ||
            curl_easy_setopt(h->easy, CURLOPT_ERRORBUFFER, h->errbuf) != CURLE_OK ||
            curl_easy_setopt(h->easy, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
            curl_easy_setopt(h->easy, CURLOPT_NOPROXY, "*") != CURLE_OK ||
            curl_easy_setopt(h->easy, CURLOPT_FRESH_CONNECT, 1L) != CURLE_OK ||
            curl_easy_setopt(h->easy, CURLOPT_FORBID_REUSE, 1L) != CURLE_OK ||
            curl_easy_setopt(h->easy, CURLOPT_TIMEOUT_MS, (long) HOLD_TIMEOUT_MS) != CURLE_OK) {
                runtime_hold_free(h);
                return -ENOMEM;
        }
        r = curl_event_add(curl, h->easy, on_done, h);
        if (r < 0) {
                runtime_hold_free(h);
                return r;
        }
        *ret = h;
        return 0;
}

RuntimeHold *runtime_hold_free(RuntimeHold *h) {
        if (!h)
                return NULL;
        if (h->easy) {
                curl_event_remove(h->curl, h->easy);
                curl_easy_cleanup(h->easy);
        }
        curl_slist_free_all(h->headers);
        buffer_done(&h->answer);
        free(h);
        return NULL;
}
