/* SPDX-License-Identifier: MIT */
#include <libwebsockets.h>

#include "log.h"
#include "polling-transport.h"
#include "tls.h"

/* python-engineio refuses a payload of more than 16 packets ("Too many packets in payload"):
 * a longer queue goes out over several POSTs. */
#define POST_MAX_PACKETS 16
/* Kept of a non-200 response body, for the error message. */
#define ERROR_BODY_MAX 256u

typedef struct Request {
        PollingTransport *t;
        CURL *easy;
        bool running;
        bool handshake;
        bool status_checked;
        long status;
        char errbuf[CURL_ERROR_SIZE];
        Buffer error_body;  /* a non-200 body, cut short */
        int error;          /* found while the body streamed in */

        /* the packet of a GET response being received */
        Buffer packet;
        size_t packet_len;  /* characters of it so far, kept or not */
        bool oversized;
} Request;

struct PollingTransport {
        sd_event *event;
        CurlEvent *glue;
        char *url;
        char *ca_pem;       /* https://: the only CA trusted */
        char *sandbox_id;   /* https://: the sandbox the certificate must name too, or NULL */
        char *sid;
        size_t max_payload; /* the server's, bytes of one POST body */
        uint64_t connect_timeout_usec;
        size_t max_message;
        OutQueue *queue;
        const EioTransportHandlers *handlers;
        void *userdata;

        Request get, post;
        Buffer post_body;
        size_t post_bytes;  /* queue bytes the running POST carries */
        struct curl_slist *post_headers;
        sd_event_source *kick;
        bool handshake_started;
        bool closed;
        bool shutting_down;
};

static void report_closed(PollingTransport *t, int error, const char *message) {
        if (t->closed)
                return;
        t->closed = true;
        (void) sd_event_source_set_enabled(t->kick, SD_EVENT_ONESHOT); /* stops the requests */
        if (t->handlers->closed)
                t->handlers->closed(t->userdata, error, message, false);
}

/* ---- receiving ------------------------------------------------------------------------------- */

/* 'b' + base64 of a full-size message: the longest packet a GET response may hold. */
static size_t packet_limit(const PollingTransport *t) {
        return 1 + (t->max_message + 2) / 3 * 4;
}

static int on_packet(const EioPacket *p, void *userdata) {
        PollingTransport *t = userdata;

        t->handlers->packet(t->userdata, p);
        return t->closed ? -ECANCELED : 0;
}

/* One complete packet of a GET response. */
static int finish_packet(Request *req) {
        PollingTransport *t = req->t;
        const uint8_t *d = buffer_data(&req->packet);
        int r = 0;

        if (req->packet_len == 0)
                return -EBADMSG; /* an empty packet, or an empty payload */

        if (req->oversized) {
                if (d[0] == 'b') {
                        /* Decode the kept head, cut to whole base64 quads. */
                        size_t chars = (req->packet.len - 1) / 4 * 4;
                        uint8_t head[EIO_TOO_LARGE_HEAD + 4];
                        int n = lws_b64_decode_string_len((const char *) d + 1, (int) chars, (char *) head,
                                                          (int) sizeof(head));
                        t->handlers->too_large(t->userdata, true, head, n > 0 ? MIN((size_t) n, EIO_TOO_LARGE_HEAD) : 0,
                                               (req->packet_len - 1) / 4 * 3);
                } else
                        t->handlers->too_large(t->userdata, false, d + 1, req->packet.len - 1, req->packet_len - 1);
                if (t->closed)
                        r = -ECANCELED;
        } else
                r = eio_payload_decode(d, req->packet.len, on_packet, t);

        buffer_clear(&req->packet);
        req->packet_len = 0;
        req->oversized = false;
        return r;
}

