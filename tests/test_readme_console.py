"""Every example of README.md and docs/*.md runs as written on the shipped models, and what a
console example shows is what it prints.

Each page gets a scratch directory where `models` is the project's models/ (so files an example
writes land in the scratch directory). In it, in the page's order:

- a code block whose caption (the last line before it) ends with a file name in backquotes and
  a colon ("`my_ops.py`:") is that file: it is written, not run;
- each `$ ` line of a ```console block is run with bash (`python3`, `python`, `irrun` and `dask`
  are this interpreter's). The lines shown after it must each be printed (stdout or stderr), in
  the page's order within each stream; a `...` line stands for output the page leaves out;
  `$ echo $?` and a number after it give the exit status (else it must be 0). A trailing
  `  # comment` explains, it is not run. A command ending in `&` runs in the background until
  the page is done. Installing (`python3 -m pip install ...`) is not run: the tests run in the
  installed checkout;
- then the page's ```python blocks (files aside) run in one interpreter, in order, in one
  namespace, so a block may use what an earlier one made.

Output that varies is checked as far as it holds: `--profile` times are only run (the status
is checked); `irrun compare` against OpenVINO prints numbers whose last digits may differ on
another CPU, so its lines are compared with every number replaced by `#`. An example that needs
an optional package (openvino for compare and reduce, dask for batch) is left out only when
that package cannot be imported; the test extra installs them.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))

FENCE = re.compile(r"^```(\w*)\n(.*?)^```[ \t]*$", re.M | re.S)
CAPTION = re.compile(r"`([\w.-]+\.\w+)`[^`]*:$")


@dataclass
class Command:
    line: int                     # the page's line of the `$ ` command
    command: str                  # as written
    shown: list[str]              # the output lines the page shows after it
    status: int = 0


@dataclass
class Page:
    path: Path
    files: dict[str, str] = field(default_factory=dict)
    commands: list[Command] = field(default_factory=list)
    python: list[tuple[int, str]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.path.relative_to(ROOT))


def parse(path: Path) -> Page:
    text = path.read_text()
    page = Page(path)
    for block in FENCE.finditer(text):
        kind, body = block.group(1), block.group(2)
        first = text.count("\n", 0, block.start()) + 2           # the block's first line
        before = [line for line in text[:block.start()].splitlines() if line.strip()]
        caption = CAPTION.search(before[-1]) if before else None
        if caption and kind != "console":
            page.files[caption.group(1)] = body
        elif kind == "python":
            page.python.append((first, body))
        elif kind == "console":
            page.commands += console_commands(body, first)
    return page


def console_commands(body: str, first: int) -> list[Command]:
    lines = body.rstrip("\n").split("\n")
    commands, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            i += 1
            continue
        j = i + 1
        shown = []
        while j < len(lines) and not lines[j].startswith("$ "):
            shown.append(lines[j])
            j += 1
        status = 0
        if j < len(lines) and lines[j] == "$ echo $?":
            status = int(lines[j + 1])
            j += 2
        commands.append(Command(first + i, lines[i][2:], shown, status))
        i = j
    return commands


def runnable(command: str) -> str:
    return command.split("  #")[0].strip()


def _importable(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


def missing_package(code: str) -> str | None:
    """The optional package an example needs and this interpreter lacks, if any."""
    wants_openvino = (re.search(r"irrun (compare|graph)\b.*--compare|irrun compare\b", code)
                      and "--reference" not in code) \
        or re.search(r"--until (diverges|openvino-fails)", code) \
        or ("irrun.compare(" in code and "reference=" not in code)
    if wants_openvino and not _importable("openvino"):
        return "openvino"
    if re.search(r"irrun batch|^dask |irrun\.batch\(|map_blocks", code) \
            and not _importable("dask", "distributed"):
        return "dask"
    return None


def _normalise(line: str) -> str:
    return " ".join(re.sub(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?", "#", line).split())


def _shell_prefix() -> str:
    """Shell functions making `python3`, `python`, `irrun` and `dask` this interpreter's."""
    py = sys.executable
    bindir = Path(py).parent
    functions = [f'python3() {{ "{py}" "$@"; }}', f'python() {{ "{py}" "$@"; }}']
    for tool, module in (("irrun", "irrun"), ("dask", "dask")):
        if not (bindir / tool).exists():
            functions.append(f'{tool}() {{ "{py}" -m {module} "$@"; }}')
    return "; ".join(functions) + "; "


