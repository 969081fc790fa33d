/* SPDX-License-Identifier: MIT */
#pragma once

/* Sizes, times and modes for people. */

#include <stdbool.h>
#include <stdint.h>

/* "512 B", "1.5 KiB", "256.0 MiB" … into buf. */
#define FORMAT_BYTES_MAX 16
const char *format_bytes(uint64_t n, char buf[static FORMAT_BYTES_MAX]);

/* "2024-05-01 12:34" from an ISO 8601 timestamp, or the input as it is when it does not look
 * like one. */
#define FORMAT_TIME_MAX 32
const char *format_timestamp(const char *iso, char buf[static FORMAT_TIME_MAX]);

/* "2024-05-01 12:34:56" in local time from microseconds since the epoch; "-" for 0. */
const char *format_epoch_usec(uint64_t usec, char buf[static FORMAT_TIME_MAX]);

/* "drwxr-xr-x", "-rwsr-x--T" … as ls -l writes it; the type letter alone followed by
 * "?????????" when the mode is unknown (negative). */
#define FORMAT_MODE_MAX 11
const char *format_mode(bool is_dir, int mode, char buf[static FORMAT_MODE_MAX]);
