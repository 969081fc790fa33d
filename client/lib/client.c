/* SPDX-License-Identifier: MIT */
/* The client: one Socket.IO session at a time to one runtime server, the table of calls in
 * flight, and what happens around reconnects (resume, queued messages). The calls themselves
 * are request.c. */

#include <jansson.h>

#include "agentix-private.h"
#include "call-envelope.h"
#include "client-internal.h"
#include "error.h"
#include "log.h"
#include "mp-check.h"
#include "tls.h"
#include "value.h"

#define USEC_PER_SEC 1000000ULL

static void client_free_now(agentix_client *c);
static void client_session_end(agentix_client *c, const agentix_error *e);
static int client_start_sio(agentix_client *c, bool reconnect);
static void ack_ring_clear(agentix_client *c);

static bool url_is_supported(const char *url) {
        static const char *const schemes[] = { "http://", "https://", "ws://", "wss://" };

        for (size_t i = 0; i < ELEMENTSOF(schemes); i++)
                if (strneq(url, schemes[i], strlen(schemes[i])) && url[strlen(schemes[i])])
                        return true;
        return false;
}

/* $AGENTIX_CA_FILE's text: the CA of an https:// runtime when the caller gives none. */
static int read_ca_file(char **ret) {
        const char *path = getenv("AGENTIX_CA_FILE");
        _cleanup_fclose_ FILE *f = NULL;
        char *text = NULL;
        size_t size = 0;
        ssize_t n;

        if (strempty(path))
                return -ENOKEY;
        f = fopen(path, "re");
        if (!f)
                return negative_errno();
        n = getdelim(&text, &size, '\0', f); /* the whole file: a PEM holds no NUL */
        if (n <= 0 || n > 1024 * 1024) {
                free(text);
                return n < 0 && ferror(f) ? -EIO : -EINVAL;
        }
        *ret = text;
        return 0;
}

AGENTIX_API int agentix_client_new(const agentix_options *o, sd_event *event, agentix_client **ret) {
        agentix_client *c;
        int r;

        if (!o || !ret || !o->url || !url_is_supported(o->url))
                return -EINVAL;
        log_parse_env(); /* AGENTIX_LOG_LEVEL=debug shows what the client does */
        if (o->transport < AGENTIX_TRANSPORT_AUTO || o->transport > AGENTIX_TRANSPORT_POLLING)
                return -EINVAL;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->n_ref = 1;
        c->options = *o;
        c->url = strdup(o->url);
        c->calls = strmap_new();
        if (!c->url || !c->calls) {
                r = -ENOMEM;
                goto fail;
        }
        c->options.url = c->url;
        c->options.token = NULL;
        c->options.ca_pem = NULL;
        if (tls_url_is_secure(o->url)) {
                r = o->ca_pem ? ((c->ca_pem = strdup(o->ca_pem)) ? 0 : -ENOMEM) : read_ca_file(&c->ca_pem);
                if (r < 0)
                        goto fail;
                c->options.ca_pem = c->ca_pem;
        }
        if (o->token) {
                json_t *auth = json_pack("{s:s}", "token", o->token);

                c->auth_json = auth ? json_dumps(auth, JSON_COMPACT) : NULL;
                json_decref(auth);
                if (!c->auth_json) {
                        r = -EINVAL; /* not UTF-8 */
                        goto fail;
                }
        }
        if (c->options.connect_timeout_usec == 0)
                c->options.connect_timeout_usec = 10 * USEC_PER_SEC;
        if (c->options.reconnect_timeout_usec == 0)
                c->options.reconnect_timeout_usec = 60 * USEC_PER_SEC;
        if (c->options.max_message == 0)
                c->options.max_message = 256u * MIB;

        if (event)
                c->event = sd_event_ref(event);
        else {
                r = sd_event_new(&c->event);
                if (r < 0)
                        goto fail;
                c->own_event = true;
        }
        *ret = c;
        return 0;

fail:
        strmap_free(c->calls);
        free(c->ca_pem);
        free(c->url);
        free(c->auth_json);
        free(c);
        return r;
}

AGENTIX_API agentix_client *agentix_client_ref(agentix_client *c) {
        if (c)
                c->n_ref++;
        return c;
}

void client_enter(agentix_client *c) {
        c->dispatching++;
}

