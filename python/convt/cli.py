"""The ``convt`` command line.

    convt bench [options]        convt against PyTorch eager on this machine
    convt export-kernelbench ... a self-contained KernelBench solution (ModelNew) for a problem
    convt kernelbench-check ...  the KernelBench protocol for a problem and a solution

Run ``convt COMMAND --help`` for the options; see docs/bench.md and docs/kernelbench.md. ``main(argv)`` returns
the exit status instead of exiting, so the command can be driven from Python.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Any, Sequence

__all__ = ["build_parser", "main"]

_PROG = "convt"

_DTYPE_ALIASES = {"fp32": "fp32", "float32": "fp32", "float": "fp32",
                  "bf16": "bf16", "bfloat16": "bf16",
                  "fp16": "fp16", "float16": "fp16", "half": "fp16"}
_MATH_ALIASES = {"default": "default", "tf32": "default", "strict": "strict", "ieee": "strict"}
_DIRECTION_ALIASES = {"fwd": "fwd", "forward": "fwd", "fwd+bwd": "fwd+bwd",
                      "fwd_bwd": "fwd+bwd", "fwdbwd": "fwd+bwd"}
_PEAK_KEYS = ("fp32", "tf32", "bf16", "fp16")
# Width of the tables when the output goes to a file or a pipe.
_PIPE_WIDTH = 140


class UsageError(Exception):
    """A bad command line; reported as 'convt bench: error: ...' with status 2."""


# ---------------------------------------------------------------------------------------
# Parser
# ---------------------------------------------------------------------------------------

_BENCH_DESCRIPTION = """\
How much faster than PyTorch is convt on this machine, and how far from what the
hardware allows? For every case and mode, PyTorch eager and convt run on the same
tensors in the same process, interleaved, timed with CUDA events after warm-up (median
of --reps runs). Both are checked against a float64 oracle before and after timing; a
case whose convt error is above the budget is reported FAILED, not as a speedup, and
makes the exit status 1. Without a CUDA GPU, convt's CPU backend runs against PyTorch
on the CPU on a scaled-down suite, with no roofline figures."""

_BENCH_EPILOG = """\
shapes (--shape):
{grammar}

examples:
  convt bench                                   the kernelbench suite, fp32, TF32 allowed
  convt bench --dtype fp32,bf16 --math default,strict --direction fwd,fwd+bwd
  convt bench --case kb57,kb72 --reps 50 --json out.json --plot out.png
  convt bench --shape "1d N=16 C=512->256 in=8192 k=16 s=8 p=4"
  convt bench --suite my_shapes.json