/* Feed a piece of a GET response body: split at separators, bound every packet. */
static int feed(Request *req, const uint8_t *data, size_t n) {
        PollingTransport *t = req->t;
        size_t limit = packet_limit(t);

        while (n > 0) {
                const uint8_t *sep = memchr(data, EIO_RECORD_SEPARATOR, n);
                size_t piece = sep ? (size_t) (sep - data) : n;
                int r;

                req->packet_len += piece;
                if (!req->oversized && req->packet_len > limit) {
                        /* Keep a head (its base64 when binary), skip the rest. */
                        size_t keep = 1 + (EIO_TOO_LARGE_HEAD + 2) / 3 * 4;
                        req->oversized = true;
                        if (req->packet.len > keep)
                                req->packet.len = keep;
                }
                if (req->oversized) {
                        size_t keep = 1 + (EIO_TOO_LARGE_HEAD + 2) / 3 * 4;
                        r = req->packet.len < keep
                                    ? buffer_append(&req->packet, data, MIN(piece, keep - req->packet.len))
                                    : 0;
                } else
                        r = buffer_append(&req->packet, data, piece);
                if (r < 0)
                        return r;

                if (!sep)
                        break;
                r = finish_packet(req);
                if (r < 0)
                        return r;
                data = sep + 1;
                n -= piece + 1;
        }
        return 0;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *userdata) {
        Request *req = userdata;
        PollingTransport *t = req->t;
        size_t n = size * nmemb;
        int r;

        if (t->closed)
                return 0; /* abort the transfer */

        if (!req->status_checked) {
                req->status_checked = true;
                (void) curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &req->status);
        }
        if (req->status != 200 || req == &t->post) {
                if (req->error_body.len < ERROR_BODY_MAX)
                        (void) buffer_append(&req->error_body, data, MIN(n, ERROR_BODY_MAX - req->error_body.len));
                return n;
        }

        if (t->handlers->activity)
                t->handlers->activity(t->userdata);
        r = feed(req, (const uint8_t *) data, n);
        if (r < 0 || t->closed) {
                req->error = r < 0 ? r : -ECANCELED;
                return 0;
        }
        return n;
}

/* ---- requests -------------------------------------------------------------------------------- */

static int curl_result_to_errno(CURLcode c) {
        switch (c) {
        case CURLE_COULDNT_CONNECT:
                return -ECONNREFUSED;
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
                return -EHOSTUNREACH;
        case CURLE_OPERATION_TIMEDOUT:
                return -ETIMEDOUT;
        case CURLE_OUT_OF_MEMORY:
                return -ENOMEM;
        case CURLE_GOT_NOTHING:
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
        case CURLE_PARTIAL_FILE:
                return -ECONNRESET;
        default:
                return -EIO;
        }
}

static void request_reset(Request *req) {
        req->status_checked = false;
        req->status = 0;
        req->errbuf[0] = 0;
        req->error = 0;
        buffer_done(&req->error_body);
        buffer_clear(&req->packet);
        if (req->packet.cap > 1024 * 1024)
                buffer_done(&req->packet);
        req->packet_len = 0;
        req->oversized = false;
}

static void on_done(CurlEvent *g, CURL *easy, CURLcode result, void *userdata);

static int request_start(Request *req, const char *query_sid) {
        PollingTransport *t = req->t;
        _cleanup_buffer_ Buffer url = BUFFER_NULL;
        int r;

        request_reset(req);
        r = buffer_printf(&url, "%s?EIO=4&transport=polling", t->url);
        if (r >= 0 && query_sid) {
                char *e = curl_easy_escape(req->easy, query_sid, 0);
                r = e ? buffer_printf(&url, "&sid=%s", e) : -ENOMEM;
                curl_free(e);
        }
        if (r >= 0)
                r = buffer_append_byte(&url, 0);
        if (r < 0)
                return r;
        if (curl_easy_setopt(req->easy, CURLOPT_URL, (char *) buffer_data(&url)) != CURLE_OK)
                return -ENOMEM;
        r = curl_event_add(t->glue, req->easy, on_done, req);
        if (r < 0)
                return r;
        req->running = true;
        return 0;
}

