/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdint.h>
#include <sys/mman.h>

#include "buffer.h"

/* Multi-megabyte buffers (a large download, a large upload frame) are filled once and freed:
 * with 4 KiB pages most of their cost is page faults. Ask for transparent huge pages on the
 * 2 MiB-aligned part (the kernel default here is "madvise"), as glibc.malloc.hugetlb=1 would. */
#define HUGE_PAGE (2u * 1024u * 1024u)

static void advise_huge_pages(void *p, size_t size) {
        uintptr_t start, end;

        if (size < 2 * HUGE_PAGE)
                return;
        start = ((uintptr_t) p + HUGE_PAGE - 1) & ~(uintptr_t) (HUGE_PAGE - 1);
        end = ((uintptr_t) p + size) & ~(uintptr_t) (HUGE_PAGE - 1);
        if (end > start)
                (void) madvise((void *) start, end - start, MADV_HUGEPAGE);
}

int buffer_reserve(Buffer *b, size_t extra) {
        size_t need, ncap, total;
        uint8_t *m;

        if (size_add_overflows(b->len, extra, &need))
                return -ENOMEM;
        /* Keep one spare byte so buffer_steal() can NUL-terminate in place. */
        if (size_add_overflows(need, 1, &need))
                return -ENOMEM;
        if (need <= b->cap)
                return 0;

        ncap = MAX(b->cap * 2, (size_t) 256);
        if (ncap < need)
                ncap = need;
        if (size_add_overflows(ncap, b->headroom, &total))
                return -ENOMEM;
        m = realloc(b->mem, total);
        if (!m)
                return -ENOMEM;
        b->mem = m;
        b->cap = ncap;
        advise_huge_pages(m, total);
        return 0;
}

int buffer_append(Buffer *b, const void *data, size_t n) {
        int r;

        if (n == 0)
                return 0;
        r = buffer_reserve(b, n);
        if (r < 0)
                return r;
        memcpy(b->mem + b->headroom + b->len, data, n);
        b->len += n;
        return 0;
}

int buffer_append_byte(Buffer *b, uint8_t c) {
        return buffer_append(b, &c, 1);
}

int buffer_printf(Buffer *b, const char *fmt, ...) {
        va_list ap;
        int k, r;

        va_start(ap, fmt);
        k = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -EINVAL;

        r = buffer_reserve(b, (size_t) k + 1);
        if (r < 0)
                return r;

        va_start(ap, fmt);
        vsnprintf((char *) b->mem + b->headroom + b->len, (size_t) k + 1, fmt, ap);
        va_end(ap);
        b->len += (size_t) k;
        return 0;
}

int buffer_set_headroom(Buffer *b, size_t headroom) {
        if (b->len > 0)
                return -EBUSY;
        free(b->mem);
        *b = (Buffer) { .headroom = headroom };
        return buffer_reserve(b, 0);
}

void buffer_consume(Buffer *b, size_t n) {
        if (n >= b->len) {
                b->len = 0;
                return;
        }
        memmove(b->mem + b->headroom, b->mem + b->headroom + n, b->len - n);
        b->len -= n;
}

void buffer_clear(Buffer *b) {
        b->len = 0;
}

void buffer_done(Buffer *b) {
        free(b->mem);
        *b = BUFFER_NULL;
}

uint8_t *buffer_steal(Buffer *b, size_t *ret_len) {
        uint8_t *p;

        if (buffer_reserve(b, 0) < 0)
                return NULL;
        if (b->headroom > 0) {
                p = malloc(b->len + 1);
                if (!p)
                        return NULL;
                memcpy(p, buffer_data(b), b->len);
                p[b->len] = 0;
                if (ret_len)
                        *ret_len = b->len;
                buffer_done(b);
                return p;
        }
        p = b->mem;
        p[b->len] = 0;
        if (ret_len)
                *ret_len = b->len;
        *b = BUFFER_NULL;
        return p;
}
