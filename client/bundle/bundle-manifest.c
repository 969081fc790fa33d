/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <ini.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>

#include "bundle-manifest.h"

#define MODULE_SECTION_PREFIX "Module "

typedef struct Parser {
        BundleManifest *m;
        char *error;      /* the first error, without the line (inih knows it) */
        BundleModule *module; /* the [Module NAME] section being read */
} Parser;

bool bundle_name_is_valid(const char *s) {
        /* A Docker repository path component: lowercase, digits, separators inside. */
        if (strempty(s) || strlen(s) > 128 || !(islower(s[0]) || isdigit(s[0])))
                return false;
        for (const char *p = s; *p; p++)
                if (!(islower(*p) || isdigit(*p) || strchr("._-", *p)))
                        return false;
        return islower(s[strlen(s) - 1]) || isdigit(s[strlen(s) - 1]);
}

bool bundle_version_is_valid(const char *s) {
        /* A Docker tag: [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}, and not "latest" (built on every build). */
        if (strempty(s) || strlen(s) > 128 || streq(s, "latest") || !(isalnum(s[0]) || s[0] == '_'))
                return false;
        for (const char *p = s; *p; p++)
                if (!(isalnum(*p) || strchr("_.-", *p)))
                        return false;
        return true;
}

/* Returns 0: to inih, the line is an error. */
#define parser_fail(p, ...) message_set_first(&(p)->error, 0, __VA_ARGS__)

/* A relative path that stays below its base: no "..", not absolute, not empty. */
static bool relative_path_is_safe(const char *s) {
        if (strempty(s) || s[0] == '/')
                return false;
        for (const char *p = s; *p;) {
                size_t n = strcspn(p, "/");
                if (n == 2 && strneq(p, "..", 2))
                        return false;
                p += n;
                p += strspn(p, "/");
        }
        return true;
}

static int set_once(Parser *p, char **field, const char *key, const char *value) {
        if (*field)
                return parser_fail(p, "%s= is given twice", key);
        if (strempty(value))
                return parser_fail(p, "%s= is empty", key);
        *field = strdup(value);
        return *field ? 1 : parser_fail(p, "out of memory");
}

static int add_words(Parser *p, char ***l, const char *value) {
        return strv_split_extend(l, value) < 0 ? parser_fail(p, "out of memory") : 1;
}

static int bundle_section(Parser *p, const char *key, const char *value) {
        BundleManifest *m = p->m;

        if (streq(key, "Name")) {
                if (!bundle_name_is_valid(value))
                        return parser_fail(p, "Name=%s is not a valid bundle name (lowercase letters, digits, '.', '_' "
                                           "and '-', starting and ending with a letter or digit)", value);
                return set_once(p, &m->name, key, value);
        }
        if (streq(key, "Version")) {
                if (!bundle_version_is_valid(value))
                        return parser_fail(p, "Version=%s is not a valid version (letters, digits, '.', '_' and '-', "
                                           "at most 128, not 'latest')", value);
                return set_once(p, &m->version, key, value);
        }
        if (streq(key, "Description"))
                return set_once(p, &m->description, key, value);
        if (streq(key, "Platform"))
                return set_once(p, &m->platform, key, value);
        return parser_fail(p, "unknown key '%s' in [Bundle] (known: Name, Version, Description, Platform)", key);
}

static int tools_section(Parser *p, const char *key, const char *value) {
        BundleManifest *m = p->m;

        if (streq(key, "Packages"))
                return add_words(p, &m->packages, value);
        if (streq(key, "Programs")) {
                _cleanup_strv_free_ char **l = NULL;
                if (strv_split_extend(&l, value) < 0)
                        return parser_fail(p, "out of memory");
                for (char **i = l; i && *i; i++)
                        if ((*i)[0] != '/')
                                return parser_fail(p, "Programs= takes absolute paths on the build host, not '%s'", *i);
                return add_words(p, &m->programs, value);
        }
        if (streq(key, "ExcludePackages"))
                return add_words(p, &m->exclude_packages, value);
        return parser_fail(p, "unknown key '%s' in [Tools] (known: Packages, Programs, ExcludePackages)", key);
}

