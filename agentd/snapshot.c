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

/* A Snapshot() goes: counting (the owner's snapshots asked of the backend, when a quota
 * applies), waiting (for another take of the same sandbox or the same name), taking (the
 * backend commits). The backend's list answers later and shows only what is made, so a check
 * against it alone lets every concurrent call pass: a take that passed holds a place of its
 * owner's from its check until it ends, and the check counts those places, and the owner's
 * snapshots made while it was being counted (the list may predate them; counting one twice only
 * errs on the safe side). Two takes of one sandbox (its numbered names), of one name, or of a
 * name among another sandbox's numbered ones, at once, would both claim the same name and leave
 * the first image nameless, in no list and no count (and another user's so, by a race): they
 * run one after the other. */
typedef enum TakePhase {
        TAKE_COUNTING,
        TAKE_WAITING,
        TAKE_TAKING,
} TakePhase;

typedef struct TakeCall {
        Manager *manager;
        char *sandbox_id;
        char *image;            /* the tag asked for, or NULL */
        uid_t owner;
        sd_bus_message *call;
        TakePhase phase;
        bool holds;             /* holds one of its owner's places */
        uint64_t made_since;    /* the owner's snapshots made while this one was counted */
        struct TakeCall *prev, *next;
} TakeCall;

/* Every Snapshot() under way (agentd has one Manager). Bounded by the calls the bus lets in. */
static TakeCall *takes;

static void take_now(TakeCall *t);

/* REPOSITORY:TAG of image (":latest" when it names no tag) into buf. */
static const char *full_name(const char *image, char buf[static 300]) {
        const char *slash = strrchr(image, '/'), *colon = strrchr(image, ':');

        snprintf(buf, 300, "%s%s", image, colon && (!slash || colon > slash) ? "" : ":latest");
        return buf;
}

/* Does image name a tag of agentix-snapshot/<sandbox_id>, where b's numbered names go? */
static bool in_numbered(const char *image, const char *sandbox_id) {
        const char *p = startswith(image, "agentix-snapshot/");

        p = p ? startswith(p, sandbox_id) : NULL;
        return p && (*p == ':' || *p == 0);
}

/* Might a and b claim the same name? */
static bool conflict(const TakeCall *a, const TakeCall *b) {
        char x[300], y[300];

        if (streq(a->sandbox_id, b->sandbox_id))
                return true;
        if ((a->image && in_numbered(a->image, b->sandbox_id)) || (b->image && in_numbered(b->image, a->sandbox_id)))
                return true;
        return a->image && b->image && streq(full_name(a->image, x), full_name(b->image, y));
}

static bool blocked(const TakeCall *t) {
        for (TakeCall *u = takes; u; u = u->next)
                if (u != t && u->phase == TAKE_TAKING && conflict(t, u))
                        return true;
        return false;
}

/* The takes that waited for one that ended, when nothing else holds them back. */
static void start_waiting(void) {
        for (;;) {
                TakeCall *t = takes;

                while (t && (t->phase != TAKE_WAITING || blocked(t)))
                        t = t->next;
                if (!t)
                        return;
                take_now(t); /* taking now, or answered and gone */
        }
}

static void take_call_free(TakeCall *t) {
        bool was_taking;

        if (!t)
                return;
        was_taking = t->phase == TAKE_TAKING;
        if (t->prev)
                t->prev->next = t->next;
        else
                takes = t->next;
        if (t->next)
                t->next->prev = t->prev;
        sd_bus_message_unref(t->call);
        free(t->sandbox_id);
        free(t->image);
        free(t);
        if (was_taking)
                start_waiting();
}

/* The places owner's takes hold, t's own aside. */
static uint64_t places_held(uid_t owner, const TakeCall *t) {
        uint64_t n = 0;

        for (TakeCall *u = takes; u; u = u->next)
                n += u != t && u->owner == owner && u->holds;
        return n;
}