exit status: 0 when every case ran and passed its error check, 1 when any case
FAILED (or could not run), 2 for a bad command line, suite file or setup."""


def _add_bench_parser(subparsers: Any) -> None:
    from convt.bench.suite import SHAPE_GRAMMAR

    p = subparsers.add_parser(
        "bench",
        help="convt against PyTorch eager: speedup, roofline, errors",
        description=_BENCH_DESCRIPTION,
        epilog=_BENCH_EPILOG.format(grammar="\n".join("  " + line for line in
                                                       SHAPE_GRAMMAR.splitlines())),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = p.add_argument_group("what to run")
    what.add_argument("--suite", metavar="NAME|FILE.json",
                      help="a built-in suite (kernelbench, the default) or a suite file "
                           "(schema: docs/bench.md)")
    what.add_argument("--shape", action="append", metavar="SHAPE", default=[],
                      help='one inline case, e.g. "2d N=8 C=64->64 in=512x512 k=3 s=2 p=1 '
                           'op=1" (repeatable; replaces the default suite)')
    what.add_argument("--case", action="append", metavar="ID", default=[],
                      help="run only these case ids (repeatable or comma-separated)")
    what.add_argument("--list", action="store_true",
                      help="list the cases that would run, then exit")
    mode = p.add_argument_group("modes (each takes several values, comma-separated or "
                                "repeated)")
    mode.add_argument("--dtype", action="append", metavar="fp32|bf16|fp16",
                      help="element type (default fp32)")
    mode.add_argument("--math", action="append", metavar="default|strict",
                      help="float32 precision: default lets both sides use TF32 "
                           "(torch.backends.cudnn.allow_tf32 = True), strict does not "
                           "(default: default)")
    mode.add_argument("--direction", action="append", metavar="fwd|fwd+bwd",
                      help="forward only, or forward and backward (default fwd)")
    timing = p.add_argument_group("measurement")
    timing.add_argument("--reps", type=int, default=20, metavar="N",
                        help="timed runs per side; the median is reported (default 20)")
    timing.add_argument("--warmup", type=int, default=5, metavar="N",
                        help="untimed runs per side first (default 5)")
    timing.add_argument("--device", default="auto", metavar="auto|cpu|cuda[:N]",
                        help="where to run (default auto: the GPU when there is one)")
    timing.add_argument("--no-flush-l2", dest="flush_l2", action="store_false",
                        help="do not evict the L2 cache before each timed call")
    timing.add_argument("--cudnn-benchmark", action="store_true",
                        help="let PyTorch pick cuDNN algorithms by trial "
                             "(torch.backends.cudnn.benchmark = True)")
    timing.add_argument("--peak", action="append", metavar="KEY=TFLOPS", default=[],
                        help="override a peak (keys fp32, tf32, bf16, fp16), e.g. "
                             "tf32=494.7")
    timing.add_argument("--cpu-max-mflop", type=float, default=50.0, metavar="M",
                        help="on the CPU, scale cases down to about M MFLOP (default 50; "
                             "0 runs them as given)")
    timing.add_argument("--seed", type=int, default=0, help="seed of inputs and weights")
    timing.add_argument("--impl", metavar="MODULE[:ATTR]",
                        help="benchmark another implementation with torch's "
                             "conv_transpose1d/2d/3d API instead of convt (e.g. "
                             "torch.nn.functional, to see the instrument's own spread)")
    out = p.add_argument_group("output")
    out.add_argument("--json", metavar="FILE", help="write every figure to FILE (JSON)")
    out.add_argument("--plot", metavar="FILE.png",
                     help="plot both sides as fractions of the roofline, one panel per mode")
    out.add_argument("--plot-scale", choices=("log", "linear"), default="log",
                     help="y axis of the plot (default log)")
    out.add_argument("-q", "--quiet", action="store_true", help="no progress display")
    p.set_defaults(func=_cmd_bench)


_EXPORT_DESCRIPTION = """\
Write a KernelBench solution for a KernelBench problem file: one Python file whose
ModelNew is the problem's Model with every nn.ConvTranspose1d/2d/3d computed by convt's
kernels (same constructor, parameter names, shapes and initialisation, same forward).
The file carries convt's C++/CUDA sources, compiles them with
torch.utils.cpp_extension.load_inline and imports nothing from convt: it runs where
PyTorch and nvcc are installed. A problem convt cannot export (no transposed
convolution, another padding mode) is reported and no file is written."""

_EXPORT_EPILOG = """\
examples:
  convt export-kernelbench 57_conv_transposed_2D__square_input__square_kernel.py -o solution.py
  convt export-kernelbench --all KernelBench/level1 -o solutions/
  convt export-kernelbench --from-suite kernelbench -o problems/    the 17 level-1 problems
  convt export-kernelbench --from-suite kernelbench --case kb57,kb72 -o problems/

