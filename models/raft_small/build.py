"""Builds torchvision's RAFT-small optical flow net (random weights, seeded) and converts it
with openvino.convert_model, the way a new user would:

    image1, image2 [1, 3, 128, 128] f32 (values in [-1, 1], as RAFT expects)
      --raft_small's architecture (see SMALL below): feature and context encoders (residual
        bottleneck blocks; instance norm in the feature encoder), the all-pairs correlation
        volume (a matrix product of the two feature maps, 1/8 resolution) and its 4-level
        average-pooled pyramid; UPDATES flow updates, each looking up the pyramid around
        the current flow with grid_sample (radius 3), a motion encoder, a ConvGRU and a flow
        head; the last flow upsampled 8x (bilinear)-->
      flow [1, 2, 128, 128] f32 (the last of the UPDATES predictions)

The tracer unrolls the update loop: each update is a copy of the same layers. Run with a
build venv (torch, torchvision, openvino): `python models/raft_small/build.py`. Writes
model.xml/.bin (ov.save_model, compress_to_fp16), inputs.npz and expected.npz.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

SEED = 2505
SIZE = 128
UPDATES = 4
FIRST_STD = 0.5
# torchvision's raft_small with every width halved (its values in comments): the layers,
# blocks and correlation pyramid are raft_small's.
SMALL = dict(
    feature_encoder_layers=(16, 16, 32, 48, 64),        # (32, 32, 64, 96, 128)
    context_encoder_layers=(16, 16, 32, 48, 80),        # (32, 32, 64, 96, 160)
    corr_block_num_levels=4, corr_block_radius=3,        # the same
    motion_encoder_corr_layers=(48,),                    # (96,)
    motion_encoder_flow_layers=(32, 16),                 # (64, 32)
    motion_encoder_out_channels=41,                      # 82
    recurrent_block_hidden_state_size=48,                # 96
    recurrent_block_kernel_size=(3,), recurrent_block_padding=(1,),
    flow_head_hidden_size=64,                            # 128
)


def sample_inputs(rng):
    """Two frames: a smooth random image and the same image shifted by (2, 3) pixels with a
    little noise, in [-1, 1]."""
    base = rng.standard_normal((1, 3, SIZE // 8 + 2, SIZE // 8 + 2))
    big = np.kron(base, np.ones((1, 1, 8, 8)))                   # blocks of 8x8 pixels
    kernel = np.ones(5) / 5                                        # then a 5-tap box blur
    for axis in (2, 3):
        big = np.apply_along_axis(lambda v: np.convolve(v, kernel, "same"), axis, big)
    frame1 = big[:, :, 8:8 + SIZE, 8:8 + SIZE]
    frame2 = big[:, :, 6:6 + SIZE, 5:5 + SIZE] + 0.05 * rng.standard_normal((1, 3, SIZE, SIZE))
    clip = lambda a: np.clip(a / 2, -1, 1).astype(np.float32)    # noqa: E731
    return {"image1": clip(frame1), "image2": clip(frame2)}


def torch_model():
    import torch
    from torchvision.models.optical_flow.raft import BottleneckBlock, _raft

    class Flow(torch.nn.Module):
        """RAFT returns every update's flow as a list; this returns the last one."""

        def __init__(self, raft):
            super().__init__()
            self.raft = raft

        def forward(self, image1, image2):
            return self.raft(image1, image2, num_flow_updates=UPDATES)[-1]

    torch.manual_seed(SEED)
    raft = _raft(weights=None, feature_encoder_block=BottleneckBlock,
                 feature_encoder_norm_layer=torch.nn.InstanceNorm2d,
                 context_encoder_block=BottleneckBlock, context_encoder_norm_layer=None,
                 use_mask_predictor=False, **SMALL).eval()
    inputs = sample_inputs(np.random.default_rng(SEED))
    # A fresh flow head moves the flow by ~10 pixels per update; scale its last convolution
    # so the first update's flow has a spread of FIRST_STD pixels on the sample.
    frames = [torch.from_numpy(inputs[k]) for k in ("image1", "image2")]
    with torch.no_grad():
        first = raft(*frames, num_flow_updates=1)[-1]
        head = raft.update_block.flow_head.conv2
        scale = FIRST_STD / float(first.std())
        head.weight.mul_(scale)
        head.bias.mul_(scale)
    return Flow(raft).eval(), inputs


def build():
    import openvino as ov
    import torch

    model, inputs = torch_model()
    example = tuple(torch.from_numpy(inputs[k]) for k in ("image1", "image2"))
    ov_model = ov.convert_model(model, example_input=example,
                                input=[[1, 3, SIZE, SIZE], [1, 3, SIZE, SIZE]])
    for port, name in zip(ov_model.inputs, ("image1", "image2")):
        port.get_tensor().set_names({name})
    ov_model.outputs[0].get_tensor().set_names({"flow"})
    return ov_model, inputs


if __name__ == "__main__":
    import collections

    from write import write_model  # models/write.py

    m, inputs = build()
    ops = collections.Counter(f"{n.get_type_name()}-{n.get_type_info().version_id}"
                              for n in m.get_ordered_ops())
    print(dict(sorted(ops.items())))
    out = write_model(m, HERE, inputs)
    print({k: (v.shape, v.dtype, float(v.std()), float(v.mean(axis=(2, 3)).ravel()[0]),
               float(v.mean(axis=(2, 3)).ravel()[1])) for k, v in out.items()})
