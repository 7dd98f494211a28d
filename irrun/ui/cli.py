"""The command line: `irrun MODEL.xml --inputs X.npz` runs a model; subcommands check and inspect."""
from __future__ import annotations

import json
import os
import re
import sys

import click

from ..errors import Diagnostic, FeedError, IrrunError, ModelError

# NumPy, the feeds (.npz reading and writing) and the model machinery are imported inside
# the commands that use them: `irrun --help` and `irrun ops` need none of them.


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """Text with terminal control characters escaped (`\x1b` for ESC, ...): a layer or npz
    member name cannot move the cursor, retitle the window or hide what follows."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _echo(message="", **kwargs):
    click.echo(printable(str(message)), **kwargs)


class Interrupted(BaseException):
    """Ctrl-C: raised by main()'s SIGINT handler. Not a KeyboardInterrupt, so click does not
    turn it into "Aborted!" (exit 1), and no `except Exception` on the way swallows it."""


class _Fail(click.ClickException):
    """One or more compiler-style lines on stderr, exit 1, no traceback."""

    def show(self, file=None):
        _echo(self.message, err=True)


def _fail_from(e: IrrunError):
    if isinstance(e, ModelError):
        # The same lines `irrun validate` prints (warnings too: they often explain an error).
        return _Fail("\n".join(str(d) for d in e.diagnostics))
    return _Fail(str(e))


class RunByDefault(click.Group):
    """A group whose first argument may be a model file: `irrun M.xml ...` means `irrun run M.xml ...`."""


    def parse_args(self, ctx, args):
        rest = list(args)
        # Group options that take a value (--extension FILE): skip the value too.
        valued = {name for p in self.params if isinstance(p, click.Option) and not p.is_flag
                  and not p.count for name in p.opts + p.secondary_opts}
        i = 0
        while i < len(rest) and rest[i].startswith("-") and rest[i] not in ("--help", "-h"):
            i += 2 if rest[i] in valued else 1
        if i < len(rest) and rest[i] not in self.commands and rest[i] not in ("--help", "-h"):
            word = rest[i]
            if not os.path.exists(word) and "." not in os.path.basename(word):
                # `irrun valdate m.xml`: a misspelt subcommand, not a model file.
                import difflib

                close = difflib.get_close_matches(word, list(self.commands), n=1, cutoff=0.6)
                if close:
                    raise click.UsageError(f"no command '{word}'; did you mean '{close[0]}'? "
                                           f"(commands: {', '.join(sorted(self.commands))})",
                                           ctx)
            rest.insert(i, "run")
        return super().parse_args(ctx, rest)


def _set_threads(ctx, param, value):
    # IRRUN_THREADS is irrun's own setting, read when a load or run starts (config.pinned):
    # the option sets it for this process, and for the processes it starts (Dask workers).
    if value is not None:
        os.environ["IRRUN_THREADS"] = str(value)
    return value


def threads_option(f):
    """--threads N, on the group and on every command that runs a model."""
    return click.option("--threads", type=click.IntRange(min=1), metavar="N",
                        expose_value=False, callback=_set_threads, is_eager=True,
                        help="Use at most N threads at once, BLAS's included (1: fully serial;"
                             " default: IRRUN_THREADS, else the CPUs this process may use)."
                        )(f)



def random_input_options(f):
    """--random-inputs, --shape, --seed and --val-range, as `irrun run` takes them."""
    for option in reversed((
            click.option("--random-inputs", "random_inputs", is_flag=True,
                         help="Run on random inputs, seeded, valid where the model says what "
                              "is valid (indices in range, masks of ones)."),
            click.option("--shape", "shapes", multiple=True, metavar="NAME[D,D,...]",
                         help="With --random-inputs: an input's shape, e.g. image[1,3,224,224] "
                              "(as benchmark_app's -data_shape); [1,3,224,224] alone for a "
                              "one-input model."),
            click.option("--seed", type=int, default=0, show_default=True,
                         help="With --random-inputs: the random seed."),
            click.option("--val-range", "val_ranges", multiple=True, metavar="[NAME:]LO,HI",
                         help="With --random-inputs: the values of input NAME (of every input "
                              "without NAME) in [LO, HI]; repeatable."))):
        f = option(f)
    return f



@click.group(cls=RunByDefault, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="irrun")
@click.option("--traceback", is_flag=True, help="Show the Python stack on errors (debugging).")
@click.option("--extension", "extensions", multiple=True, type=click.Path(dir_okay=False),
              help="Import a Python file of custom ops (@irrun.register) first; repeatable.")
@threads_option
@click.pass_context
def cli(ctx, traceback, extensions):
    """Run, validate and inspect OpenVINO IR models (model.xml + model.bin).

    \b
    irrun MODEL.xml --inputs INPUTS.npz [--output OUT.npz]
    irrun validate MODEL.xml...
    irrun info MODEL.xml
    irrun ops
    irrun graph MODEL.xml -o model.svg|model.dot|model.html
    irrun compare MODEL.xml [--inputs INPUTS.npz] [--html report.html]
    irrun batch MODEL.xml SHARD... --out DIR [--scheduler threads|processes|ADDRESS]
    irrun extract MODEL.xml --outputs L[:PORT] [--inputs L[:PORT]] -o sub.xml
    irrun reduce MODEL.xml -i x.npz --until diverges|openvino-fails -o repro/
    irrun generate FOLDER "prompt" [--max-new-tokens N]     (an OpenVINO GenAI LLM folder)
    irrun tokenize FOLDER "text" / irrun detokenize FOLDER IDS...
    """
    ctx.ensure_object(dict)
    ctx.obj["traceback"] = traceback
    ctx.obj["extension_paths"] = tuple(os.path.abspath(p) for p in extensions)
    _check_config()
    _load_extensions(ctx, extensions)


def _check_config():
    """A bad IRRUN_* setting is one usage error (exit 2), not an error at every layer."""
    from ..config import config
    from ..errors import ConfigError

    try:
        config()
    except ConfigError as e:
        raise click.UsageError(e.message) from None


def _load_extensions(ctx, paths):
    from ..ir.registry import load_extension

    for path in paths:
        _guard(ctx, load_extension, path)


def _guard(ctx, fn, *args, hint: str | None = None, **kwargs):
    """fn(*args, **kwargs), its errors one line each (`hint` added to a layer's error)."""
    try:
        return fn(*args, **kwargs)
    except IrrunError as e:
        if hint and e.diagnostic.layer_name is not None:
            e.diagnostic.message += " " + hint
            e.args = (e.diagnostic.message,)
        if ctx.find_root().obj.get("traceback"):
            raise
        raise _fail_from(e) from None
    except (click.ClickException, click.exceptions.Exit, KeyboardInterrupt, BrokenPipeError):
        raise
    except Exception as e:   # an irrun bug: still one line, the stack only on request
        if ctx.find_root().obj.get("traceback"):
            raise
        ordinary = _ordinary_error(e)
        if ordinary is not None:
            raise _Fail(ordinary) from None
        raise _Fail(f"error: internal error: {type(e).__name__}: {e} "
                    "(an irrun bug; --traceback shows where)") from None


def _ordinary_error(e: Exception) -> str | None:
    """The line for a failure of the machine rather than of irrun: I/O, memory."""
    if isinstance(e, OSError):
        where = e.filename if e.filename is not None else "irrun"
        return f"{where}: error: {e.strerror or e}"
    if isinstance(e, MemoryError) or (isinstance(e, ValueError) and (
            "array is too big" in str(e) or "Maximum allowed size exceeded" in str(e))):
        return (f"error: out of memory ({e}); IRRUN_MAX_BYTES sets the budget irrun checks "
                "before allocating") if str(e) else "error: out of memory"
    return None


def _preview(a) -> str:
    import numpy as np

    with np.printoptions(threshold=20, edgeitems=3, precision=5, linewidth=100):
        return np.array2string(a, prefix="  ")


@cli.command("run")
@click.argument("model", type=click.Path())
@click.option("--inputs", "-i", "inputs_path", type=click.Path(dir_okay=False),
              help="An .npz of input arrays keyed by input name (or a .npy for a model with "
                   "one input).")
@random_input_options
@click.option("--output", "-o", "output_path", type=click.Path(dir_okay=False),
              help="Write the outputs to this .npz, keyed by output name.")
@click.option("--weights", "-w", type=click.Path(dir_okay=False),
              help="The .bin file (default: beside MODEL with the same stem).")
@click.option("--no-mmap", "no_mmap", is_flag=True,
              help="Read the .bin into memory instead of mapping it (safe if it may change).")
@click.option("--profile", is_flag=True,
              help="After the run, print each layer's time (slowest first) and totals per op type.")
@click.option("--repeat", "-n", type=click.IntRange(min=1), default=1, show_default=True,
              metavar="N", help="Run N times and report the best and median wall time; with "
                                "--profile, each layer's best time.")
@click.option("--dump", "dump_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Write every intermediate tensor to DIR as <layer>.<port>.npy, plus index.json.")
@click.option("--dump-layers", "dump_patterns", multiple=True, metavar="PATTERN",
              help="With --dump: only layers whose name matches this glob (repeatable).")
@click.option("-v", "--verbose", count=True,
              help="Trace each layer as it runs on stderr; -vv adds Consts, inputs and values.")
@click.option("--check-nan", is_flag=True,
              help="Stop at the first layer that produces NaN or Inf and name it (exit 1).")
@click.option("--until", metavar="LAYER", help="Run only up to LAYER and output its outputs.")
@click.option("--steps", type=click.IntRange(min=1), metavar="N",
              help="Run a stateful model N steps in one session (variables kept): an input "
                   "array with one more dim than the input is a sequence, step k gets its [k]; "
                   "other arrays go to every step. --output stacks each output's steps on a "
                   "new axis 0.")
@click.option("--loop-back", "loop_back", multiple=True, metavar="OUT=IN",
              help="With --steps: from step 1 on, input IN is output OUT of the step before.")
@click.option("--extension", "extensions", multiple=True, type=click.Path(dir_okay=False),
              help="Import a Python file of custom ops (@irrun.register) first; repeatable.")
@threads_option
@click.pass_context
def run_cmd(ctx, model, inputs_path, random_inputs, shapes, seed, val_ranges, output_path,
            weights, no_mmap, profile, repeat, dump_dir, dump_patterns, verbose, check_nan, until, steps,
            loop_back, extensions):
    """Run MODEL on INPUTS and print or save the outputs."""
    import time

    import numpy as np

    from ..run import inspect
    from ..run.feed import check_output_path, load_npy, load_npz, output_clashes, save_npz
    from ..run.model import read_model

    if dump_patterns and not dump_dir:
        raise click.UsageError("--dump-layers needs --dump DIR")
    if random_inputs and inputs_path:
        raise click.UsageError("--random-inputs and --inputs exclude each other")
    if (shapes or val_ranges) and not random_inputs:
        raise click.UsageError(f"{'--shape' if shapes else '--val-range'} goes with "
                               "--random-inputs")
    shape_of_input = _parse_shapes(shapes)
    if output_path and not os.path.splitext(os.path.basename(output_path))[1]:
        # `-o out` writes out.npz (as np.savez would name it).
        output_path += ".npz"
    elif output_path and os.path.splitext(output_path)[1].lower() != ".npz":
        # Written at exactly the path given (a script may want that name), but said: an .npz
        # under another suffix is most often a slip.
        _echo(f"warning: --output writes an .npz archive; '{output_path}' has another suffix "
              f"(did you mean '{os.path.splitext(output_path)[0]}.npz'?)", err=True)
    if loop_back and not steps:
        raise click.UsageError("--loop-back needs --steps N")
    if steps and (until or dump_dir or repeat > 1):
        raise click.UsageError("--steps does not combine with --until, --dump or --repeat")
    pairs = {}
    for item in loop_back:
        out, sep, inp = item.partition("=")
        if not sep or not out or not inp:
            raise click.UsageError(f"--loop-back takes OUT=IN (an output and an input name), "
                                   f"got '{item}'")
        pairs[out] = inp
    _load_extensions(ctx, extensions)

    def go():
        m = read_model(model, weights, mmap=not no_mmap)
        if dump_patterns:
            import fnmatch

            def layer_names(program, prefix=""):
                # Body layers are named <layer>/<body>/<body layer>, as --dump writes them.
                for n in program.nodes.values():
                    yield prefix + n.layer.name
                    for body in getattr(n, "bodies", None) or ():
                        if body is not None and body.doc is not None:
                            role = body.doc.name.rsplit("/", 1)[-1]
                            yield from layer_names(body, f"{prefix}{n.layer.name}/{role}/")

            names = list(layer_names(m.program))
            for pattern in dump_patterns:
                if not any(fnmatch.fnmatchcase(n, pattern) for n in names):
                    raise FeedError(f"--dump-layers '{pattern}' matches no layer"
                                    f"{m._nearest(pattern)}", file=model)
        from ..run.feed import sample_inputs_for

        sample = sample_inputs_for(model)
        path = None if random_inputs else inputs_path or sample
        if random_inputs:
            feed = generate_feed(m, model, seed, shape_of_input, val_ranges, sample)
        elif path is not None and path.lower().endswith(".npy"):
            feed = load_npy(path, m.inputs)
        elif path is None:
            if not m.inputs:
                feed = {}
            else:
                needed = "; ".join(str(i) for i in m.inputs)
                raise FeedError(f"no --inputs given and no sample inputs beside the model; "
                                f"the model needs: {needed}. Give them in an .npz keyed by "
                                "these names (--inputs FILE), or run on random inputs with "
                                "--random-inputs", file=model)
        else:
            feed = load_npz(path, m.inputs)   # names, sizes, headers checked before data
        if output_path:
            # Before the run: a model that takes an hour must not fail at the last step.
            clash = output_clashes(m.output_names(until))
            if clash:
                raise FeedError(f"two outputs are named {', '.join(repr(c) for c in clash)}; "
                                f"an .npz keeps one array per name, so --output would lose "
                                "one (print them without --output, or use --until)", file=model)
            check_output_path(output_path)
        err = sys.stderr     # read now: CliRunner swaps it while a command runs
        tracer = inspect.Tracer(lambda line: _echo(line, err=True), verbose, m.program) \
            if verbose else None
        dumper = inspect.Dumper(dump_dir, dump_patterns) if dump_dir else None
        profiler = inspect.Profiler(per_body=verbose >= 2) if profile else None
        # The trace already shows progress; a bar would garble it.
        progress = None if verbose else inspect.Progress(
            len(m.run_order(until, ops_only=True)), err)
        nan_check = inspect.FiniteCheck(model) if check_nan else None
        # Dump and trace before the NaN check, so the offending layer is in both.
        listener = inspect.chain(tracer, dumper, profiler, progress, nan_check)
        start = time.perf_counter()
        if steps:
            _run_session(m, feed, steps, pairs, listener, output_path, progress)
            return
        try:
            outputs = m.infer(feed, until=until, listener=listener)
        finally:
            walls = [time.perf_counter() - start]
            if progress is not None:
                progress.close()
            if dumper is not None:
                dumper.close()
                n = len(dumper.entries)
                if not isinstance(sys.exc_info()[1], Interrupted):   # Ctrl-C: one line only
                    _echo(f"dumped {n} tensor{'s' if n != 1 else ''} to {dump_dir} "
                          f"(index.json lists them)", err=True)
        # The first run pays first-call costs (numba loading its compiled loop, caches
        # warming up); later runs are timed alone, with only the profiler listening.
        for _ in range(repeat - 1):
            start = time.perf_counter()
            m.infer(feed, until=until, listener=profiler)
            walls.append(time.perf_counter() - start)
        if output_path:
            # atomic; any name (np.savez takes keywords)
            save_npz(output_path, outputs, _output_layers(m, until))
            _echo(f"wrote {len(outputs)} output{'s' if len(outputs) != 1 else ''} "
                       f"to {output_path}")
        else:
            for name, a in outputs.items():
                kind = "string" if a.dtype == object else a.dtype
                _echo(f"{name}: {kind}{list(a.shape)}")
                _echo("  " + _preview(a))
        if profiler is not None:
            _echo("")
            _echo(inspect.profile_table(profiler.rows(), min(walls), runs=repeat))
        if repeat > 1:
            _echo(f"{repeat} runs: best {min(walls) * 1e3:.3f} ms, median "
                       f"{float(np.median(walls)) * 1e3:.3f} ms, first {walls[0] * 1e3:.3f} ms",
                       err=True)

    _guard(ctx, go, hint=GENERATED_HINT if random_inputs else None)


# Said after an error on a layer when the inputs were made up: their shapes or values may be
# what the model cannot take.
GENERATED_HINT = ("(the inputs were generated: give their shapes with --shape NAME[D,D,...] "
                  "and their values with --val-range NAME:LO,HI, or real ones with --inputs)")


def generate_feed(m, model, seed, shapes, val_ranges, sample=None) -> dict:
    """Random inputs for the model (irrun.run.inputs), each input's rule said on stderr."""
    from ..run.inputs import ValueRange, generated_inputs

    shapes = dict(shapes)
    if None in shapes:
        if len(m.inputs) != 1:
            raise click.UsageError("--shape without a name is for a model with one "
                                   f"input; this one has {len(m.inputs)}")
        shapes[m.inputs[0].name] = shapes.pop(None)
    ranges = [ValueRange.parse(v) for v in val_ranges]
    feed, notes = generated_inputs(m, seed, shapes, ranges)
    why = (f"random inputs requested; sample inputs exist at {sample}" if sample else
           "no sample inputs beside the model")
    _echo(f"inputs: generated ({why}): random, seed {seed}", err=True)
    for note in notes:
        _echo(f"  {printable(note)}", err=True)
    return feed

def _parse_shapes(items) -> dict:
    """--shape image[1,3,224,224] -> {"image": [1, 3, 224, 224]}; a bare [..] -> {None: ...}."""
    import re

    shapes = {}
    for item in items:
        m = re.fullmatch(r"\s*(.*?)\s*\[\s*([0-9,\s]*)\]\s*", item)
        if m is None or not all(p.strip().isdigit() for p in m.group(2).split(",") if p.strip()):
            raise click.BadParameter(f"'{item}' is not NAME[D,D,...] (e.g. image[1,3,224,224])",
                                     param_hint="--shape")
        dims = [int(p) for p in m.group(2).split(",") if p.strip()]
        shapes[m.group(1) or None] = dims
    return shapes


def _output_layers(m, until=None):
    """save_npz's `where`: an output's name (or NAME.stepK of --steps) -> the location of the
    layer it comes from (its Result; with --until, the layer)."""
    targets, names = m._targets(until)
    sources = m.program.results if until is None else [m.program.nodes[t[0]] for t in targets]
    layers = {}
    for name, node in zip(names, sources):
        layers.setdefault(name, node.layer)

    def where(name: str) -> dict:
        layer = layers.get(name) or layers.get(name.rsplit(".step", 1)[0])
        if layer is None:
            return {}
        return dict(file=m.path, line=layer.line, layer_id=layer.id, layer_name=layer.name,
                    op=layer.op_label)
    return where


def _run_session(m, feed, steps, pairs, listener, output_path, progress):
    """--steps: N runs of one session; each step's outputs printed, or all of them saved."""
    import numpy as np

    from ..run.feed import save_npz

    try:
        results = m.create_session().run_sequence(feed, steps, pairs, listener)
    finally:
        if progress is not None:
            progress.close()
    if output_path:
        stacked = {}
        for name in results[0]:
            shapes = {r[name].shape for r in results}
            if len(shapes) == 1:
                stacked[name] = np.stack([r[name] for r in results])
            else:   # steps of different shapes cannot stack: one array per step
                stacked.update({f"{name}.step{k}": r[name] for k, r in enumerate(results)})
        save_npz(output_path, stacked, _output_layers(m))
        _echo(f"wrote {len(results[0])} output{'s' if len(results[0]) != 1 else ''} of "
                   f"{steps} steps to {output_path}")
        return
    for k, outputs in enumerate(results):
        _echo(f"step {k}:")
        for name, a in outputs.items():
            _echo(f"  {name}: {a.dtype}{list(a.shape)}")
            _echo("    " + _preview(a))


@cli.command("graph")
@click.argument("model", type=click.Path())
@click.option("--output", "-o", "output_path", type=click.Path(dir_okay=False),
              help="model.svg, model.dot or model.html (the suffix picks the format); "
                   "default: DOT on stdout.")
@click.option("--format", "fmt", type=click.Choice(["dot", "svg", "html"]),
              help="The format, when the output's suffix does not say.")
@click.option("--layout", "layout_engine", type=click.Choice(["auto", "dot", "builtin"]),
              default="auto", show_default=True,
              help="SVG/HTML layout: Graphviz's dot (when installed) or irrun's own.")
@click.option("--weights", "-w", type=click.Path(dir_okay=False),
              help="The .bin file (default: beside MODEL with the same stem).")
@click.option("--inputs", "-i", "inputs_path", type=click.Path(dir_okay=False),
              help="HTML: run the model on these inputs and show each layer's time share as "
                   "its colour, its output statistics, and NaN/Inf flagged.")
@click.option("--compare", "with_compare", is_flag=True,
              help="HTML: also run `irrun compare` (OpenVINO) and colour each layer by its "
                   "agreement.")
@threads_option
@click.pass_context
def graph_cmd(ctx, model, output_path, fmt, layout_engine, weights, inputs_path, with_compare):
    """Draw MODEL's layer graph as DOT, SVG or a self-contained HTML page.

    Layers show type-version and output shapes, edges dtype and shape; colours follow the
    op category, and layers that fail validation are outlined in red.

    An invalid model is drawn as far as it can be read.
    """
    from ..tools import drawing

    if fmt is None:
        suffix = os.path.splitext(output_path)[1].lower() if output_path else ".dot"
        fmt = drawing.FORMATS.get(suffix)
        if fmt is None:
            raise click.UsageError(f"cannot tell the format from '{output_path}': use a .svg, "
                                   ".dot or .html name, or --format")

    if (inputs_path or with_compare) and fmt != "html":
        raise click.UsageError("--inputs and --compare go with an HTML page (-o model.html)")

    def go():
        program = drawing.load_for_drawing(model, weights)
        if fmt == "html":
            # The interactive viewer (irrun/ui/viewer.py); its own layout, whatever --layout.
            from .viewer import run_stats, to_viewer_html

            run = None
            if inputs_path:
                from ..run.feed import load_npz
                from ..run.model import read_model

                m = read_model(model, weights)
                run = run_stats(m, load_npz(inputs_path, m.inputs))
            agreement = None
            if with_compare:
                from ..tools.comparing import compare
                from .viewer import agreement_of

                agreement = agreement_of(compare(model, inputs_path, weights=weights))
            text = to_viewer_html(program, run, agreement)
        try:
            if fmt != "html":
                text = drawing.render(program, fmt, layout_engine)
        except RuntimeError as e:   # dot missing or failing
            raise _Fail(f"{model}: error: {e}") from None
        if not output_path:
            _echo(text, nl=False)
            return
        with open(output_path, "w", encoding="utf-8") as f:
            f.write(text)
        errors = [d for d in program.diagnostics if d.severity == "error"]
        marked = len({d.layer_id for d in errors if d.layer_id is not None})
        note = (f"; {len(errors)} error{'s' if len(errors) != 1 else ''}, {marked} layer"
                f"{'s' if marked != 1 else ''} highlighted; `irrun validate` lists them"
                if errors else "")
        _echo(f"wrote {output_path} ({len(program.doc.layers)} layers{note})")

    _guard(ctx, go)


@cli.command("compare")
@click.argument("model", type=click.Path())
@click.option("--inputs", "-i", "inputs_path", type=click.Path(dir_okay=False),
              help="An .npz of inputs (default: the sample inputs beside MODEL, else random "
                   "ones, seeded, as benchmark_app makes them).")
@click.option("--device", default="CPU", show_default=True, help="OpenVINO device to compare with.")
@click.option("--layers", default="all", show_default=True, metavar="all|outputs|PATTERN",
              help="Compare every op's every output, only the model outputs, or the layers "
                   "whose name matches a glob (and the outputs).")
@click.option("--rtol", type=float, help="Relative tolerance for every float tensor "
                                         "(default: per element type, see the README).")
@click.option("--atol", type=float, help="Absolute tolerance for every float tensor.")
@click.option("--precision", type=click.Choice(["f32", "as-compiled"]), default="f32",
              show_default=True, help="OpenVINO's inference precision: f32, or the device's "
                                      "default (f32 tensors are then held to its tolerance).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Report format.")
@click.option("--html", "html_path", type=click.Path(dir_okay=False),
              help="Also write the graph picture, layers coloured by agreement, to this page.")
@click.option("--reference", "reference_path", type=click.Path(dir_okay=False),
              help="Compare with the values in this .npz (output names, tensor names, "
                   "layer:port or layer names as keys) instead of running OpenVINO.")
@click.option("--weights", "-w", type=click.Path(dir_okay=False),
              help="The .bin file (default: beside MODEL with the same stem).")
@random_input_options
@threads_option
@click.pass_context
def compare_cmd(ctx, model, inputs_path, device, layers, rtol, atol, precision, fmt, html_path,
                reference_path, weights, random_inputs, shapes, seed, val_ranges):
    """Run MODEL in irrun and in OpenVINO, tensor by tensor; name the first divergent layer.

    Exit 0 when every compared tensor agrees, 1 when one does not (or on an error).
    """
    from ..tools.comparing import compare

    if random_inputs and inputs_path:
        raise click.UsageError("--random-inputs and --inputs exclude each other")
    if (shapes or val_ranges) and not random_inputs:
        raise click.UsageError(f"{'--shape' if shapes else '--val-range'} goes with "
                               "--random-inputs")

    def go():
        feed = inputs_path
        if random_inputs:
            from ..run.feed import sample_inputs_for
            from ..run.model import read_model

            feed = generate_feed(read_model(model, weights), model, seed, _parse_shapes(shapes),
                                 val_ranges, sample_inputs_for(model))
        result = compare(model, feed, reference=reference_path, device=device,
                         layers=layers, rtol=rtol, atol=atol, precision=precision,
                         weights=weights)
        if html_path:
            with open(html_path, "w", encoding="utf-8") as f:
                f.write(result.html())
        if fmt == "json":
            _echo(result.to_json())
        else:
            _echo(result.report())
            if html_path:
                _echo(f"wrote {html_path}")
        return result

    result = _guard(ctx, go, hint=GENERATED_HINT if random_inputs else None)
    ctx.exit(0 if result.ok else 1)



def _split_list(values) -> list[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


@cli.command("extract")
@click.argument("model", type=click.Path())
@click.option("--outputs", "outputs", multiple=True, required=True, metavar="L[:PORT],...",
              help="The tensors the subgraph computes: layer names (and output port "
                   "positions) or tensor names; comma-separated or repeated.")
@click.option("--inputs", "cuts", multiple=True, metavar="L[:PORT],...",
              help="Cut points: each becomes a Parameter of the right type and shape.")
@click.option("--inputs-data", "inputs_data", type=click.Path(dir_okay=False),
              help="Inputs of the full model: the values at the cut are computed with them and "
                   "saved beside the subgraph as <stem>.inputs.npz.")
@click.option("-o", "--output", "output_path", required=True, type=click.Path(dir_okay=False),
              help="The subgraph's .xml (its .bin is written beside it).")
@click.pass_context
def extract_cmd(ctx, model, outputs, cuts, inputs_data, output_path):
    """Write the subgraph of MODEL that computes --outputs from --inputs as a new IR."""
    from ..run.feed import load_npz, save_npz
    from ..run.model import read_model
    from ..tools.surgery import extract

    def go():
        m = read_model(model)
        feed = load_npz(inputs_data, m.inputs) if inputs_data else None
        xml, values = extract(m, _split_list(outputs), _split_list(cuts), output_path, feed)
        click.echo(f"wrote {xml} and {os.path.splitext(xml)[0]}.bin")
        if values is not None:
            path = os.path.splitext(xml)[0] + ".inputs.npz"
            save_npz(path, values)
            click.echo(f"wrote {path} ({', '.join(values)})")

    _guard(ctx, go)


@cli.command("reduce")
@click.argument("model", type=click.Path())
@click.option("--inputs", "-i", "inputs_path", type=click.Path(dir_okay=False),
              help="Inputs of MODEL (default: the sample inputs beside it).")
@click.option("--until", "until", type=click.Choice(["diverges", "openvino-fails"]),
              help="The problem to keep: irrun and OpenVINO disagree on the outputs, or "
                   "OpenVINO fails to compile or run the model (run in a subprocess).")
@click.option("--command", "command",
              help="Instead of --until: a shell command that fails (exits non-zero) while the "
                   "problem is there; {model} and {inputs} are replaced by the candidate's "
                   "paths.")
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for the reproducer: model.xml/.bin, inputs.npz, outputs, "
                   "README.txt.")
@click.option("--rtol", type=float, help="With --until diverges: the relative tolerance.")
@click.option("--atol", type=float, help="With --until diverges: the absolute tolerance.")
@click.option("--quiet", "-q", is_flag=True, help="Do not print each try.")
@threads_option
@click.pass_context
def reduce_cmd(ctx, model, inputs_path, until, command, out_dir, rtol, atol, quiet):
    """Shrink MODEL to a small subgraph that still shows a problem, and write a reproducer."""
    from ..run.feed import load_npz
    from ..run.model import read_model
    from ..tools.surgery import Condition, reduce, write_repro

    if (until is None) == (command is None):
        raise click.UsageError("give exactly one of --until diverges|openvino-fails and "
                               "--command 'CMD {model}'")
    from ..run.feed import sample_inputs_for

    inputs_path = inputs_path or sample_inputs_for(model)
    if inputs_path is None:
        raise click.UsageError("no --inputs and no inputs.npz beside the model")

    def go():
        m = read_model(model)
        feed = load_npz(inputs_path, m.inputs)
        condition = Condition(until or "command", command, rtol, atol)
        log = None if quiet else (lambda msg: click.echo(msg, err=True))
        reduced = reduce(m, feed, condition, out_dir, log=log)
        shown = (f"irrun compare {reduced.xml} --inputs {reduced.inputs} --layers outputs"
                 if until == "diverges" else
                 f"python -c \"import numpy as np, openvino as ov; c = ov.Core().compile_model("
                 f"'{reduced.xml}', 'CPU'); c({{k: v for k, v in np.load('{reduced.inputs}')"
                 f".items()}})\"" if until == "openvino-fails" else
                 command.replace("{model}", reduced.xml).replace("{inputs}", reduced.inputs))
        write_repro(out_dir, reduced, shown)
        folder = os.path.normpath(out_dir)
        click.echo(f"wrote {folder}/: {reduced.layers} op layer{'s' if reduced.layers != 1 else ''}"
                   f" after {reduced.tries} tries (see {os.path.join(folder, 'README.txt')})")

    _guard(ctx, go)


@cli.command("batch")
@click.argument("model", type=click.Path())
@click.argument("shards", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for <shard>.npz outputs and manifest.json (made if missing).")
@click.option("--scheduler", default="threads", show_default=True,
              metavar="threads|processes|ADDRESS",
              help="A local Dask cluster of threads or processes, or the address of a running "
                   "dask.distributed scheduler (tcp://host:8786).")
@click.option("--workers", type=click.IntRange(min=1),
              help="Workers of the local cluster (default: the cores, at most 4).")
@click.option("--batch-axis", type=click.IntRange(min=0), default=0, show_default=True,
              help="The axis along which a Parquet shard's rows are stacked.")
@click.option("--retries", type=click.IntRange(min=0), default=2, show_default=True,
              help="How often a shard that failed for another reason than its input (an I/O "
                   "or memory error) is tried again before it is recorded as failed; one whose "
                   "input is at fault fails at once.")
@click.option("--segment-ids", "segment_ids", multiple=True, metavar="INPUT=COLUMN",
              help="Parquet: fill INPUT with the row index of each element of the list "
                   "column COLUMN (ragged inputs such as EmbeddingSegmentsSum's); repeatable.")
@click.option("--progress/--no-progress", default=None,
              help="A progress bar (default: when stderr is a terminal).")
@threads_option
@click.pass_context
def batch_cmd(ctx, model, shards, out_dir, scheduler, workers, batch_axis, retries, segment_ids,
              progress):
    """Score every SHARD (.npz of inputs, or .parquet) through MODEL on Dask.

    Outputs go to OUT/<shard>.npz, written atomically; OUT/manifest.json records each shard's
    status, time and input digest. Run the same command again to finish an interrupted batch:
    shards already done with the same digest are skipped. Exit 1 when a shard failed.
    """
    from ..tools.batching import batch

    mapping = {}
    for item in segment_ids:
        target, sep, column = item.partition("=")
        if not sep or not target or not column:
            raise click.BadParameter(f"'{item}' is not INPUT=COLUMN", param_hint="--segment-ids")
        mapping[target] = column
    show = sys.stderr.isatty() if progress is None else progress

    def go():
        bar = click.progressbar(length=len(shards), label="shards", file=sys.stderr) \
            if show else None
        try:
            if bar is not None:
                bar.__enter__()
            return batch(model, list(shards), out_dir, scheduler=scheduler, workers=workers,
                         batch_axis=batch_axis, retries=retries, segment_ids=mapping or None,
                         extensions=ctx.find_root().obj.get("extension_paths", ()),
                         on_result=(lambda name, entry: bar.update(1)) if bar else None)
        finally:
            if bar is not None:
                bar.__exit__(None, None, None)

    result = _guard(ctx, go)
    for name in result.failed:
        _echo(f"{name}: failed: {result.manifest['shards'][name].get('error')}", err=True)
    manifest = os.path.join(out_dir, "manifest.json")
    _echo(f"{len(shards)} shards: {len(result.done)} done, {len(result.skipped)} already "
               f"done, {len(result.failed)} failed; manifest: {manifest}")
    ctx.exit(0 if result.ok else 1)

def _diag_counts(diags):
    e = sum(d.severity == "error" for d in diags)
    w = sum(d.severity == "warning" for d in diags)
    return e, w


@cli.command("validate")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--strict", is_flag=True, help="Treat warnings as errors.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format.")
@click.option("--weights", "-w", type=click.Path(dir_okay=False),
              help="The .bin file (only with one model).")
@click.pass_context
def validate_cmd(ctx, files, strict, fmt, weights):
    """Report every problem in each IR FILE as FILE:LINE: severity: message."""
    from ..run.model import validate

    if weights and len(files) > 1:
        raise click.UsageError("--weights goes with a single model file")
    all_diags = []
    for f in files:
        try:
            diags = validate(f, weights)
        except Exception as e:   # an irrun bug: report it and go on with the other files
            if ctx.find_root().obj.get("traceback"):
                raise
            diags = [Diagnostic(f"internal error while validating: {type(e).__name__}: {e} "
                                "(an irrun bug; --traceback shows where)", "error", "internal", f)]
        if strict:
            for d in diags:
                d.severity = "error"
        all_diags.extend(diags)
    errors, warnings = _diag_counts(all_diags)
    if fmt == "json":
        _echo(json.dumps({"files": list(files), "errors": errors, "warnings": warnings,
                               "diagnostics": [d.as_dict() for d in all_diags]}, indent=2))
    else:
        for d in all_diags:
            _echo(str(d))
        n = len(files)
        _echo(f"{n} file{'s' if n != 1 else ''}: {errors} error{'s' if errors != 1 else ''}, "
                   f"{warnings} warning{'s' if warnings != 1 else ''}")
    ctx.exit(1 if errors else 0)


@cli.command("info")
@click.argument("model", type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format.")
@click.pass_context
def info_cmd(ctx, model, fmt):
    """Inputs, outputs, op counts by type and version, opsets, weights, and what wrote it."""

    def go():
        from ..tools.inspect_model import describe

        # Everything that can be read is shown, even for a model read_model refuses (an
        # unregistered op, a missing .bin); the problems are flagged after it.
        info = describe(model)
        if fmt == "json":
            import json

            _echo(json.dumps(info, indent=2))
            return
        more = f", {info['layers_in_bodies']} more inside bodies" \
            if info["layers_in_bodies"] else ""
        _echo(f"model: {model} (IR v{info['ir_version']}, {info['layers']} layers{more})")
        if info["name"]:
            _echo(f"name: {info['name']}")
        _echo("inputs:")
        for p in info["inputs"]:
            _echo(f"  {p['text']}")
        _echo("outputs:")
        for p in info["outputs"]:
            _echo(f"  {p['text']}")
        _echo("ops:")
        for label, c in info["ops"].items():
            _echo(f"  {label:32s} {c}")
        _echo(f"opsets: {', '.join(info['opsets'])}")
        weights = info["weights"]
        if weights["bytes"]:
            by_type = ", ".join(f"{et} {_size(b)}" for et, b in weights["by_element_type"].items())
            _echo(f"weights: {_size(weights['bytes'])} ({by_type}); "
                  f"{_count(weights['parameters'])} parameters")
        if info["rt_info"]:
            _echo("rt_info:")
            for key, value in info["rt_info"].items():
                _echo(f"  {key}: {value}")
        errors = info["problems"]
        if errors:
            _echo(f"problems: {len(errors)} error{'s' if len(errors) != 1 else ''} "
                  "(the model cannot run; `irrun validate` lists every one):")
            for d in errors[:5]:
                _echo(f"  {d}")
            if len(errors) > 5:
                _echo(f"  ... and {len(errors) - 5} more")

    _guard(ctx, go)


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _count(n: int) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f}{unit}"
    return str(n)


@cli.command("generate")
@click.argument("folder", type=click.Path(file_okay=False))
@click.argument("prompt")
@click.option("--max-new-tokens", "-n", type=click.IntRange(min=0), default=None,
              help="Tokens to generate at most (default: generation_config.json's, else 20).")
@click.option("--prompt-ids", is_flag=True,
              help="PROMPT is token ids (`1 309 379` or `1,309,379`), not text.")
@click.option("--ids", "show_ids", is_flag=True,
              help="After the text, print the generated ids and why generation stopped.")
@click.option("--sample", is_flag=True,
              help="Sample instead of greedy decoding (irrun's sampler: not GenAI's tokens).")
@click.option("--temperature", type=float, default=None, help="With --sample.")
@click.option("--top-k", type=click.IntRange(min=0), default=None, help="With --sample.")
@click.option("--top-p", type=float, default=None, help="With --sample.")
@click.option("--seed", type=int, default=0, show_default=True, help="With --sample.")
@click.option("--no-chat-template", is_flag=True,
              help="Tokenize the prompt as it is when the folder has a chat template.")
@threads_option
@click.pass_context
def generate_cmd(ctx, folder, prompt, max_new_tokens, prompt_ids, show_ids, sample, temperature,
                 top_k, top_p, seed, no_chat_template):
    """Generate text with an OpenVINO GenAI LLM folder (optimum-intel's export:
    openvino_model.xml, openvino_tokenizer.xml, openvino_detokenizer.xml, config.json), the
    text streamed to stdout as it comes. Greedy by default, as openvino_genai.LLMPipeline."""
    def go():
        from ..tools.genai import LLMPipeline

        options = {"seed": seed}
        if sample:
            options["do_sample"] = True
        for name, value in (("temperature", temperature), ("top_k", top_k), ("top_p", top_p)):
            if value is not None:
                options[name] = value
        if prompt_ids:
            text = prompt.replace(",", " ").split()
            if not text or not all(t.lstrip("-").isdigit() for t in text):
                raise click.BadParameter(f"'{prompt}' is not a list of token ids",
                                         param_hint="PROMPT")
            source = [int(t) for t in text]
        else:
            source = prompt
        pipe = LLMPipeline(folder)
        result = pipe.generate(source, max_new_tokens,
                               streamer=lambda piece: _echo(piece, nl=False),
                               apply_chat_template=False if no_chat_template else None,
                               **options)
        _echo()
        if show_ids:
            _echo(f"ids: {' '.join(map(str, result.ids))} ({result.finish_reason})")

    _guard(ctx, go)


@cli.command("tokenize")
@click.argument("folder", type=click.Path(file_okay=False))
@click.argument("text")
@click.pass_context
def tokenize_cmd(ctx, folder, text):
    """Print the token ids of TEXT with FOLDER's openvino_tokenizer.xml (special tokens
    added as the tokenizer says)."""
    def go():
        from ..tools.genai import LLMPipeline

        _echo(" ".join(map(str, LLMPipeline(folder).tokenize(text).tolist())))

    _guard(ctx, go)


@cli.command("detokenize")
@click.argument("folder", type=click.Path(file_okay=False))
@click.argument("ids", nargs=-1, required=True, type=int)
@click.pass_context
def detokenize_cmd(ctx, folder, ids):
    """Print the text of token IDS with FOLDER's openvino_detokenizer.xml (special tokens
    skipped; bytes that are not UTF-8 shown as U+FFFD)."""
    def go():
        from ..tools.genai import LLMPipeline

        _echo(LLMPipeline(folder).detokenize(ids))

    _guard(ctx, go)


@cli.command("ops")
@click.option("--markdown", is_flag=True, help="Print the README's op table.")
@click.option("--coverage", is_flag=True,
              help="Count the op versions of opsets 1-16 irrun has and list the missing ones.")
def ops_cmd(markdown, coverage):
    """List the supported ops and versions."""
    _echo(coverage_report() if coverage else ops_table(markdown))


def coverage_report() -> str:
    from ..ir.opset_table import TOTAL, coverage
    from ..ir.registry import REGISTRY

    have, missing = coverage({label for _, _, labels in REGISTRY.listing() for label in labels})
    lines = [f"{have} of {TOTAL} op versions of opsets 1-16"]
    if missing:
        lines.append(f"missing ({len(missing)}):")
        lines += [f"  {category:16s} {label}" for category, label in missing]
    return "\n".join(lines)


def ops_table(markdown: bool = False) -> str:
    from ..ir.registry import REGISTRY

    lines = []
    if markdown:
        lines += ["| category | op | versions |", "|---|---|---|"]
    for category, name, labels in sorted(REGISTRY.listing(), key=lambda r: (r[0], r[1].lower())):
        joined = ", ".join(labels)
        lines.append(f"| {category} | {name} | {joined} |" if markdown else
                     f"{category:16s} {name:28s} {joined}")
    return "\n".join(lines)


# `irrun explore`: Model Explorer, in its own package above irrun.tools (irrun/explore/).
from ..explore.command import explore_cmd  # noqa: E402

cli.add_command(explore_cmd)


def main(argv=None):
    """The console entry point: Ctrl-C exits 130 (128 + SIGINT) with one line on stderr;
    what was being written is removed (--output, --dump write to temporary or exclusive files)."""
    import signal

    def interrupted(signum, frame):
        raise Interrupted()

    if threading_main():
        signal.signal(signal.SIGINT, interrupted)
    if not isinstance(sys.stdout, _PipeGuard):
        sys.stdout = _PipeGuard(sys.stdout)
    try:
        cli.main(args=argv, prog_name="irrun", standalone_mode=True)
    except (Interrupted, KeyboardInterrupt):
        _echo("irrun: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        _quiet_pipe_exit()


class _PipeGuard:
    """sys.stdout, ending irrun quietly when the reader has gone (`irrun ... | head`) at
    whatever write or flush notices it, before click's own handler, which would exit 1."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            _quiet_pipe_exit()

    def flush(self):
        try:
            self._stream.flush()
        except BrokenPipeError:
            _quiet_pipe_exit()

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _quiet_pipe_exit():
    """`irrun ... | head`: the reader went away, which is a normal end: exit 0, quietly
    (without Python's complaint when it flushes stdout at exit). Status 0 whatever the size
    of the output: an output that fits the pipe's buffer never sees the closed pipe at all,
    so 141 (128 + SIGPIPE, as coreutils) could not be given consistently."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    sys.exit(0)


def threading_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
