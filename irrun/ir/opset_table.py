"""The op versions of OpenVINO 2026.4's opsets 1-16, as data: what `irrun ops --coverage`
measures irrun against.

Read from OpenVINO itself: every type `NodeFactory(f"opset{k}")` creates for k = 1..16, the
names taken from the opset tables OpenVINO ships (include/openvino/opsets/opsetK_tbl.hpp),
each op version as `Type-N`, N the first opset that holds it, by spec category.
tests/test_opset_coverage.py reads the same from the installed openvino and fails when
this table or irrun's registry differs from it. The Constant of the runtime is the IR's
Const (NodeFactory makes none), outside the count.

opset1 holds two versions that no later opset does: Reverse-1 (OpenVINO's ONNX frontend
writes it for ArgMax/ArgMin with select_last_index) and Xor-1 (LogicalXor's old name).
The runtime names LogicalXor's version "opset2" (its IR files say version="opset2"), but
opset1 holds it too: LogicalXor-1. A few names differ from the IR spelling irrun
registers; `IRRUN_LABEL` maps them.
"""
from __future__ import annotations

OPSET_VERSIONS: dict[str, tuple[str, ...]] = {
    "activation": (
        "Clamp-1", "Elu-1", "Exp-1", "Gelu-2", "Gelu-7", "HSigmoid-5", "HSwish-4",
        "HardSigmoid-1", "LogSoftmax-5", "Mish-4", "PRelu-1", "Relu-1", "Selu-1", "Sigmoid-1",
        "SoftPlus-4", "SoftSign-9", "Softmax-1", "Softmax-8", "Swish-4",
    ),
    "arithmetic": (
        "Abs-1", "Acos-1", "Acosh-4", "Add-1", "Asin-1", "Asinh-4", "Atan-1", "Atanh-4",
        "Ceiling-1", "Cos-1", "Cosh-1", "CumSum-3", "Divide-1", "Erf-1", "Floor-1", "FloorMod-1",
        "Log-1", "Maximum-1", "Minimum-1", "Mod-1", "Multiply-1", "Negative-1", "Power-1",
        "Round-5", "Sign-1", "Sin-1", "Sinh-1", "Sqrt-1", "SquaredDifference-1", "Subtract-1",
        "Tan-1", "Tanh-1",
    ),
    "bitwise": (
        "BitwiseAnd-13", "BitwiseLeftShift-15", "BitwiseNot-13", "BitwiseOr-13",
        "BitwiseRightShift-15", "BitwiseXor-13",
    ),
    "comparison": (
        "Equal-1", "Greater-1", "GreaterEqual-1", "IsFinite-10", "IsInf-10", "IsNaN-10", "Less-1",
        "LessEqual-1", "NotEqual-1",
    ),
    "condition": (
        "Bucketize-3", "If-8", "NonZero-3", "Select-1",
    ),
    "convolution": (
        "BinaryConvolution-1", "Convolution-1", "ConvolutionBackpropData-1",
        "DeformableConvolution-1", "DeformableConvolution-8", "GroupConvolution-1",
        "GroupConvolutionBackpropData-1",
    ),
    "detection": (
        "DeformablePSROIPooling-1", "DetectionOutput-1", "DetectionOutput-8",
        "ExperimentalDetectronDetectionOutput-6",
        "ExperimentalDetectronGenerateProposalsSingleImage-6",
        "ExperimentalDetectronPriorGridGenerator-6", "ExperimentalDetectronROIFeatureExtractor-6",
        "GenerateProposals-9", "PSROIPooling-1", "PriorBox-1", "PriorBox-8",
        "PriorBoxClustered-1", "Proposal-1", "Proposal-4", "ROIAlign-3", "ROIAlign-9",
        "ROIAlignRotated-15", "ROIPooling-2", "RegionYolo-1", "ReorgYolo-2",
    ),
    "generation": (
        "Eye-9", "Multinomial-13", "RandomUniform-8", "Range-1", "Range-4",
    ),
    "image": (
        "Col2Im-15", "GridSample-9", "I420toBGR-8", "I420toRGB-8", "Interpolate-1",
        "Interpolate-4", "Interpolate-11", "NV12toBGR-8", "NV12toRGB-8",
    ),
    "infrastructure": (
        "Assign-3", "Assign-6", "Identity-16", "Loop-5", "Parameter-1", "ReadValue-3",
        "ReadValue-6", "Result-1", "TensorIterator-1",
    ),
    "logical": (
        "LogicalAnd-1", "LogicalNot-1", "LogicalOr-1", "LogicalXor-1", "Xor-1",
    ),
    "matrix": (
        "Einsum-7", "Inverse-14", "MatMul-1",
    ),
    "movement": (
        "BatchToSpace-2", "Broadcast-1", "Broadcast-3", "Concat-1", "DepthToSpace-1",
        "ExtractImagePatches-3", "Gather-1", "Gather-7", "Gather-8", "GatherElements-6",
        "GatherND-5", "GatherND-8", "GatherTree-1", "Pad-1", "Pad-12", "Reverse-1",
        "ReverseSequence-1", "Roll-7", "ScatterElementsUpdate-3", "ScatterElementsUpdate-12",
        "ScatterNDUpdate-4", "ScatterNDUpdate-15", "ScatterUpdate-3", "ShuffleChannels-1",
        "Slice-8", "SliceScatter-15", "SpaceToBatch-2", "SpaceToDepth-1", "Split-1",
        "StridedSlice-1", "Tile-1", "Transpose-1", "Unique-10", "VariadicSplit-1",
    ),
    "normalization": (
        "BatchNormInference-1", "BatchNormInference-5", "GRN-1", "GroupNormalization-12", "LRN-1",
        "MVN-2", "MVN-6", "NormalizeL2-1",
    ),
    "pooling": (
        "AdaptiveAvgPool-8", "AdaptiveMaxPool-8", "AvgPool-1", "AvgPool-14", "AvgPool-16",
        "MaxPool-1", "MaxPool-8", "MaxPool-14",
    ),
    "quantization": (
        "FakeConvert-13", "FakeQuantize-1",
    ),
    "reduction": (
        "ReduceL1-4", "ReduceL2-4", "ReduceLogicalAnd-1", "ReduceLogicalOr-1", "ReduceMax-1",
        "ReduceMean-1", "ReduceMin-1", "ReduceProd-1", "ReduceSum-1",
    ),
    "sequence": (
        "CTCGreedyDecoder-1", "CTCGreedyDecoderSeqLen-6", "CTCLoss-4", "GRUCell-3",
        "GRUSequence-5", "LSTMCell-1", "LSTMCell-4", "LSTMSequence-5", "OneHot-1", "OneHot-16",
        "RNNCell-1", "RNNSequence-5", "ScaledDotProductAttention-13",
    ),
    "shape": (
        "Reshape-1", "ShapeOf-1", "ShapeOf-3", "Squeeze-1", "Squeeze-15", "Unsqueeze-1",
    ),
    "signals": (
        "DFT-7", "IDFT-7", "IRDFT-9", "ISTFT-16", "RDFT-9", "STFT-15",
    ),
    "sort": (
        "ExperimentalDetectronTopKROIs-6", "MatrixNms-8", "MulticlassNms-8", "MulticlassNms-9",
        "NMSRotated-13", "NonMaxSuppression-1", "NonMaxSuppression-3", "NonMaxSuppression-4",
        "NonMaxSuppression-5", "NonMaxSuppression-9", "SearchSorted-15", "TopK-1", "TopK-3",
        "TopK-11",
    ),
    "sparse": (
        "EmbeddingBagOffsets-15", "EmbeddingBagOffsetsSum-3", "EmbeddingBagPacked-15",
        "EmbeddingBagPackedSum-3", "EmbeddingSegmentsSum-3", "SegmentMax-16",
        "SparseFillEmptyRows-16",
    ),
    "string": (
        "StringTensorPack-15", "StringTensorUnpack-15",
    ),
    "type": (
        "Convert-1", "ConvertLike-1", "ConvertPromoteTypes-14",
    ),
}

# The runtime's names where irrun registers the IR spelling: Relu/Softmax are ReLU/SoftMax in
# IR files (OpenVINO's serializer writes them so).
IRRUN_LABEL = {"Relu-1": "ReLU-1", "Softmax-1": "SoftMax-1", "Softmax-8": "SoftMax-8"}

TOTAL = sum(len(v) for v in OPSET_VERSIONS.values())


def all_versions() -> list[tuple[str, str]]:
    """(category, irrun label) for every op version of opsets 1-16."""
    return [(cat, IRRUN_LABEL.get(v, v)) for cat, vs in OPSET_VERSIONS.items() for v in vs]


def coverage(registered: set[str]) -> tuple[int, list[tuple[str, str]]]:
    """How many of the versions `registered` (labels like "Gather-8") holds, and the
    missing ones as (category, label)."""
    missing = [(c, v) for c, v in all_versions() if v not in registered]
    return TOTAL - len(missing), missing
