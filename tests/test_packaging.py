"""Packaging: ops/ installs as irrun.ops, nothing called plain `ops` lands in site-packages,
and .ci/run runs exactly the README's test command."""
import os
import pathlib
import re
import shutil
import subprocess
import sys


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_installed_copy_has_irrun_ops_and_no_top_level_ops(tmp_path):
    target = tmp_path / "site"
    # From a copy without build/: setuptools puts whatever an earlier build left there
    # into the wheel, which would hide a package missing from pyproject.toml.
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", ".git", "__pycache__", "models", "bench", "tests"))
    # With build isolation, as a user's pip builds it (a fresh venv may have an old setuptools).
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                           "--target", str(target), str(source)], capture_output=True,
                          text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (target / "irrun" / "ops" / "__init__.py").exists()
    assert not (target / "ops").exists()
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import irrun.ops, irrun;"
            "print(irrun.ops.__file__)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-I", "-c", code, str(target)], check=True,
                         capture_output=True, text=True, cwd=tmp_path, env=env).stdout
    assert out.strip().startswith(str(target))
    # Every subpackage of the source is in the installed copy (irrun.opkit was once left
    # out; an editable install, which the other tests use, never notices).
    for source, installed in (("irrun", "irrun"), ("ops", os.path.join("irrun", "ops"))):
        for init in sorted(pathlib.Path(ROOT, source).rglob("__init__.py")):
            package = init.parent.relative_to(pathlib.Path(ROOT, source))
            assert (target / installed / package / "__init__.py").exists(), package


def _readme_commands():
    text = open(os.path.join(ROOT, "README.md")).read()
    block = re.search(r"```\w*\n(.*?)```", text, re.S).group(1)
    return [line.strip() for line in block.splitlines() if line.strip()]


def test_readme_starts_with_two_commands_and_ci_runs_the_test_one():
    commands = _readme_commands()
    assert len(commands) == 2
    run_cmd, test_cmd = commands
    assert "irrun models/" in run_cmd and "--inputs" in run_cmd
    assert "pytest" in test_cmd and ".[test]" in test_cmd
    ci = open(os.path.join(ROOT, ".ci", "run")).read().splitlines()
    ci_commands = [line.strip() for line in ci if line.strip() and not line.startswith("#")
                   and not line.startswith(("set ", "cd "))]
    assert test_cmd in ci_commands


def test_python_dash_m_irrun_works():
    out = subprocess.run([sys.executable, "-m", "irrun", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "validate" in out
