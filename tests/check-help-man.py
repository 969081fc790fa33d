#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""--help and the man page document the same options: every long option one lists, the other
lists too. Usage: check-help-man.py BINARY MANPAGE (a BINARY ending in .js runs under node)"""

import re
import subprocess
import sys

binary, manpage = sys.argv[1:3]
command = ["node", binary] if binary.endswith(".js") else [binary]
help_text = subprocess.run([*command, "--help"], capture_output=True, text=True, check=True).stdout
with open(manpage) as f:
    man_text = f.read()
# The options are those the OPTIONS section lists (other sections may show other programs' own,
# in examples); a page without one is read whole.
section = re.search(r"^\.SH OPTIONS\n(.*?)(?=^\.SH )", man_text, re.S | re.M)
if section:
    man_text = section.group(1)
man_text = man_text.replace("\\-", "-").replace("\\fB", "").replace("\\fI", "").replace("\\fR", "")

option = re.compile(r"(?<![\w-])--[a-z][a-z-]*[a-z]")
in_help = set(option.findall(help_text))
in_man = set(option.findall(man_text))
missing_in_man = sorted(in_help - in_man)
missing_in_help = sorted(in_man - in_help)
if missing_in_man or missing_in_help:
    print(f"options in --help but not in {manpage}: {missing_in_man}")
    print(f"options in {manpage} but not in --help: {missing_in_help}")
    sys.exit(1)
print(f"{len(in_help)} options documented in both")