static int module_section(Parser *p, const char *key, const char *value) {
        BundleModule *mod = p->module;

        if (streq(key, "Sources")) {
                _cleanup_strv_free_ char **l = NULL;
                if (strv_split_extend(&l, value) < 0)
                        return parser_fail(p, "out of memory");
                return add_words(p, &mod->sources, value);
        }
        if (streq(key, "File"))
                return set_once(p, &mod->file, key, value);
        if (streq(key, "CFlags")) {
                char *joined;
                if (asprintf(&joined, "%s%s%s", mod->cflags ?: "", mod->cflags ? " " : "", value) < 0)
                        return parser_fail(p, "out of memory");
                free(mod->cflags);
                mod->cflags = joined;
                return 1;
        }
        if (streq(key, "PkgConfig"))
                return add_words(p, &mod->pkg_config, value);
        return parser_fail(p, "unknown key '%s' in [Module %s] (known: Sources, File, CFlags, PkgConfig)", key, mod->name);
}

static int files_section(Parser *p, const char *key, const char *value) {
        BundleManifest *m = p->m;
        _cleanup_strv_free_ char **w = NULL;
        BundleCopy *c;

        if (!streq(key, "Copy"))
                return parser_fail(p, "unknown key '%s' in [Files] (known: Copy)", key);
        if (strv_split_extend(&w, value) < 0)
                return parser_fail(p, "out of memory");
        if (strv_length(w) != 2)
                return parser_fail(p, "Copy= takes two paths, SOURCE DEST, not '%s'", value);
        if (!relative_path_is_safe(w[1]))
                return parser_fail(p, "Copy= destination '%s' must be relative to /nix/runtime", w[1]);
        c = realloc(m->copies, (m->n_copies + 1) * sizeof(*c));
        if (!c)
                return parser_fail(p, "out of memory");
        m->copies = c;
        m->copies[m->n_copies++] = (BundleCopy) { .source = TAKE_PTR(w[0]), .dest = TAKE_PTR(w[1]) };
        return 1;
}

