"""Regenerate the kernel index irrun/ops/_index.py (which module registers which op) and the
op table of docs/ops.md from `irrun ops --markdown` (tests/test_op_index.py and
tests/test_readme.py check them). Run it after adding or removing an op version."""
import os
import re

from irrun.ui.cli import ops_table
from irrun.ir.registry import REGISTRY, index_source

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(root, "ops", "_index.py"), "w") as f:
    f.write(index_source(REGISTRY))      # imports every kernel module
path = os.path.join(root, "docs", "ops.md")
with open(path) as f:
    text = f.read()
table = ops_table(markdown=True).strip()
text, n = re.subn(r"(<!-- ops-table -->\n).*?(<!-- /ops-table -->)",
                  lambda m: m.group(1) + table + "\n" + m.group(2), text, flags=re.S)
if n != 1:
    raise SystemExit("docs/ops.md has no <!-- ops-table --> section")
with open(path, "w") as f:
    f.write(text)
print(f"docs/ops.md: op table with {table.count(chr(10)) - 1} rows")
