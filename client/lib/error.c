/* SPDX-License-Identifier: MIT */
#include <stdarg.h>

#include "envelope.h"
#include "error.h"

static const struct {
        const char *type;
        agentix_error_kind kind;
        int code;
} wire_types[] = {
        { RPC_ERR_UNAUTHORIZED, AGENTIX_E_UNAUTHORIZED, -EACCES },
        { RPC_ERR_BAD_REQUEST, AGENTIX_E_BAD_REQUEST, -EBADMSG },
        { RPC_ERR_NO_SUCH_CALLABLE, AGENTIX_E_NO_SUCH_CALLABLE, -ENOSYS },
        { RPC_ERR_ARGUMENT, AGENTIX_E_ARGUMENT, -EINVAL },
        { RPC_ERR_CANCELLED, AGENTIX_E_CANCELLED, -ECANCELED },
        { RPC_ERR_DEADLINE, AGENTIX_E_DEADLINE_EXCEEDED, -ETIME },
        { RPC_ERR_WORKER_DIED, AGENTIX_E_WORKER_DIED, -EOWNERDEAD },
        { RPC_ERR_RESULT_UNAVAILABLE, AGENTIX_E_RESULT_UNAVAILABLE, -ENODATA },
        { RPC_ERR_TOO_LARGE, AGENTIX_E_MESSAGE_TOO_LARGE, -EMSGSIZE },
        { RPC_ERR_TOO_MANY_CALLS, AGENTIX_E_TOO_MANY_CALLS, -EAGAIN },
};

/* Names for agentix_error_kind_name(): the wire type where there is one. */
static const char *const kind_names[] = {
        [AGENTIX_E_NONE] = "None",
        [AGENTIX_E_UNAUTHORIZED] = RPC_ERR_UNAUTHORIZED,
        [AGENTIX_E_BAD_REQUEST] = RPC_ERR_BAD_REQUEST,
        [AGENTIX_E_NO_SUCH_CALLABLE] = RPC_ERR_NO_SUCH_CALLABLE,
        [AGENTIX_E_ARGUMENT] = RPC_ERR_ARGUMENT,
        [AGENTIX_E_CANCELLED] = RPC_ERR_CANCELLED,
        [AGENTIX_E_DEADLINE_EXCEEDED] = RPC_ERR_DEADLINE,
        [AGENTIX_E_WORKER_DIED] = RPC_ERR_WORKER_DIED,
        [AGENTIX_E_RESULT_UNAVAILABLE] = RPC_ERR_RESULT_UNAVAILABLE,
        [AGENTIX_E_MESSAGE_TOO_LARGE] = RPC_ERR_TOO_LARGE,
        [AGENTIX_E_TOO_MANY_CALLS] = RPC_ERR_TOO_MANY_CALLS,
        [AGENTIX_E_REMOTE] = "RemoteError",
        [AGENTIX_E_FILE] = "FileError",
        [AGENTIX_E_CONNECTION] = "ConnectionError",
        [AGENTIX_E_TIMEOUT] = "Timeout",
        [AGENTIX_E_PROTOCOL] = "ProtocolError",
        [AGENTIX_E_INVALID] = "InvalidArgument",
        [AGENTIX_E_OVERFLOW] = "Overflow",
        [AGENTIX_E_SANDBOX] = "SandboxError",
};

static const struct {
        const char *code;
        int errnum;
} file_codes[] = {
        { "file_not_found", -ENOENT },       { "permission_denied", -EACCES },
        { "is_directory", -EISDIR },         { "not_a_directory", -ENOTDIR },
        { "invalid_path", -EINVAL },         { "already_exists", -EEXIST },
        { "string_not_found", -ENOMSG },     { "multiple_occurrences", -ENOTUNIQ },
        { "not_a_file", -EBADFD },           { "not_a_text_file", -EILSEQ },
        { "invalid_offset", -ERANGE },       { "too_large", -EFBIG },
        { "io_error", -EIO },
};

AGENTIX_API const char *agentix_error_kind_name(agentix_error_kind kind) {
        if ((size_t) kind >= ELEMENTSOF(kind_names) || !kind_names[kind])
                return "Unknown";
        return kind_names[kind];
}

AGENTIX_API void agentix_error_done(agentix_error *e) {
        if (!e)
                return;
        free(e->type);
        free(e->message);
        free(e->traceback);
        *e = AGENTIX_ERROR_NULL;
}

static bool bytes_eq(const char *a, size_t a_len, const char *b) {
        return strlen(b) == a_len && memcmp(a, b, a_len) == 0;
}

agentix_error_kind error_kind_from_type(const char *type, size_t len) {
        for (size_t i = 0; i < ELEMENTSOF(wire_types); i++)
                if (bytes_eq(type, len, wire_types[i].type))
                        return wire_types[i].kind;
        return AGENTIX_E_REMOTE;
}