/* Fill the next POST body from the queue: up to POST_MAX_PACKETS packets, within the server's
 * maxPayload (but always at least one packet). */
static int post_start(PollingTransport *t) {
        size_t n = 0;
        OutMessage *m;
        int r = 0;

        buffer_clear(&t->post_body);
        t->post_bytes = 0;
        while ((m = t->queue->head) && n < POST_MAX_PACKETS) {
                size_t enc = m->binary ? 1 + (m->data.len + 2) / 3 * 4 : m->data.len;
                size_t saved = t->post_body.len;

                if (n > 0 && t->post_body.len + 1 + enc > t->max_payload)
                        break;
                if (m->binary)
                        r = eio_payload_append(&t->post_body, EIO_MESSAGE, true, buffer_data(&m->data), m->data.len);
                else {
                        /* Already "<type digit><data>": the packet's polling form. */
                        r = t->post_body.len > 0 ? buffer_append_byte(&t->post_body, EIO_RECORD_SEPARATOR) : 0;
                        if (r >= 0)
                                r = buffer_append(&t->post_body, buffer_data(&m->data), m->data.len);
                }
                if (r < 0) {
                        t->post_body.len = saved;
                        break;
                }
                t->post_bytes += m->data.len;
                t->queue->inflight += m->data.len;
                out_message_free(out_queue_pop(t->queue));
                n++;
        }
        if (n == 0)
                return r < 0 ? r : 0;

        if (curl_easy_setopt(t->post.easy, CURLOPT_POSTFIELDS, (char *) buffer_data(&t->post_body)) != CURLE_OK ||
            curl_easy_setopt(t->post.easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) t->post_body.len) != CURLE_OK)
                return -ENOMEM;
        return request_start(&t->post, t->sid);
}

static void post_finished(PollingTransport *t) {
        t->queue->inflight -= MIN(t->queue->inflight, t->post_bytes);
        t->post_bytes = 0;
        buffer_clear(&t->post_body);
        if (t->post_body.cap > 1024 * 1024)
                buffer_done(&t->post_body);
}

static void request_failed(Request *req, CURLcode result) {
        PollingTransport *t = req->t;
        const char *what = req->handshake ? "handshake" : req == &t->post ? "POST" : "poll";
        char text[512];
        int error;

        if (req->error && req->error != -ECANCELED) {
                error = req->error;
                snprintf(text, sizeof(text), "Engine.IO polling %s: %s", what,
                         error == -EBADMSG ? "malformed payload" : strerror(-error));
        } else if (result != CURLE_OK) {
                error = curl_result_to_errno(result);
                snprintf(text, sizeof(text), "Engine.IO polling %s to %s failed: %s", what, t->url,
                         req->errbuf[0] ? req->errbuf : curl_easy_strerror(result));
        } else {
                /* A 400 after the handshake: the server no longer knows the session. */
                error = req->handshake ? -EPROTO : -ECONNRESET;
                snprintf(text, sizeof(text), "Engine.IO polling %s: HTTP status %ld%s%.*s", what, req->status,
                         req->error_body.len > 0 ? ": " : "", (int) req->error_body.len,
                         (const char *) buffer_data(&req->error_body) ?: "");
        }
        report_closed(t, error, text);
}

