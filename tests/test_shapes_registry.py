"""The partial-shape grammar, Dim intervals, the registry's opset selection and attribute parsing."""
from dataclasses import dataclass
from typing import Literal

import pytest

from irrun.ir.registry import (LookupFailure, NoAttrs, lookup, parse_attrs, register,
                            unregister)
from irrun.ir.shapes import DYNAMIC, Dim, format_shape, parse_partial_shape, shape_matches

import irrun.ops  # noqa: F401


@pytest.mark.parametrize("text,expected", [
    ("1,3,224,224", [Dim(1, 1), Dim(3, 3), Dim(224, 224), Dim(224, 224)]),
    ("?,11", [DYNAMIC, Dim(11, 11)]),
    ("-1", [DYNAMIC]),
    ("2..10", [Dim(2, 10)]),
    ("..5", [Dim(0, 5)]),
    ("3..", [Dim(3, None)]),
    ("", []),
    ("[1,?]", [Dim(1, 1), DYNAMIC]),
    ("3, 4", [Dim(3, 3), Dim(4, 4)]),      # Const shapes use ", "
])
def test_partial_shape_grammar(text, expected):
    assert list(parse_partial_shape(text)) == expected


def test_dynamic_rank():
    assert parse_partial_shape("...") is None
    assert format_shape(None) == "[...]"


@pytest.mark.parametrize("bad", ["1,,4", "a", "3..2", "1.5", "-2", "[1,2"])
def test_bad_shapes_are_rejected(bad):
    with pytest.raises(ValueError):
        parse_partial_shape(bad)


def test_shape_matches_intervals():
    shape = parse_partial_shape("?,2..4,5")
    assert shape_matches(shape, (7, 3, 5))
    assert not shape_matches(shape, (7, 5, 5))
    assert not shape_matches(shape, (7, 3))
    assert shape_matches(None, (1, 2, 3))


def test_dim_arithmetic_and_merge():
    assert Dim(2, 3) + Dim(1, 1) == Dim(3, 4)
    assert Dim(2, 3) * Dim.of(2) == Dim(4, 6)
    assert Dim(2, None) + 1 == Dim(3, None)
    assert Dim(1, 5).merge(Dim(3, 9)) == Dim(3, 5)
    assert Dim(1, 2).merge(Dim(3, 9)) is None
    assert str(Dim(2, 10)) == "2..10" and str(DYNAMIC) == "?" and str(Dim.of(4)) == "4"


def test_opset_selects_newest_version_at_or_before():
    @dataclass(frozen=True)
    class A:
        pass

    @register("ZzTest", since=1)
    class ZzTest1:
        @staticmethod
        def infer(attrs, x):
            return [x]

        @staticmethod
        def run(attrs, x):
            return (x,)

    @register("ZzTest", since=5)
    class ZzTest5(ZzTest1):
        pass

    try:
        assert lookup("ZzTest", "opset1").impl is ZzTest1
        assert lookup("ZzTest", "opset4").impl is ZzTest1
        assert lookup("zztest", "opset5").impl is ZzTest5     # case-insensitive, like OpenVINO
        assert lookup("ZzTest", "opset13").impl is ZzTest5
        with pytest.raises(LookupFailure, match="ZzTest-1, ZzTest-5"):
            lookup("ZzTest", "extension")
    finally:
        unregister("ZzTest", 1)
        unregister("ZzTest", 5)


def test_unknown_type_suggests_a_near_spelling():
    with pytest.raises(LookupFailure, match="did you mean Convert"):
        lookup("Convrt", "opset1")


def test_opset_too_old_lists_registered_versions():
    @register("ZzNew", since=3)
    class ZzNew3:
        @staticmethod
        def infer(attrs, x):
            return [x]

        @staticmethod
        def run(attrs, x):
            return (x,)

    try:
        with pytest.raises(LookupFailure, match=r"no kernel for ZzNew-opset1; registered: ZzNew-3"):
            lookup("ZzNew", "opset1")
    finally:
        unregister("ZzNew", 3)


def test_register_rejects_duplicates_and_needs_one_version():
    with pytest.raises(TypeError):
        register("X", since=1, version="extension")
    with pytest.raises(ValueError, match="registered twice"):
        @register("Convert", since=1)
        class Again:
            @staticmethod
            def run(attrs, x):
                return (x,)


@dataclass(frozen=True)
class SampleAttrs:
    mode: Literal["sum", "mean"]
    flag: bool = True
    k: int = 1
    eps: float = 1e-5
    axes: tuple[int, ...] = ()


@pytest.mark.parametrize("data,expected", [
    ({"mode": "sum"}, SampleAttrs("sum")),
    ({"mode": "mean", "flag": "false", "k": "3", "eps": "0.5", "axes": "1,-2"},
     SampleAttrs("mean", False, 3, 0.5, (1, -2))),
    ({"mode": "sum", "flag": "0", "axes": ""}, SampleAttrs("sum", False)),
])
def test_attribute_parsing(data, expected):
    attrs, problems, unknown = parse_attrs(SampleAttrs, data)
    assert problems == [] and unknown == []
    assert attrs == expected


def test_attribute_problems_are_all_reported():
    attrs, problems, unknown = parse_attrs(
        SampleAttrs, {"flag": "maybe", "k": "x", "eps": "fast", "axes": "1,a", "extra": "1"})
    assert attrs is None
    messages = " | ".join(m for _, m, _ in problems)
    assert "required attribute 'mode' is missing" in messages
    assert "flag='maybe' is not a boolean (true/false)" in messages
    assert "k='x' is not an integer" in messages
    assert "eps='fast' is not a number" in messages
    assert "axes='1,a' has the item 'a', which is not an integer" in messages
    assert unknown == ["extra"]


def test_integer_attributes_must_fit_in_64_bits():
    """OpenVINO's integer attributes are int64_t or size_t, and irrun computes with them in
    int64: a larger number is a located attribute error (fuzzing found a stride of 1e29
    overflowing inside the pooling shape rule)."""
    top = (1 << 63) - 1
    attrs, problems, _ = parse_attrs(SampleAttrs, {"mode": "sum", "k": str(top),
                                                   "axes": f"{-top - 1},{top}"})
    assert problems == [] and attrs.k == top and attrs.axes == (-top - 1, top)
    _, problems, _ = parse_attrs(SampleAttrs, {"mode": "sum", "k": str(top + 1),
                                               "axes": f"1, {10**29}"})
    messages = [m for _, m, _ in problems]
    assert messages == [
        f"attribute k='{top + 1}' is outside the 64-bit integer range [{-top - 1}, {top}]",
        f"attribute axes='1, {10**29}' has the item '{10**29}', which is outside the 64-bit "
        f"integer range [{-top - 1}, {top}]"]


def test_enum_value_outside_its_set_names_the_allowed_values():
    _, problems, _ = parse_attrs(SampleAttrs, {"mode": "max"})
    assert problems[0][1] == "attribute mode='max' is not one of sum, mean"


def test_no_attrs_schema():
    attrs, problems, unknown = parse_attrs(NoAttrs, {"x": "1"})
    assert attrs == NoAttrs() and unknown == ["x"]
