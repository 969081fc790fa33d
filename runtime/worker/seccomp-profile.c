/* SPDX-License-Identifier: MIT */
#include <stdarg.h>

#include <jansson.h>

#include "log.h"
#include "seccomp-profile.h"

typedef struct ProfileParser {
        scmp_filter_ctx ctx;
        uint32_t default_action;
        char *error;
} ProfileParser;

/* Always -EINVAL, visibly to the compiler: out-parameters are left unset on failure. */
#define profile_fail(p, ...) (message_set_first(&(p)->error, -EINVAL, __VA_ARGS__), -EINVAL)

static const struct {
        const char *name;
        uint32_t token;
        const char *go_name; /* how Docker's includes/excludes name it */
} arch_table[] = {
        { "SCMP_ARCH_X86", SCMP_ARCH_X86, "x86" },
        { "SCMP_ARCH_X86_64", SCMP_ARCH_X86_64, "amd64" },
        { "SCMP_ARCH_X32", SCMP_ARCH_X32, "x32" },
        { "SCMP_ARCH_ARM", SCMP_ARCH_ARM, "arm" },
        { "SCMP_ARCH_AARCH64", SCMP_ARCH_AARCH64, "arm64" },
        { "SCMP_ARCH_MIPS", SCMP_ARCH_MIPS, "mips" },
        { "SCMP_ARCH_MIPS64", SCMP_ARCH_MIPS64, "mips64" },
        { "SCMP_ARCH_MIPS64N32", SCMP_ARCH_MIPS64N32, "mips64n32" },
        { "SCMP_ARCH_MIPSEL", SCMP_ARCH_MIPSEL, "mipsle" },
        { "SCMP_ARCH_MIPSEL64", SCMP_ARCH_MIPSEL64, "mips64le" },
        { "SCMP_ARCH_MIPSEL64N32", SCMP_ARCH_MIPSEL64N32, "mips64len32" },
        { "SCMP_ARCH_PPC", SCMP_ARCH_PPC, "ppc" },
        { "SCMP_ARCH_PPC64", SCMP_ARCH_PPC64, "ppc64" },
        { "SCMP_ARCH_PPC64LE", SCMP_ARCH_PPC64LE, "ppc64le" },
        { "SCMP_ARCH_S390", SCMP_ARCH_S390, "s390" },
        { "SCMP_ARCH_S390X", SCMP_ARCH_S390X, "s390x" },
        { "SCMP_ARCH_RISCV64", SCMP_ARCH_RISCV64, "riscv64" },
};

static const char *native_go_arch(void) {
        uint32_t native = seccomp_arch_native();

        for (size_t i = 0; i < ELEMENTSOF(arch_table); i++)
                if (arch_table[i].token == native)
                        return arch_table[i].go_name;
        return "unknown";
}

static int arch_add(ProfileParser *p, const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(arch_table); i++)
                if (streq(arch_table[i].name, name)) {
                        int r = seccomp_arch_add(p->ctx, arch_table[i].token);
                        if (r < 0 && r != -EEXIST)
                                return profile_fail(p, "cannot add architecture %s: %s", name, strerror(-r));
                        return 0;
                }
        /* A newer profile may name architectures this libseccomp does not know. */
        log_debug("seccomp profile: skipping unknown architecture %s", name);
        return 0;
}