static bool env_name_is_valid(const char *s, size_t n) {
        if (n == 0 || isdigit(s[0]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!(isalnum(s[i]) || s[i] == '_'))
                        return false;
        return true;
}

static int environment_section(Parser *p, const char *key, const char *value) {
        const char *eq;

        if (!streq(key, "Environment"))
                return parser_fail(p, "unknown key '%s' in [Environment] (known: Environment)", key);
        eq = strchr(value, '=');
        if (!eq || !env_name_is_valid(value, eq - value))
                return parser_fail(p, "Environment= takes NAME=VALUE, not '%s'", value);
        return strv_extend(&p->m->environment, value) < 0 ? parser_fail(p, "out of memory") : 1;
}

static BundleModule *module_find(BundleManifest *m, const char *name) {
        for (size_t i = 0; i < m->n_modules; i++)
                if (streq(m->modules[i].name, name))
                        return &m->modules[i];
        return NULL;
}

static int on_entry(void *userdata, const char *section, const char *key, const char *value) {
        Parser *p = userdata;

        if (p->error)
                return 1; /* report the first error only */
        if (streq(section, "Bundle"))
                return bundle_section(p, key, value);
        if (streq(section, "Tools"))
                return tools_section(p, key, value);
        if (streq(section, "Files"))
                return files_section(p, key, value);
        if (streq(section, "Environment"))
                return environment_section(p, key, value);
        if (strneq(section, MODULE_SECTION_PREFIX, STRLEN(MODULE_SECTION_PREFIX))) {
                const char *name = section + STRLEN(MODULE_SECTION_PREFIX);
                BundleModule *mod;

                if (!bundle_name_is_valid(name) || strchr(name, '.'))
                        return parser_fail(p, "[Module %s]: a module name is lowercase letters, digits, '_' and '-'", name);
                mod = module_find(p->m, name);
                if (!mod) {
                        mod = realloc(p->m->modules, (p->m->n_modules + 1) * sizeof(*mod));
                        if (!mod)
                                return parser_fail(p, "out of memory");
                        p->m->modules = mod;
                        mod = &p->m->modules[p->m->n_modules++];
                        *mod = (BundleModule) { .name = strdup(name) };
                        if (!mod->name)
                                return parser_fail(p, "out of memory");
                }
                p->module = mod;
                return module_section(p, key, value);
        }
        return parser_fail(p, "unknown section [%s] (known: [Bundle], [Tools], [Module NAME], [Files], [Environment])",
                           section);
}

static int check_complete(BundleManifest *m, char **ret_error) {
        const char *what = NULL;

        if (!m->name)
                what = "[Bundle] Name= is missing";
        else if (!m->version)
                what = "[Bundle] Version= is missing";
        if (what)
                return asprintf(ret_error, "%s: %s", m->path, what) < 0 ? -ENOMEM : -EINVAL;
        for (size_t i = 0; i < m->n_modules; i++) {
                BundleModule *mod = &m->modules[i];
                if (!!mod->file == !!mod->sources)
                        return asprintf(ret_error, "%s: [Module %s] needs either Sources= or File=", m->path,
                                        mod->name) < 0 ? -ENOMEM : -EINVAL;
        }
        return 0;
}

int bundle_manifest_parse(FILE *f, const char *path, BundleManifest **ret, char **ret_error) {
        _cleanup_(bundle_manifest_freep) BundleManifest *m = NULL;
        char dir[PATH_MAX];
        Parser p = {};
        int line, r;

        *ret_error = NULL;
        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->path = strdup(path);
        snprintf(dir, sizeof(dir), "%s", path);
        m->dir = strdup(dirname(dir));
        if (!m->path || !m->dir)
                return -ENOMEM;

        /* inih cuts longer lines in two: say so rather than report the second half. */
        {
                _cleanup_free_ char *l = NULL;
                size_t size = 0;
                ssize_t n;
                int no = 0;

                while ((n = getline(&l, &size, f)) > 0) {
                        no++;
                        if (n - (l[n - 1] == '\n') > INI_MAX_LINE - 1)
                                return asprintf(ret_error, "%s:%d: line longer than %d characters (continue a list on "
                                                "an indented line)", path, no, INI_MAX_LINE - 1) < 0 ? -ENOMEM : -EINVAL;
                }
                if (fseek(f, 0, SEEK_SET) < 0)
                        return negative_errno();
        }
        p.m = m;
        line = ini_parse_file(f, on_entry, &p);
        if (line != 0) {
                if (line < 0)
                        r = asprintf(ret_error, "cannot read %s", path);
                else
                        r = asprintf(ret_error, "%s:%d: %s", path, line,
                                     p.error ?: "syntax error (expected [Section] or Key=Value)");
                free(p.error);
                return r < 0 ? -ENOMEM : -EINVAL;
        }
        r = check_complete(m, ret_error);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(m);
        return 0;
}

int bundle_manifest_load(const char *path, BundleManifest **ret, char **ret_error) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        int r;

        *ret_error = NULL;
        if (!f) {
                r = negative_errno();
                return asprintf(ret_error, "cannot read %s: %s", path, strerror(-r)) < 0 ? -ENOMEM : r;
        }
        return bundle_manifest_parse(f, path, ret, ret_error);
}

BundleManifest *bundle_manifest_free(BundleManifest *m) {
        if (!m)
                return NULL;
        free(m->path);
        free(m->dir);
        free(m->name);
        free(m->version);
        free(m->description);
        free(m->platform);
        strv_free(m->packages);
        strv_free(m->programs);
        strv_free(m->exclude_packages);
        for (size_t i = 0; i < m->n_modules; i++) {
                free(m->modules[i].name);
                strv_free(m->modules[i].sources);
                free(m->modules[i].file);
                free(m->modules[i].cflags);
                strv_free(m->modules[i].pkg_config);
        }
        free(m->modules);
        for (size_t i = 0; i < m->n_copies; i++) {
                free(m->copies[i].source);
                free(m->copies[i].dest);
        }
        free(m->copies);
        strv_free(m->environment);
        free(m);
        return NULL;
}
