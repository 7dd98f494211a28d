"""The op table of docs/ops.md is `irrun ops --markdown`."""
import os
import re

from irrun.ui.cli import ops_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _ops_page():
    with open(os.path.join(ROOT, "docs", "ops.md")) as f:
        return f.read()


def test_op_table_is_in_sync_with_irrun_ops():
    m = re.search(r"<!-- ops-table -->\n(.*?)<!-- /ops-table -->", _ops_page(), re.S)
    assert m, "docs/ops.md has no <!-- ops-table --> section"
    assert m.group(1).strip() == ops_table(markdown=True).strip(), (
        "docs/ops.md's op table is stale: regenerate it with `python tools/sync_readme.py`")
