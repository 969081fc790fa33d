/* SPDX-License-Identifier: MIT */
/* agentix-bundle.conf through inih and our section handlers: any input parses or fails with
 * a message that names the file; a parsed manifest is complete (Name, Version, and each module
 * with exactly one of Sources= and File=). */
#include "bundle-manifest.h"
#include "fuzz-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        BundleManifest *m = NULL;
        char *error = NULL;
        FILE *f;
        int r;

        if (size > 64 * 1024)
                return 0;
        f = fmemopen((void *) data, size ?: 1, "r");
        if (!f)
                return 0;
        if (size == 0)
                (void) fgetc(f); /* fmemopen() wants a non-empty buffer: start at its end */
        r = bundle_manifest_parse(f, "fuzz/agentix-bundle.conf", &m, &error);
        fclose(f);
        if (r >= 0) {
                CHECK(m && m->name && m->version && !error);
                CHECK(bundle_name_is_valid(m->name) && bundle_version_is_valid(m->version));
                for (size_t i = 0; i < m->n_modules; i++)
                        CHECK(!!m->modules[i].file != !!m->modules[i].sources);
        } else {
                CHECK(!m);
                CHECK(r == -ENOMEM || (error && strneq(error, "fuzz/agentix-bundle.conf", 24)));
        }
        bundle_manifest_free(m);
        free(error);
        return 0;
}
