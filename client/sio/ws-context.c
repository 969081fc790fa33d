/* SPDX-License-Identifier: MIT */
#include <stdlib.h>

#include "log.h"
#include "uv-event.h"
#include "ws-context.h"

struct WsContext {
        sd_event *event;
        UvEvent *uv;
        struct lws_context *lws;
        sd_event_source *wakeup;
        unsigned n_resolving;
};

static int on_wakeup(sd_event_source *s, void *userdata) {
        WsContext *ctx = userdata;

        uv_event_run(ctx->uv);
        return 0;
}

static void lws_log_emit(int level, const char *line) {
        size_t n = strlen(line);

        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
                n--;
        log_debug("lws: %.*s", (int) n, line);
}

int ws_context_new(sd_event *event, uint64_t connect_timeout_usec, WsContext **ret) {
        struct lws_context_creation_info info = {};
        void *foreign_loops[1];
        WsContext *ctx;
        int r;

        ctx = calloc(1, sizeof(*ctx));
        if (!ctx)
                return -ENOMEM;
        ctx->event = sd_event_ref(event);

        r = uv_event_new(event, &ctx->uv);
        if (r < 0)
                goto fail;
        /* lws's idle handle after each socket event: run it at once, not through a timer. */
        uv_event_set_reruns(ctx->uv, 2);
        r = sd_event_add_defer(event, &ctx->wakeup, on_wakeup, ctx);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_enabled(ctx->wakeup, SD_EVENT_OFF);
        (void) sd_event_source_set_description(ctx->wakeup, "ws-wakeup");

        /* lws logs connection failures at error level; they are ours to report (the
         * `disconnected` callback says what happened), so lws only speaks at debug level. */
        lws_set_log_level(log_get_max_level() >= LOG_DEBUG ? (LLL_ERR | LLL_WARN | LLL_NOTICE) : 0, lws_log_emit);

        foreign_loops[0] = uv_event_loop(ctx->uv);
        info.options = LWS_SERVER_OPTION_LIBUV;
        info.foreign_loops = foreign_loops;
        info.port = CONTEXT_PORT_NO_LISTEN;
        info.protocols = ws_transport_protocols;
        info.user = ctx;
        info.count_threads = 1;
        /* lws sizes its fd table from this; the default (RLIMIT_NOFILE) can be millions. */
        info.fd_limit_per_thread = 64;
        info.pt_serv_buf_size = 64 * 1024;
        info.timeout_secs = (unsigned) MIN(connect_timeout_usec / 1000000u + 1, (uint64_t) 3600);
        ctx->lws = lws_create_context(&info);
        if (!ctx->lws) {
                r = log_debug_errno(EIO, "Failed to create the libwebsockets client context.");
                goto fail;
        }

        uv_event_run(ctx->uv);
        *ret = ctx;
        return 0;
fail:
        ws_context_free(ctx);
        return r;
}

WsContext *ws_context_free(WsContext *ctx) {
        if (!ctx)
                return NULL;
        if (ctx->lws) {
                /* On a foreign loop lws 4.1 stops after the first stage and waits for its uv
                 * handles to close; once the loop has run their close callbacks, the second
                 * stage frees the context. The order matters (see http-server.c). */
                lws_context_destroy(ctx->lws);
                uv_event_settle(ctx->uv);
                lws_context_destroy2(ctx->lws);
                ctx->lws = NULL;
        }
        /* A lookup running on the thread pool cannot be cancelled, and its completion must find
         * the loop alive: wait for it (the only place this code may block, bounded by the
         * resolver's own timeout). Nothing else is left on the loop now. */
        while (ctx->uv && ctx->n_resolving > 0)
                if (uv_run(uv_event_loop(ctx->uv), UV_RUN_ONCE) == 0 && ctx->n_resolving > 0)
                        break;
        ctx->uv = uv_event_free(ctx->uv);
        sd_event_source_disable_unref(ctx->wakeup);
        sd_event_unref(ctx->event);
        free(ctx);
        return NULL;
}

struct lws_context *ws_context_lws(WsContext *ctx) {
        return ctx->lws;
}

uv_loop_t *ws_context_loop(WsContext *ctx) {
        return uv_event_loop(ctx->uv);
}

sd_event *ws_context_event(WsContext *ctx) {
        return ctx->event;
}

void ws_context_run(WsContext *ctx) {
        uv_event_run(ctx->uv);
}

void ws_context_wakeup(WsContext *ctx) {
        (void) sd_event_source_set_enabled(ctx->wakeup, SD_EVENT_ONESHOT);
}

void ws_context_resolve_started(WsContext *ctx) {
        ctx->n_resolving++;
}

void ws_context_resolve_done(WsContext *ctx) {
        if (ctx->n_resolving > 0)
                ctx->n_resolving--;
}
