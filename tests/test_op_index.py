"""The kernel index (irrun/ops/_index.py) and what start-up imports.

The registry imports only the kernel modules an op type needs, as the generated index says;
`irrun --help` and `irrun ops` import no NumPy and no kernel; a small `irrun validate`
imports the kernels of its ops only. Checked by what lands in sys.modules, not by timing.
"""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _fresh(code: str) -> dict:
    """Run `code` in a new interpreter; it prints one JSON value, returned here."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_index_is_what_the_kernels_register():
    # Every module imported, the registrations turned into the index's text: the same as the
    # file (tools/sync_readme.py rewrites it after an op is added or removed).
    text = _fresh("import json; from irrun.ir.registry import REGISTRY, index_source; "
                  "print(json.dumps(index_source(REGISTRY)))")
    with open(os.path.join(ROOT, "ops", "_index.py")) as f:
        assert f.read() == text, "ops/_index.py is stale: run python3 tools/sync_readme.py"


def _after_cli(args) -> dict:
    code = ("import json, sys, io, contextlib\n"
            "from irrun.ui.cli import cli\n"
            "buf = io.StringIO()\n"
            "with contextlib.redirect_stdout(buf):\n"
            f"    try: cli.main(args={args!r}, prog_name='irrun', standalone_mode=False)\n"
            "    except SystemExit: pass\n"
            "print(json.dumps({'modules': sorted(sys.modules), 'out': buf.getvalue()}))")
    return _fresh(code)


@pytest.mark.parametrize("args", [["--help"], ["ops"], ["ops", "--coverage"]])
def test_help_and_ops_import_no_numpy_and_no_kernel(args):
    seen = _after_cli(args)
    assert seen["out"]
    heavy = [m for m in seen["modules"] if m.split(".")[0] in ("numpy", "networkx", "ml_dtypes")
             or (m.startswith("irrun.ops.") and m != "irrun.ops._index")]
    assert heavy == []


def test_ops_lists_the_same_table_with_every_kernel_imported():
    listed = _after_cli(["ops"])["out"]
    loaded = _fresh("import json; from irrun.ir.registry import all_ops; all_ops(); "
                    "from irrun.ui.cli import ops_table; print(json.dumps(ops_table()))")
    assert listed.strip() == loaded.strip()


def test_a_small_validate_imports_only_its_kernels():
    seen = _after_cli(["validate", "models/trace_demo/model.xml"])
    assert "0 errors" in seen["out"]
    kernels = {m for m in seen["modules"] if m.startswith("irrun.ops.")} - {"irrun.ops._index"}
    # trace_demo's layers: Parameter/Const/Result (structural), Add and Multiply
    # (elementwise), ReLU (activation), Concat and the like (movement) at most.
    assert kernels and kernels <= {"irrun.ops.structural", "irrun.ops.elementwise",
                                   "irrun.ops.activation", "irrun.ops.movement",
                                   "irrun.ops.shape", "irrun.ops.matmul"}
    assert "irrun.ops.detection" not in seen["modules"]
    assert not [m for m in seen["modules"] if m.split(".")[0] == "networkx"]


def test_a_lookup_imports_the_module_of_its_type_only():
    seen = _fresh("import json, sys; from irrun.ir.registry import lookup; "
                  "op = lookup('Bucketize', 'opset3'); "
                  "print(json.dumps([op.label, sorted(m for m in sys.modules "
                  "if m.startswith('irrun.ops.'))]))")
    assert seen == ["Bucketize-3", ["irrun.ops._index", "irrun.ops.condition"]]


def test_an_unknown_type_still_names_every_registered_type():
    from irrun.ir.registry import LookupFailure, lookup

    with pytest.raises(LookupFailure, match=r"unknown op type 'Bucketise'; did you mean Bucketize"):
        lookup("Bucketise", "opset3")