/* The Socket.IO client may be freed from inside its own callbacks, so the only frames that
 * must finish first are ours. */
void client_leave(agentix_client *c) {
        if (--c->dispatching == 0 && c->free_pending)
                client_free_now(c);
}

AGENTIX_API agentix_client *agentix_client_unref(agentix_client *c) {
        if (!c)
                return NULL;
        if (c->n_ref == 0 || --c->n_ref > 0 || c->freeing)
                return NULL;
        c->freeing = true;
        if (c->dispatching > 0) {
                c->free_pending = true; /* client_leave() frees it */
                return NULL;
        }
        client_free_now(c);
        return NULL;
}

static void outbox_clear(agentix_client *c) {
        OutMsg *m;

        while ((m = c->out_head)) {
                c->out_head = m->next;
                client_account(c, -(ssize_t) m->size);
                free(m);
        }
        c->out_tail = NULL;
}

static void client_free_now(agentix_client *c) {
        agentix_request *r;

        log_debug("Freeing the client of %s.", c->url);
        c->freeing = true;
        c->free_pending = false;
        c->dispatching++; /* handlers run below; nothing may free us twice */
        client_flush_acks(c); /* over WebSocket they still leave before the socket closes */
        client_session_end(c, &(agentix_error) { .kind = AGENTIX_E_CONNECTION, .code = -ECONNABORTED,
                                                  .message = (char *) "the client was freed while the call ran" });
        while ((r = c->requests_head))
                request_detach(r);
        outbox_clear(c);
        ack_ring_clear(c);
        sio_client_free(c->sio);
        sd_event_source_disable_unref(c->connect_timer);
        sd_event_source_disable_unref(c->ack_source);
        strmap_free(c->calls);
        sd_event_unref(c->event);
        free(c->url);
        free(c->ca_pem);
        free(c->sandbox_id);
        free(c->auth_json);
        free(c);
}

AGENTIX_API int agentix_client_set_sandbox_id(agentix_client *c, const char *id) {
        char name[TLS_SANDBOX_NAME_MAX], *copy = NULL;

        if (!c || (id && tls_sandbox_name(id, name, sizeof(name)) < 0))
                return -EINVAL;
        if (id && !(copy = strdup(id)))
                return -ENOMEM;
        free(c->sandbox_id);
        c->sandbox_id = copy;
        return 0;
}

AGENTIX_API sd_event *agentix_client_get_event(agentix_client *c) {
        return c ? c->event : NULL;
}

AGENTIX_API bool agentix_client_is_connected(agentix_client *c) {
        return c && client_is_connected(c);
}

bool client_is_connected(agentix_client *c) {
        /* The Socket.IO client knows of a drop before its callback tells us. */
        return c->state == CLIENT_CONNECTED && sio_client_is_connected(c->sio);
}

AGENTIX_API const char *agentix_client_transport(agentix_client *c) {
        if (!c || !client_is_connected(c))
                return NULL;
        return sio_client_transport_name(c->sio);
}

AGENTIX_API void agentix_client_set_disconnect_handler(agentix_client *c, agentix_disconnect_handler h,
                                                       void *userdata) {
        if (!c)
                return;
        c->disconnect_handler = h;
        c->disconnect_userdata = userdata;
}

void client_account(agentix_client *c, ssize_t delta) {
        c->queued_bytes += (size_t) delta;
}

size_t client_queue_limit(agentix_client *c) {
        return MAX((size_t) CLIENT_MAX_QUEUED_BYTES, c->options.max_message);
}

int client_not_connected_error(agentix_client *c, agentix_error *ret_error) {
        if (c->freeing)
                return error_set(ret_error, AGENTIX_E_CONNECTION, -ENOTCONN, "the client is being freed");
        if (c->closing)
                return error_set(ret_error, AGENTIX_E_CONNECTION, -ENOTCONN, "the client is being closed");
        return error_set(ret_error, AGENTIX_E_CONNECTION, -ENOTCONN,
                         "not connected to %s: call agentix_client_connect() first", c->url);
}

