"""The command line: `irrun MODEL.xml --inputs X.npz` runs a model; subcommands check and inspect."""
from __future__ import annotations

import json
import os
import sys
import zipfile

import click
import numpy as np

from .errors import FeedError, IrrunError, ModelError, ReadError


class _Fail(click.ClickException):
    """One or more compiler-style lines on stderr, exit 1, no traceback."""

    def show(self, file=None):
        click.echo(self.message, err=True)


def _fail_from(e: IrrunError):
    if isinstance(e, ModelError):
        lines = [str(d) for d in e.diagnostics if d.severity == "error"]
        return _Fail("\n".join(lines))
    return _Fail(str(e))


class RunByDefault(click.Group):
    """A group whose first argument may be a model file: `irrun M.xml ...` means `irrun run M.xml ...`."""

    def parse_args(self, ctx, args):
        rest = list(args)
        i = 0
        while i < len(rest) and rest[i].startswith("-") and rest[i] not in ("--help", "-h"):
            i += 1
        if i < len(rest) and rest[i] not in self.commands and rest[i] not in ("--help", "-h"):
            rest.insert(i, "run")
        return super().parse_args(ctx, rest)


@click.group(cls=RunByDefault, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="irrun")
@click.option("--traceback", is_flag=True, help="Show the Python stack on errors (debugging).")
@click.pass_context
def cli(ctx, traceback):
    """Run, validate and inspect OpenVINO IR models (model.xml + model.bin).

    \b
    irrun MODEL.xml --inputs INPUTS.npz [--output OUT.npz]
    irrun validate MODEL.xml...
    irrun info MODEL.xml
    irrun ops
    """
    ctx.ensure_object(dict)
    ctx.obj["traceback"] = traceback


def _guard(ctx, fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except IrrunError as e:
        if ctx.find_root().obj.get("traceback"):
            raise
        raise _fail_from(e) from None


def load_npz(path: str) -> dict[str, np.ndarray]:
    """An npz of input arrays; never unpickles (object arrays are refused). See feed.load_npz."""
    from .feed import load_npz as load

    return load(path)


def sample_inputs_for(model_path: str) -> str | None:
    """The sample inputs shipped beside a model: <stem>.inputs.npz or inputs.npz."""
    stem = os.path.splitext(model_path)[0]
    for candidate in (stem + ".inputs.npz", os.path.join(os.path.dirname(model_path), "inputs.npz")):
        if os.path.exists(candidate):
            return candidate
    return None


def _preview(a: np.ndarray) -> str:
    with np.printoptions(threshold=20, edgeitems=3, precision=5, linewidth=100):
        return np.array2string(a, prefix="  ")


@cli.command("run")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--inputs", "-i", "inputs_path", type=click.Path(dir_okay=False),
              help="An .npz of input arrays keyed by input name.")
@click.option("--output", "-o", "output_path", type=click.Path(dir_okay=False),
              help="Write the outputs to this .npz, keyed by output name.")
@click.option("--weights", "-w", type=click.Path(dir_okay=False),
              help="The .bin file (default: beside MODEL with the same stem).")
@click.pass_context
def run_cmd(ctx, model, inputs_path, output_path, weights):
    """Run MODEL on INPUTS and print or save the outputs."""
    from .model import read_model

    def go():
        m = read_model(model, weights)
        path = inputs_path or sample_inputs_for(model)
        if path is None:
            if not m.inputs:
                feed = {}
            else:
                needed = "; ".join(str(i) for i in m.inputs)
                raise FeedError(f"no --inputs given and no sample inputs beside the model; "
                                f"the model needs: {needed}", file=model)
        else:
            feed = load_npz(path)
        outputs = m.infer(feed)
        if output_path:
            np.savez(output_path, **outputs)
            click.echo(f"wrote {len(outputs)} output{'s' if len(outputs) != 1 else ''} "
                       f"to {output_path}")
        else:
            for name, a in outputs.items():
                click.echo(f"{name}: {a.dtype}{list(a.shape)}")
                click.echo("  " + _preview(a))

    _guard(ctx, go)


def _diag_counts(diags):
    e = sum(d.severity == "error" for d in diags)
    w = sum(d.severity == "warning" for d in diags)
    return e, w


@cli.command("validate")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--strict", is_flag=True, help="Treat warnings as errors.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format.")
@click.option("--weights", "-w", type=click.Path(dir_okay=False),
              help="The .bin file (only with one model).")
@click.pass_context
def validate_cmd(ctx, files, strict, fmt, weights):
    """Report every problem in each IR FILE as FILE:LINE: severity: message."""
    from .model import validate

    if weights and len(files) > 1:
        raise click.UsageError("--weights goes with a single model file")
    all_diags = []
    for f in files:
        diags = validate(f, weights)
        if strict:
            for d in diags:
                d.severity = "error"
        all_diags.extend(diags)
    errors, warnings = _diag_counts(all_diags)
    if fmt == "json":
        click.echo(json.dumps({"files": list(files), "errors": errors, "warnings": warnings,
                               "diagnostics": [d.as_dict() for d in all_diags]}, indent=2))
    else:
        for d in all_diags:
            click.echo(str(d))
        n = len(files)
        click.echo(f"{n} file{'s' if n != 1 else ''}: {errors} error{'s' if errors != 1 else ''}, "
                   f"{warnings} warning{'s' if warnings != 1 else ''}")
    ctx.exit(1 if errors else 0)


@cli.command("info")
@click.argument("model", type=click.Path(dir_okay=False))
@click.pass_context
def info_cmd(ctx, model):
    """Inputs, outputs, op counts by type and version, and opsets used."""
    from collections import Counter

    from .model import read_model

    def go():
        m = read_model(model)
        doc = m.program.doc
        click.echo(f"model: {model} (IR v{doc.version}, {len(doc.layers)} layers)")
        click.echo("inputs:")
        for i in m.inputs:
            click.echo(f"  {i}")
        click.echo("outputs:")
        for o in m.outputs:
            click.echo(f"  {o}")
        counts = Counter(f"{n.op.label}" for n in m.program.nodes.values() if n.op is not None)
        click.echo("ops:")
        for label, c in sorted(counts.items()):
            click.echo(f"  {label:32s} {c}")
        opsets = sorted({layer.version for layer in doc.layers if layer.version},
                        key=lambda v: (len(v), v))
        click.echo(f"opsets: {', '.join(opsets)}")

    _guard(ctx, go)


@cli.command("ops")
@click.option("--markdown", is_flag=True, help="Print the README's op table.")
def ops_cmd(markdown):
    """List the supported ops and versions."""
    click.echo(ops_table(markdown))


def ops_table(markdown: bool = False) -> str:
    from . import ops  # noqa: F401
    from .registry import all_ops

    by_type: dict[str, list] = {}
    for op in all_ops():
        by_type.setdefault((op.category or "other", op.type), []).append(op)
    lines = []
    if markdown:
        lines += ["| category | op | versions |", "|---|---|---|"]
    for (category, name), versions in sorted(by_type.items(), key=lambda kv: (kv[0][0], kv[0][1].lower())):
        labels = ", ".join(o.label for o in versions)
        lines.append(f"| {category} | {name} | {labels} |" if markdown else
                     f"{category:16s} {name:28s} {labels}")
    return "\n".join(lines)


def main(argv=None):
    try:
        cli.main(args=argv, prog_name="irrun", standalone_mode=True)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)
