/* SPDX-License-Identifier: MIT */
/* fs.upload's gzip content (E2B's `files.write(…, {gzip: true})` sends Content-Encoding: gzip):
 * inflated in the worker, a piece at a time straight into the file being written, so that
 * neither the event loop nor memory carries the inflated bytes. */
#include <zlib.h>

#include "fs-ops.h"

#define GUNZIP_CHUNK (256u * 1024u)

typedef struct GunzipContent {
        const void *data;
        size_t size;
        bool corrupt;   /* not gzip, or cut short */
        bool too_large; /* inflates to more than FS_GUNZIP_MAX */
} GunzipContent;

static int write_gunzip(int fd, void *userdata) {
        GunzipContent *c = userdata;
        _cleanup_free_ uint8_t *out = malloc(GUNZIP_CHUNK);
        const uint8_t *in = c->data;
        size_t left = c->size;
        uint64_t total = 0;
        z_stream z = {};
        int r = 0;

        if (!out)
                return -ENOMEM;
        if (left == 0) {
                c->corrupt = true; /* not even a header */
                return -EBADMSG;
        }
        /* 16 + MAX_WBITS: a gzip header and trailer, nothing else. */
        if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
                return -ENOMEM;
        for (;;) {
                size_t produced;
                int zr;

                if (z.avail_in == 0 && left > 0) {
                        /* zlib counts in uInt: at most 1 GiB at a time. */
                        size_t n = MIN(left, (size_t) 1 << 30);

                        z.next_in = (Bytef *) in;
                        z.avail_in = (uInt) n;
                        in += n;
                        left -= n;
                }
                z.next_out = out;
                z.avail_out = GUNZIP_CHUNK;
                zr = inflate(&z, Z_NO_FLUSH);
                if (zr == Z_MEM_ERROR) {
                        r = -ENOMEM;
                        break;
                }
                if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
                        c->corrupt = true;
                        r = -EBADMSG;
                        break;
                }
                produced = GUNZIP_CHUNK - z.avail_out;
                total += produced;
                if (total > FS_GUNZIP_MAX) {
                        c->too_large = true;
                        r = -EFBIG;
                        break;
                }
                r = loop_write(fd, out, produced);
                if (r < 0)
                        break;
                if (zr == Z_STREAM_END) {
                        if (z.avail_in == 0 && left == 0)
                                break;
                        /* gzip files may be several members one after another (cat a.gz b.gz). */
                        if (inflateReset(&z) != Z_OK) {
                                r = -ENOMEM;
                                break;
                        }
                } else if (produced == 0 && z.avail_in == 0 && left == 0) {
                        c->corrupt = true; /* all of it read and no end: cut short */
                        r = -EBADMSG;
                        break;
                }
        }
        (void) inflateEnd(&z);
        return r;
}

int fs_write_gunzip(const char *path, const void *data, size_t size, bool overwrite, int mode, FsStatus *ret) {
        GunzipContent c = { .data = data, .size = size };
        int r;

        r = fs_write_atomic_mode(path, overwrite, mode, write_gunzip, &c, ret);
        if (r < 0 || (!c.corrupt && !c.too_large))
                return r;
        fs_status_done(ret);
        if (c.corrupt)
                return fs_status_set(ret, FS_ERROR_IO, "Error: the content for '%s' is not valid gzip (or is cut short)", path);
        return fs_status_set(ret, FS_ERROR_TOO_LARGE, "Error: the content for '%s' inflates to more than %llu bytes", path,
                             (unsigned long long) FS_GUNZIP_MAX);
}
