/* SPDX-License-Identifier: MIT */
/* Snapshots: a sandbox's filesystem as an image a create can name, kept by the backend with its
 * owner (agentd-backend(3): snapshot(), snapshots(), delete_snapshot()). agentd holds no record
 * of them: the backend's list is the truth, so snapshots outlive agentd and its restarts. A
 * snapshot is its owner's (the owner of the sandbox it was taken of) and root's; at most
 * MaxSnapshotsPerUser= per user. */
#include "agentd-errors.h"
#include "log.h"
#include "macro.h"
#include "quota.h"
#include "snapshot.h"

/* ---- taking one -------------------------------------------------------------------------- */

typedef struct TakeCall {
        Manager *manager;
        char *sandbox_id;
        char *image;            /* the tag asked for, or NULL */
        uid_t owner;
        sd_bus_message *call;
} TakeCall;

static TakeCall *take_call_free(TakeCall *t) {
        if (!t)
                return NULL;
        sd_bus_message_unref(t->call);
        free(t->sandbox_id);
        free(t->image);
        return mfree(t);
}

static void on_taken(void *userdata, const char *image, const char *error_name, const char *message) {
        TakeCall *t = userdata;
        Sandbox *s = manager_get_sandbox(t->manager, t->sandbox_id);

        if (error_name)
                (void) sd_bus_reply_method_errorf(t->call, error_name, "%s", message ?: "The backend gave no reason");
        else {
                if (s)
                        log_sandbox_info(s, "Sandbox %s: snapshot %s taken.", s->id, image);
                (void) sd_bus_reply_method_return(t->call, "s", image);
        }
        take_call_free(t);
}

static void take_now(TakeCall *t) {
        Sandbox *s = manager_get_sandbox(t->manager, t->sandbox_id);
        int r;

        if (!s) {
                (void) sd_bus_reply_method_errorf(t->call, AGENTD_ERROR_NO_SUCH_SANDBOX,
                                                  "Sandbox %s was deleted before its snapshot was taken.", t->sandbox_id);
                take_call_free(t);
                return;
        }
        r = s->backend->ops->snapshot(s->backend->state, s->id, t->owner, t->image, on_taken, t);
        if (r < 0) {
                (void) sd_bus_reply_method_errorf(t->call, r == -EINVAL ? AGENTD_ERROR_INVALID_CONFIG
                                                                        : AGENTD_ERROR_BACKEND_UNAVAILABLE,
                                                  r == -EINVAL ? "'%s' is not an image name (REPOSITORY[:TAG])"
                                                               : "Cannot ask the backend for a snapshot: %s",
                                                  r == -EINVAL ? t->image : strerror(-r));
                take_call_free(t);
        }
}

/* Does image (REPOSITORY[:TAG]) name entry? A name without a tag means :latest. */
static bool same_image(const char *image, const char *entry) {
        size_t n = strlen(image);
        const char *slash = strrchr(image, '/'), *colon = strrchr(image, ':');

        if (colon && (!slash || colon > slash))
                return streq(image, entry);
        return strneq(image, entry, n) && streq(entry + n, ":latest");
}

/* The owner's snapshots counted against the maximum (a name the owner replaces is no new one). */
static void on_counted(void *userdata, const AgentdSnapshot *list, size_t n, const char *error_name,
                       const char *message) {
        TakeCall *t = userdata;
        uint64_t max = t->manager->config->max_snapshots_per_user, count = 0,
                 quota = quota_of(t->manager, t->owner).max_snapshots;

        if (error_name) {
                (void) sd_bus_reply_method_errorf(t->call, error_name, "Cannot count the snapshots of uid %u: %s",
                                                  (unsigned) t->owner, message ?: "the backend gave no reason");
                take_call_free(t);
                return;
        }
        for (size_t i = 0; i < n; i++) {
                if (list[i].owner != t->owner)
                        continue;
                if (t->image && same_image(t->image, list[i].image)) {
                        take_now(t);
                        return;
                }
                count++;
        }
        if (count < max && count >= quota) {
                (void) quota_snapshots_exceeded(t->call, t->owner, count, quota);
                take_call_free(t);
                return;
        }
        if (count >= max) {
                (void) sd_bus_reply_method_errorf(t->call, AGENTD_ERROR_TOO_MANY_SNAPSHOTS,
                                                  "uid %u has %llu snapshots, the most one user may have "
                                                  "(MaxSnapshotsPerUser= in agentd.conf): delete one with DeleteSnapshot()",
                                                  (unsigned) t->owner, (unsigned long long) count);
                take_call_free(t);
                return;
        }
        take_now(t);
}