int client_emit(agentix_client *c, const char *event, const void *data, size_t size, bool queue) {
        OutMsg *m;
        int r;

        if (size > c->options.max_message)
                return -EMSGSIZE;
        if (client_is_connected(c)) {
                sio_client_hold(c->sio);
                r = sio_client_emit_binary1(c->sio, event, data, size);
                /* Acks waiting to be sent go right behind, in the same write. */
                if (r >= 0)
                        client_flush_acks(c);
                sio_client_release(c->sio);
                if (r != -ENOTCONN)
                        return r;
        }
        if (!queue || c->state == CLIENT_IDLE)
                return -ENOTCONN;
        if (c->queued_bytes + size > client_queue_limit(c))
                return -ENOBUFS;

        m = malloc(sizeof(*m) + size);
        if (!m)
                return -ENOMEM;
        m->next = NULL;
        m->event = event; /* always one of the EV_* literals */
        m->size = size;
        memcpy(m->data, data, size);
        if (c->out_tail)
                c->out_tail->next = m;
        else
                c->out_head = m;
        c->out_tail = m;
        client_account(c, (ssize_t) size);
        return 0;
}

static char *free_str(char *s) {
        free(s);
        return NULL;
}

static void emit_ack(agentix_client *c, const char *id) {
        _cleanup_buffer_ Buffer b = BUFFER_NULL;

        if (rpc_envelope_call_id(&b, id, strlen(id)) >= 0)
                (void) client_emit(c, EV_ACK, buffer_data(&b), b.len, true);
}

/* Acks do not go out the moment a result is delivered: that would put a write (and the
 * server's handling of the ack) between the result and the caller's next call. They wait
 * and go out behind the next message the client sends (in the same write), when the loop
 * finds nothing else to do, before a close, or when ACKS_PENDING_MAX of them wait. The
 * server keeps a result until its ack, so waiting only costs server memory meanwhile. */
void client_flush_acks(agentix_client *c) {
        unsigned n = c->n_pending_acks;

        if (n == 0)
                return;
        c->n_pending_acks = 0;
        (void) sd_event_source_set_enabled(c->ack_source, SD_EVENT_OFF);
        /* Without a connection the ring sends them again after the reconnect. */
        if (!client_is_connected(c))
                return;
        sio_client_hold(c->sio);
        for (unsigned i = 0; i < n; i++)
                emit_ack(c, c->pending_acks[i]);
        sio_client_release(c->sio);
}

static int on_ack_idle(sd_event_source *s, void *userdata) {
        client_flush_acks(userdata);
        return 0;
}

void client_ack(agentix_client *c, const char *id) {
        char **slot = &c->acked[c->acked_next];
        int r;

        free(*slot);
        *slot = strdup(id);
        c->acked_next = (c->acked_next + 1) % ACK_RING;

        if (!client_is_connected(c) || strlen(id) > RPC_CALL_ID_MAX) {
                emit_ack(c, id); /* queued for the next connection */
                return;
        }
        strcpy(c->pending_acks[c->n_pending_acks++], id);
        if (c->n_pending_acks >= ACKS_PENDING_MAX) {
                client_flush_acks(c);
                return;
        }
        if (c->ack_source)
                r = sd_event_source_set_enabled(c->ack_source, SD_EVENT_ONESHOT);
        else {
                r = sd_event_add_defer(c->event, &c->ack_source, on_ack_idle, c);
                if (r >= 0)
                        r = sd_event_source_set_priority(c->ack_source, SD_EVENT_PRIORITY_IDLE);
                if (r >= 0)
                        r = sd_event_source_set_enabled(c->ack_source, SD_EVENT_ONESHOT);
                if (r >= 0)
                        (void) sd_event_source_set_description(c->ack_source, "agentix-acks");
        }
        if (r < 0)
                client_flush_acks(c);
}

void client_forget_ack(agentix_client *c, const char *id) {
        /* A waiting ack for this call_id must reach the server before the new call does. */
        for (unsigned i = 0; i < c->n_pending_acks; i++)
                if (streq(c->pending_acks[i], id)) {
                        client_flush_acks(c);
                        break;
                }
        for (unsigned i = 0; i < ACK_RING; i++)
                if (c->acked[i] && streq(c->acked[i], id))
                        c->acked[i] = free_str(c->acked[i]);
}

static void ack_ring_clear(agentix_client *c) {
        for (unsigned i = 0; i < ACK_RING; i++)
                c->acked[i] = free_str(c->acked[i]);
}

