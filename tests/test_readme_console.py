"""Every console example of the README that uses a model shipped in models/ is run, and what
the README shows is what it prints.

A block's `$ irrun ...` line is run with bash in a scratch directory where `models` is the
project's models/ (so files the example writes land there). The lines the README shows after
it must each be printed (stdout or stderr), in the README's order within each stream; a `...`
line stands for output the README leaves out. Examples whose output varies run to run
(`--profile` times) are only run, and must succeed as the README says they do.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def console_examples():
    """(line number, command, shown output lines, expected exit status) of each shipped-model
    example."""
    examples = []
    for block in re.finditer(r"```console\n(.*?)```", README, re.S):
        start = README.count("\n", 0, block.start()) + 2
        lines = block.group(1).rstrip("\n").split("\n")
        i = 0
        while i < len(lines):
            if not lines[i].startswith("$ "):
                i += 1
                continue
            command = lines[i][2:]
            j = i + 1
            shown = []
            while j < len(lines) and not lines[j].startswith("$ "):
                shown.append(lines[j])
                j += 1
            status = 0
            if j < len(lines) and lines[j] == "$ echo $?":
                status = int(lines[j + 1])
                j += 2
            run = command.split("  #")[0]
            if run.startswith("irrun ") and "models/" in run and "*" not in run:
                examples.append((start + i, command, shown, status))
            i = j
    return examples


EXAMPLES = console_examples()


def test_examples_are_found():
    assert len(EXAMPLES) >= 10


@pytest.mark.parametrize("line, command, shown, status", EXAMPLES,
                         ids=[f"line{e[0]}" for e in EXAMPLES])
def test_readme_console_example(line, command, shown, status, tmp_path):
    (tmp_path / "models").symlink_to(ROOT / "models")
    irrun = Path(sys.executable).with_name("irrun")
    prefix = f'irrun() {{ "{sys.executable}" -m irrun "$@"; }}; ' if not irrun.exists() else ""
    cmd = command.split("  #")[0]          # a trailing comment explains, it is not run
    done = subprocess.run(["bash", "-c", prefix + cmd], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == status, f"README line {line}: {cmd}\n{done.stdout}{done.stderr}"
    if "--profile" in cmd:
        return
    out, err = done.stdout.splitlines(), done.stderr.splitlines()
    for stream in (out, err):
        found = [stream.index(s) for s in shown if s != "..." and s.strip() and s in stream]
        assert found == sorted(found), f"README line {line}: lines out of order"
    missing = [s for s in shown if s != "..." and s.strip() and s not in out + err]
    assert not missing, (f"README line {line}: {cmd}\nshown but not printed: {missing}\n"
                         f"printed:\n{done.stdout}{done.stderr}")


def test_readme_shows_the_real_no_extension_hint(tmp_path):
    from test_extension import model_xml

    (tmp_path / "custom.xml").write_text(model_xml())
    import numpy as np

    np.savez(tmp_path / "in.npz", x=np.ones((2, 3), np.float32))
    done = subprocess.run([sys.executable, "-m", "irrun", "custom.xml", "-i", "in.npz"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    line = done.stderr.strip()
    assert line.startswith("custom.xml:8: error: layer 'act' (ScaledTanh-extension): ")
    assert line in README, f"the README's hint differs from what irrun prints:\n{line}"
