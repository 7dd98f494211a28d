"""FakeQuantize-1 (spec page: quantization/fake-quantize-1)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from irrun.opkit import TensorSpec, fail, output_shape, register

_NAMES = ["X (input 0)", "input_low (input 1)", "input_high (input 2)", "output_low (input 3)",
          "output_high (input 4)"]


@dataclass(frozen=True)
class FakeQuantizeAttrs:
    levels: int
    auto_broadcast: Literal["none", "numpy", "pdpd"] = "numpy"


def fake_quantize(x, il, ih, ol, oh, levels: int) -> np.ndarray:
    """The spec's formula in the input's precision, each step rounded as OpenVINO's reference
    rounds it: round((x - il) / (ih - il) * (levels - 1)) / (levels - 1) * (oh - ol) + ol,
    with round half to even (std::nearbyint); x <= min(il, ih) gives ol, x > max(il, ih) oh.

    f16 and bf16 compute in f32 (the CPU plugin's precision; the reference would round every
    step to f16). The CPU plugin instead precomputes scales and shifts, so a value within an
    ulp of a rounding boundary may land on the neighbouring level there.
    """
    t = np.float64 if x.dtype == np.float64 else np.float32
    x, il, ih, ol, oh = (np.asarray(a).astype(t, copy=False) for a in (x, il, ih, ol, oh))
    lm1 = t(levels - 1)
    with np.errstate(all="ignore"):      # the formula is not used where ih == il
        q = np.rint((x - il) / (ih - il) * lm1) / lm1 * (oh - ol) + ol
        y = np.where(x <= np.minimum(il, ih), ol, np.where(x > np.maximum(il, ih), oh, q))
    return y


@register("FakeQuantize", since=1, attrs=FakeQuantizeAttrs, category="quantization")
class FakeQuantize1:
    @staticmethod
    def infer(attrs, x: TensorSpec, *limits: TensorSpec):
        if len(limits) != 4:
            fail(f"FakeQuantize takes 5 inputs (X and four limits), got {1 + len(limits)}")
        if not x.etype.is_float:
            fail(f"FakeQuantize X (input 0) must be of a floating-point type, got {x.etype.name}")
        for name, s in zip(_NAMES[1:], limits):
            if s.etype != x.etype:
                fail(f"FakeQuantize {name} must have X's element type {x.etype.name}, got {s.etype.name}")
        if attrs.levels < 2:
            fail(f"FakeQuantize needs levels >= 2, got levels={attrs.levels}")
        # OpenVINO merges every limit's shape into X's: the output may be larger than X.
        return [TensorSpec(x.etype, output_shape(attrs.auto_broadcast, x, *limits, names=_NAMES))]

    @staticmethod
    def run(attrs, x, il, ih, ol, oh):
        if attrs.auto_broadcast == "none" and len({a.shape for a in (x, il, ih, ol, oh)}) != 1:
            fail("auto_broadcast='none' needs equal shapes, got "
                 + " and ".join(f"{n} {list(a.shape)}" for n, a in zip(_NAMES, (x, il, ih, ol, oh))))
        return (fake_quantize(x, il, ih, ol, oh, attrs.levels).astype(x.dtype),)