/* ---- the Socket.IO session -------------------------------------------------------------- */

/* Done with this Socket.IO client (it may be the one whose callback is running: it allows
 * that). */
static void retire_sio(agentix_client *c) {
        c->sio = sio_client_free(c->sio);
}

/* Unfinished requests, each with a reference, so handlers may do anything meanwhile. */
static agentix_request **snapshot_requests(agentix_client *c, size_t *ret_n) {
        size_t n = strmap_size(c->calls), i = 0;
        agentix_request **a;

        a = calloc(n ?: 1, sizeof(*a));
        if (!a)
                return NULL;
        for (agentix_request *r = c->requests_head; r && i < n; r = r->next)
                if (r->in_table)
                        a[i++] = agentix_request_ref(r);
        *ret_n = i;
        return a;
}

static void release_snapshot(agentix_request **a, size_t n) {
        for (size_t i = 0; i < n; i++)
                agentix_request_unref(a[i]);
        free(a);
}

static void fail_all(agentix_client *c, const agentix_error *e) {
        agentix_request **a;
        size_t n = 0;

        a = snapshot_requests(c, &n);
        if (!a) {
                /* Out of memory: fail them one by one from the head (each leaves the table). */
                for (agentix_request *r = c->requests_head; r;) {
                        agentix_request *next = r->next;
                        if (r->in_table) {
                                request_fail(r, e);
                                r = c->requests_head;
                                continue;
                        }
                        r = next;
                }
                return;
        }
        for (size_t i = 0; i < n; i++)
                request_fail(a[i], e);
        release_snapshot(a, n);
}

/* The session is over for good: fail what is left, tell the user. */
static void client_session_end(agentix_client *c, const agentix_error *e) {
        agentix_connect_handler h;
        bool was_connecting, was_connected;

        if (c->state == CLIENT_IDLE)
                return;
        was_connecting = c->state == CLIENT_CONNECTING;
        was_connected = c->connected_once;
        c->state = CLIENT_IDLE;
        c->connect_timer = sd_event_source_disable_unref(c->connect_timer);
        c->n_pending_acks = 0;
        (void) sd_event_source_set_enabled(c->ack_source, SD_EVENT_OFF);
        retire_sio(c);
        outbox_clear(c);

        fail_all(c, e);

        h = c->connect_handler;
        c->connect_handler = NULL;
        if (was_connecting && h)
                h(c, e, c->connect_userdata);
        if (was_connected && c->disconnect_handler)
                c->disconnect_handler(c, e, c->disconnect_userdata);
}

static void emit_resume(agentix_client *c, const char *const *ids, size_t n) {
        for (size_t i = 0; i < n; i += RESUME_BATCH) {
                _cleanup_buffer_ Buffer b = BUFFER_NULL;
                size_t k = MIN(n - i, (size_t) RESUME_BATCH);
                int r;

                r = call_envelope_pack_resume(&b, ids + i, k);
                if (r >= 0)
                        r = client_emit(c, EV_RESUME, buffer_data(&b), b.len, false);
                if (r < 0) {
                        log_debug_errno(r, "Failed to send resume: %m");
                        return;
                }
        }
}

static void flush_outbox(agentix_client *c) {
        OutMsg *m;

        while ((m = c->out_head) && client_is_connected(c)) {
                int r = sio_client_emit_binary1(c->sio, m->event, m->data, m->size);
                if (r == -ENOTCONN)
                        return;
                if (r < 0)
                        log_debug_errno(r, "Failed to send a queued %s: %m", m->event);
                c->out_head = m->next;
                if (!c->out_head)
                        c->out_tail = NULL;
                client_account(c, -(ssize_t) m->size);
                free(m);
        }
}

/* A (re)connection: send the calls that wait, resume the ones the server may have, then what
 * was queued meanwhile (inbox items after their call, as they were made). */
