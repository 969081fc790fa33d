/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <limits.h>

#include "sio-packet.h"

/* Event names the reference parser refuses on the wire: they have a local meaning in the
 * Socket.IO libraries, so a peer sending one is broken or hostile. */
static const char *const reserved_events[] = {
        "connect",
        "connect_error",
        "disconnect",
        "disconnecting",
        "newListener",
        "removeListener",
};

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

int sio_placeholder_num(const json_t *v) {
        json_t *num;
        json_int_t k;

        if (!json_is_object(v) || !json_is_true(json_object_get(v, "_placeholder")))
                return -1;
        num = json_object_get(v, "num");
        if (!json_is_integer(num))
                return -1;
        k = json_integer_value(num);
        if (k < 0 || k > INT_MAX)
                return -1;
        return (int) k;
}

json_t *sio_placeholder_new(unsigned num) {
        return json_pack("{s:b,s:I}", "_placeholder", 1, "num", (json_int_t) num);
}

/* The reference decoder treats every object with "_placeholder": true as a placeholder (and
 * fails when its num is bad), so the same objects count here. */
static bool looks_like_placeholder(const json_t *v) {
        return json_is_object(v) && json_is_true(json_object_get(v, "_placeholder"));
}

typedef struct PlaceholderScan {
        unsigned attachments;
        unsigned found;
        uint8_t seen[SIO_ATTACHMENTS_MAX / 8];
} PlaceholderScan;

/* Recursion depth is bounded by jansson's parser, which refuses nesting deeper than 2048. */
static int scan_placeholders(const json_t *v, PlaceholderScan *s) {
        const char *key;
        json_t *child;
        size_t i;
        int r;

        if (looks_like_placeholder(v)) {
                int num = sio_placeholder_num(v);

                if (num < 0 || (unsigned) num >= s->attachments)
                        return -EBADMSG;
                if (s->seen[num / 8] & (1u << (num % 8)))
                        return -EBADMSG; /* two placeholders for one attachment */
                s->seen[num / 8] |= (uint8_t) (1u << (num % 8));
                s->found++;
                return 0;
        }

        if (json_is_array(v)) {
                json_array_foreach(v, i, child) {
                        r = scan_placeholders(child, s);
                        if (r < 0)
                                return r;
                }
        } else if (json_is_object(v)) {
                json_object_foreach((json_t *) v, key, child) {
                        r = scan_placeholders(child, s);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

static bool is_binary_type(SioType t) {
        return t == SIO_BINARY_EVENT || t == SIO_BINARY_ACK;
}

static bool event_name_is_valid(const json_t *name) {
        const char *s = json_string_value(name);

        if (!s)
                return false;
        /* A NUL inside the name would make it compare equal to a shorter one in C. */
        if (strlen(s) != json_string_length(name))
                return false;
        for (size_t i = 0; i < ELEMENTSOF(reserved_events); i++)
                if (streq(s, reserved_events[i]))
                        return false;
        return true;
}

static bool payload_is_valid(SioType type, const json_t *data) {
        switch (type) {
        case SIO_CONNECT:
                return !data || json_is_object(data);
        case SIO_DISCONNECT:
                return !data;
        case SIO_EVENT:
        case SIO_BINARY_EVENT:
                return json_is_array(data) && json_array_size(data) > 0 &&
                       event_name_is_valid(json_array_get(data, 0));
        case SIO_ACK:
        case SIO_BINARY_ACK:
                return json_is_array(data);
        case SIO_CONNECT_ERROR:
                return json_is_object(data) || json_is_string(data);
        default:
                return false;
        }
}

/* Parse unsigned decimal digits at s[*i..n) up to `max`; at least one digit. */
static int parse_number(const char *s, size_t n, size_t *i, uint64_t max, uint64_t *ret) {
        uint64_t v = 0;
        size_t start = *i;

        while (*i < n && is_digit(s[*i])) {
                if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t) (s[*i] - '0'), &v) ||
                    v > max)
                        return -EBADMSG;
                (*i)++;
        }
        if (*i == start)
                return -EBADMSG;
        *ret = v;
        return 0;
}

