/* SPDX-License-Identifier: MIT */
/* The list (control-list.h): ListSandboxes, then each one's properties, then one page. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control-list.h"
#include "strv.h"

#define LIST_LIMIT_MAX 100
#define LIST_MAX 10000                     /* sandboxes one list looks at (agentd's own bound is lower) */

typedef struct ListQuery {
        char **ids, **paths;
        size_t n, n_paths, next_one;
        json_t *seen;           /* [[created_at, id, sandbox json]] that passed the filters */
        char **states;          /* the state filter (NULL: running and paused) */
        json_t *metadata;       /* the metadata filter: every key with that value */
        unsigned limit;
        char *after;            /* nextToken: "CREATED-ID" of the last one of the page before */
} ListQuery;

static void list_query_free(void *p) {
        ListQuery *q = p;

        if (!q)
                return;
        strv_free(q->ids);
        strv_free(q->paths);
        json_decref(q->seen);
        strv_free(q->states);
        json_decref(q->metadata);
        free(q->after);
        free(q);
}

static void list_next(Op *op);

static bool passes_filters(const ListQuery *q, const SandboxInfo *info) {
        const char *state = sandbox_info_e2b_state(info), *k;
        json_t *v;

        if (!state || (q->states && !strv_contains(q->states, state)))
                return false;
        json_object_foreach(q->metadata, k, v)
                if (!json_equal(json_object_get(info->metadata, k), v))
                        return false;
        return true;
}

static void list_got_one(Op *op) {
        ListQuery *q = op->state;

        if (op->info.id && passes_filters(q, &op->info)) {
                json_t *j = sandbox_info_json(&op->info);

                if (!j || json_array_append_new(q->seen, json_pack("[I, s, o]", (json_int_t) op->info.created_at,
                                                                    op->info.id, j)) < 0) {
                        op_fail(op, 500, "out of memory");
                        return;
                }
        }
        sandbox_info_done(&op->info);
        list_next(op);
}

/* reply: NULL when the sandbox went before it was read (it is simply not listed). */
static void list_got_properties(Op *op, sd_bus_message *reply) {
        ListQuery *q = op->state;

        if (reply) {
                int r = sandbox_info_read(reply, q->ids[q->next_one - 1], &op->info);
                if (r < 0) {
                        op_fail(op, 500, "agentd's properties of a sandbox could not be read: %s", strerror(-r));
                        return;
                }
        }
        list_got_one(op);
}

/* ---- paging ------------------------------------------------------------------------------------ */

/* "CREATED-ID" orders as the list does: by creation, then id. */
static int order(json_int_t created_a, const char *id_a, json_int_t created_b, const char *id_b) {
        if (created_a != created_b)
                return created_a < created_b ? -1 : 1;
        return strcmp(id_a, id_b);
}

static int compare_seen(const void *a, const void *b) {
        json_t *x = *(json_t *const *) a, *y = *(json_t *const *) b;
        return order(json_integer_value(json_array_get(x, 0)), json_string_value(json_array_get(x, 1)),
                     json_integer_value(json_array_get(y, 0)), json_string_value(json_array_get(y, 1)));
}

static void list_answer(Op *op) {
        ListQuery *q = op->state;
        size_t n = json_array_size(q->seen), start = 0, count;
        _cleanup_free_ json_t **sorted = calloc(n + 1, sizeof(json_t *));
        json_t *out = json_array();
        json_int_t after_created = 0;
        const char *after_id = NULL;

        if (!sorted || !out) {
                json_decref(out);
                op_fail(op, 500, "out of memory");
                return;
        }
        for (size_t i = 0; i < n; i++)
                sorted[i] = json_array_get(q->seen, i);
        qsort(sorted, n, sizeof(json_t *), compare_seen);
        if (q->after) {
                char *dash = strchr(q->after, '-');
                after_created = strtoll(q->after, NULL, 10);
                after_id = dash ? dash + 1 : "";
                while (start < n && order(json_integer_value(json_array_get(sorted[start], 0)),
                                          json_string_value(json_array_get(sorted[start], 1)), after_created,
                                          after_id) <= 0)
                        start++;
        }
        count = MIN(n - start, (size_t) q->limit);
        for (size_t i = start; i < start + count; i++)
                (void) json_array_append(out, json_array_get(sorted[i], 2));
        if (start + count < n && op->c) {
                json_t *last = sorted[start + count - 1];
                _cleanup_free_ char *token = NULL;

                if (asprintf(&token, "%" JSON_INTEGER_FORMAT "-%s", json_integer_value(json_array_get(last, 0)),
                             json_string_value(json_array_get(last, 1))) >= 0)
                        (void) http_conn_add_header(op->c, "x-next-token", token);
        }
        op_answer(op, 200, out);
}

