"""Builds one IR of openvino_tokenizers' post-processing ops on ragged id inputs, made with
its node factory (no tokenizer around them), so that truncation of pairs, segment
combination and padding, which the shipped tokenizers run only in their simplest settings,
are compared with OpenVINO:

    first_begins, first_ends i32 [B], first_ids i32 [N]      (ragged: row r is
    second_begins, second_ends i32 [B], second_ids i32 [M]    ids[begins[r]:ends[r]])
    max_length i32 [], side u8 [?] ("left"/"right"), mode u8 [?] ("longest_first",
    "only_first", "only_second"), pad_right boolean []
      --> Truncate (the pair)
      --> CombineSegments [101] + first + [102] + second + [102], segment ids 0 0 0 1 1
      --> RaggedToDense to the longest row, padding on the side pad_right says
    outputs: ids i32 [B, T], mask boolean [B, T], types i32 [B, T]

One Truncate only: openvino_tokenizers' Truncate writes its results into its input tensors,
so several Truncates sharing inputs would see each other's cuts. Writes
openvino_tokenizer.xml/.bin, oracle.npz (inputs `in_<k>/<name>` and OpenVINO's outputs
`out_<k>/<name>` for a few cases) and openvino_tokenizer.inputs.npz (the first case's
inputs, which irrun's tools take as the file's sample). Run in a venv with openvino and openvino-tokenizers:
`python models/tok_postprocess/build.py`.
"""
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RAGGED = ("first_begins", "first_ends", "first_ids", "second_begins", "second_ends",
          "second_ids")


def build_model():
    import openvino as ov
    import openvino.opset15 as o
    from openvino_tokenizers import _get_factory

    factory = _get_factory()
    params = [o.parameter([-1], ov.Type.i32, name=n) for n in RAGGED]
    params += [o.parameter([], ov.Type.i32, name="max_length"),
               o.parameter([-1], ov.Type.u8, name="side"),
               o.parameter([-1], ov.Type.u8, name="mode"),
               o.parameter([], ov.Type.boolean, name="pad_right")]

    def const(values):
        return o.constant(np.array(values, np.int32)).output(0)

    def special(token):            # scalar begins and ends: one id added to every row
        return [const(0), const(1), const([token])]

    cut = factory.create("Truncate", [p.output(0) for p in params[:9]]).outputs()
    combined = factory.create(
        "CombineSegments", special(101) + cut[:3] + special(102) + cut[3:6] + special(102)
        + [const([0, 0, 0, 1, 1])]).outputs()
    longest = o.reduce_max(o.subtract(combined[1], combined[0]), const([0]), keep_dims=True)
    dense = factory.create("RaggedToDense", combined[:3] + [longest.output(0), const(0),
                                                            params[9].output(0)]).outputs()
    types = factory.create("RaggedToDense", combined[3:6] + [longest.output(0), const(0),
                                                             params[9].output(0)]).outputs()
    results = []
    for out, name in ((dense[0], "ids"), (dense[1], "mask"), (types[0], "types")):
        out.get_tensor().set_names({name})
        results.append(o.result(out))
    return ov.Model(results, params, "postprocess")


def text(value: str) -> np.ndarray:
    return np.frombuffer(value.encode(), np.uint8).copy()


def sample(rng, rows, max_len, side, mode, pad_right):
    feed = {}
    for part in ("first", "second"):
        lengths = rng.integers(0, 9, rows)
        ends = np.cumsum(lengths).astype(np.int32)
        feed[f"{part}_begins"] = (ends - lengths).astype(np.int32)
        feed[f"{part}_ends"] = ends
        feed[f"{part}_ids"] = rng.integers(1, 100, int(lengths.sum())).astype(np.int32)
    feed.update(max_length=np.array(max_len, np.int32), side=text(side), mode=text(mode),
                pad_right=np.array(pad_right))
    return feed


# (seed, rows, max_length, side, mode, pad_right)
SAMPLES = [(1, 4, 7, "right", "longest_first", True), (2, 3, 10, "left", "longest_first", False),
           (3, 5, 5, "left", "only_first", True), (4, 1, 100, "right", "only_second", False),
           (5, 6, 0, "right", "longest_first", True), (6, 4, 6, "left", "only_second", True)]


def build():
    import openvino as ov
    import openvino_tokenizers  # noqa: F401

    xml = os.path.join(HERE, "openvino_tokenizer.xml")
    ov.save_model(build_model(), xml)
    compiled = ov.Core().compile_model(xml, "CPU")
    arrays = {}
    for k, (seed, *case) in enumerate(SAMPLES):
        feed = sample(np.random.default_rng(seed), *case)
        for name, value in feed.items():
            arrays[f"in_{k}/{name}"] = value
        res = compiled({n: v.copy() for n, v in feed.items()})   # (Truncate cuts in place)
        for out in compiled.outputs:
            arrays[f"out_{k}/{out.get_any_name()}"] = np.array(res[out])
    np.savez_compressed(os.path.join(HERE, "oracle.npz"), **arrays)
    # Sample inputs where irrun's tools look for them (<stem>.inputs.npz): random u8 side
    # and mode strings would not name a side or a mode.
    first = sample(np.random.default_rng(SAMPLES[0][0]), *SAMPLES[0][1:])
    np.savez(os.path.join(HERE, "openvino_tokenizer.inputs.npz"), **first)


if __name__ == "__main__":
    build()