static void on_taken(void *userdata, const char *image, const char *error_name, const char *message) {
        TakeCall *t = userdata;
        Sandbox *s = manager_get_sandbox(t->manager, t->sandbox_id);

        if (error_name)
                (void) sd_bus_reply_method_errorf(t->call, error_name, "%s", message ?: "The backend gave no reason");
        else {
                if (s)
                        log_sandbox_info(s, "Sandbox %s: snapshot %s taken.", s->id, image);
                /* Made: a count under way may have a list from before it. */
                for (TakeCall *u = takes; u; u = u->next)
                        if (u->phase == TAKE_COUNTING && u->owner == t->owner)
                                u->made_since++;
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
        t->phase = TAKE_TAKING;
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

/* Now, or once the take that would claim the same name ended. */
static void take_when_free(TakeCall *t) {
        if (blocked(t)) {
                t->phase = TAKE_WAITING;
                return;
        }
        take_now(t);
}

/* Does image (REPOSITORY[:TAG]) name entry? A name without a tag means :latest. */
static bool same_image(const char *image, const char *entry) {
        char buf[300];

        return streq(full_name(image, buf), entry);
}

/* The owner's snapshots counted against the maximum (a name the owner replaces is no new one),
 * with the places taken and the snapshots made since the list was asked for. */
static void on_counted(void *userdata, const AgentdSnapshot *list, size_t n, const char *error_name,
                       const char *message) {
        TakeCall *t = userdata;
        uint64_t max = t->manager->config->max_snapshots_per_user, count = 0, quota;
        Quotas q;
        int r;

        r = quota_of(t->manager, t->owner, &q);
        if (r < 0) {
                (void) sd_bus_reply_method_errnof(t->call, r, "Cannot look up the name of uid %u, which its quotas may "
                                                  "depend on (agentd.conf.d/users/NAME.conf): %m", (unsigned) t->owner);
                take_call_free(t);
                return;
        }
        quota = q.max_snapshots;
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
                        take_when_free(t);
                        return;
                }
                count++;
        }
        count += places_held(t->owner, t) + t->made_since;
        if (count < max && count >= quota) {
                (void) quota_snapshots_exceeded(t->call, t->owner, count, quota);
                take_call_free(t);
                return;
        }
        if (count >= max) {
                (void) sd_bus_reply_method_errorf(t->call, AGENTD_ERROR_TOO_MANY_SNAPSHOTS,
                                                  "uid %u has %llu snapshots (those being taken included), the most one "
                                                  "user may have (MaxSnapshotsPerUser= in agentd.conf): delete one with "
                                                  "DeleteSnapshot()", (unsigned) t->owner, (unsigned long long) count);
                take_call_free(t);
                return;
        }
        t->holds = true;
        take_when_free(t);
}

int snapshot_take(Manager *m, Sandbox *s, const char *image, sd_bus_message *call, sd_bus_error *error) {
        const AgentdBackendOps *ops = s->backend->ops;
        TakeCall *t;
        Quotas q;
        int r;

        if (s->state != SANDBOX_RUNNING && s->state != SANDBOX_PAUSED && s->state != SANDBOX_EXITED &&
            s->state != SANDBOX_HIBERNATED)
                return sd_bus_error_setf(error, AGENTD_ERROR_NOT_RUNNING, "Sandbox %s is %s: there is nothing to snapshot yet.",
                                         s->id, sandbox_state_to_string(s->state));
        /* Its container is being stopped or started for a checkpoint: its files move meanwhile. */
        if (sandbox_live_in_progress(s))
                return sd_bus_error_setf(error, AGENTD_ERROR_IN_USE, "Sandbox %s is being hibernated or resumed.",
                                         s->id);
        if (!ops->snapshot || !ops->snapshots)
                return sd_bus_error_setf(error, AGENTD_ERROR_BACKEND_UNAVAILABLE, "The %s backend takes no snapshots.",
                                         s->backend->name);
        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        *t = (TakeCall) { .manager = m, .owner = s->owner, .call = sd_bus_message_ref(call), .next = takes };
        if (takes)
                takes->prev = t;
        takes = t;
        if (!(t->sandbox_id = strdup(s->id)) || (image && !(t->image = strdup(image)))) {
                take_call_free(t);
                return -ENOMEM;
        }
        /* Counted when a bound applies, or may (the owner's quotas cannot be known now: on_counted()
         * refuses then). */
        if (s->owner == 0 ||
            (m->config->max_snapshots_per_user == AGENTD_UNLIMITED && quota_of(m, s->owner, &q) >= 0 &&
             q.max_snapshots == AGENTD_UNLIMITED)) {
                take_when_free(t);
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