static void list_next(Op *op) {
        ListQuery *q = op->state;

        if (q->next_one >= q->n) {
                list_answer(op);
                return;
        }
        q->next_one++;
        op_call(op, q->paths[q->next_one - 1], "org.freedesktop.DBus.Properties", "GetAll", list_got_properties, "s",
                SANDBOX_IFACE);
}

static void listed(Op *op, sd_bus_message *reply) {
        ListQuery *q = op->state;
        const char *id, *image, *state, *path;
        int r;

        r = sd_bus_message_enter_container(reply, 'a', "(ssso)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(ssso)", &id, &image, &state, &path)) > 0) {
                if (q->n >= LIST_MAX)
                        break;
                /* Only what E2B could list is read further (hibernated: E2B's paused). */
                if (!streq(state, "running") && !streq(state, "paused") && !streq(state, "hibernated"))
                        continue;
                if (strv_consume_n(&q->ids, &q->n, strdup(id)) < 0 ||
                    strv_consume_n(&q->paths, &q->n_paths, strdup(path)) < 0) {
                        op_fail(op, 500, "out of memory");
                        return;
                }
        }
        if (r < 0) {
                op_fail(op, 500, "agentd's list could not be read: %s", strerror(-r));
                return;
        }
        list_next(op);
}

/* ---- the query --------------------------------------------------------------------------------- */

/* A 400's message in *ret: -EINVAL (or -ENOMEM). */
static int problem(char **ret, const char *message) {
        *ret = strdup(message);
        return *ret ? -EINVAL : -ENOMEM;
}

/* Into q: limit, nextToken, state (repeated or comma-separated), metadata ("k=v&k2=v2", each
 * part URL-encoded). -EINVAL with *ret_problem (a 400's message, allocated), or -ENOMEM. */
static int read_query(HttpConn *c, ListQuery *q, char **ret_problem) {
        char buf[2048], value[1024];
        int n;

        q->limit = LIST_LIMIT_MAX;
        n = http_conn_query_nth(c, "limit", 0, buf, sizeof(buf));
        if (n >= 0) {
                char *end;
                unsigned long l = strtoul(buf, &end, 10);

                if (n == 0 || *end || l < 1 || l > LIST_LIMIT_MAX)
                        return problem(ret_problem, "limit is a number from 1 to 100");
                q->limit = (unsigned) l;
        }
        if (http_conn_query_nth(c, "nextToken", 0, buf, sizeof(buf)) > 0 && !(q->after = strdup(buf)))
                return -ENOMEM;
        for (unsigned i = 0; i < 16 && http_conn_query_nth(c, "state", i, buf, sizeof(buf)) >= 0; i++)
                for (char *s = strtok(buf, ","); s; s = strtok(NULL, ",")) {
                        if (!streq(s, "running") && !streq(s, "paused")) {
                                if (asprintf(ret_problem, "state is running or paused, not '%s'", s) < 0)
                                        return -ENOMEM;
                                return -EINVAL;
                        }
                        if (!strv_contains(q->states, s) && strv_extend(&q->states, s) < 0)
                                return -ENOMEM;
                }
        q->metadata = json_object();
        if (!q->metadata)
                return -ENOMEM;
        n = http_conn_query_nth(c, "metadata", 0, buf, sizeof(buf));
        if (n == -E2BIG)
                return problem(ret_problem, "the metadata filter is too long");
        for (char *pair = n > 0 ? strtok(buf, "&") : NULL; pair; pair = strtok(NULL, "&")) {
                char *eq = strchr(pair, '='), key[512];

                if (!eq)
                        return problem(ret_problem, "the metadata filter is key=value pairs joined by &");
                if (http_url_decode(pair, (size_t) (eq - pair), key, sizeof(key)) < 0 ||
                    http_url_decode(eq + 1, strlen(eq + 1), value, sizeof(value)) < 0)
                        return problem(ret_problem, "the metadata filter is too long");
                if (json_object_set_new(q->metadata, key, json_string(value)) < 0)
                        return -ENOMEM;
        }
        return 0;
}

void control_list_start(Op *op) {
        _cleanup_free_ char *problem = NULL;
        ListQuery *q = calloc(1, sizeof(ListQuery));
        int r;

        if (!q) {
                op_fail(op, 500, "out of memory");
                return;
        }
        op->state = q;
        op->state_free = list_query_free;
        r = read_query(op->c, q, &problem);
        if (r >= 0 && !(q->seen = json_array()))
                r = -ENOMEM;
        if (r < 0) {
                op_fail(op, r == -EINVAL ? 400 : 500, "%s", problem ?: "out of memory");
                return;
        }
        op_call(op, MANAGER_PATH, MANAGER_IFACE, "ListSandboxes", listed, NULL);
}
