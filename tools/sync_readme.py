"""Regenerate the README's op table from `irrun ops --markdown` (tests/test_readme.py checks it)."""
import os
import re

from irrun.cli import ops_table

path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")
with open(path) as f:
    text = f.read()
table = ops_table(markdown=True).strip()
text, n = re.subn(r"(<!-- ops-table -->\n).*?(<!-- /ops-table -->)",
                  lambda m: m.group(1) + table + "\n" + m.group(2), text, flags=re.S)
if n != 1:
    raise SystemExit("README.md has no <!-- ops-table --> section")
with open(path, "w") as f:
    f.write(text)
print(f"README.md: op table with {table.count(chr(10)) - 1} rows")
