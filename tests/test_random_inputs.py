"""--random-inputs makes inputs the model can take (indices in range, masks of ones, sizes
its shape rules accept), says which rule chose each input's values, and takes --shape and
--val-range; `irrun compare` takes the same options. The CLI runs as a user runs it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import irrun
from irrun.errors import FeedError
from irrun.run.inputs import ValueRange, generated_inputs

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"

# A TorchScript loop over the rows of x [?, ?] whose trip count n indexes them, and whose
# body's MatMul wants 3 columns: only the Loop body says so, and no rule reads bodies.
SHAPES = {"torch_scripted_loop": ["--shape", "x[4,3]", "--val-range", "n:0,4"]}


# An op-level harness, not a model: its inputs spell the Truncate/CombineSegments modes as
# bytes ("right", "longest_first"), which no random value is.
HARNESSES = {"tok_postprocess"}


def shipped_models() -> list[Path]:
    found = sorted(MODELS.glob("*/model.xml")) + sorted(MODELS.glob("*/openvino_model.xml")) + \
        sorted(MODELS.glob("*/openvino_*tokenizer.xml"))
    return [p for p in found if p.parent.name not in HARNESSES]


def irrun_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "irrun", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("xml", shipped_models(),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_random_inputs_run_every_shipped_model(xml, tmp_path):
    # The command itself, in this process (the tests below run the real entry point).
    from click.testing import CliRunner

    from irrun.ui.cli import cli

    done = CliRunner().invoke(cli, [str(xml), "--random-inputs", *SHAPES.get(xml.parent.name, []),
                                    "-o", str(tmp_path / "out.npz")])
    assert done.exit_code == 0, done.output
    assert done.output.startswith("inputs: generated (random inputs requested; sample inputs "
                                  "exist at ") or "no sample inputs beside the model" in done.output
    assert (tmp_path / "out.npz").exists()


def test_each_input_says_how_its_values_were_chosen():
    m = irrun.read_model(MODELS / "ctr_wide_deep" / "model.xml")
    feed, notes = generated_inputs(m)
    assert notes[1].startswith("cat_ids i32[16] in [0, 50) (indices of EmbeddingSegmentsSum")
    assert notes[2].startswith("cat_segments i32[16] sorted in [0, 1) (segment ids of")
    assert feed["cat_ids"].max() < 50 and (np.diff(feed["cat_segments"]) >= 0).all()
    bert = irrun.read_model(MODELS / "tiny_bert" / "model.xml")
    feed, notes = generated_inputs(bert)
    # 128 tokens do not fit its 16 positions: the sequence halves until the rules accept it.
    assert feed["input_ids"].shape == (1, 16) and feed["input_ids"].max() < 100
    assert (feed["attention_mask"] == 1).all() and "attention mask" in notes[1]
    crnn = irrun.read_model(MODELS / "crnn" / "model.xml")
    feed, notes = generated_inputs(crnn)
    assert feed["image"].shape == (1, 1, 32, 224)      # an image's dynamic width: 224
    assert 1 <= feed["sequence_length"][0] <= 56 and "sequence lengths of" in notes[1]


def test_dlrm_offsets_start_at_zero_and_rise():
    m = irrun.read_model(MODELS / "dlrm" / "model.xml")
    feed, notes = generated_inputs(m, shapes={"dense": [5, 4], "offsets": [5]})
    offsets = feed["offsets"]
    assert offsets[0] == 0 and (np.diff(offsets) >= 0).all() and offsets.max() <= 20
    assert feed["item_ids"].max() < 1000
    m.infer(feed)


def test_value_ranges():
    m = irrun.read_model(MODELS / "ctr_wide_deep" / "model.xml")
    feed, notes = generated_inputs(m, ranges=[ValueRange.parse("numeric:5,6"),
                                              ValueRange.parse("0,3")])
    assert ((feed["numeric"] >= 5) & (feed["numeric"] < 6)).all()
    assert "(--val-range)" in notes[0]
    assert feed["cat_ids"].max() <= 3 and feed["cat_ids"].min() >= 0   # the range for all
    for bad in ("x", "1", "3,1", "a:b,c"):
        with pytest.raises(FeedError):
            ValueRange.parse(bad)
    with pytest.raises(FeedError, match="--val-range names no input 'nope'"):
        generated_inputs(m, ranges=[ValueRange.parse("nope:0,1")])


def test_seeded():
    m = irrun.read_model(MODELS / "tiny_bert" / "model.xml")
    a, _ = generated_inputs(m, seed=3)
    b, _ = generated_inputs(m, seed=3)
    c, _ = generated_inputs(m, seed=4)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["input_ids"], c["input_ids"])


def test_cli_says_what_is_true_about_sample_inputs(tmp_path):
    done = irrun_cli(MODELS / "crnn" / "model.xml", "--random-inputs")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == ("inputs: generated (random inputs requested; sample inputs exist at "
                        f"{MODELS / 'crnn' / 'inputs.npz'}): random, seed 0")
    assert lines[1] == "  image f32[1,1,32,224] in [-1, 1)"
    (tmp_path / "m.xml").write_text((MODELS / "crnn" / "model.xml").read_text())
    (tmp_path / "m.bin").write_bytes((MODELS / "crnn" / "model.bin").read_bytes())
    alone = irrun_cli(tmp_path / "m.xml", "--random-inputs", "--val-range", "image:0,1",
                      "--val-range", "sequence_length:3,3")
    assert alone.returncode == 0, alone.stderr
    assert "(no sample inputs beside the model)" in alone.stderr
    assert "  sequence_length i32[1] in [3, 3] (--val-range)" in alone.stderr.splitlines()
    none = irrun_cli(tmp_path / "m.xml")
    assert none.returncode == 1
    assert "no --inputs given and no sample inputs beside the model" in none.stderr
    assert "--random-inputs" in none.stderr
    bad = irrun_cli(tmp_path / "m.xml", "--val-range", "0,1")
    assert bad.returncode == 2 and "--val-range goes with --random-inputs" in bad.stderr


def test_a_refused_generated_input_suggests_shape_and_val_range(tmp_path):
    done = irrun_cli(MODELS / "torch_scripted_loop" / "model.xml", "--random-inputs")
    assert done.returncode == 1
    assert done.stderr.rstrip().endswith(
        "(the inputs were generated: give their shapes with --shape NAME[D,D,...] and their "
        "values with --val-range NAME:LO,HI, or real ones with --inputs)"), done.stderr
    assert "Traceback" not in done.stderr


def test_compare_takes_the_input_options(tmp_path):
    pytest.importorskip("openvino")
    done = irrun_cli("compare", MODELS / "crnn" / "model.xml", "--random-inputs", "--shape",
                     "image[1,1,32,64]", "--layers", "outputs")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "  image f32[1,1,32,64] in [-1, 1)" in done.stderr.splitlines()
    assert "i32[1,16]" in done.stdout                   # 64 wide gives 16 steps
    bad = irrun_cli("compare", MODELS / "crnn" / "model.xml", "--shape", "image[1,1,32,64]")
    assert bad.returncode == 2 and "--shape goes with --random-inputs" in bad.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs a POSIX shell")
def test_detokenizer_ids_are_any_ints(tmp_path):
    # A detokenizer takes ids; random ones decode to some string: the run succeeds.
    done = irrun_cli(MODELS / "tok_bpe" / "openvino_detokenizer.xml", "--random-inputs")
    assert done.returncode == 0, done.stderr
