/* SPDX-License-Identifier: MIT */
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <sys/stat.h>

#include "fs-util.h"
#include "image-archive.h"
#include "macro.h"

/* Fixed, so that the same inputs give the same id. */
#define IMAGE_CREATED "1970-01-01T00:00:01Z"
#define SERVER_PATH "/nix/runtime/bin/agentix-server"


static json_t *string_array(char *const *l) {
        json_t *a = json_array();

        for (; a && l && *l; l++)
                if (json_array_append_new(a, json_string(*l)) < 0)
                        return json_decref(a), NULL;
        return a;
}

int image_config(const ImageSpec *spec, char **ret_json, char ret_id[DIGEST_HEX_LEN + 1]) {
        json_auto_t *root = NULL;
        json_t *config, *labels, *diff_ids, *history;
        uint8_t digest[32];
        char *s;

        labels = json_object();
        for (char *const *l = spec->labels; labels && l && *l; l++) {
                const char *eq = strchr(*l, '=');
                _cleanup_free_ char *key = eq ? strndup(*l, eq - *l) : NULL;
                if (!key || json_object_set_new(labels, key, json_string(eq + 1)) < 0)
                        return json_decref(labels), -ENOMEM;
        }
        config = json_pack("{s:o, s:o, s:o, s:{s:{}}, s:{s:{}}, s:s}",
                           "Env", string_array(spec->env),
                           "Labels", labels,
                           "Entrypoint", json_pack("[s]", SERVER_PATH),
                           "Volumes", "/nix",
                           "ExposedPorts", "8000/tcp",
                           "WorkingDir", "/");
        diff_ids = json_array();
        history = json_array();
        if (!config || !diff_ids || !history) {
                json_decref(config);
                json_decref(diff_ids);
                json_decref(history);
                return -ENOMEM;
        }
        for (size_t i = 0; i < spec->n_layers; i++) {
                _cleanup_free_ char *id = NULL;
                if (asprintf(&id, "sha256:%s", spec->layers[i].diff_id) < 0 ||
                    json_array_append_new(diff_ids, json_string(id)) < 0 ||
                    json_array_append_new(history, json_pack("{s:s, s:s, s:s}", "created", IMAGE_CREATED, "created_by",
                                                             "agentixctl build", "comment",
                                                             spec->layers[i].comment ?: "")) < 0) {
                        json_decref(config);
                        json_decref(diff_ids);
                        json_decref(history);
                        return -ENOMEM;
                }
        }
        root = json_pack("{s:s, s:s, s:s, s:o, s:{s:s, s:o}, s:o}",
                         "architecture", spec->architecture,
                         "os", spec->os,
                         "created", IMAGE_CREATED,
                         "config", config,
                         "rootfs", "type", "layers", "diff_ids", diff_ids,
                         "history", history);
        if (!root)
                return -ENOMEM;
        if (spec->variant && json_object_set_new(root, "variant", json_string(spec->variant)) < 0)
                return -ENOMEM;
        s = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
        if (!s)
                return -ENOMEM;
        EVP_Digest(s, strlen(s), digest, NULL, EVP_sha256(), NULL);
        digest_to_hex(digest, ret_id);
        *ret_json = s;
        return 0;
}

static la_ssize_t on_write(struct archive *a, void *userdata, const void *buf, size_t n) {
        if (loop_write(*(int *) userdata, buf, n) < 0) {
                archive_set_error(a, errno, "write failed");
                return -1;
        }
        return n;
}

static int add_entry(struct archive *a, const char *name, mode_t mode, int64_t size) {
        return archive_write_entry(a, name, mode, size, NULL);
}

static int add_memory(struct archive *a, const char *name, const char *data) {
        size_t n = strlen(data);
        int r = add_entry(a, name, S_IFREG | 0644, n);

        if (r < 0)
                return r;
        return archive_write_data(a, data, n) == (la_ssize_t) n ? 0 : -EIO;
}

static int add_file(struct archive *a, const char *name, const char *path) {
        struct stat st;
        int r;

        if (stat(path, &st) < 0)
                return negative_errno();
        r = add_entry(a, name, S_IFREG | 0644, st.st_size);
        return r < 0 ? r : archive_write_file_data(a, path);
}

int image_archive_write(int fd, const ImageSpec *spec, const char *config_json, const char *id) {
        _cleanup_free_ char *manifest_text = NULL, *config_name = NULL;
        json_t *manifest, *layers;
        struct archive *a;
        int r = 0;

        if (asprintf(&config_name, "%s.json", id) < 0)
                return -ENOMEM;
        layers = json_array();
        for (size_t i = 0; layers && i < spec->n_layers; i++) {
                _cleanup_free_ char *name = NULL;
                if (asprintf(&name, "%s/layer.tar", spec->layers[i].diff_id) < 0 ||
                    json_array_append_new(layers, json_string(name)) < 0)
                        return json_decref(layers), -ENOMEM;
        }
        manifest = json_pack("[{s:s, s:o, s:o}]", "Config", config_name, "RepoTags", string_array(spec->tags), "Layers",
                             layers);
        if (!manifest)
                return -ENOMEM;
        manifest_text = json_dumps(manifest, JSON_COMPACT);
        json_decref(manifest);
        if (!manifest_text)
                return -ENOMEM;

        a = archive_write_new();
        if (!a)
                return -ENOMEM;
        if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
            archive_write_open2(a, &fd, NULL, on_write, NULL, NULL) != ARCHIVE_OK)
                r = -EIO;
        for (size_t i = 0; r >= 0 && i < spec->n_layers; i++) {
                char name[DIGEST_HEX_LEN + 16];
                bool seen = false;

                /* Two store paths never give the same layer, but be safe: one copy per diff id. */
                for (size_t j = 0; j < i; j++)
                        seen = seen || streq(spec->layers[j].diff_id, spec->layers[i].diff_id);
                if (seen)
                        continue;
                snprintf(name, sizeof(name), "%s/", spec->layers[i].diff_id);
                r = add_entry(a, name, S_IFDIR | 0755, 0);
                snprintf(name, sizeof(name), "%s/layer.tar", spec->layers[i].diff_id);
                if (r >= 0)
                        r = add_file(a, name, spec->layers[i].path);
        }
        if (r >= 0)
                r = add_memory(a, config_name, config_json);
        if (r >= 0)
                r = add_memory(a, "manifest.json", manifest_text);
        if (r >= 0 && archive_write_close(a) != ARCHIVE_OK)
                r = -EIO;
        archive_write_free(a);
        return r;
}