static void on_done(CurlEvent *g, CURL *easy, CURLcode result, void *userdata) {
        Request *req = userdata;
        PollingTransport *t = req->t;
        int r;

        req->running = false;
        if (req == &t->post)
                post_finished(t);
        if (t->closed)
                return;

        if (result != CURLE_OK || req->error || req->status != 200) {
                request_failed(req, result);
                return;
        }

        if (req == &t->get) {
                /* The body's last packet has no separator after it. */
                r = finish_packet(req);
                if (r < 0 && !t->closed) {
                        req->error = r;
                        request_failed(req, CURLE_OK);
                        return;
                }
                if (t->closed)
                        return;
                if (req->handshake && !t->sid) {
                        report_closed(t, -EPROTO, "the Engine.IO handshake did not open a session");
                        return;
                }
                req->handshake = false;
        } else if (req->error_body.len != 2 || memcmp(buffer_data(&req->error_body), "ok", 2) != 0)
                log_debug("Engine.IO POST answered with something else than \"ok\".");
        request_reset(req);

        /* Poll again, send what waits: from the loop (we are in a curl callback chain). */
        (void) sd_event_source_set_enabled(t->kick, SD_EVENT_ONESHOT);
        if (req == &t->post && t->handlers->sent)
                t->handlers->sent(t->userdata);
}

static int on_kick(sd_event_source *s, void *userdata) {
        PollingTransport *t = userdata;
        int r = 0;

        if (t->closed) {
                /* Stop what still runs: the peer sees the connections go. */
                if (t->get.running)
                        curl_event_remove(t->glue, t->get.easy);
                if (t->post.running) {
                        curl_event_remove(t->glue, t->post.easy);
                        post_finished(t);
                }
                t->get.running = t->post.running = false;
                return 0;
        }

        if (!t->handshake_started) {
                t->handshake_started = true;
                t->get.handshake = true;
                r = request_start(&t->get, NULL);
        } else if (t->sid) {
                if (!t->get.running && !t->shutting_down)
                        r = request_start(&t->get, t->sid);
                if (r >= 0 && !t->post.running && !out_queue_is_empty(t->queue))
                        r = post_start(t);
                if (r >= 0 && t->shutting_down && !t->post.running && out_queue_is_empty(t->queue))
                        report_closed(t, -ECONNRESET, "closed");
        }
        if (r < 0)
                report_closed(t, r, "Failed to start an Engine.IO polling request");
        return 0;
}

/* ---- the transport --------------------------------------------------------------------------- */

static CURLcode on_ssl_ctx(CURL *easy, void *ssl_ctx, void *userdata) {
        PollingTransport *t = userdata;

        return tls_context_require_sandbox(ssl_ctx, t->sandbox_id) < 0 ? CURLE_SSL_CERTPROBLEM : CURLE_OK;
}

static int request_init(PollingTransport *t, Request *req, bool post) {
        long connect_ms = (long) MAX(t->connect_timeout_usec / 1000, (uint64_t) 1);

        req->t = t;
        req->easy = curl_easy_init();
        if (!req->easy)
                return -ENOMEM;
        if (curl_easy_setopt(req->easy, CURLOPT_WRITEFUNCTION, on_write) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_WRITEDATA, req) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_ERRORBUFFER, req->errbuf) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_CONNECTTIMEOUT_MS, connect_ms) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_BUFFERSIZE, 256L * 1024L) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_HTTP_VERSION, (long) CURL_HTTP_VERSION_1_1) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK)
                return -ENOMEM;
        if (t->ca_pem) {
                struct curl_blob ca = { .data = t->ca_pem, .len = strlen(t->ca_pem), .flags = CURL_BLOB_NOCOPY };
                /* The runtime CA alone: not the system's store. */
                if (curl_easy_setopt(req->easy, CURLOPT_CAINFO_BLOB, &ca) != CURLE_OK ||
                    curl_easy_setopt(req->easy, CURLOPT_CAPATH, NULL) != CURLE_OK)
                        return -ENOMEM;
                /* curl checks the URL's address; OpenSSL the sandbox's name (tls.h). */
                if (t->sandbox_id && (curl_easy_setopt(req->easy, CURLOPT_SSL_CTX_FUNCTION, on_ssl_ctx) != CURLE_OK ||
                                      curl_easy_setopt(req->easy, CURLOPT_SSL_CTX_DATA, t) != CURLE_OK))
                        return -ENOMEM;
        }
        if (post && (curl_easy_setopt(req->easy, CURLOPT_POST, 1L) != CURLE_OK ||
                     curl_easy_setopt(req->easy, CURLOPT_HTTPHEADER, t->post_headers) != CURLE_OK))
                return -ENOMEM;
        return 0;
}