exit status: 0 when every file was written, 1 when a problem could not be exported (in
--all mode: when any failed, or none had a transposed convolution), 2 for a bad command
line."""


def _add_export_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "export-kernelbench",
        help="a self-contained KernelBench solution (ModelNew) on convt's kernels",
        description=_EXPORT_DESCRIPTION,
        epilog=_EXPORT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("problem", nargs="?", metavar="PROBLEM.py", help="a KernelBench problem file")
    p.add_argument("--all", metavar="DIR", dest="all_dir",
                   help="export every problem file (*.py) of DIR into the directory -o; "
                        "problems without a transposed convolution are skipped")
    p.add_argument("--from-suite", metavar="NAME|FILE.json",
                   help="write KernelBench problem files for a benchmark suite (kernelbench: "
                        "the 17 level-1 transposed convolutions) into the directory -o")
    p.add_argument("--case", action="append", metavar="ID", default=[],
                   help="with --from-suite: only these case ids (repeatable or comma-separated)")
    p.add_argument("-o", "--output", required=True, metavar="PATH",
                   help="the solution file (a directory with --all or --from-suite)")
    p.add_argument("-q", "--quiet", action="store_true", help="print errors only")
    p.set_defaults(func=_cmd_export_kernelbench)


_CHECK_DESCRIPTION = """\
Run the KernelBench protocol for a problem file and a solution file (any ModelNew, not
only convt's): Model and ModelNew built from get_init_inputs() under the same seed (their
weights compared, nothing copied), several fresh get_inputs() trials compared with
torch.allclose at atol=rtol=1e-2 (PyTorch's default precision: cuDNN may use TF32) and
at 1e-4 with TF32 disabled, the gradients of both compared, and both timed with CUDA
events (interleaved, after warm-up, median, L2 evicted before each call, as convt bench
times). Needs a CUDA GPU."""

_CHECK_EPILOG = """\
examples:
  convt kernelbench-check problem.py solution.py
  convt kernelbench-check problem.py solution.py --math strict --trials 10 --json out.json

exit status: 0 when the solution is correct in every mode (and its weights match
Model's), 1 when it is not (a solution that does not load or build fails too), 2 when
the check cannot run (no GPU, an unusable problem file)."""


def _add_check_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "kernelbench-check",
        help="KernelBench's correctness and timing protocol for a problem and a solution",
        description=_CHECK_DESCRIPTION,
        epilog=_CHECK_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("problem", metavar="PROBLEM.py", help="the KernelBench problem file (Model)")
    p.add_argument("solution", metavar="SOLUTION.py", help="the solution file (ModelNew)")
    p.add_argument("--math", action="append", metavar="default|strict",
                   help="precision modes (default: both): default = PyTorch's (TF32 allowed "
                        "for cuDNN, tolerance 1e-2), strict = TF32 disabled (tolerance 1e-4)")
    p.add_argument("--trials", type=int, default=5, metavar="N",
                   help="correctness trials per mode, each with fresh inputs (default 5)")
    p.add_argument("--reps", type=int, default=20, metavar="N",
                   help="timed runs per model; the median is reported (default 20)")
    p.add_argument("--warmup", type=int, default=5, metavar="N",
                   help="untimed runs per model first (default 5)")
    p.add_argument("--seed", type=int, default=42, help="seed of the models and inputs (default 42)")
    p.add_argument("--device", default="cuda", metavar="cuda[:N]|cpu",
                   help="where to run (default cuda; cpu for small problems, wall-clock timing)")
    p.add_argument("--no-backward", dest="backward", action="store_false",
                   help="skip the gradient check")
    p.add_argument("--no-timing", dest="timing", action="store_false", help="skip the timing")
    p.add_argument("--no-flush-l2", dest="flush_l2", action="store_false",
                   help="do not evict the L2 cache before each timed call")
    p.add_argument("--json", metavar="FILE", help="write every figure to FILE (JSON)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=_cmd_kernelbench_check)


# Each entry adds one subcommand's parser and sets ``func``: a function
# ``func(args, *, argv, impl) -> exit status`` (``impl`` may be ignored).
_SUBCOMMANDS = [_add_bench_parser, _add_export_parser, _add_check_parser]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_PROG,
        description="convt: fast transposed convolution for PyTorch.",
    )
    subparsers = parser.add_subparsers(title="commands", dest="command", metavar="COMMAND")
    for add in _SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None, *, impl: Any = None) -> int:
    """Run the command line; returns the exit status.

    ``impl`` (Python callers only) replaces the implementation under test by any object
    with ``conv_transpose1d/2d/3d``.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, or a usage error argparse already reported
        return int(e.code or 0)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args.func(args, argv=argv, impl=impl))
    except UsageError as e:
        print(f"{_PROG} {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{_PROG} {args.command}: interrupted", file=sys.stderr)
        return 130


# ---------------------------------------------------------------------------------------
# convt bench
# ---------------------------------------------------------------------------------------

def _split(values: Sequence[str] | None, aliases: dict[str, str], default: str,
           what: str) -> list[str]:
    out: list[str] = []
    for entry in values or [default]:
        for part in entry.split(","):
            part = part.strip().lower()
            if not part:
                continue
            if part not in aliases:
                choices = ", ".join(sorted(set(aliases.values())))
                raise UsageError(f"unknown {what} {part!r} (choose from {choices})")
            if aliases[part] not in out:
                out.append(aliases[part])
    if not out:
        raise UsageError(f"no {what} given")
    return out


def _parse_peaks(values: Sequence[str]) -> dict[str, float]:
    peaks: dict[str, float] = {}
    for entry in values:
        for part in filter(None, (p.strip() for p in entry.split(","))):
            key, sep, value = part.partition("=")
            key = key.strip().lower()
            try:
                number = float(value)
            except ValueError:
                number = -1.0
            if not sep or key not in _PEAK_KEYS or not number > 0:
                raise UsageError(f"--peak {part!r}: expected KEY=TFLOPS with KEY one of "
                                 f"{', '.join(_PEAK_KEYS)} and a positive number")
            peaks[key] = number
    return peaks


def _gather_cases(args: argparse.Namespace):
    from convt.bench.suite import (ShapeError, SuiteError, load_suite, parse_shape,
                                   select_cases)

    cases = []
    suite_info = None
    try:
        if args.suite or not args.shape:
            suite = load_suite(args.suite or "kernelbench")
            cases.extend(suite.cases)
            suite_info = {"name": suite.name, "path": suite.path, "about": suite.about}
        many = len(args.shape) > 1
        for i, text in enumerate(args.shape, 1):
            case = parse_shape(text, default_id=f"shape{i}" if many else "shape")
            if any(c.id == case.id for c in cases):
                raise UsageError(f"--shape {text!r}: case id {case.id!r} is already taken "
                                 f"(give it another with id=NAME)")
            cases.append(case)
        cases = select_cases(cases, args.case)
    except (ShapeError, SuiteError) as e:
        raise UsageError(str(e)) from None
    return cases, suite_info


def _print_case_list(console: Any, cases: Sequence[Any]) -> None:
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for col in ("id", "shape", "output", "GFLOP"):
        table.add_column(col, justify="right" if col == "GFLOP" else "left")
    for c in cases:
        table.add_row(c.id, c.spec(), "x".join(map(str, c.output_size)), f"{c.flops() / 1e9:.2f}")
    console.print(table)


class _Progress:
    """A rich progress bar on a terminal; one line per finished case otherwise."""

    def __init__(self, console: Any, quiet: bool):
        self.console = console
        self.quiet = quiet
        self.live = console.is_terminal and not quiet
        self._progress = None
        self._task = None

    def __enter__(self) -> "_Progress":
        if self.live:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress,
                                       TextColumn, TimeElapsedColumn)

            self._progress = Progress(
                TextColumn("[progress.description]{task.description}"), BarColumn(),
                MofNCompleteColumn(), TimeElapsedColumn(), console=self.console,
                transient=True,
            )
            self._progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)

    def __call__(self, done: int, total: int, case: Any, mode: Any, result: Any) -> None:
        if self._progress is not None:
            if self._task is None:
                self._task = self._progress.add_task("", total=total)
            desc = f"{case.id} {mode.label}"
            self._progress.update(self._task, completed=done, description=desc)
        elif not self.quiet and result is not None:
            speed = f" {result.speedup:.2f}x" if result.speedup else ""
            self.console.print(f"[{done}/{total}] {case.id} {mode.label}: "
                               f"{result.status}{speed}", highlight=False, markup=False)