static void client_flush_held(agentix_client *c) {
        _cleanup_free_ const char **ids = NULL;
        agentix_request **a;
        size_t n = 0, n_ids = 0;

        a = snapshot_requests(c, &n);
        ids = calloc(n ?: 1, sizeof(*ids));
        if (!a || !ids) {
                log_oom();
                if (a)
                        release_snapshot(a, n);
                sio_client_drop(c->sio); /* try again with the next connection */
                return;
        }
        for (size_t i = 0; i < n && client_is_connected(c); i++) {
                agentix_request *r = a[i];
                int k;

                if (!r->in_table)
                        continue;
                k = request_on_connected(r);
                if (k > 0)
                        ids[n_ids++] = r->id;
                else if (k < 0 && k != -ENOTCONN) {
                        agentix_error e = AGENTIX_ERROR_NULL;

                        if (k == -EMSGSIZE)
                                error_set(&e, AGENTIX_E_MESSAGE_TOO_LARGE, k, "the call is larger than the message limit");
                        else
                                error_set(&e, AGENTIX_E_CONNECTION, k, "cannot send the call to %s: %s", c->url,
                                          strerror(-k));
                        request_fail(r, &e);
                        agentix_error_done(&e);
                }
        }
        for (unsigned i = 0; i < ACK_RING && client_is_connected(c); i++)
                if (c->acked[i])
                        emit_ack(c, c->acked[i]);
        if (n_ids > 0 && client_is_connected(c)) {
                log_debug("Resuming %zu call(s) on %s.", n_ids, c->url);
                emit_resume(c, ids, n_ids);
        }
        /* Inbox items behind their call (or its resume), the ones a drop may have lost first. */
        for (size_t i = 0; i < n && client_is_connected(c); i++)
                if (a[i]->in_table)
                        request_inbox_on_connected(a[i]);
        release_snapshot(a, n);
        flush_outbox(c);
}

static void client_flush(agentix_client *c) {
        SioClient *s = c->sio; /* freed only after its callback (ours) returns */

        /* All of it leaves together. */
        sio_client_hold(s);
        client_flush_held(c);
        sio_client_release(s);
}

static void on_sio_connected(SioClient *s, bool reconnected, void *userdata) {
        agentix_client *c = userdata;
        agentix_connect_handler h;

        if (s != c->sio)
                return;
        client_enter(c);

        log_debug("Connected to %s over %s%s.", c->url, strna(sio_client_transport_name(s)),
                  reconnected ? " again" : "");
        c->state = CLIENT_CONNECTED;
        c->connected_once = true;
        c->connect_timer = sd_event_source_disable_unref(c->connect_timer);
        /* Acks that waited when the connection dropped are in the ring, sent again below. */
        c->n_pending_acks = 0;
        (void) sd_event_source_set_enabled(c->ack_source, SD_EVENT_OFF);

        client_flush(c);

        h = c->connect_handler;
        c->connect_handler = NULL;
        if (h)
                h(c, NULL, c->connect_userdata);

        client_leave(c);
}

/* The error a final disconnect stands for, phrased for a person. */
static void disconnect_error(agentix_client *c, int error, const char *message, agentix_error *ret) {
        char why[512];

        /* The errno says what happened in words everyone knows, the message where it happened
         * (a refused TLS certificate, -EPERM, is said by its message alone). */
        if (error < 0 && error != -EPERM && !strempty(message) && !strcasestr(message, strerror(-error)))
                snprintf(why, sizeof(why), "%s (%s)", strerror(-error), message);
        else
                snprintf(why, sizeof(why), "%s",
                         !strempty(message) ? message : error < 0 ? strerror(-error) : "connection closed");

        if (c->closing)
                error_set(ret, AGENTIX_E_CONNECTION, -ECONNABORTED, "the connection to %s was closed by the client",
                          c->url);
        else if (c->connect_timed_out)
                error_set(ret, AGENTIX_E_TIMEOUT, -ETIMEDOUT, "cannot connect to %s: no answer within %llu ms",
                          c->url, (unsigned long long) (c->options.connect_timeout_usec / 1000));
        else if (error == -EACCES)
                error_set_typed(ret, AGENTIX_E_UNAUTHORIZED, -EACCES, RPC_ERR_UNAUTHORIZED,
                                "%s refused the token (%s): check the token for this sandbox", c->url,
                                strempty(message) ? "unauthorized" : message);
        else if (!c->connected_once)
                error_set(ret, AGENTIX_E_CONNECTION, error < 0 ? error : -ECONNREFUSED, "cannot connect to %s: %s",
                          c->url, why);
        else
                error_set(ret, AGENTIX_E_CONNECTION, error < 0 ? error : -ECONNRESET, "lost the connection to %s: %s",
                          c->url, why);
}