int polling_transport_new(sd_event *event, CurlEvent *glue, const char *url, const char *ca_pem, const char *sandbox_id,
                          uint64_t connect_timeout_usec, size_t max_message, OutQueue *queue,
                          const EioTransportHandlers *handlers, void *userdata, PollingTransport **ret) {
        PollingTransport *t;
        int r;

        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->event = sd_event_ref(event);
        t->glue = glue;
        t->connect_timeout_usec = connect_timeout_usec;
        t->max_message = max_message;
        t->max_payload = SIZE_MAX;
        t->queue = queue;
        t->handlers = handlers;
        t->userdata = userdata;
        t->url = strdup(url);
        if (!t->url || (ca_pem && !(t->ca_pem = strdup(ca_pem))) ||
            (sandbox_id && !(t->sandbox_id = strdup(sandbox_id)))) {
                r = -ENOMEM;
                goto fail;
        }

        /* "Expect:" turns off curl's 100-continue wait before big bodies. */
        struct curl_slist *h = curl_slist_append(NULL, "Content-Type: text/plain;charset=UTF-8");
        if (h)
                t->post_headers = h;
        if (!h || !(h = curl_slist_append(t->post_headers, "Expect:"))) {
                r = -ENOMEM;
                goto fail;
        }

        r = request_init(t, &t->get, false);
        if (r >= 0)
                r = request_init(t, &t->post, true);
        if (r < 0)
                goto fail;

        /* Everything starts from the loop, so that handlers never run inside this call. */
        r = sd_event_add_defer(event, &t->kick, on_kick, t);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_description(t->kick, "eio-polling-kick");

        *ret = t;
        return 0;
fail:
        polling_transport_free(t);
        return r;
}

int polling_transport_set_sid(PollingTransport *t, const char *sid, size_t max_payload) {
        char *s;

        if (t->sid)
                return -EBUSY;
        s = strdup(sid);
        if (!s)
                return -ENOMEM;
        t->sid = s;
        t->max_payload = max_payload > 0 ? max_payload : SIZE_MAX;
        return 0;
}

void polling_transport_kick(PollingTransport *t) {
        if (t && !t->closed && t->sid)
                (void) sd_event_source_set_enabled(t->kick, SD_EVENT_ONESHOT);
}

void polling_transport_shutdown(PollingTransport *t) {
        if (!t || t->closed)
                return;
        t->shutting_down = true;
        (void) sd_event_source_set_enabled(t->kick, SD_EVENT_ONESHOT);
}

void polling_transport_close(PollingTransport *t) {
        if (!t || t->closed)
                return;
        t->closed = true;
        (void) sd_event_source_set_enabled(t->kick, SD_EVENT_ONESHOT);
}

static void request_done(PollingTransport *t, Request *req) {
        if (req->easy) {
                if (req->running)
                        curl_event_remove(t->glue, req->easy);
                curl_easy_cleanup(req->easy);
        }
        req->running = false;
        buffer_done(&req->error_body);
        buffer_done(&req->packet);
}

PollingTransport *polling_transport_free(PollingTransport *t) {
        if (!t)
                return NULL;
        t->closed = true;
        request_done(t, &t->get);
        request_done(t, &t->post);
        if (t->post_bytes > 0)
                post_finished(t);
        buffer_done(&t->post_body);
        curl_slist_free_all(t->post_headers);
        sd_event_source_disable_unref(t->kick);
        sd_event_unref(t->event);
        free(t->sid);
        free(t->url);
        free(t->ca_pem);
        free(t->sandbox_id);
        free(t);
        return NULL;
}