def check_command(page: Page, cmd: Command, scratch: Path, env: dict, group: int,
                  logs: Path) -> str | None:
    """Run one console example; the problem, or None."""
    run = runnable(cmd.command)
    where = f"{page.name} line {cmd.line}: {run}"
    prefix = _shell_prefix()
    join_group = lambda: os.setpgid(0, group)              # noqa: E731
    if run.endswith("&"):
        with open(logs / f"{cmd.line}.out", "w") as out:
            subprocess.Popen(["bash", "-c", prefix + run[:-1]], cwd=scratch, env=env,
                             stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             preexec_fn=join_group)
        return None
    done = subprocess.run(["bash", "-c", prefix + run], cwd=scratch, env=env,
                          capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL, preexec_fn=join_group)
    printed = f"printed:\n{done.stdout}{done.stderr}"
    if done.returncode != cmd.status:
        return f"{where}\nexit status {done.returncode}, the page says {cmd.status}\n{printed}"
    if "--profile" in run:
        return None
    shown = [s for s in cmd.shown if s != "..." and s.strip()]
    out, err = done.stdout.splitlines(), done.stderr.splitlines()
    if "irrun compare" in run and "--reference" not in run:
        shown = [_normalise(s) for s in shown]
        out, err = [_normalise(s) for s in out], [_normalise(s) for s in err]
    missing = [s for s in shown if s not in out + err]
    if missing:
        return f"{where}\nshown but not printed: {missing}\n{printed}"
    for stream in (out, err):
        found = [stream.index(s) for s in shown if s in stream]
        if found != sorted(found):
            return f"{where}\nprinted in another order than shown\n{printed}"
    return None


RUNNER = r"""
import json, sys, traceback
sys.path.insert(0, "")
namespace = {"__name__": "__main__"}
for page, line, code in json.load(open(sys.argv[1])):
    try:
        exec(compile(code, f"{page} line {line}", "exec"), namespace)
    except BaseException:
        print(f"{page} line {line}: this python example fails:", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
"""


PARSED = [parse(p) for p in PAGES]


def test_examples_are_found():
    pages = {p.name: p for p in PARSED}
    assert len(pages["README.md"].commands) >= 8 and len(pages["README.md"].python) >= 1
    assert sum(len(p.commands) for p in PARSED) >= 40
    assert sum(len(p.python) for p in PARSED) >= 8
    assert "my_ops.py" in pages["docs/ops.md"].files and "leaky.py" in pages["README.md"].files


def test_examples_name_only_shipped_models():
    """A model path in an example is a shipped model (or a file an earlier example writes)."""
    for page in PARSED:
        code = "\n".join([c.command for c in page.commands] + [b for _, b in page.python])
        for path in re.findall(r"models/([\w.-]+)/", code):
            assert (ROOT / "models" / path).is_dir(), f"{page.name}: models/{path} is not shipped"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_between_pages_resolve():
    """Every relative link of README.md and docs/*.md names a file that exists, and its
    `#anchor` a heading of that page."""
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path) if path else page
            where = f"{page.relative_to(ROOT)}: ({target})"
            assert dest.exists(), f"{where}: no such file"
            if anchor:
                headings = re.findall(r"^#+ (.*)$", dest.read_text(), re.M)
                assert anchor in {_slug(h) for h in headings}, f"{where}: no such heading"


@pytest.mark.parametrize("page", PARSED, ids=[p.name for p in PARSED])
def test_page_examples_run_as_written(page, tmp_path):
    if not page.commands and not page.python:
        pytest.skip("no examples")
    scratch = tmp_path / "work"
    scratch.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    (scratch / "models").symlink_to(ROOT / "models")
    for name, body in page.files.items():
        (scratch / name).write_text(body)
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("PYTHONPATH", None)

    problems, left_out = [], []
    # Background commands join the process group of this placeholder, ended with the page.
    anchor = subprocess.Popen(["sleep", "3600"], preexec_fn=os.setpgrp)   # a group of its own
    try:
        for cmd in page.commands:
            run = runnable(cmd.command)
            if run.startswith(("python3 -m pip install", "pip install")):
                continue
            lacking = missing_package(run)
            if lacking:
                left_out.append(f"{page.name} line {cmd.line} (no {lacking})")
                continue
            problem = check_command(page, cmd, scratch, env, anchor.pid, logs)
            if problem:
                problems.append(problem)
    finally:
        os.killpg(anchor.pid, signal.SIGTERM)
        anchor.wait()

    blocks = []
    for line, code in page.python:
        lacking = missing_package(code)
        if lacking:
            left_out.append(f"{page.name} line {line} (no {lacking})")
        else:
            blocks.append((page.name, line, code))
    if blocks:
        (tmp_path / "blocks.json").write_text(json.dumps(blocks))
        done = subprocess.run([sys.executable, "-c", RUNNER, str(tmp_path / "blocks.json")],
                              cwd=scratch, env=env, capture_output=True, text=True,
                              timeout=600, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            problems.append(done.stderr[-6000:])
    if left_out:
        warnings.warn("examples left out, their package missing: " + ", ".join(left_out))
    assert not problems, "\n\n".join(problems)