def _cmd_bench(args: argparse.Namespace, *, argv: Sequence[str], impl: Any = None) -> int:
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(highlight=False, width=_PIPE_WIDTH)
    err_console = Console(stderr=True, highlight=False)

    dtypes = _split(args.dtype, _DTYPE_ALIASES, "fp32", "dtype")
    maths = _split(args.math, _MATH_ALIASES, "default", "math")
    directions = _split(args.direction, _DIRECTION_ALIASES, "fwd", "direction")
    peak_overrides = _parse_peaks(args.peak)
    if args.reps < 1:
        raise UsageError(f"--reps must be at least 1, got {args.reps}")
    if args.warmup < 0:
        raise UsageError(f"--warmup must be non-negative, got {args.warmup}")
    if args.cpu_max_mflop < 0:
        raise UsageError(f"--cpu-max-mflop must be non-negative, got {args.cpu_max_mflop}")
    cases, suite_info = _gather_cases(args)
    if args.list:
        _print_case_list(console, cases)
        return 0

    from convt.bench import report
    from convt.bench.runner import Bench, BenchConfig, ImplementationError

    config = BenchConfig(
        device=args.device, reps=args.reps, warmup=args.warmup, seed=args.seed,
        flush_l2=args.flush_l2, cudnn_benchmark=args.cudnn_benchmark,
        cpu_max_flops=int(args.cpu_max_mflop * 1e6), peak_overrides=peak_overrides,
    )
    try:
        bench = Bench(config, impl=impl if impl is not None else args.impl)
        modes = bench.modes(dtypes, maths, directions)
    except (ImplementationError, ValueError, RuntimeError) as e:
        raise UsageError(str(e)) from None

    impl_name = bench.impl.name
    if bench.is_cuda:
        console.print(report.environment_line(bench.environment, vars(bench.impl)),
                      soft_wrap=True)
    else:
        why = "--device cpu" if args.device == "cpu" else "no CUDA GPU"
        rule = (f"cases above {args.cpu_max_mflop:g} MFLOP scaled down: batch 1, then the "
                f"largest spatial size halved until within; channels kept"
                if config.cpu_max_flops > 0 else "cases run as given")
        side = "convt's CPU backend" if impl_name == "convt" else impl_name
        console.print(f"CPU run ({why}): {side} against PyTorch on the CPU; {rule}; no "
                      f"roofline on the CPU (n/a); float32 checked against the strict "
                      f"budget (no TF32 on the CPU).", soft_wrap=True)
        console.print(report.environment_line(bench.environment, vars(bench.impl)),
                      soft_wrap=True)

    if bench.is_cuda:
        bench.measure_hardware()
        peaks = bench.peaks
        console.print(
            f"copy bandwidth {report.fmt_bandwidth(bench.bandwidth_gbps)} (measured) · peaks "
            f"TFLOP/s ({peaks.source}): TF32 {peaks.tf32:g}, BF16 {peaks.bf16:g}, "
            f"FP16 {peaks.fp16:g}, FP32 {peaks.fp32:g}", soft_wrap=True
        )
        flush = ("L2 evicted before each timed call" if config.flush_l2
                 else "L2 not evicted between calls")
        console.print(f"median of {config.reps} interleaved runs after {config.warmup} "
                      f"warm-up runs per side; {flush}.")
    console.print()

    with _Progress(err_console, args.quiet) as progress:
        run = bench.run(cases, modes, progress=progress)

    report.print_tables(run, console)
    command = f"{_PROG} " + shlex.join(argv)
    if args.json:
        doc = report.to_json(run, command=command, argv=argv, suite=suite_info)
        report.write_json(doc, args.json)
        console.print(f"wrote {args.json}")
    if args.plot:
        report.write_plot(run, args.plot, scale=args.plot_scale)
        console.print(f"wrote {args.plot}")
    return 0 if run.ok else 1


