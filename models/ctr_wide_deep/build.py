"""Builds a wide & deep style click-through-rate model, the way OpenVINO's TensorFlow
frontend lowers feature columns: bucketized numeric features and a multi-hot categorical
feature with sparse (segment) ids.

    numeric [B, 4] f32 --Split--> 4 columns --Bucketize (own boundaries each)--> Concat
        --Add per-feature offsets--> bucket ids [B, 4] --Gather (bucket embeddings)--> [B, 4, 4]
        --Reshape [0, -1]--> [B, 16]
    cat_ids [n], cat_segments [n], cat_weights [n] --EmbeddingSegmentsSum (table [50, 8],
        num_segments = B from ShapeOf -> Gather, default row 0)--> [B, 8]
    Concat([B, 16], [B, 8], numeric) [B, 28] --MatMul/Add/ReLU--> [B, 16]
        --MatMul/Add--> [B, 1] --Sigmoid--> score [B, 1]

The batch B is dynamic. The number of categorical id slots n is static (16 per request,
spread over the users by cat_segments): OpenVINO 2026.4's CPU plugin cannot compile
EmbeddingSegmentsSum with per_sample_weights when n is dynamic ("to_shape was called on a
dynamic shape"), and the model must run there to give expected.npz. Run from anywhere:
`python models/ctr_wide_deep/build.py`. Writes model.xml/.bin with ov.save_model (default
compress_to_fp16: the f32 weights are stored as f16 plus a decompression Convert),
inputs.npz keyed by input name and expected.npz with OpenVINO CPU plugin's outputs keyed by
output name. The weights come from a fixed seed.
"""
import os
import sys

import numpy as np
import openvino as ov
import openvino.opset3 as o3
import openvino.opset8 as o8

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from write import write_model  # noqa: E402  (models/write.py)
SEED = 20240601
# Per-feature boundaries (f16-exact, so fp16 compression keeps them sorted and unchanged).
BOUNDARIES = [
    [0.0, 1.0, 5.0],                       # e.g. item count
    [-2.0, -1.0, 0.0, 1.0, 2.0],           # a standardised price
    [10.0, 30.0, 60.0, 120.0],             # seconds since last visit
    [0.125, 0.25, 0.5, 0.75, 0.875, 1.0],  # a click-through rate
]
K = len(BOUNDARIES)
BUCKET_DIM = 4
VOCAB, EMB_DIM = 50, 8
HIDDEN = 16
SLOTS = 16   # categorical id slots per request


def _name(node, name):
    node.output(0).get_tensor().set_names({name})
    return node


def build() -> ov.Model:
    rng = np.random.default_rng(SEED)
    numeric = _name(o8.parameter([-1, K], ov.Type.f32, name="numeric"), "numeric")
    cat_ids = _name(o8.parameter([SLOTS], ov.Type.i32, name="cat_ids"), "cat_ids")
    cat_segments = _name(o8.parameter([SLOTS], ov.Type.i32, name="cat_segments"), "cat_segments")
    cat_weights = _name(o8.parameter([SLOTS], ov.Type.f32, name="cat_weights"), "cat_weights")

    # Wide part: one Bucketize per feature column, ids made global by per-feature offsets.
    columns = o8.split(numeric, o8.constant(np.int64(1)), K, name="split_features")
    buckets = [o3.bucketize(columns.output(i), o8.constant(np.array(b, np.float32)),
                            output_type="i64", with_right_bound=True, name=f"bucketize_{i}")
               for i, b in enumerate(BOUNDARIES)]
    ids = o8.concat(buckets, axis=1, name="bucket_ids")
    offsets = np.cumsum([0] + [len(b) + 1 for b in BOUNDARIES[:-1]]).astype(np.int64)
    ids = o8.add(ids, o8.constant(offsets), name="offset_ids")
    n_buckets = sum(len(b) + 1 for b in BOUNDARIES)
    bucket_table = rng.normal(0, 0.5, (n_buckets, BUCKET_DIM)).astype(np.float32)
    wide = o8.gather(o8.constant(bucket_table), ids, o8.constant(np.int64(0)), name="bucket_embeddings")
    wide = o8.reshape(wide, o8.constant(np.array([0, -1], np.int64)), special_zero=True, name="wide")

    # Sparse categorical part: num_segments is the batch size, read from the numeric input.
    batch = o8.gather(o3.shape_of(numeric, output_type="i32"), o8.constant(np.int64(0)),
                      o8.constant(np.int64(0)), name="batch_size")
    # Row 0 is the learned "no categories" row: the default for users without ids.
    table = rng.normal(0, 0.5, (VOCAB, EMB_DIM)).astype(np.float32)
    emb = o3.embedding_segments_sum(o8.constant(table), cat_ids, cat_segments, batch,
                                    o8.constant(np.int32(0)), cat_weights, name="categorical")

    deep = o8.concat([wide, emb, numeric], axis=1, name="features")
    width = K * BUCKET_DIM + EMB_DIM + K
    w1 = rng.normal(0, 1 / np.sqrt(width), (width, HIDDEN)).astype(np.float32)
    b1 = rng.normal(0, 0.1, (HIDDEN,)).astype(np.float32)
    w2 = rng.normal(0, 1 / np.sqrt(HIDDEN), (HIDDEN, 1)).astype(np.float32)
    b2 = np.array([-0.5], np.float32)
    h = o8.relu(o8.add(o8.matmul(deep, o8.constant(w1), False, False), o8.constant(b1)), name="hidden")
    logit = o8.add(o8.matmul(h, o8.constant(w2), False, False), o8.constant(b2), name="logit")
    score = _name(o8.sigmoid(logit, name="score"), "score")
    return ov.Model([score.output(0)], [numeric, cat_ids, cat_segments, cat_weights], "ctr_wide_deep")


def sample_inputs(rng, batch: int) -> dict:
    """Plausible features; the SLOTS categorical ids go to random users (sorted segment ids,
    as TensorFlow's sparse ids are), so with a large batch some users get none and fall back
    on the default row."""
    numeric = np.stack([
        rng.integers(0, 8, batch).astype(np.float32),
        rng.normal(0, 1.5, batch).astype(np.float32),
        rng.exponential(50, batch).astype(np.float32),
        rng.uniform(0, 1.1, batch).astype(np.float32),
    ], axis=1)
    segments = np.sort(rng.integers(0, batch, SLOTS)).astype(np.int32)
    ids = rng.integers(1, VOCAB, SLOTS).astype(np.int32)
    weights = rng.uniform(0.5, 1.5, SLOTS).astype(np.float32)
    return {"numeric": numeric, "cat_ids": ids, "cat_segments": segments, "cat_weights": weights}


def main() -> None:
    inputs = sample_inputs(np.random.default_rng(7), batch=10)
    print(write_model(build(), HERE, inputs))


if __name__ == "__main__":
    main()
