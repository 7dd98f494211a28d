"""The README's op table is `irrun ops --markdown`, and its Python examples name real APIs."""
import os
import re

from irrun.ui.cli import ops_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _readme():
    with open(os.path.join(ROOT, "README.md")) as f:
        return f.read()


def test_op_table_is_in_sync_with_irrun_ops():
    m = re.search(r"<!-- ops-table -->\n(.*?)<!-- /ops-table -->", _readme(), re.S)
    assert m, "the README has no <!-- ops-table --> section"
    assert m.group(1).strip() == ops_table(markdown=True).strip(), (
        "README op table is stale: regenerate it with `python tools/sync_readme.py`")