# ---------------------------------------------------------------------------------------
# convt export-kernelbench
# ---------------------------------------------------------------------------------------

def _cmd_export_kernelbench(args: argparse.Namespace, *, argv: Sequence[str], impl: Any = None) -> int:
    from pathlib import Path

    from convt.kernelbench.amalgamate import AmalgamationError
    from convt.kernelbench.export import ExportError, export_dir, export_file

    chosen = [name for name, value in (("PROBLEM.py", args.problem), ("--all", args.all_dir),
                                       ("--from-suite", args.from_suite)) if value]
    if len(chosen) != 1:
        raise UsageError("give exactly one of PROBLEM.py, --all DIR and --from-suite NAME"
                         + (f" (got {', '.join(chosen)})" if chosen else ""))
    if args.case and not args.from_suite:
        raise UsageError("--case selects cases of --from-suite")
    out = Path(args.output)
    if (args.all_dir or args.from_suite) and out.exists() and not out.is_dir():
        raise UsageError(f"-o {out} is a file; give a directory for the {chosen[0]} output")
    say = (lambda *_a: None) if args.quiet else print
    err = lambda msg: print(f"{_PROG} export-kernelbench: error: {msg}", file=sys.stderr)  # noqa: E731

    if args.from_suite:
        from convt.bench.suite import SuiteError
        from convt.kernelbench.problems import write_suite_problems

        try:
            paths = write_suite_problems(args.from_suite, out, args.case)
        except SuiteError as e:
            raise UsageError(str(e)) from None
        for path in paths:
            say(f"wrote {path}")
        say(f"{len(paths)} problem files in {out}")
        return 0

    try:
        if args.problem:
            if out.is_dir():
                raise UsageError(f"-o {out} is a directory; give the solution's file name")
            result = export_file(args.problem, out)
            say(f"wrote {out} ({result.text.count(chr(10))} lines)")
            for info in result.analysis.convs:
                where = info.name or "(the model)"
                shapes = ", ".join("x".join(map(str, c.input_shape)) for c in info.calls) or "input shape unknown"
                state = "convt" if info.replaced else "left to PyTorch (a subclass)"
                say(f"  {where}: {info.description}; input {shapes}; {state}")
            return 0
        entries = export_dir(args.all_dir, out)
    except AmalgamationError as e:
        err(str(e))
        return 1
    except ExportError as e:
        err(str(e))
        return 1
    counts = {"exported": 0, "skipped": 0, "failed": 0}
    for entry in entries:
        counts[entry.status] += 1
        if entry.status == "exported":
            say(f"exported  {entry.problem.name} -> {entry.solution}")
        elif entry.status == "skipped":
            say(f"skipped   {entry.problem.name}: no nn.ConvTranspose1d/2d/3d module")
        else:
            print(f"failed    {entry.problem.name}: {entry.error}", file=sys.stderr)
    say(f"{counts['exported']} exported, {counts['skipped']} skipped (no transposed convolution), "
        f"{counts['failed']} failed; solutions in {out}")
    if counts["exported"] == 0 and counts["failed"] == 0:
        err(f"no problem in {args.all_dir} has a transposed convolution")
    return 0 if counts["failed"] == 0 and counts["exported"] > 0 else 1


# ---------------------------------------------------------------------------------------
# convt kernelbench-check
# ---------------------------------------------------------------------------------------

def _cmd_kernelbench_check(args: argparse.Namespace, *, argv: Sequence[str], impl: Any = None) -> int:
    from convt.kernelbench.check import (MODES, CheckConfig, CheckSetupError, format_report,
                                         run_check, write_json)

    maths = _split(args.math, {**{m: m for m in MODES}, **{k: v for k, v in _MATH_ALIASES.items()}},
                   "default,strict", "math")
    config = CheckConfig(device=args.device, trials=args.trials, reps=args.reps, warmup=args.warmup,
                         seed=args.seed, maths=tuple(maths), backward=args.backward,
                         timing=args.timing, flush_l2=args.flush_l2)
    progress = None if args.quiet else (lambda msg: print(f"... {msg}", file=sys.stderr, flush=True))
    try:
        result = run_check(args.problem, args.solution, config, progress=progress)
    except CheckSetupError as e:
        print(f"{_PROG} kernelbench-check: {e}", file=sys.stderr)
        return 2
    print(format_report(result))
    if args.json:
        write_json(result, args.json)
        print(f"wrote {args.json}")
    return 0 if result.ok else 1
