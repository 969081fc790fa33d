/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

#include "claim-state.h"
#include "macro.h"
#include "strv.h"

ClaimState *claim_state_free(ClaimState *c) {
        if (!c)
                return NULL;
        free(c->id);
        if (c->token)
                explicit_bzero(c->token, strlen(c->token));
        free(c->token);
        free(c->pool);
        free(c->bound_to);
        strv_free(c->env);
        free(c->workdir);
        strv_free(c->labels);
        free(c);
        return NULL;
}

const char *claim_state_dir(void) {
        static char dir[4096];

        if (!dir[0])
                snprintf(dir, sizeof(dir), "%s/claims", getenv("STATE_DIRECTORY") ?: "/var/lib/agentix");
        return dir;
}

/* An id is 16 hex digits: nothing else ever becomes a file name here. */
static int claim_path(const char *id, const char *suffix, char *buf, size_t size) {
        if (strlen(id) != 16 || strspn(id, "0123456789abcdef") != 16)
                return -EINVAL;
        snprintf(buf, size, "%s/%s.json%s", claim_state_dir(), id, suffix);
        return 0;
}

static json_t *strv_json(char **l) {
        json_t *a = json_array();

        for (char **s = l; a && s && *s; s++)
                if (json_array_append_new(a, json_string(*s)) < 0)
                        return json_decref(a), NULL;
        return a;
}

int claim_state_save(const ClaimState *c) {
        char path[4200], tmp[4200];
        json_t *j;
        int r;

        r = claim_path(c->id, "", path, sizeof(path));
        if (r < 0)
                return r;
        (void) claim_path(c->id, ".tmp", tmp, sizeof(tmp));
        /* Its parent (STATE_DIRECTORY, or /var/lib/agentix) is systemd's to make, mode 0700. */
        if (mkdir(claim_state_dir(), 0700) < 0 && errno != EEXIST) {
                char parent[4096];
                snprintf(parent, sizeof(parent), "%s", claim_state_dir());
                *strrchr(parent, '/') = 0;
                if (errno != ENOENT || (mkdir(parent, 0700) < 0 && errno != EEXIST) || mkdir(claim_state_dir(), 0700) < 0)
                        return -errno;
        }
        j = json_pack("{s:s, s:I, s:s, s:I, s:I, s:s?, s:s?, s:o, s:s?, s:o}", "id", c->id, "owner", (json_int_t) c->owner,
                      "token", c->token, "created_at", (json_int_t) c->created_at, "expires_at",
                      (json_int_t) c->expires_at, "pool", c->pool, "bound_to", c->bound_to, "env", strv_json(c->env),
                      "workdir", c->workdir, "labels", strv_json(c->labels));
        if (!j)
                return -ENOMEM;
        {
                _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
                if (fd < 0) {
                        json_decref(j);
                        return -errno;
                }
                r = json_dumpfd(j, fd, JSON_COMPACT) < 0 ? -EIO : 0;
                json_decref(j);
                if (r < 0) {
                        (void) unlink(tmp);
                        return r;
                }
        }
        if (rename(tmp, path) < 0) {
                r = -errno;
                (void) unlink(tmp);
                return r;
        }
        return 0;
}

static char **json_strv(json_t *a) {
        char **l = calloc(1, sizeof(char *));
        size_t i;
        json_t *v;

        json_array_foreach(a, i, v)
                if (!l || !json_string_value(v) || strv_extend(&l, json_string_value(v)) < 0)
                        return strv_free(l);
        return l;
}

static int dup_or_null(char **field, const char *v) {
        return v && !(*field = strdup(v)) ? -ENOMEM : 0;
}

int claim_state_load(const char *id, ClaimState **ret) {
        char path[4200];
        json_error_t e;
        ClaimState *c;
        json_t *j;
        int r;

        r = claim_path(id, "", path, sizeof(path));
        if (r < 0)
                return r;
        if (access(path, F_OK) < 0)
                return -errno;
        j = json_load_file(path, JSON_REJECT_DUPLICATES, &e);
        if (!j)
                return -EBADMSG;
        c = calloc(1, sizeof(*c));
        if (!c) {
                json_decref(j);
                return -ENOMEM;
        }
        c->owner = (uid_t) json_integer_value(json_object_get(j, "owner"));
        c->created_at = json_integer_value(json_object_get(j, "created_at"));
        c->expires_at = json_integer_value(json_object_get(j, "expires_at"));
        r = dup_or_null(&c->id, json_string_value(json_object_get(j, "id")));
        if (r >= 0)
                r = dup_or_null(&c->token, json_string_value(json_object_get(j, "token")));
        if (r >= 0)
                r = dup_or_null(&c->pool, json_string_value(json_object_get(j, "pool")));
        if (r >= 0)
                r = dup_or_null(&c->bound_to, json_string_value(json_object_get(j, "bound_to")));
        if (r >= 0)
                r = dup_or_null(&c->workdir, json_string_value(json_object_get(j, "workdir")));
        if (r >= 0 && (!(c->env = json_strv(json_object_get(j, "env"))) ||
                       !(c->labels = json_strv(json_object_get(j, "labels")))))
                r = -ENOMEM;
        json_decref(j);
        if (r >= 0 && (!c->id || !streq(c->id, id) || !c->token))
                r = -EBADMSG;
        if (r < 0) {
                claim_state_free(c);
                return r;
        }
        *ret = c;
        return 0;
}

int claim_state_remove(const char *id) {
        char path[4200];
        int r = claim_path(id, "", path, sizeof(path));

        if (r < 0)
                return r;
        return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}