static int parse_architectures(ProfileParser *p, json_t *root) {
        json_t *arches = json_object_get(root, "architectures"), *map = json_object_get(root, "archMap"), *e;
        size_t i;
        int r;

        if (arches && !json_is_array(arches) && !json_is_null(arches))
                return profile_fail(p, "\"architectures\" must be an array of strings");
        json_array_foreach(arches, i, e) {
                if (!json_is_string(e))
                        return profile_fail(p, "architectures[%zu] must be a string", i);
                r = arch_add(p, json_string_value(e));
                if (r < 0)
                        return r;
        }
        if (json_array_size(arches) > 0 || !map || json_is_null(map))
                return 0;

        /* Docker's archMap: add the native architecture's entry and its sub-architectures. */
        if (!json_is_array(map))
                return profile_fail(p, "\"archMap\" must be an array");
        json_array_foreach(map, i, e) {
                const char *arch = json_string_value(json_object_get(e, "architecture"));
                json_t *subs = json_object_get(e, "subArchitectures"), *s;
                uint32_t token = 0;
                size_t j;

                if (!arch)
                        return profile_fail(p, "archMap[%zu].architecture must be a string", i);
                for (size_t k = 0; k < ELEMENTSOF(arch_table); k++)
                        if (streq(arch_table[k].name, arch))
                                token = arch_table[k].token;
                if (token != seccomp_arch_native())
                        continue;
                r = arch_add(p, arch);
                if (r < 0)
                        return r;
                json_array_foreach(subs, j, s) {
                        if (!json_is_string(s))
                                return profile_fail(p, "archMap[%zu].subArchitectures[%zu] must be a string", i, j);
                        r = arch_add(p, json_string_value(s));
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

static int parse_action(ProfileParser *p, const char *where, json_t *action, json_t *errno_ret, uint32_t *ret) {
        const char *a = json_string_value(action);
        int64_t e = EPERM;

        if (!a)
                return profile_fail(p, "%s: \"action\" must be a string", where);
        if (errno_ret && !json_is_null(errno_ret)) {
                if (!json_is_integer(errno_ret) || json_integer_value(errno_ret) < 0 ||
                    json_integer_value(errno_ret) > 0xffff)
                        return profile_fail(p, "%s: errnoRet must be an integer 0…65535", where);
                e = json_integer_value(errno_ret);
        }

        if (streq(a, "SCMP_ACT_ALLOW"))
                *ret = SCMP_ACT_ALLOW;
        else if (streq(a, "SCMP_ACT_ERRNO"))
                *ret = SCMP_ACT_ERRNO((uint32_t) e);
        else if (streq(a, "SCMP_ACT_KILL") || streq(a, "SCMP_ACT_KILL_THREAD"))
                *ret = SCMP_ACT_KILL_THREAD;
        else if (streq(a, "SCMP_ACT_KILL_PROCESS"))
                *ret = SCMP_ACT_KILL_PROCESS;
        else if (streq(a, "SCMP_ACT_TRAP"))
                *ret = SCMP_ACT_TRAP;
        else if (streq(a, "SCMP_ACT_TRACE"))
                *ret = SCMP_ACT_TRACE((uint32_t) e);
        else if (streq(a, "SCMP_ACT_LOG"))
                *ret = SCMP_ACT_LOG;
        else if (streq(a, "SCMP_ACT_NOTIFY"))
                return profile_fail(p, "%s: action SCMP_ACT_NOTIFY is not supported (the worker has no notification listener)",
                            where);
        else
                return profile_fail(p, "%s: unknown action \"%s\" (expected SCMP_ACT_ALLOW, SCMP_ACT_ERRNO, SCMP_ACT_KILL, "
                            "SCMP_ACT_KILL_THREAD, SCMP_ACT_KILL_PROCESS, SCMP_ACT_TRAP, SCMP_ACT_TRACE or SCMP_ACT_LOG)",
                            where, a);
        return 0;
}

static int parse_op(ProfileParser *p, const char *where, const char *op, enum scmp_compare *ret) {
        static const struct {
                const char *name;
                enum scmp_compare op;
        } ops[] = {
                { "SCMP_CMP_NE", SCMP_CMP_NE }, { "SCMP_CMP_LT", SCMP_CMP_LT },
                { "SCMP_CMP_LE", SCMP_CMP_LE }, { "SCMP_CMP_EQ", SCMP_CMP_EQ },
                { "SCMP_CMP_GE", SCMP_CMP_GE }, { "SCMP_CMP_GT", SCMP_CMP_GT },
                { "SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ },
        };

        if (!op)
                return profile_fail(p, "%s: \"op\" must be a string", where);
        for (size_t i = 0; i < ELEMENTSOF(ops); i++)
                if (streq(ops[i].name, op)) {
                        *ret = ops[i].op;
                        return 0;
                }
        return profile_fail(p, "%s: unknown comparison \"%s\" (expected SCMP_CMP_NE, SCMP_CMP_LT, SCMP_CMP_LE, "
                    "SCMP_CMP_EQ, SCMP_CMP_GE, SCMP_CMP_GT or SCMP_CMP_MASKED_EQ)", where, op);
}

static int parse_u64(ProfileParser *p, const char *where, const char *field, json_t *v, uint64_t *ret) {
        if (!v || json_is_null(v)) {
                *ret = 0;
                return 0;
        }
        if (!json_is_integer(v))
                return profile_fail(p, "%s: \"%s\" must be an integer", where, field);
        /* JSON integers are signed 64-bit here; negative values stand for the high half. */
        *ret = (uint64_t) json_integer_value(v);
        return 0;
}

static int parse_args(ProfileParser *p, const char *where, json_t *args, struct scmp_arg_cmp *cmps, unsigned *ret_n) {
        json_t *a;
        size_t i;
        int r;

        if (!args || json_is_null(args)) {
                *ret_n = 0;
                return 0;
        }
        if (!json_is_array(args))
                return profile_fail(p, "%s: \"args\" must be an array", where);
        if (json_array_size(args) > 6)
                return profile_fail(p, "%s: at most 6 argument comparisons are possible", where);

        json_array_foreach(args, i, a) {
                json_t *index = json_object_get(a, "index");
                enum scmp_compare op;
                uint64_t value, value_two;
                char w[256];

                snprintf(w, sizeof(w), "%s.args[%zu]", where, i);
                if (!json_is_object(a))
                        return profile_fail(p, "%s: must be an object", w);
                if (!json_is_integer(index) || json_integer_value(index) < 0 || json_integer_value(index) > 5)
                        return profile_fail(p, "%s: \"index\" must be an integer 0…5", w);
                r = parse_op(p, w, json_string_value(json_object_get(a, "op")), &op);
                if (r < 0)
                        return r;
                r = parse_u64(p, w, "value", json_object_get(a, "value"), &value);
                if (r < 0)
                        return r;
                r = parse_u64(p, w, "valueTwo", json_object_get(a, "valueTwo"), &value_two);
                if (r < 0)
                        return r;
                cmps[i] = (struct scmp_arg_cmp) {
                        .arg = (unsigned) json_integer_value(index),
                        .op = op,
                        .datum_a = value,
                        .datum_b = value_two,
                };
        }
        *ret_n = (unsigned) json_array_size(args);
        return 0;
}

static bool string_in(json_t *array, const char *s) {
        json_t *e;
        size_t i;

        json_array_foreach(array, i, e)
                if (json_is_string(e) && streq(json_string_value(e), s))
                        return true;
        return false;
}

/* Does this entry apply to us (native arch, no capabilities)? */
static int entry_applies(ProfileParser *p, const char *where, json_t *entry, bool *ret) {
        json_t *inc = json_object_get(entry, "includes"), *exc = json_object_get(entry, "excludes");
        const char *arch = native_go_arch();

        if ((inc && !json_is_object(inc) && !json_is_null(inc)) || (exc && !json_is_object(exc) && !json_is_null(exc)))
                return profile_fail(p, "%s: \"includes\" and \"excludes\" must be objects", where);

        *ret = false;
        if (json_array_size(json_object_get(inc, "arches")) > 0 && !string_in(json_object_get(inc, "arches"), arch))
                return 0;
        if (json_array_size(json_object_get(inc, "caps")) > 0)
                return 0;
        if (string_in(json_object_get(exc, "arches"), arch))
                return 0;
        *ret = true;
        return 0;
}

static int add_rule(ProfileParser *p, const char *where, const char *name, uint32_t action,
                    const struct scmp_arg_cmp *cmps, unsigned n_cmps) {
        int nr, r;

        nr = seccomp_syscall_resolve_name(name);
        if (nr == __NR_SCMP_ERROR) {
                log_debug("seccomp profile: %s: skipping syscall \"%s\" unknown to libseccomp", where, name);
                return 0;
        }
        r = seccomp_rule_add_array(p->ctx, action, nr, n_cmps, cmps);
        if (r < 0)
                return profile_fail(p, "%s: cannot add a rule for \"%s\": %s", where, name, strerror(-r));
        return 0;
}

static int parse_entry(ProfileParser *p, size_t i, json_t *entry) {
        struct scmp_arg_cmp cmps[6];
        json_t *names, *name, *e;
        unsigned n_cmps;
        uint32_t action;
        bool applies;
        char where[64];
        size_t j;
        int r;

        snprintf(where, sizeof(where), "syscalls[%zu]", i);
        if (!json_is_object(entry))
                return profile_fail(p, "%s: must be an object", where);

        r = parse_action(p, where, json_object_get(entry, "action"), json_object_get(entry, "errnoRet"), &action);
        if (r < 0)
                return r;
        r = parse_args(p, where, json_object_get(entry, "args"), cmps, &n_cmps);
        if (r < 0)
                return r;
        r = entry_applies(p, where, entry, &applies);
        if (r < 0)
                return r;

        names = json_object_get(entry, "names");
        name = json_object_get(entry, "name");
        if ((names && !json_is_array(names) && !json_is_null(names)) || (name && !json_is_string(name)))
                return profile_fail(p, "%s: \"names\" must be an array of strings, \"name\" a string", where);
        if (json_array_size(names) == 0 && !name)
                return profile_fail(p, "%s: no syscall \"names\" given", where);
        json_array_foreach(names, j, e)
                if (!json_is_string(e))
                        return profile_fail(p, "%s.names[%zu]: must be a string", where, j);

        if (!applies || action == p->default_action)
                return 0;

        json_array_foreach(names, j, e) {
                r = add_rule(p, where, json_string_value(e), action, cmps, n_cmps);
                if (r < 0)
                        return r;
        }
        if (name)
                return add_rule(p, where, json_string_value(name), action, cmps, n_cmps);
        return 0;
}

int seccomp_profile_compile(const char *json, size_t size, scmp_filter_ctx *ret, char **ret_error) {
        ProfileParser p = {};
        json_error_t jerr;
        json_t *root, *syscalls, *e;
        size_t i;
        int r;

        root = json_loadb(json, size, JSON_REJECT_DUPLICATES, &jerr);
        if (!root) {
                r = profile_fail(&p, "not valid JSON (line %d, column %d): %s", jerr.line, jerr.column, jerr.text);
                goto finish;
        }
        if (!json_is_object(root)) {
                r = profile_fail(&p, "the profile must be a JSON object");
                goto finish;
        }

        r = parse_action(&p, "defaultAction", json_object_get(root, "defaultAction"),
                         json_object_get(root, "defaultErrnoRet"), &p.default_action);
        if (r < 0)
                goto finish;

        p.ctx = seccomp_init(p.default_action);
        if (!p.ctx) {
                r = profile_fail(&p, "seccomp_init() failed");
                goto finish;
        }

        r = parse_architectures(&p, root);
        if (r < 0)
                goto finish;

        syscalls = json_object_get(root, "syscalls");
        if (syscalls && !json_is_array(syscalls) && !json_is_null(syscalls)) {
                r = profile_fail(&p, "\"syscalls\" must be an array");
                goto finish;
        }
        json_array_foreach(syscalls, i, e) {
                r = parse_entry(&p, i, e);
                if (r < 0)
                        goto finish;
        }

        *ret = TAKE_PTR(p.ctx);
        r = 0;
finish:
        json_decref(root);
        if (p.ctx)
                seccomp_release(p.ctx);
        if (r < 0 && ret_error)
                *ret_error = TAKE_PTR(p.error);
        free(p.error);
        return r;
}

int seccomp_profile_compile_file(const char *path, scmp_filter_ctx *ret, char **ret_error) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *text = NULL, *error = NULL;
        size_t size = 0;
        int r;

        f = fopen(path, "re");
        if (!f) {
                r = negative_errno();
                if (ret_error && asprintf(ret_error, "cannot open %s: %s", path, strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        if (getdelim(&text, &size, '\0', f) < 0 && ferror(f)) {
                r = negative_errno();
                if (ret_error && asprintf(ret_error, "cannot read %s: %s", path, strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }

        r = seccomp_profile_compile(text ?: "", text ? strlen(text) : 0, ret, &error);
        if (r < 0 && ret_error && asprintf(ret_error, "%s: %s", path, strna(error)) < 0)
                *ret_error = NULL;
        return r;
}

int seccomp_profile_install(const char *path, char **ret_error) {
        scmp_filter_ctx ctx = NULL;
        int r;

        if (path)
                r = seccomp_profile_compile_file(path, &ctx, ret_error);
        else
                r = seccomp_profile_compile(seccomp_default_profile_json, strlen(seccomp_default_profile_json),
                                            &ctx, ret_error);
        if (r < 0)
                return r;

        r = seccomp_load(ctx);
        seccomp_release(ctx);
        if (r < 0 && ret_error && asprintf(ret_error, "cannot load the seccomp filter: %s", strerror(-r)) < 0)
                *ret_error = NULL;
        return r;
}
