/* SPDX-License-Identifier: MIT */
/* agentixctl build: make a bundle image from a project's agentix-bundle.conf. */
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <locale.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentixctl.h"
#include "bundle-build.h"
#include "cache-gc.h"
#include "fail.h"
#include "format-util.h"
#include "image-ref.h"
#include "output.h"
#include "strv.h"

#define MANIFEST_NAME "agentix-bundle.conf"

static void help(void) {
        printf("Usage: agentixctl build [OPTIONS] [DIR]\n"
               "\n"
               "Build the bundle DIR/" MANIFEST_NAME " declares (DIR defaults to the current\n"
               "directory): the agentix runtime, the project's C modules and the tools it names,\n"
               "with every library they need down to glibc, as a layered image with /nix that runs\n"
               "on any task image. The image is loaded into Docker as NAME:VERSION and NAME:latest\n"
               "(or as --tag says).\n"
               "\n"
               "  -h --help               Show this help\n"
               "  -f --file=FILE          The manifest (default DIR/" MANIFEST_NAME ")\n"
               "  -o --output=FILE        Write the image archive to FILE instead of loading it\n"
               "                          (docker load < FILE loads it later)\n"
               "     --tag=REPOSITORY[:TAG]\n"
               "                          Tag the image this, not NAME:VERSION and NAME:latest\n"
               "                          (TAG defaults to latest)\n"
               "     --platform=OS/ARCH   The platform to build for; only the build host's own\n"
               "                          (default: the manifest's Platform=, else the host's)\n"
               "     --cache-dir=DIR      Store paths and layers of earlier builds (default\n"
               "                          $AGENTIX_CACHE_DIR, $XDG_CACHE_HOME/agentix, ~/.cache/agentix)\n"
               "     --runtime-dir=DIR    Take agentix-server and agentix-worker from DIR\n"
               "                          (default $AGENTIX_RUNTIME_DIR, else the installed ones)\n"
               "     --gc                 Build nothing: remove the store paths and layers of the\n"
               "                          cache that no bundle's latest build uses; say how much\n"
               "                          that freed\n"
               "     --json               Print the result as JSON\n"
               "  -q --quiet              No progress display\n"
               "\n"
               "See agentixctl(1) and agentix-bundle(5).\n");
}

static const char *const step_names[_BUILD_STEP_MAX] = {
        [BUILD_STEP_RESOLVE] = "Resolving the closure",
        [BUILD_STEP_MODULES] = "Compiling modules",
        [BUILD_STEP_STORE] = "Making store paths",
        [BUILD_STEP_LAYERS] = "Writing layers",
        [BUILD_STEP_IMAGE] = "Writing the image",
        [BUILD_STEP_LOAD] = "Loading into Docker",
};

static void on_progress(BuildStep step, size_t done, size_t total, const char *what, void *userdata) {
        static BuildStep last_step = _BUILD_STEP_MAX;
        static uint64_t last_usec = 0;
        bool *drawn = userdata;
        uint64_t now = now_usec();

        /* At most ten frames a second, but every step's first and last. */
        if (step == last_step && done != 0 && done != total && now - last_usec < 100 * 1000)
                return;
        last_step = step;
        last_usec = now;

        /* One line, redrawn in place; on a terminal only (userdata is NULL otherwise). */
        if (total > 1)
                fprintf(stderr, "\r\033[K%s %zu/%zu%s%s", step_names[step], done, total, what ? " " : "", what ?: "");
        else
                fprintf(stderr, "\r\033[K%s%s", step_names[step], done == total ? " done" : "…");
        *drawn = true;
}

static int default_cache_dir(char *buf, size_t size) {
        const char *e = getenv("AGENTIX_CACHE_DIR"), *home;

        if (!strempty(e))
                return snprintf(buf, size, "%s", e) < (int) size ? 0 : -ENAMETOOLONG;
        e = getenv("XDG_CACHE_HOME");
        if (!strempty(e))
                return snprintf(buf, size, "%s/agentix", e) < (int) size ? 0 : -ENAMETOOLONG;
        home = getenv("HOME");
        if (strempty(home))
                return -ENOENT;
        return snprintf(buf, size, "%s/.cache/agentix", home) < (int) size ? 0 : -ENAMETOOLONG;
}