static void on_sio_disconnected(SioClient *s, bool final, int error, const char *message, void *userdata) {
        agentix_client *c = userdata;
        agentix_error e = AGENTIX_ERROR_NULL;
        int r;

        if (s != c->sio)
                return;
        client_enter(c);

        if (!final) {
                /* The reconnecting Socket.IO client lost its connection and tries again. */
                log_debug("Lost the connection to %s (%s); reconnecting.", c->url, strna(message));
                c->state = CLIENT_RECONNECTING;
        } else if (c->state == CLIENT_CONNECTED && !c->sio_reconnects && !c->options.no_reconnect &&
                   !c->closing && error != -EACCES) {
                /* The first connection dropped: reconnect (and resume) with a client that retries. */
                log_debug("Lost the connection to %s (%s); reconnecting.", c->url, strna(message));
                c->state = CLIENT_RECONNECTING;
                r = client_start_sio(c, true);
                if (r < 0) {
                        disconnect_error(c, r, message, &e);
                        client_session_end(c, &e);
                }
        } else {
                /* For good: refused, gave up reconnecting, closed; or the first connection
                 * failed — reported at once rather than retried for a minute. */
                disconnect_error(c, error, message, &e);
                log_debug("%s", strna(e.message));
                client_session_end(c, &e);
        }
        agentix_error_done(&e);

        client_leave(c);
}

static void on_sio_event(SioClient *s, const char *event, const uint8_t *data, size_t size, void *userdata) {
        agentix_client *c = userdata;
        const msgpack_object *env;
        msgpack_unpacked u;
        const char *id;
        size_t id_len, off = 0;
        agentix_request *r;

        if (s != c->sio)
                return;

        msgpack_unpacked_init(&u);
        if (mp_check(data, size) < 0 || msgpack_unpack_next(&u, (const char *) data, size, &off) != MSGPACK_UNPACK_SUCCESS ||
            u.data.type != MSGPACK_OBJECT_MAP) {
                log_debug("Ignoring a malformed '%s' event from %s.", event, c->url);
                goto finish;
        }
        env = &u.data;
        if (mp_map_get_str(env, "call_id", &id, &id_len) < 0 || id_len == 0 || id_len > RPC_CALL_ID_MAX) {
                /* An error the server could not tie to a call (a malformed message of ours). */
                const msgpack_object *m = mp_map_get(mp_map_get(env, "error"), "message");
                log_debug("The server sent '%s' without a call: %.*s", event,
                          m && m->type == MSGPACK_OBJECT_STR ? (int) m->via.str.size : 0,
                          m && m->type == MSGPACK_OBJECT_STR ? m->via.str.ptr : "");
                goto finish;
        }

        r = strmap_get(c->calls, id, id_len);
        if (!r) {
                /* A terminal event of a call this client has finished already (a replay after a
                 * resume, or the server's answer to a cancel we completed locally): tell the
                 * server it can forget it. Nothing reaches the user twice. */
                if (streq(event, EV_RESULT) || streq(event, EV_END) || streq(event, EV_ERROR)) {
                        _cleanup_buffer_ Buffer b = BUFFER_NULL;
                        if (rpc_envelope_call_id(&b, id, id_len) >= 0)
                                (void) client_emit(c, EV_ACK, buffer_data(&b), b.len, false);
                }
                goto finish;
        }

        client_enter(c);
        agentix_request_ref(r);
        request_dispatch(r, event, env, data, size);
        agentix_request_unref(r);
        client_leave(c);

finish:
        msgpack_unpacked_destroy(&u);
}

/* An event over max_message was skipped: end its call, it cannot be complete any more. */
static void on_sio_too_large(SioClient *s, const char *event, const uint8_t *head, size_t head_size, size_t size,
                             void *userdata) {
        agentix_client *c = userdata;
        char id[RPC_CALL_ID_MAX + 1];
        agentix_request *r;

        if (s != c->sio)
                return;
        if (value_scan_call_id(head, head_size, id, sizeof(id)) < 0 || !(r = strmap_get(c->calls, id, strlen(id)))) {
                log_debug("Skipped a '%s' event of %zu bytes from %s that names no call in flight.", event, size, c->url);
                return;
        }
        client_enter(c);
        agentix_request_ref(r);
        request_too_large(r, event, size);
        agentix_request_unref(r);
        client_leave(c);
}

