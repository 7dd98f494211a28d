"""`irrun ops` against the table of opsets 1-16 (irrun/ir/opset_table.py), and that table
against OpenVINO itself: every op type its NodeFactory creates for opset1..opset16."""
import pathlib
import re

import pytest
from click.testing import CliRunner

from irrun.ir.opset_table import IRRUN_LABEL, OPSET_VERSIONS, TOTAL, all_versions, coverage
from irrun.ir.registry import all_ops
from irrun.ui.cli import cli

ROOT = pathlib.Path(__file__).parent.parent


def registered() -> set[str]:
    return {op.label for op in all_ops()}


def openvino_versions() -> dict[str, int]:
    """{"Type-N": N} for every op version the installed OpenVINO's NodeFactory creates in
    opset1..opset16, N the first opset holding it. Candidate names: the opset tables OpenVINO
    ships (include/openvino/opsets/opsetK_tbl.hpp), the types irrun registers and the op
    names of the spec pages, so that a type missing from OpenVINO's tables is still tried."""
    ov = pytest.importorskip("openvino")
    from openvino.utils.node_factory import NodeFactory

    tables = pathlib.Path(ov.__file__).parent / "include" / "openvino" / "opsets"
    if not (tables / "opset1_tbl.hpp").is_file():
        pytest.skip("this openvino ships no opset tables (include/openvino/opsets)")
    listed = {k: re.findall(r"^_OPENVINO_OP_REG\((\w+),", (tables / f"opset{k}_tbl.hpp").read_text(),
                            re.MULTILINE) for k in range(1, 17)}
    names = {n for ns in listed.values() for n in ns} | {op.type for op in all_ops()}
    names |= {label.rsplit("-", 1)[0] for _, label in all_versions()}
    first: dict[tuple[str, str], int] = {}
    refused = []
    for k in range(1, 17):
        factory = NodeFactory(f"opset{k}").factory
        for name in sorted(names):
            if name == "Constant":
                continue            # NodeFactory makes no Constant (the IR's Const)
            try:
                info = factory.create(name).get_type_info()
            except RuntimeError:
                if name in listed[k]:
                    refused.append(f"opset{k}/{name}")
                continue
            # version_id tells classes of one name apart (Gather's opset1/opset7/opset8)
            first.setdefault((info.name, info.version_id), k)
    assert not refused, f"listed in OpenVINO's opset tables but not created: {refused}"
    return {f"{name}-{k}": k for (name, _), k in first.items()}


def test_the_table_is_what_openvino_creates():
    probed = set(openvino_versions())
    table = {v for vs in OPSET_VERSIONS.values() for v in vs}
    assert not probed - table, f"op versions OpenVINO creates that the table lacks: " \
                               f"{sorted(probed - table)}"
    assert not table - probed, f"op versions in the table that OpenVINO does not create: " \
                               f"{sorted(table - probed)}"


def test_irrun_registers_every_version_openvino_creates():
    probed = openvino_versions()
    have = registered()
    missing = sorted(v for v in probed if IRRUN_LABEL.get(v, v) not in have)
    assert not missing, f"op versions of OpenVINO's opsets 1-16 irrun does not register: {missing}"


def test_the_table_has_no_repeats_and_labels_irrun_registers():
    labels = [v for _, v in all_versions()]
    assert len(labels) == len(set(labels)) == TOTAL
    _, missing = coverage(registered())
    assert not missing, f"op versions of opsets 1-16 missing from `irrun ops`: {missing}"


def test_ops_coverage_prints_the_count_and_the_missing_versions():
    result = CliRunner().invoke(cli, ["ops", "--coverage"])
    assert result.exit_code == 0, result.output
    have, missing = coverage(registered())
    lines = result.output.splitlines()
    assert lines[0] == f"{have} of {TOTAL} op versions of opsets 1-16"
    listed = [line.split()[-1] for line in lines[2:]]
    assert listed == [v for _, v in missing]
    plain = CliRunner().invoke(cli, ["ops"]).output
    # every registered version of the table appears in the plain listing too
    for _, v in all_versions():
        if v in registered():
            assert v in plain


def test_ops_page_states_the_measured_coverage():
    have, _ = coverage(registered())
    page = (ROOT / "docs" / "ops.md").read_text()
    assert f"against the {TOTAL} op versions of OpenVINO" in page
    assert f"**{have} of {TOTAL} op versions of opsets 1-16**" in page


def _written_attributes(label: str) -> set[str]:
    """The <data> attribute names OpenVINO's serializer writes for an op version: what its
    attribute visitor (the one ov.save_model walks) reports for a node of that version.
    Bodies and port maps of TensorIterator/Loop/If are elements of their own, not <data>."""
    ov = pytest.importorskip("openvino")
    from openvino.utils.node_factory import NodeFactory

    name, k = label.rsplit("-", 1)
    if label in ("ReadValue-6", "Assign-6"):
        # A default-constructed one has no variable, and visiting it crashes: make a real one.
        import openvino.opset6 as o6
        from openvino.op.util import Variable, VariableInfo

        info = VariableInfo()
        info.data_shape, info.data_type, info.variable_id = ov.PartialShape([2]), ov.Type.f32, "v"
        variable = Variable(info)
        read = o6.read_value(o6.parameter([2], ov.Type.f32), variable)
        return set((read if name == "ReadValue" else o6.assign(read, variable)).get_attributes())
    return set(NodeFactory(f"opset{k}").factory.create(name).get_attributes())


def test_irrun_reads_every_attribute_openvino_writes():
    """No op version's <data> as OpenVINO writes it gets an "unknown attribute" warning from
    irrun, and none lacks an attribute irrun requires."""
    pytest.importorskip("openvino")
    from irrun.ir.registry import lookup, schema

    unknown, required = [], []
    for _, label in all_versions():
        runtime = next((v for v, lab in IRRUN_LABEL.items() if lab == label), label)
        written = _written_attributes(runtime)
        name, k = label.rsplit("-", 1)
        known = schema(lookup(name, f"opset{k}").attrs)
        unknown += [f"{label}: {a}" for a in sorted(written - set(known))]
        required += [f"{label}: {a}" for a, (_, req) in sorted(known.items())
                     if req and a not in written]
    assert not unknown, f"attributes OpenVINO writes that irrun does not know: {unknown}"
    assert not required, f"attributes irrun requires that OpenVINO does not write: {required}"


def test_roi_pooling_as_openvino_saves_it_validates_without_warnings(tmp_path):
    ov = pytest.importorskip("openvino")
    import numpy as np
    import openvino.opset2 as o2

    import irrun

    x = o2.parameter([1, 2, 8, 8], ov.Type.f32, name="x")
    rois = o2.parameter([3, 5], ov.Type.f32, name="rois")
    model = ov.Model([o2.roi_pooling(x, rois, [2, 3], 1.0, "max")], [x, rois])
    xml = str(tmp_path / "roi.xml")
    ov.save_model(model, xml)
    text = pathlib.Path(xml).read_text()
    assert 'output_roi="2, 3"' in text and 'output_size="2, 3"' in text
    assert irrun.validate(xml) == []
    m = irrun.read_model(xml)
    feed = {"x": np.arange(128, dtype=np.float32).reshape(1, 2, 8, 8),
            "rois": np.array([[0, 0, 0, 7, 7], [0, 1, 2, 5, 6], [0, 3, 3, 3, 3]], np.float32)}
    (got,) = m.infer(feed).values()
    compiled = ov.Core().compile_model(xml, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    np.testing.assert_array_equal(got, compiled(feed)[0])