int sio_packet_decode(const char *s, size_t n, SioPacket *ret) {
        _cleanup_free_ char *nsp = NULL;
        json_t *data = NULL;
        unsigned attachments = 0;
        int64_t ack_id = -1;
        size_t i = 1;
        SioType type;
        int r;

        if (!s || n == 0 || s[0] < '0' || s[0] >= '0' + _SIO_TYPE_MAX)
                return -EBADMSG;
        type = (SioType) (s[0] - '0');

        if (is_binary_type(type)) {
                uint64_t k;

                r = parse_number(s, n, &i, SIO_ATTACHMENTS_MAX, &k);
                if (r < 0 || k == 0 || i >= n || s[i] != '-')
                        return -EBADMSG;
                attachments = (unsigned) k;
                i++;
        }

        if (i < n && s[i] == '/') {
                const char *comma = memchr(s + i, ',', n - i);
                size_t len = comma ? (size_t) (comma - (s + i)) : n - i;

                if (len > SIO_NSP_MAX || memchr(s + i, 0, len))
                        return -EBADMSG;
                nsp = strndup(s + i, len);
                if (!nsp)
                        return -ENOMEM;
                i += len + (comma ? 1 : 0);
        } else {
                nsp = strdup("/");
                if (!nsp)
                        return -ENOMEM;
        }

        if (i < n && is_digit(s[i])) {
                uint64_t k;

                r = parse_number(s, n, &i, INT64_MAX, &k);
                if (r < 0)
                        return r;
                ack_id = (int64_t) k;
        }

        if (i < n) {
                /* The rest must be exactly one JSON value (jansson checks nothing follows it).
                 * NUL is allowed inside strings, as JSON.parse allows it. */
                data = json_loadb(s + i, n - i, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
                if (!data)
                        return -EBADMSG;
        }

        if (!payload_is_valid(type, data)) {
                json_decref(data);
                return -EBADMSG;
        }

        if (data) {
                PlaceholderScan scan = { .attachments = attachments };

                r = scan_placeholders(data, &scan);
                if (r < 0 || scan.found != attachments) {
                        json_decref(data);
                        return -EBADMSG;
                }
        }
        /* BINARY_* always carry data (payload_is_valid() wants an array), so `attachments`
         * placeholders were found; the other types have attachments == 0. */

        *ret = (SioPacket) {
                .type = type,
                .nsp = TAKE_PTR(nsp),
                .ack_id = ack_id,
                .attachments = attachments,
                .data = data,
        };
        return 0;
}

static bool nsp_is_valid(const char *nsp) {
        size_t n = strlen(nsp);

        return n > 0 && n <= SIO_NSP_MAX && nsp[0] == '/' && !strchr(nsp, ',');
}

static bool nsp_is_root(const char *nsp) {
        return !nsp || streq(nsp, "/");
}

typedef struct DumpTarget {
        Buffer *out;
        int error;
} DumpTarget;

static int dump_to_buffer(const char *buf, size_t size, void *userdata) {
        DumpTarget *t = userdata;

        t->error = buffer_append(t->out, buf, size);
        return t->error < 0 ? -1 : 0;
}

int sio_packet_encode(const SioPacket *p, Buffer *out) {
        size_t saved = out->len;
        int r;

        if (!p || (unsigned) p->type >= _SIO_TYPE_MAX)
                return -EINVAL;
        if (!nsp_is_root(p->nsp) && !nsp_is_valid(p->nsp))
                return -EINVAL;

        r = buffer_printf(out, "%u", (unsigned) p->type);
        if (r >= 0 && is_binary_type(p->type))
                r = buffer_printf(out, "%u-", p->attachments);
        if (r >= 0 && !nsp_is_root(p->nsp))
                r = buffer_printf(out, "%s,", p->nsp);
        if (r >= 0 && p->ack_id >= 0)
                r = buffer_printf(out, "%" PRIi64, p->ack_id);
        if (r >= 0 && p->data) {
                DumpTarget t = { .out = out };

                if (json_dump_callback(p->data, dump_to_buffer, &t,
                                       JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY) < 0)
                        r = t.error < 0 ? t.error : -EINVAL;
        }
        if (r < 0)
                out->len = saved;
        return r;
}

void sio_packet_done(SioPacket *p) {
        if (!p)
                return;
        free(p->nsp);
        json_decref(p->data);
        *p = SIO_PACKET_NULL;
}

/* Printable ASCII other than the two characters JSON escapes. */
static bool needs_no_json_escaping(const char *s) {
        for (; *s; s++)
                if (*s < 0x20 || *s > 0x7e || *s == '"' || *s == '\\')
                        return false;
        return true;
}

int sio_encode_binary_event1(Buffer *out, const char *nsp, const char *event) {
        bool root = nsp_is_root(nsp);

        if (!event || !needs_no_json_escaping(event))
                return -EINVAL;
        if (!root && (!nsp_is_valid(nsp) || !needs_no_json_escaping(nsp)))
                return -EINVAL;

        /* '4' is the Engine.IO MESSAGE type, as the header's example shows. */
        return buffer_printf(out, "451-%s%s[\"%s\",{\"_placeholder\":true,\"num\":0}]",
                             root ? "" : nsp, root ? "" : ",", event);
}