enum {
        ARG_PLATFORM = ARG_COMMON_END,
        ARG_CACHE_DIR,
        ARG_RUNTIME_DIR,
        ARG_GC,
        ARG_TAG,
};

static int collect_cache(const char *cache_dir) {
        _cleanup_free_ char *error = NULL;
        char freed[FORMAT_BYTES_MAX];
        CacheGcResult res;
        int r;

        r = cache_gc(cache_dir, &res, &error);
        if (r < 0)
                return fail(EXIT_FAILED, "build --gc: %s", error ?: strerror(-r));
        if (arg_json)
                return print_json(json_pack("{s:s, s:I, s:I, s:I, s:I}", "cache_dir", cache_dir, "bundles",
                                            (json_int_t) res.n_roots, "store_paths_removed",
                                            (json_int_t) res.n_store_paths, "layers_removed", (json_int_t) res.n_layers,
                                            "bytes_freed", (json_int_t) res.bytes_freed));
        if (!arg_quiet)
                printf("Removed %zu store paths and %zu layers no bundle's latest build uses (%zu kept): %s freed in %s\n",
                       res.n_store_paths, res.n_layers, res.n_roots, format_bytes(res.bytes_freed, freed), cache_dir);
        return EXIT_OK;
}

int verb_build(int argc, char *argv[]) {
        static const struct option options[] = {
                COMMON_LONG_OPTIONS,
                { "file", required_argument, NULL, 'f' },
                { "output", required_argument, NULL, 'o' },
                { "platform", required_argument, NULL, ARG_PLATFORM },
                { "cache-dir", required_argument, NULL, ARG_CACHE_DIR },
                { "runtime-dir", required_argument, NULL, ARG_RUNTIME_DIR },
                { "gc", no_argument, NULL, ARG_GC },
                { "tag", required_argument, NULL, ARG_TAG },
                {}
        };
        BundleBuildOptions o = {};
        BundleBuildResult res = {};
        _cleanup_free_ char *error = NULL;
        char manifest[PATH_MAX], cache[PATH_MAX];
        const char *file = NULL, *dir = ".";
        bool drawn = false, gc = false;
        int c, r;

        o.runtime_dir = getenv("AGENTIX_RUNTIME_DIR");
        if (strempty(o.runtime_dir))
                o.runtime_dir = NULL;
        o.include_dir = getenv("AGENTIX_INCLUDE_DIR");
        if (strempty(o.include_dir))
                o.include_dir = NULL;
        optind = 0;
        while ((c = getopt_long(argc, argv, "+:" COMMON_OPTIONS "f:o:", options, NULL)) >= 0) {
                switch (c) {
                        COMMON_OPTION_CASES("build", help, argv);
                case 'f':
                        file = optarg;
                        break;
                case 'o':
                        o.output = optarg;
                        break;
                case ARG_PLATFORM:
                        o.platform = optarg;
                        break;
                case ARG_CACHE_DIR:
                        o.cache_dir = optarg;
                        break;
                case ARG_RUNTIME_DIR:
                        o.runtime_dir = optarg;
                        break;
                case ARG_GC:
                        gc = true;
                        break;
                case ARG_TAG: {
                        _cleanup_free_ char *repository = NULL, *tag = NULL;

                        r = image_ref_split(optarg, &repository, &tag);
                        if (r == -ENOMEM)
                                return fail(EXIT_SOFTWARE, "build: out of memory");
                        if (r < 0)
                                return fail_usage("build", "--tag=%s is not an image name: REPOSITORY[:TAG], the "
                                                  "repository in lower case", optarg);
                        o.tag = optarg;
                        break;
                }
                }
        }
        if (gc) {
                if (optind < argc || file || o.output || o.platform || o.tag)
                        return fail_usage("build", "--gc builds nothing: it takes only --cache-dir=");
                if (!o.cache_dir) {
                        r = default_cache_dir(cache, sizeof(cache));
                        if (r < 0)
                                return fail_usage("build", "no cache directory: set $HOME or use --cache-dir");
                        o.cache_dir = cache;
                }
                return collect_cache(o.cache_dir);
        }
        if (optind + 1 < argc)
                return fail_usage("build", "takes one directory, not %d arguments", argc - optind);
        if (optind < argc)
                dir = argv[optind];
        if (file)
                snprintf(manifest, sizeof(manifest), "%s", file);
        else
                snprintf(manifest, sizeof(manifest), "%s/" MANIFEST_NAME, dir);
        if (access(manifest, R_OK) < 0)
                return fail_errno(EXIT_IOERR, errno, "build: cannot read %s: %m", manifest);
        o.manifest = manifest;
        if (!o.cache_dir) {
                r = default_cache_dir(cache, sizeof(cache));
                if (r < 0)
                        return fail_usage("build", "no cache directory: set $HOME or use --cache-dir");
                o.cache_dir = cache;
        }
        if (!arg_quiet && isatty(STDERR_FILENO)) {
                o.progress = on_progress;
                o.userdata = &drawn;
        }

        /* File names go into layers as they are on disk (UTF-8), whatever the user's locale. */
        if (!setlocale(LC_CTYPE, "C.UTF-8"))
                return fail(EXIT_SOFTWARE, "build: the C.UTF-8 locale is missing (libc6 provides it)");
        r = bundle_build(&o, &res, &error);
        if (drawn)
                fputs("\r\033[K", stderr);
        if (r < 0)
                return fail(EXIT_FAILED, "build: %s", strna(error));

        if (arg_json) {
                _cleanup_free_ char *text = NULL, *id = NULL;
                json_t *j, *tags = json_array();

                for (char **t = res.tags; tags && t && *t; t++)
                        if (json_array_append_new(tags, json_string(*t)) < 0) {
                                json_decref(tags);
                                tags = NULL;
                        }
                if (!tags || asprintf(&id, "sha256:%s", res.id) < 0) {
                        json_decref(tags);
                        return fail(EXIT_SOFTWARE, "build: out of memory");
                }
                j = json_pack("{s:s, s:s, s:s, s:o, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:I, s:s?}", "id", id, "name", res.name,
                              "version", res.version, "tags", tags, "store_paths", (json_int_t) res.n_store_paths,
                              "layers", (json_int_t) res.n_layers, "store_paths_made", (json_int_t) res.n_made,
                              "store_paths_hashed", (json_int_t) res.n_hashed, "layers_written",
                              (json_int_t) res.n_layers_written,
                              "size", (json_int_t) res.size, "loaded", res.loaded, "warnings",
                              (json_int_t) res.n_warnings, "output", o.output);
                text = j ? json_dumps(j, JSON_COMPACT) : NULL;
                json_decref(j);
                if (!text)
                        return fail(EXIT_SOFTWARE, "build: out of memory");
                puts(text);
        } else {
                if (!arg_quiet) {
                        fprintf(stderr, "%zu store paths (%zu new), %zu layers, %.1f MiB\n", res.n_store_paths,
                                res.n_made, res.n_layers, res.size / 1048576.0);
                        if (res.n_warnings > 0)
                                fprintf(stderr, "%u libraries that some packaged files name are not on this host and were "
                                        "left out (AGENTIX_LOG_LEVEL=debug lists them)\n", res.n_warnings);
                }
                _cleanup_free_ char *tags = strv_join(res.tags, " ");

                if (!tags)
                        return fail(EXIT_SOFTWARE, "build: out of memory");
                if (o.output)
                        printf("sha256:%s %s\n", res.id, o.output);
                else
                        printf("sha256:%s %s\n", res.id, tags);
        }
        bundle_build_result_done(&res);
        return EXIT_OK;
}
