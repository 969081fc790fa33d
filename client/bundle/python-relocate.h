/* SPDX-License-Identifier: MIT */
#pragma once

/* Debian's Python packages name some data by its absolute place on the host: pytz reads
 * '/usr/share/zoneinfo/tzdata.zi' on import, matplotlib its '/usr/share/matplotlib/mpl-data'.
 * In a bundle those files are in the store, and a task image may have no /usr/share at all.
 * So each quoted '/usr/share/…' path in the closure's Python sources that names a file or
 * directory the bundle holds is rewritten to its store path (TextRewrite, applied when the store
 * path is built). Paths the bundle does not hold stay as they are. */

#include "closure.h"

int relocate_python_paths(Closure *c);
