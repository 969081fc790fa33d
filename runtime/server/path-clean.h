/* SPDX-License-Identifier: MIT */
#pragma once

/* Clean an absolute path in place, lexically, as Go's filepath.Clean (which E2B's envd uses):
 * no empty or "." components, ".." takes away the one before it (never above "/"), no
 * trailing '/'. Links are not looked at. */
void path_clean(char *path);