int snapshot_take(Manager *m, Sandbox *s, const char *image, sd_bus_message *call, sd_bus_error *error) {
        const AgentdBackendOps *ops = s->backend->ops;
        TakeCall *t;
        int r;

        if (s->state != SANDBOX_RUNNING && s->state != SANDBOX_PAUSED && s->state != SANDBOX_EXITED)
                return sd_bus_error_setf(error, AGENTD_ERROR_NOT_RUNNING, "Sandbox %s is %s: there is nothing to snapshot yet.",
                                         s->id, sandbox_state_to_string(s->state));
        if (!ops->snapshot || !ops->snapshots)
                return sd_bus_error_setf(error, AGENTD_ERROR_BACKEND_UNAVAILABLE, "The %s backend takes no snapshots.",
                                         s->backend->name);
        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        *t = (TakeCall) { .manager = m, .owner = s->owner, .call = sd_bus_message_ref(call) };
        if (!(t->sandbox_id = strdup(s->id)) || (image && !(t->image = strdup(image)))) {
                take_call_free(t);
                return -ENOMEM;
        }
        if (s->owner == 0 ||
            (m->config->max_snapshots_per_user == AGENTD_UNLIMITED && quota_of(m, s->owner).max_snapshots == AGENTD_UNLIMITED)) {
                take_now(t);
                return 1;
        }
        r = ops->snapshots(s->backend->state, on_counted, t);
        if (r < 0) {
                take_call_free(t);
                return r;
        }
        return 1;
}

/* ---- the list, over every backend that keeps snapshots ------------------------------------ */

typedef struct ListCall {
        sd_bus_message *call;
        sd_bus_message *reply;  /* a(ssutt), filled as the backends answer */
        uid_t uid;              /* whose (root: everyone's) */
        unsigned pending;
        int error;
} ListCall;

static void list_call_unref(ListCall *l) {
        if (--l->pending > 0)
                return;
        if (l->error >= 0)
                l->error = sd_bus_message_close_container(l->reply);
        if (l->error >= 0)
                (void) sd_bus_send(NULL, l->reply, NULL);
        else
                (void) sd_bus_reply_method_errno(l->call, l->error, NULL);
        sd_bus_message_unref(l->reply);
        sd_bus_message_unref(l->call);
        free(l);
}

static void on_listed(void *userdata, const AgentdSnapshot *list, size_t n, const char *error_name,
                      const char *message) {
        ListCall *l = userdata;

        if (error_name)
                log_warning("A backend could not list its snapshots: %s", message ?: error_name);
        for (size_t i = 0; i < n && l->error >= 0; i++)
                if (l->uid == 0 || list[i].owner == l->uid)
                        l->error = sd_bus_message_append(l->reply, "(ssutt)", list[i].image, list[i].sandbox_id,
                                                         (uint32_t) list[i].owner, list[i].created_at, list[i].size);
        list_call_unref(l);
}

int snapshot_list(Manager *m, uid_t uid, sd_bus_message *call) {
        ListCall *l = calloc(1, sizeof(*l));
        int r;

        if (!l)
                return -ENOMEM;
        *l = (ListCall) { .call = sd_bus_message_ref(call), .uid = uid, .pending = 1 };
        r = sd_bus_message_new_method_return(call, &l->reply);
        if (r >= 0)
                r = sd_bus_message_open_container(l->reply, 'a', "(ssutt)");
        for (size_t i = 0; r >= 0 && i < m->n_backends; i++) {
                Backend *b = m->backends[i];
                if (!b->state || !b->ops->snapshots)
                        continue;
                l->pending++;
                if (b->ops->snapshots(b->state, on_listed, l) < 0)
                        l->pending--;
        }
        l->error = r < 0 ? r : 0;
        list_call_unref(l); /* its own reference: answered now if no backend was asked */
        return 1;
}

/* ---- removing one: the first backend that has it ------------------------------------------ */

typedef struct DeleteCall {
        Manager *manager;
        char *image;
        uid_t uid;
        size_t next;            /* the backend to ask next */
        sd_bus_message *call;
} DeleteCall;

static void delete_next(DeleteCall *d);

static void delete_call_free(DeleteCall *d) {
        sd_bus_message_unref(d->call);
        free(d->image);
        free(d);
}

static void on_deleted(void *userdata, const char *error_name, const char *message) {
        DeleteCall *d = userdata;

        if (error_name && streq(error_name, AGENTD_ERROR_NO_SUCH_SNAPSHOT) && d->next < d->manager->n_backends) {
                delete_next(d); /* perhaps another backend's */
                return;
        }
        if (error_name)
                (void) sd_bus_reply_method_errorf(d->call, error_name, "%s", message ?: "The backend gave no reason");
        else {
                log_info("Snapshot %s deleted (asked by uid %u).", d->image, (unsigned) d->uid);
                (void) sd_bus_reply_method_return(d->call, NULL);
        }
        delete_call_free(d);
}

static void delete_next(DeleteCall *d) {
        while (d->next < d->manager->n_backends) {
                Backend *b = d->manager->backends[d->next++];
                if (b->state && b->ops->delete_snapshot &&
                    b->ops->delete_snapshot(b->state, d->image, d->uid, on_deleted, d) >= 0)
                        return;
        }
        (void) sd_bus_reply_method_errorf(d->call, AGENTD_ERROR_NO_SUCH_SNAPSHOT, "There is no snapshot %s.", d->image);
        delete_call_free(d);
}

int snapshot_delete(Manager *m, const char *image, uid_t uid, sd_bus_message *call) {
        DeleteCall *d = calloc(1, sizeof(*d));

        if (!d || !(d->image = strdup(image))) {
                free(d);
                return -ENOMEM;
        }
        d->manager = m;
        d->uid = uid;
        d->call = sd_bus_message_ref(call);
        delete_next(d);
        return 1;
}
