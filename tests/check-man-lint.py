#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Every man page renders cleanly: groff, as man(1) runs it (-k: the page's UTF-8 through
preconv), prints no warning at all (-ww), and the source holds no control character (a "\\f"
written from a script as a form feed renders as a broken font change). With --commands BINARY
PAGE, every command BINARY's --help lists is in PAGE's SYNOPSIS too.

Usage: check-man-lint.py PAGE...
       check-man-lint.py --commands BINARY PAGE"""

import re
import subprocess
import sys


def lint(page):
    problems = []
    with open(page, "rb") as f:
        for n, line in enumerate(f.read().split(b"\n"), 1):
            bad = sorted({c for c in line if c < 0x20 and c != 0x09} | ({0x7f} & set(line)))
            if bad:
                problems.append(f"{page}:{n}: control character(s) {', '.join(f'0x{c:02x}' for c in bad)}")
    r = subprocess.run(["groff", "-k", "-man", "-ww", "-z", page], capture_output=True, text=True)
    problems += [f"{page}: groff: {line}" for line in (r.stdout + r.stderr).splitlines() if line.strip()]
    if r.returncode != 0:
        problems.append(f"{page}: groff exited with {r.returncode}")
    return problems


def help_commands(binary):
    """The command words of BINARY --help: the first word of each line of its Commands: list."""
    text = subprocess.run([binary, "--help"], capture_output=True, text=True, check=True).stdout
    section = re.search(r"^Commands:\n(.*?)\n\n", text, re.S | re.M)
    assert section, f"{binary} --help has no Commands: section"
    return sorted({m.group(1) for m in re.finditer(r"^  ([a-z][a-z-]*)", section.group(1), re.M)})


def synopsis_commands(page, program):
    with open(page) as f:
        text = f.read()
    section = re.search(r"^\.SH SYNOPSIS\n(.*?)(?=^\.SH )", text, re.S | re.M)
    assert section, f"{page} has no SYNOPSIS"
    words = re.findall(rf"^\.B {re.escape(program)} ([a-z][a-z\\-]*)", section.group(1), re.M)
    return {w.replace("\\-", "-") for w in words}


def main(argv):
    if argv[:1] == ["--commands"]:
        binary, page = argv[1:3]
        program = binary.rsplit("/", 1)[-1]
        listed, documented = help_commands(binary), synopsis_commands(page, program)
        missing = [c for c in listed if c not in documented]
        if missing:
            print(f"commands in {program} --help but not in the SYNOPSIS of {page}: {missing}")
            return 1
        if len(listed) < 2:
            print(f"found only {listed} in {program} --help: is the Commands: list still there?")
            return 1
        print(f"{len(listed)} commands in --help, each in the SYNOPSIS")
        return 0
    problems = [p for page in argv for p in lint(page)]
    for p in problems:
        print(p)
    print(f"{len(argv)} pages, {len(problems)} problems")
    return 1 if problems or not argv else 0


sys.exit(main(sys.argv[1:]))