int error_kind_errno(agentix_error_kind kind) {
        for (size_t i = 0; i < ELEMENTSOF(wire_types); i++)
                if (wire_types[i].kind == kind)
                        return wire_types[i].code;
        switch (kind) {
        case AGENTIX_E_NONE:
                return 0;
        case AGENTIX_E_REMOTE:
                return -EREMOTEIO;
        case AGENTIX_E_FILE:
                return -EIO;
        case AGENTIX_E_CONNECTION:
                return -ENOTCONN;
        case AGENTIX_E_TIMEOUT:
                return -ETIMEDOUT;
        case AGENTIX_E_PROTOCOL:
                return -EPROTO;
        case AGENTIX_E_OVERFLOW:
                return -ENOBUFS;
        case AGENTIX_E_SANDBOX:
                return -EREMOTEIO;
        default:
                return -EINVAL;
        }
}

int error_file_errno(const char *code, size_t len) {
        for (size_t i = 0; i < ELEMENTSOF(file_codes); i++)
                if (bytes_eq(code, len, file_codes[i].code))
                        return file_codes[i].errnum;
        return -EIO;
}

/* A msgpack str as a malloc()ed C string (NUL bytes inside become '?', so the string stays
 * whole and printable). NULL when absent or not a str. */
static char *str_dup(const msgpack_object *o) {
        char *s;

        if (!o || o->type != MSGPACK_OBJECT_STR)
                return NULL;
        s = malloc(o->via.str.size + 1);
        if (!s)
                return NULL;
        for (uint32_t i = 0; i < o->via.str.size; i++)
                s[i] = o->via.str.ptr[i] ?: '?';
        s[o->via.str.size] = 0;
        return s;
}

static int error_setv(agentix_error *e, agentix_error_kind kind, int code, const char *type, const char *fmt,
                      va_list ap) {
        if (!e)
                return code;
        agentix_error_done(e);
        e->kind = kind;
        e->code = code;
        if (type)
                e->type = strdup(type);
        if (vasprintf(&e->message, fmt, ap) < 0)
                e->message = NULL;
        return code;
}

int error_set(agentix_error *e, agentix_error_kind kind, int code, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = error_setv(e, kind, code, NULL, fmt, ap);
        va_end(ap);
        return r;
}

int error_set_typed(agentix_error *e, agentix_error_kind kind, int code, const char *type, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = error_setv(e, kind, code, type, fmt, ap);
        va_end(ap);
        return r;
}

int error_from_wire(agentix_error *e, const msgpack_object *map) {
        const msgpack_object *type = mp_map_get(map, "type"), *v;
        agentix_error_kind kind;
        int code;

        if (!type || type->type != MSGPACK_OBJECT_STR || type->via.str.size == 0)
                return error_set(e, AGENTIX_E_PROTOCOL, -EPROTO,
                                 "the server sent an error without a type (a client/server version mismatch?)");

        kind = error_kind_from_type(type->via.str.ptr, type->via.str.size);
        code = error_kind_errno(kind);
        if (!e)
                return code;

        agentix_error_done(e);
        e->kind = kind;
        e->code = code;
        e->type = str_dup(type);
        e->message = str_dup(mp_map_get(map, "message"));
        if (!e->message)
                e->message = strdup(e->type ?: "error");
        e->traceback = str_dup(mp_map_get(map, "traceback"));
        v = mp_map_get(map, "cancelled");
        e->cancelled = v && v->type == MSGPACK_OBJECT_BOOLEAN && v->via.boolean;

        v = mp_map_get(map, "returncode");
        if (v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER && v->via.u64 <= INT32_MAX) {
                e->has_returncode = true;
                e->returncode = (int) v->via.u64;
        } else if (v && v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER && v->via.i64 >= INT32_MIN) {
                e->has_returncode = true;
                e->returncode = (int) v->via.i64;
        }
        return code;
}

int error_from_file(agentix_error *e, const msgpack_object *code, const msgpack_object *message) {
        _cleanup_free_ char *c = str_dup(code), *m = str_dup(message);
        int r;

        if (!c)
                return error_set(e, AGENTIX_E_PROTOCOL, -EPROTO, "the server sent a file error without a code");
        r = error_file_errno(c, strlen(c));
        return error_set_typed(e, AGENTIX_E_FILE, r, c, "%s", m ?: c);
}

int error_copy(agentix_error *dst, const agentix_error *src) {
        if (!dst)
                return src->code;
        agentix_error_done(dst);
        *dst = *src;
        dst->type = src->type ? strdup(src->type) : NULL;
        dst->message = src->message ? strdup(src->message) : NULL;
        dst->traceback = src->traceback ? strdup(src->traceback) : NULL;
        return src->code;
}
