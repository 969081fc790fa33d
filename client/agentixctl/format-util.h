/* SPDX-License-Identifier: MIT */
#pragma once

/* Sizes and times for people. */

#include <stdint.h>

/* "512 B", "1.5 KiB", "256.0 MiB" … into buf. */
#define FORMAT_BYTES_MAX 16
const char *format_bytes(uint64_t n, char buf[static FORMAT_BYTES_MAX]);

/* "2024-05-01 12:34" from an ISO 8601 timestamp, or the input as it is when it does not look
 * like one. */
#define FORMAT_TIME_MAX 32
const char *format_timestamp(const char *iso, char buf[static FORMAT_TIME_MAX]);
