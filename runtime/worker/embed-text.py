#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Embed a text file in C as `const char NAME[]` (NUL-terminated), so the binary needs no
data file at run time. Usage: embed-text.py NAME INPUT OUTPUT"""

import sys

ESCAPES = {'"': '\\"', '\\': '\\\\', '\n': '\\n', '\t': '\\t', '?': '\\?'}


def main():
    name, src, dst = sys.argv[1:4]
    data = open(src, 'rb').read()
    if b'\0' in data:
        sys.exit(f'{src}: contains a NUL byte')
    lines = [f'/* Generated from {src.rsplit("/", 1)[-1]} by embed-text.py; do not edit. */',
             f'const char {name}[] =']
    for line in data.splitlines(keepends=True):
        esc = ''.join(ESCAPES.get(c) or (c if 0x20 <= ord(c) < 0x7f else f'\\{ord(c):03o}')
                      for c in line.decode('latin-1'))
        lines.append(f'        "{esc}"')
    lines[-1] += ';' if len(lines) > 2 else ''
    if len(lines) == 2:
        lines.append('        "";')
    open(dst, 'w').write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
