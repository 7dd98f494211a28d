"""`irrun ops` against the table of opsets 1-16 (irrun/opset_table.py): every missing op
version must be owned by an open issue, named here; `irrun ops --coverage` counts them."""
from click.testing import CliRunner

from irrun.ui.cli import cli
from irrun.ir.opset_table import OPSET_VERSIONS, TOTAL, all_versions, coverage
from irrun.ir.registry import all_ops

# Op versions other open issues build: allowed to be missing until those issues land.
ALLOWED_MISSING = {
    "issue 13 (subgraphs, state, recurrent)": [
        "Loop-5", "TensorIterator-1", "If-8", "ReadValue-3", "ReadValue-6", "Assign-3", "Assign-6",
        "Identity-16", "LSTMCell-1", "LSTMCell-4", "LSTMSequence-5", "GRUCell-3", "GRUSequence-5",
        "RNNCell-1", "RNNSequence-5", "GatherND-5", "GatherND-8", "GatherElements-6", "NonZero-3",
        "ReverseSequence-1", "ScatterUpdate-3", "ScatterNDUpdate-4", "ScatterNDUpdate-15",
        "ScatterElementsUpdate-3", "ScatterElementsUpdate-12", "OneHot-1", "OneHot-16"],
    "issue 14 (transformers and audio)": [
        "ScaledDotProductAttention-13", "MVN-2", "MVN-6", "GroupNormalization-12",
        "BatchNormInference-1", "BatchNormInference-5", "LRN-1", "NormalizeL2-1", "GRN-1",
        "BitwiseAnd-13", "BitwiseOr-13", "BitwiseXor-13", "BitwiseNot-13", "BitwiseLeftShift-15",
        "BitwiseRightShift-15", "IsNaN-10", "IsInf-10", "IsFinite-10", "Einsum-7", "Inverse-14"],
    "issue 15 (seed op families)": [
        "EmbeddingBagOffsetsSum-3", "EmbeddingBagPackedSum-3", "EmbeddingBagOffsets-15",
        "EmbeddingBagPacked-15", "SegmentMax-16", "SparseFillEmptyRows-16", "SearchSorted-15",
        "CTCGreedyDecoder-1", "CTCLoss-4"],
    "issue 16 (vision and INT8)": [
        "Elu-1", "HSigmoid-5", "HardSigmoid-1", "Mish-4", "PRelu-1", "Selu-1", "SoftPlus-4",
        "SoftSign-9", "ConvolutionBackpropData-1", "GroupConvolutionBackpropData-1",
        "DeformableConvolution-1", "DeformableConvolution-8", "BinaryConvolution-1", "MaxPool-14",
        "AvgPool-14", "AvgPool-16", "AdaptiveAvgPool-8", "AdaptiveMaxPool-8", "Interpolate-1",
        "Interpolate-4", "Interpolate-11", "GridSample-9", "Col2Im-15", "NV12toRGB-8", "NV12toBGR-8",
        "I420toRGB-8", "I420toBGR-8", "Pad-1", "Pad-12", "DepthToSpace-1", "SpaceToDepth-1",
        "BatchToSpace-2", "SpaceToBatch-2", "ShuffleChannels-1", "ExtractImagePatches-3", "Roll-7",
        "Squeeze-15", "FakeQuantize-1", "FakeConvert-13"],
    "issue 17 (detection)": [
        "NonMaxSuppression-1", "NonMaxSuppression-3", "NonMaxSuppression-4", "NonMaxSuppression-5",
        "NonMaxSuppression-9", "MatrixNms-8", "MulticlassNms-8", "MulticlassNms-9", "NMSRotated-13",
        "ExperimentalDetectronTopKROIs-6", "DetectionOutput-1", "DetectionOutput-8", "PriorBox-1",
        "PriorBox-8", "PriorBoxClustered-1", "Proposal-1", "Proposal-4", "ROIAlign-3", "ROIAlign-9",
        "ROIAlignRotated-15", "ROIPooling-2", "PSROIPooling-1", "DeformablePSROIPooling-1",
        "RegionYolo-1", "ReorgYolo-2", "GenerateProposals-9", "ExperimentalDetectronDetectionOutput-6",
        "ExperimentalDetectronGenerateProposalsSingleImage-6",
        "ExperimentalDetectronPriorGridGenerator-6", "ExperimentalDetectronROIFeatureExtractor-6"],
}


def registered() -> set[str]:
    return {op.label for op in all_ops()}


def test_the_table_holds_238_versions_in_24_categories():
    assert TOTAL == 238 and len(OPSET_VERSIONS) == 24
    labels = [v for _, v in all_versions()]
    assert len(set(labels)) == 238
    allowed = [v for vs in ALLOWED_MISSING.values() for v in vs]
    assert len(allowed) == len(set(allowed)) and set(allowed) <= set(labels)


def test_every_missing_version_is_owned_by_an_open_issue():
    _, missing = coverage(registered())
    allowed = {v for vs in ALLOWED_MISSING.values() for v in vs}
    unowned = [f"{c}/{v}" for c, v in missing if v not in allowed]
    assert not unowned, f"op versions of opsets 1-16 missing from `irrun ops` and owned by no open issue: {unowned}"


def test_ops_coverage_prints_the_count_and_the_missing_versions():
    result = CliRunner().invoke(cli, ["ops", "--coverage"])
    assert result.exit_code == 0, result.output
    have, missing = coverage(registered())
    lines = result.output.splitlines()
    assert lines[0] == f"{have} of 238 op versions of opsets 1-16"
    listed = [line.split()[-1] for line in lines[2:]]
    assert listed == [v for _, v in missing]
    plain = CliRunner().invoke(cli, ["ops"]).output
    # every registered version of the table appears in the plain listing too
    for _, v in all_versions():
        if v in registered():
            assert v in plain


def test_ops_page_states_the_measured_coverage():
    import pathlib
    have, _ = coverage(registered())
    page = (pathlib.Path(__file__).parent.parent / "docs" / "ops.md").read_text()
    assert f"**{have} of 238 op versions of opsets 1-16**" in page
