/* SPDX-License-Identifier: MIT */
#pragma once

/* Reading a file line by line with Python's universal newlines ("\n", "\r\n" and a lone
 * "\r" all end a line), from a fixed buffer: memory stays bounded however long the file or
 * its lines are, because a caller says how much of each line it wants to keep. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buffer.h"

typedef struct FsLineReader {
        int fd;          /* not owned */
        uint8_t *buf;
        size_t size;     /* capacity of buf */
        size_t start;    /* unread data is buf[start..end) */
        size_t end;
        bool eof;
} FsLineReader;

#define FS_LINE_READER_BUFFER_SIZE (128u * 1024u)

int fs_line_reader_init(FsLineReader *r, int fd, size_t buffer_size);
void fs_line_reader_done(FsLineReader *r);

/* Read the next line. If `line` is non-NULL it is cleared and gets at most `keep` bytes of
 * the line's text (terminator excluded); *ret_len (optional) gets the line's full length.
 * Returns 1 for a line, 0 at the end of the file, or a negative errno. */
int fs_line_reader_next(FsLineReader *r, Buffer *line, size_t keep, uint64_t *ret_len);

/* Whether the next fs_line_reader_next() would return 0. Returns 1/0 or a negative errno. */
int fs_line_reader_at_eof(FsLineReader *r);