/* The connection's queue refused inbox items earlier and has room now. */
static void on_sio_writable(SioClient *s, void *userdata) {
        agentix_client *c = userdata;
        agentix_request **a;
        size_t n = 0;

        client_enter(c);
        a = snapshot_requests(c, &n);
        if (a) {
                for (size_t i = 0; i < n; i++)
                        request_inbox_on_transport_writable(a[i]);
                release_snapshot(a, n);
        } else
                log_oom();
        client_leave(c);
}

static const SioClientCallbacks sio_callbacks = {
        .connected = on_sio_connected,
        .disconnected = on_sio_disconnected,
        .event = on_sio_event,
        .message_too_large = on_sio_too_large,
        .writable = on_sio_writable,
};

static int on_connect_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        agentix_client *c = userdata;
        agentix_error e = AGENTIX_ERROR_NULL;

        c->connect_timer = sd_event_source_disable_unref(c->connect_timer);
        if (c->state != CLIENT_CONNECTING)
                return 0;
        client_enter(c);
        c->connect_timed_out = true;
        disconnect_error(c, -ETIMEDOUT, NULL, &e);
        client_session_end(c, &e);
        agentix_error_done(&e);
        client_leave(c);
        return 0;
}

/* A Socket.IO client for this session. The first connection is made without the Socket.IO
 * client's own retries, so that a server that cannot be reached (or refuses the token) is
 * reported at once; after a drop a second one is started that does retry (with backoff, for
 * reconnect_timeout). */
static int client_start_sio(agentix_client *c, bool reconnect) {
        static const SioClientTransport transports[] = {
                [AGENTIX_TRANSPORT_AUTO] = SIO_CLIENT_TRANSPORT_AUTO,
                [AGENTIX_TRANSPORT_WEBSOCKET] = SIO_CLIENT_TRANSPORT_WEBSOCKET,
                [AGENTIX_TRANSPORT_POLLING] = SIO_CLIENT_TRANSPORT_POLLING,
        };
        SioClientConfig config = {
                .url = c->url,
                .nsp = "/rpc",
                .auth_json = c->auth_json,
                .transport = transports[c->options.transport],
                .connect_timeout_usec = c->options.connect_timeout_usec,
                .reconnect = reconnect,
                .reconnect_timeout_usec = c->options.reconnect_timeout_usec,
                .max_message = c->options.max_message,
                .tls_ca_pem = c->options.ca_pem,
                .tls_sandbox_id = c->sandbox_id,
        };
        int r;

        retire_sio(c);
        r = sio_client_new(c->event, &config, &sio_callbacks, c, &c->sio);
        if (r < 0)
                return r;
        r = sio_client_start(c->sio);
        if (r < 0) {
                c->sio = sio_client_free(c->sio);
                return r;
        }
        c->sio_reconnects = reconnect;
        return 0;
}

AGENTIX_API int agentix_client_connect_async(agentix_client *c, agentix_connect_handler h, void *userdata) {
        uint64_t now, budget;
        int r;

        if (!c || c->freeing || c->closing)
                return -EINVAL;
        if (c->state == CLIENT_CONNECTED)
                return -EISCONN;
        if (c->state != CLIENT_IDLE)
                return -EALREADY;

        /* The Socket.IO client bounds each attempt; this bounds the whole first connection
         * (AUTO may try WebSocket and then polling). */
        budget = c->options.connect_timeout_usec * (c->options.transport == AGENTIX_TRANSPORT_AUTO ? 2 : 1) +
                 USEC_PER_SEC;
        r = sd_event_now(c->event, CLOCK_MONOTONIC, &now);
        if (r >= 0)
                r = sd_event_add_time(c->event, &c->connect_timer, CLOCK_MONOTONIC, now + budget, 0,
                                      on_connect_timeout, c);
        if (r < 0)
                return r;

        r = client_start_sio(c, false);
        if (r < 0) {
                c->connect_timer = sd_event_source_disable_unref(c->connect_timer);
                return r;
        }
        c->state = CLIENT_CONNECTING;
        c->connected_once = false;
        c->connect_timed_out = false;
        c->connect_handler = h;
        c->connect_userdata = userdata;
        return 0;
}

