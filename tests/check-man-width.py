#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every man page fits an 80-column terminal: render each with man(1) at MANWIDTH=80 and
report the lines wider than that (in characters, as a terminal shows them).
Usage: check-man-width.py PAGE..."""

import os
import subprocess
import sys

WIDTH = 80
bad = 0
for page in sys.argv[1:]:
    env = dict(os.environ, MANWIDTH=str(WIDTH), LANG="C.UTF-8", MAN_KEEP_FORMATTING="")
    out = subprocess.run(["man", "-l", page], capture_output=True, text=True, env=env, check=True).stdout
    for n, line in enumerate(out.splitlines(), 1):
        if len(line) > WIDTH:
            bad += 1
            print(f"{os.path.basename(page)}:{n}: {len(line)} columns: {line.strip()[:70]}")
print(f"{len(sys.argv) - 1} pages, {bad} lines wider than {WIDTH} columns")
sys.exit(1 if bad else 0)
