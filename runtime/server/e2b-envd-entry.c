/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "e2b-envd-entry.h"
#include "envelope.h"
#include "json-msgpack.h"
#include "macro.h"
#include "mp-check.h"
#include "path-clean.h"

/* Connect's code names and their HTTP statuses. */
unsigned envd_connect_status(const char *code) {
        static const struct {
                const char *code;
                unsigned status;
        } table[] = {
                { "invalid_argument", 400 },  { "not_found", 404 },       { "already_exists", 409 },
                { "permission_denied", 403 }, { "unauthenticated", 401 }, { "unimplemented", 404 },
                { "resource_exhausted", 429 }, { "unavailable", 503 },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (streq(code, table[i].code))
                        return table[i].status;
        return 500; /* internal */
}

void envd_respond_error(HttpConn *c, const char *code, const char *message) {
        (void) http_conn_respond_json(c, envd_connect_status(code), json_pack("{s:s,s:s}", "code", code, "message", message ?: code));
}

/* An fs:: error code as a Connect code. */
const char *envd_code_of(const char *fs_error) {
        if (streq(fs_error, "file_not_found"))
                return "not_found";
        if (streq(fs_error, "permission_denied"))
                return "permission_denied";
        if (streq(fs_error, "already_exists"))
                return "already_exists";
        if (streq(fs_error, "invalid_path") || streq(fs_error, "not_a_directory") || streq(fs_error, "is_directory"))
                return "invalid_argument";
        return "internal";
}

static void permissions_string(const char *type, unsigned mode, char out[static 11]) {
        static const char rwx[] = "rwxrwxrwx";

        out[0] = streq(type, "directory") ? 'd' : streq(type, "symlink") ? 'l' : '-';
        for (int i = 0; i < 9; i++)
                out[1 + i] = mode & (1u << (8 - i)) ? rwx[i] : '-';
        out[10] = 0;
}

/* The account names of uid and gid as the image's /etc/passwd and /etc/group have them (a
 * small local read), else the numbers. */
static void owner_names(int64_t uid, int64_t gid, char *user, size_t user_size, char *group, size_t group_size) {
        char buf[4096];
        struct passwd pw, *pwp = NULL;
        struct group gr, *grp = NULL;

        if (getpwuid_r((uid_t) uid, &pw, buf, sizeof(buf), &pwp) == 0 && pwp)
                snprintf(user, user_size, "%s", pwp->pw_name);
        else
                snprintf(user, user_size, "%" PRIi64, uid);
        if (getgrgid_r((gid_t) gid, &gr, buf, sizeof(buf), &grp) == 0 && grp)
                snprintf(group, group_size, "%s", grp->gr_name);
        else
                snprintf(group, group_size, "%" PRIi64, gid);
}

/* One fs::stat result map as envd's EntryInfo. */
json_t *envd_entry_json(const msgpack_object *m) {
        const char *type, *path, *mtime, *target;
        size_t type_n, path_n, mtime_n, target_n;
        int64_t size = 0, mode = 0, uid = 0, gid = 0;
        char perms[11], user[64], group[64], ts[64], t[16];
        const char *name, *enum_name;
        json_t *e;

        if (mp_map_get_str(m, "type", &type, &type_n) < 0 || mp_map_get_str(m, "path", &path, &path_n) < 0 ||
            mp_map_get_str(m, "modified_at", &mtime, &mtime_n) < 0 || type_n >= sizeof(t))
                return NULL;
        (void) mp_map_get_int(m, "size", &size);
        (void) mp_map_get_int(m, "mode", &mode);
        (void) mp_map_get_int(m, "uid", &uid);
        (void) mp_map_get_int(m, "gid", &gid);
        memcpy(t, type, type_n);
        t[type_n] = 0;
        enum_name = streq(t, "directory") ? "FILE_TYPE_DIRECTORY"
                  : streq(t, "symlink")   ? "FILE_TYPE_SYMLINK"
                  : streq(t, "file")      ? "FILE_TYPE_FILE"
                                          : "FILE_TYPE_UNSPECIFIED";
        permissions_string(t, (unsigned) mode, perms);
        owner_names(uid, gid, user, sizeof(user), group, sizeof(group));
        /* fs:: says "…+00:00"; a Timestamp is written Z-normalized. */
        snprintf(ts, sizeof(ts), "%.*sZ", (int) (mtime_n >= 6 && memcmp(mtime + mtime_n - 6, "+00:00", 6) == 0
                                                        ? mtime_n - 6 : mtime_n), mtime);
        name = memrchr(path, '/', path_n);
        name = name && name + 1 < path + path_n ? name + 1 : path;
        e = json_pack("{s:s%,s:s,s:s%,s:s,s:I,s:s,s:s,s:s,s:s}", "name", name, (size_t) (path + path_n - name),
                      "type", enum_name, "path", path, path_n, "size", "", "mode", (json_int_t) mode, "permissions",
                      perms, "owner", user, "group", group, "modifiedTime", ts);
        if (!e)
                return NULL;
        {
                char n[32];

                snprintf(n, sizeof(n), "%" PRIi64, size);
                (void) json_object_set_new(e, "size", json_string(n)); /* int64: a string in JSON */
        }
        if (mp_map_get_str(m, "symlink_target", &target, &target_n) >= 0)
                (void) json_object_set_new(e, "symlinkTarget", json_stringn(target, target_n));
        return e;
}

/* ---- the account a request is for ------------------------------------------------------- */

static char default_user[64];

int envd_set_default_user(const char *name) {
        if (name && strlen(name) >= sizeof(default_user))
                return -EINVAL;
        snprintf(default_user, sizeof(default_user), "%s", name ?: "");
        return 0;
}

static int user_lookup(const char *name, EnvdUser *ret) {
        struct passwd pw, *pwp = NULL;
        char buf[4096];

        if (name[0] ? getpwnam_r(name, &pw, buf, sizeof(buf), &pwp) != 0 || !pwp :
                      getpwuid_r(geteuid(), &pw, buf, sizeof(buf), &pwp) != 0 || !pwp) {
                if (name[0])
                        return -ENOENT;
                /* The runtime's uid has no entry (docker run --user 1234): it is still itself. */
                *ret = (EnvdUser) { .uid = geteuid(), .gid = getegid(), .own = true, .home = "/" };
                snprintf(ret->name, sizeof(ret->name), "%u", (unsigned) geteuid());
                return 0;
        }
        *ret = (EnvdUser) { .uid = pwp->pw_uid, .gid = pwp->pw_gid };
        ret->own = pwp->pw_uid == geteuid() && pwp->pw_gid == getegid();
        snprintf(ret->name, sizeof(ret->name), "%s", pwp->pw_name);
        snprintf(ret->home, sizeof(ret->home), "%s", pwp->pw_dir && pwp->pw_dir[0] ? pwp->pw_dir : "/");
        return 0;
}

int envd_user_named(const char *name, EnvdUser *ret) {
        if (name && name[0])
                return strlen(name) >= sizeof(ret->name) ? -ENOENT : user_lookup(name, ret);
        if (default_user[0])
                return user_lookup(default_user, ret);
        /* E2B's images run requests as `user`: so do images that have one. */
        if (user_lookup(ENVD_IMAGE_USER, ret) == 0)
                return 0;
        return user_lookup("", ret);
}

/* The account "Authorization: Basic base64(USER:)" names, into name ("" when none). */
static int basic_user(HttpConn *c, char name[static 128]) {
        static const char basic[] = "Basic ";
        size_t n = sizeof(basic) - 1;

        name[0] = 0;
        if (strncasecmp(c->authorization, basic, n) == 0) {
                _cleanup_free_ void *decoded = NULL;
                size_t size = 0;
                char *colon;

                if (base64_decode(c->authorization + n, strlen(c->authorization + n), &decoded, &size) < 0 ||
                    size >= 128)
                        return -EINVAL;
                memcpy(name, decoded, size);
                name[size] = 0;
                colon = strchr(name, ':');
                if (colon)
                        *colon = 0;
        }
        return 0;
}

int envd_pack_owner_kwargs(msgpack_packer *pk, const EnvdUser *user, uint32_t extra) {
        bool owner = user && !user->own;
        int r = msgpack_pack_map(pk, (owner ? 2 : 0) + extra);

        if (owner) {
                r |= mp_pack_cstr(pk, "uid");
                r |= msgpack_pack_uint32(pk, user->uid);
                r |= mp_pack_cstr(pk, "gid");
                r |= msgpack_pack_uint32(pk, user->gid);
        }
        return r ? -ENOMEM : 0;
}

int envd_request_user(HttpConn *c, EnvdUser *ret) {
        char name[128];

        if (basic_user(c, name) < 0)
                return -EINVAL;
        return envd_user_named(name, ret);
}

/* A path of the request as an absolute, clean one: relative ones below home. */
char *envd_absolute_path(const char *home, const char *path) {
        char *p;

        if (asprintf(&p, "%s/%s", path[0] == '/' ? "" : home, path) < 0)
                return NULL;
        path_clean(p);
        return p;
}

/* ---- Connect's stream messages ------------------------------------------------------------- */

int envd_stream_send(HttpConn *c, uint8_t flags, json_t *msg) {
        char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
        uint8_t head[5];
        size_t n;
        int r;

        json_decref(msg);
        if (!text)
                return -ENOMEM;
        n = strlen(text);
        head[0] = flags;
        head[1] = (uint8_t) (n >> 24);
        head[2] = (uint8_t) (n >> 16);
        head[3] = (uint8_t) (n >> 8);
        head[4] = (uint8_t) n;
        r = http_conn_stream_write(c, head, sizeof(head));
        if (r >= 0)
                r = http_conn_stream_write(c, text, n);
        free(text);
        return r;
}

void envd_stream_event(HttpConn *c, json_t *event) {
        (void) envd_stream_send(c, 0, json_pack("{s:o}", "event", event));
}

/* End a stream: {} or {"error": {code, message}}. */
void envd_stream_end(HttpConn *c, const char *code, const char *message) {
        if (!c->streaming)
                (void) http_conn_stream_begin(c, 200, "application/connect+json");
        (void) envd_stream_send(c, ENVD_STREAM_END,
                                code ? json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", message ?: code)
                                     : json_object());
        (void) http_conn_stream_end(c);
}

uint64_t envd_keepalive_usec(HttpConn *c) {
        char v[32];

        if (http_conn_header(c, "Keepalive-Ping-Interval", v, sizeof(v)) <= 0)
                return 0;
        return (uint64_t) MIN(strtoull(v, NULL, 10), 3600ULL) * 1000000ULL;
}

/* A Connect stream request's one message: a flag byte, a 4-byte length, that much JSON. */
json_t *envd_stream_request(HttpConn *c) {
        const uint8_t *b = buffer_data(&c->body);
        json_error_t e;
        size_t n;

        if (c->body.len < 5 || b[0] != 0)
                return NULL;
        n = (size_t) b[1] << 24 | (size_t) b[2] << 16 | (size_t) b[3] << 8 | b[4];
        if (n != c->body.len - 5)
                return NULL;
        return json_loadb((const char *) b + 5, n, 0, &e);
}