typedef struct ConnectWait {
        bool done;
        agentix_error error;
} ConnectWait;

static void connect_wait_done(agentix_client *c, const agentix_error *e, void *userdata) {
        ConnectWait *w = userdata;

        w->done = true;
        if (e)
                (void) error_copy(&w->error, e);
}

static bool connect_wait_cond(void *userdata) {
        return ((ConnectWait *) userdata)->done;
}

AGENTIX_API int agentix_client_connect(agentix_client *c, agentix_error *ret_error) {
        ConnectWait w = { .error = AGENTIX_ERROR_NULL };
        int r;

        if (!c)
                return error_set(ret_error, AGENTIX_E_INVALID, -EINVAL, "no client given");
        if (c->state == CLIENT_CONNECTED)
                return 0;
        if (sd_event_get_state(c->event) != SD_EVENT_INITIAL)
                return error_set(ret_error, AGENTIX_E_INVALID, -EBUSY,
                                 "agentix_client_connect() blocks and cannot run inside a handler of the client's "
                                 "event loop: use agentix_client_connect_async() there");
        r = agentix_client_connect_async(c, connect_wait_done, &w);
        if (r == -EALREADY)
                return error_set(ret_error, AGENTIX_E_INVALID, r, "a connection to %s is already being made", c->url);
        if (r < 0)
                return error_set(ret_error, AGENTIX_E_CONNECTION, r, "cannot connect to %s: %s", c->url, strerror(-r));

        agentix_client_ref(c);
        r = client_run_until(c, connect_wait_cond, &w, 0, ret_error);
        if (r < 0 && !w.done && c->connect_handler == connect_wait_done)
                c->connect_handler = NULL; /* w is about to go away; the connection goes on */
        if (r >= 0 && w.error.kind != AGENTIX_E_NONE)
                r = error_copy(ret_error, &w.error);
        agentix_error_done(&w.error);
        agentix_client_unref(c);
        return r;
}

AGENTIX_API void agentix_client_close(agentix_client *c) {
        if (!c || c->state == CLIENT_IDLE || c->closing)
                return;
        client_enter(c);
        c->closing = true;
        client_flush_acks(c); /* before the DISCONNECT */
        if (c->sio)
                sio_client_close(c->sio); /* → on_sio_disconnected(final) → client_session_end() */
        if (c->state != CLIENT_IDLE) {
                agentix_error e = AGENTIX_ERROR_NULL;
                disconnect_error(c, -ECONNABORTED, NULL, &e);
                client_session_end(c, &e);
                agentix_error_done(&e);
        }
        c->closing = false;
        client_leave(c);
}

AGENTIX_API void agentix_client_drop_for_testing(agentix_client *c) {
        if (c && c->sio && c->state == CLIENT_CONNECTED)
                sio_client_drop(c->sio);
}

int client_run_until(agentix_client *c, bool (*cond)(void *userdata), void *userdata, uint64_t timeout_usec,
                     agentix_error *ret_error) {
        uint64_t deadline = UINT64_MAX;
        int r = 0;

        if (sd_event_get_state(c->event) != SD_EVENT_INITIAL)
                return error_set(ret_error, AGENTIX_E_INVALID, -EBUSY,
                                 "a blocking libagentix function was called inside a handler of the client's event "
                                 "loop: use the *_async() functions there");
        if (timeout_usec > 0)
                deadline = now_usec() + timeout_usec;

        agentix_client_ref(c);
        while (!cond(userdata)) {
                uint64_t now = now_usec(), wait = UINT64_MAX;

                if (deadline != UINT64_MAX) {
                        if (now >= deadline) {
                                r = error_set(ret_error, AGENTIX_E_TIMEOUT, -ETIMEDOUT,
                                              "no answer from %s within %llu ms", c->url,
                                              (unsigned long long) (timeout_usec / 1000));
                                break;
                        }
                        wait = deadline - now;
                }
                r = sd_event_run(c->event, wait);
                if (r < 0) {
                        r = error_set(ret_error, AGENTIX_E_INVALID, r, "the client's event loop failed: %s",
                                      strerror(-r));
                        break;
                }
                r = 0;
        }
        agentix_client_unref(c);
        return r;
}
