/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "jupyter-message.h"
#include "macro.h"

static void hex(const unsigned char *data, size_t n, char *out) {
        static const char digits[] = "0123456789abcdef";

        for (size_t i = 0; i < n; i++) {
                out[2 * i] = digits[data[i] >> 4];
                out[2 * i + 1] = digits[data[i] & 15];
        }
        out[2 * n] = 0;
}

static int random_hex(char *out, size_t bytes) {
        unsigned char buf[64];

        assert(bytes <= sizeof(buf));
        if (getrandom(buf, bytes, 0) != (ssize_t) bytes)
                return -errno ?: -EIO;
        hex(buf, bytes, out);
        return 0;
}

int jupyter_session_init(JupyterSession *s) {
        int r;

        *s = (JupyterSession) {};
        r = random_hex(s->key, 32);
        if (r < 0)
                return r;
        return random_hex(s->session, JUPYTER_MSG_ID_LEN / 2);
}

/* HMAC through EVP_MAC (HMAC_CTX is deprecated in OpenSSL 3); the algorithm is fetched once. */
static EVP_MAC *hmac;
static pthread_once_t hmac_once = PTHREAD_ONCE_INIT;

static void hmac_fetch(void) {
        hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
}

/* The hex HMAC-SHA256 of the four JSON frames; "" when the key is empty (signing off). */
static int sign(const JupyterSession *s, const struct iovec parts[4], char out[65]) {
        OSSL_PARAM params[] = {
                OSSL_PARAM_construct_utf8_string("digest", (char *) "SHA256", 0),
                OSSL_PARAM_construct_end(),
        };
        unsigned char mac[EVP_MAX_MD_SIZE];
        size_t mac_len = 0;
        EVP_MAC_CTX *ctx;
        int ok;

        out[0] = 0;
        if (s->key[0] == 0)
                return 0;
        pthread_once(&hmac_once, hmac_fetch);
        if (!hmac)
                return -EOPNOTSUPP;
        ctx = EVP_MAC_CTX_new(hmac);
        if (!ctx)
                return -ENOMEM;
        ok = EVP_MAC_init(ctx, (const unsigned char *) s->key, strlen(s->key), params);
        for (size_t i = 0; ok && i < 4; i++)
                ok = EVP_MAC_update(ctx, parts[i].iov_base, parts[i].iov_len);
        ok = ok && EVP_MAC_final(ctx, mac, &mac_len, sizeof(mac));
        EVP_MAC_CTX_free(ctx);
        if (!ok || mac_len != 32)
                return -EIO;
        hex(mac, mac_len, out);
        return 0;
}

static void iso_date(char *buf, size_t size) {
        struct timespec ts;
        struct tm tm;

        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                 tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
}

int jupyter_message_build(JupyterSession *s, const char *msg_type, const json_t *content, JupyterOutgoing *ret) {
        JupyterOutgoing m = {};
        char date[64];
        json_t *header;
        int r;

        snprintf(m.msg_id, sizeof(m.msg_id), "%s_%lu", s->session, ++s->counter);
        iso_date(date, sizeof(date));
        header = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "msg_id", m.msg_id, "session", s->session, "username",
                           "agentix", "date", date, "msg_type", msg_type, "version", JUPYTER_PROTOCOL_VERSION);
        if (!header)
                return -ENOMEM;
        m.header = json_dumps(header, JSON_COMPACT);
        json_decref(header);
        m.parent = strdup("{}");
        m.metadata = strdup("{}");
        m.content = content ? json_dumps(content, JSON_COMPACT) : strdup("{}");
        if (!m.header || !m.parent || !m.metadata || !m.content) {
                jupyter_outgoing_done(&m);
                return -ENOMEM;
        }
        m.frames[0] = (struct iovec) { (void *) JUPYTER_DELIMITER, strlen(JUPYTER_DELIMITER) };
        m.frames[2] = (struct iovec) { m.header, strlen(m.header) };
        m.frames[3] = (struct iovec) { m.parent, strlen(m.parent) };
        m.frames[4] = (struct iovec) { m.metadata, strlen(m.metadata) };
        m.frames[5] = (struct iovec) { m.content, strlen(m.content) };
        r = sign(s, &m.frames[2], m.signature);
        if (r < 0) {
                jupyter_outgoing_done(&m);
                return r;
        }
        m.frames[1] = (struct iovec) { m.signature, strlen(m.signature) };
        *ret = m;
        /* frames point into ret's own fields, not m's: fix them up after the copy. */
        ret->frames[1].iov_base = ret->signature;
        return 0;
}

void jupyter_outgoing_done(JupyterOutgoing *m) {
        free(m->header);
        free(m->parent);
        free(m->metadata);
        free(m->content);
        *m = (JupyterOutgoing) {};
}

static json_t *load_object(const struct iovec *f) {
        json_t *j = json_loadb(f->iov_base, f->iov_len, 0, NULL);

        if (j && !json_is_object(j)) {
                json_decref(j);
                return NULL;
        }
        return j;
}

int jupyter_message_parse(const JupyterSession *s, const struct iovec *frames, size_t n, JupyterMessage *ret) {
        JupyterMessage m = {};
        char expected[65];
        size_t d;
        int r;

        for (d = 0; d < n; d++)
                if (frames[d].iov_len == strlen(JUPYTER_DELIMITER) &&
                    memcmp(frames[d].iov_base, JUPYTER_DELIMITER, frames[d].iov_len) == 0)
                        break;
        if (d == n || n - d < 6)
                return -EBADMSG;
        r = sign(s, &frames[d + 2], expected);
        if (r < 0)
                return r;
        if (frames[d + 1].iov_len != strlen(expected) ||
            CRYPTO_memcmp(frames[d + 1].iov_base, expected, strlen(expected)) != 0)
                return -EBADMSG;

        m.header = load_object(&frames[d + 2]);
        m.parent_header = load_object(&frames[d + 3]);
        m.metadata = load_object(&frames[d + 4]);
        m.content = load_object(&frames[d + 5]);
        m.msg_type = json_string_value(json_object_get(m.header, "msg_type"));
        m.parent_msg_id = json_string_value(json_object_get(m.parent_header, "msg_id"));
        if (!m.header || !m.parent_header || !m.metadata || !m.content || !m.msg_type) {
                jupyter_message_done(&m);
                return -EINVAL;
        }
        *ret = m;
        return 0;
}

void jupyter_message_done(JupyterMessage *m) {
        json_decref(m->header);
        json_decref(m->parent_header);
        json_decref(m->metadata);
        json_decref(m->content);
        *m = (JupyterMessage) {};
}
