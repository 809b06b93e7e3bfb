"""Reports of a benchmark run: the rich table, the JSON document and the plot."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from convt.bench.runner import BUDGETS

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

    from convt.bench.runner import BenchRun, CaseResult, SideResult

__all__ = ["SCHEMA", "environment_line", "print_tables", "to_json", "write_json", "write_plot"]

#: Identifies the layout of the JSON document (docs/bench.md describes it).
SCHEMA = "convt-bench/1"


# ---------------------------------------------------------------------------------------
# Number formatting
# ---------------------------------------------------------------------------------------

def fmt_ms(v: float | None) -> str:
    if v is None:
        return "—"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def fmt_rate(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.3g}" if v < 1000 else f"{v:.0f}"


def fmt_pct(v: float | None) -> str:
    if v is None:
        return "n/a"
    p = 100 * v
    return f"{p:.1f}%" if p >= 1 else f"{p:.2f}%"


def fmt_speedup(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}×"


def fmt_err(v: float | None) -> str:
    if v is None:
        return "—"
    if not math.isfinite(v):
        return str(v)
    return f"{v:.1e}"


def fmt_bandwidth(gbps: float | None) -> str:
    if gbps is None:
        return "n/a"
    return f"{gbps / 1000:.2f} TB/s" if gbps >= 1000 else f"{gbps:.0f} GB/s"


# ---------------------------------------------------------------------------------------
# Console
# ---------------------------------------------------------------------------------------

def environment_line(env: dict[str, Any], impl: dict[str, Any]) -> str:
    """What runs where, in one line."""
    name = impl.get("name", "convt")
    version = f" {impl['version']}" if impl.get("version") else ""
    if str(env.get("device", "")).startswith("cuda"):
        parts = [env.get("gpu_name") or "GPU"]
        for label, key in (("CUDA", "cuda"), ("driver", "driver"), ("torch", "torch"),
                           ("cuDNN", "cudnn")):
            if env.get(key):
                parts.append(f"{label} {env[key]}")
        return f"{name}{version} vs PyTorch eager on {' · '.join(parts)}"
    return f"{name}{version} vs PyTorch on {env.get('cpu')} ({env.get('cpu_threads')} threads)"


_STATUS_STYLE = {"ok": "green", "FAILED": "bold red", "ERROR": "bold red",
                 "UNSUPPORTED": "yellow", "SKIPPED": "yellow"}


def _err_cell(r: "CaseResult", side: "SideResult") -> str:
    """The worst error of a side, red when a tensor is above its budget (PyTorch: only
    its output is held to a budget; its gradient errors set the gradients' budgets)."""
    text = fmt_err(side.error)
    for name, err in side.errors.items():
        if side is r.pytorch:
            budget = r.budget if name == "output" else math.inf
        else:
            budget = r.budgets.get(name, r.budget)
        if not (err <= budget):
            return f"[red]{text}[/red]"
    return text


def print_cases(run: "BenchRun", console: "Console") -> None:
    """The shapes of the cases that ran (the tables name cases by id only)."""
    from rich import box
    from rich.table import Table

    seen: dict[str, Any] = {}
    for r in run.results:
        seen.setdefault(r.case.id, r.case)
    scaled = any(c.scaled_from is not None for c in seen.values())
    table = Table(title="cases", box=box.SIMPLE, title_justify="left", pad_edge=False)
    table.add_column("case")
    table.add_column("shape", overflow="fold")
    table.add_column("output", overflow="fold")
    table.add_column("GFLOP", justify="right")
    if scaled:
        table.add_column("scaled from", overflow="fold", style="dim")
    for case in seen.values():
        row = [case.id, case.spec(), "x".join(map(str, case.output_size)),
               fmt_rate(case.flops() / 1e9)]
        if scaled:
            row.append(case.scaled_from.spec() if case.scaled_from is not None else "")
        table.add_row(*row)
    console.print(table)


#: Columns of the results table: (header, needed on narrow consoles).
_COLUMNS = (
    ("case", True), ("PyTorch\nms", True), ("{impl}\nms", True), ("speedup", True),
    ("{impl}\nTFLOP/s", False), ("{impl}\nGB/s", False), ("roofline\nms", False),
    ("PyTorch\n% roof", True), ("{impl}\n% roof", True),
    ("PyTorch\nerror", True), ("{impl}\nerror", True), ("status", True),
)
_WIDE = 112


def print_tables(run: "BenchRun", console: "Console") -> None:
    """The cases, then one table per mode, each with a geometric-mean row, then notes.

    On a console narrower than about 112 columns the TFLOP/s, GB/s and roofline-time
    columns are left out (the JSON has every figure)."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    impl = run.implementation["name"]
    wide = console.width >= _WIDE
    keep = [wide or needed for _, needed in _COLUMNS]
    summary = {row["mode"]: row for row in run.summary()}
    print_cases(run, console)
    for mode in run.modes:
        results = run.results_for(mode)
        if not results:
            continue
        budget = results[0].budget
        title = f"{mode.label} · error budget {budget:.1e}"
        if mode.direction == "fwd+bwd":
            title += " (gradients: or 2× PyTorch's error, if larger)"
        if run.peaks is not None:
            title += f" · peak {run.peaks.get(mode.peak_key):g} TFLOP/s ({mode.peak_key})"
        table = Table(title=title, box=box.SIMPLE_HEAVY, title_justify="left",
                      pad_edge=False)
        for (header, _), k in zip(_COLUMNS, keep):
            if k:
                table.add_column(header.format(impl=impl),
                                 justify="left" if header in ("case", "status") else "right")

        def add(*cells: str) -> None:
            table.add_row(*(c for c, k in zip(cells, keep) if k))

        footnotes: list[str] = []
        for r in results:
            style = _STATUS_STYLE.get(r.status, "")
            status = f"[{style}]{r.status}[/{style}]"
            extra = ([r.message] if r.message else []) + r.notes
            if extra:
                footnotes.append(f"[{len(footnotes) + 1}] {r.case.id}: " + "; ".join(extra))
                status += " " + escape(f"[{len(footnotes)}]")
            if r.ok:
                speedup = fmt_speedup(r.speedup)
                if r.speedup is not None:
                    speedup = f"[{'green' if r.speedup >= 1 else 'red'}]{speedup}[/]"
            else:
                speedup = f"[{style}]{r.status}[/{style}]"
            add(
                r.case.id, fmt_ms(r.pytorch.ms), fmt_ms(r.convt.ms), speedup,
                fmt_rate(r.convt.tflops), fmt_rate(r.convt.gbps),
                fmt_ms(r.roofline_ms) if r.roofline_ms is not None else "n/a",
                fmt_pct(r.pytorch.roofline_fraction), fmt_pct(r.convt.roofline_fraction),
                _err_cell(r, r.pytorch), _err_cell(r, r.convt),
                status,
            )
        s = summary[mode.label]
        table.add_section()
        add(
            f"[bold]geomean[/bold] {s['passed']}/{s['cases']}", "", "",
            f"[bold]{fmt_speedup(s['geomean_speedup'])}[/bold]", "", "", "",
            f"[bold]{fmt_pct(s['geomean_roofline_fraction_pytorch'])}[/bold]",
            f"[bold]{fmt_pct(s['geomean_roofline_fraction_convt'])}[/bold]", "", "", "",
        )
        console.print(table)
        for note in footnotes:
            console.print(note, highlight=False, markup=False, soft_wrap=True)
        console.print()
    for note in run.notes:
        console.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
    failed = [r for r in run.results if not r.ok]
    if failed:
        console.print(f"[bold red]{len(failed)} of {len(run.results)} case runs did not "
                      f"pass[/bold red] (statuses: "
                      + ", ".join(sorted({r.status for r in failed})) + ")")


# ---------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------

def _num(v: Any) -> Any:
    """JSON-safe number: non-finite floats become the strings "nan", "inf", "-inf"."""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return v


def _side(side: "SideResult") -> dict[str, Any]:
    return {
        "name": side.name,
        "ms": side.ms,
        "host_ms": side.host_ms,
        "samples_ms": list(side.samples_ms),
        "tflops": side.tflops,
        "gbps": side.gbps,
        "roofline_fraction": side.roofline_fraction,
        "forward_kernel": side.forward_kernel,
        "error": _num(side.error),
        "errors": {k: _num(v) for k, v in side.errors.items()},
    }


def _result(r: "CaseResult") -> dict[str, Any]:
    scaled = r.case.scaled_from
    return {
        "case": r.case.id,
        "shape": r.case.spec(),
        "problem": r.case.to_dict(),
        "scaled_from": None if scaled is None else {"shape": scaled.spec(),
                                                    "problem": scaled.to_dict()},
        "mode": r.mode.label,
        "dtype": r.mode.dtype,
        "math": r.mode.math,
        "direction": r.mode.direction,
        "status": r.status,
        "message": r.message,
        "notes": list(r.notes),
        "flops": r.flops,
        "bytes": r.bytes,
        "budget": r.budget,
        "budgets": dict(r.budgets),
        "peak_tflops": r.peak_tflops,
        "roofline_ms": r.roofline_ms,
        "bound": r.bound,
        "speedup": r.speedup if r.ok else None,
        "pytorch": _side(r.pytorch),
        "convt": _side(r.convt),
    }


def to_json(run: "BenchRun", *, command: str | None = None, argv: Sequence[str] | None = None,
            suite: dict[str, Any] | None = None) -> dict[str, Any]:
    """Every figure of the run as a JSON-ready dict (layout: SCHEMA, docs/bench.md)."""
    c = run.config
    return {
        "schema": SCHEMA,
        "date": run.started,
        "finished": run.finished,
        "command": command,
        "argv": list(argv) if argv is not None else None,
        "device": run.device,
        "environment": dict(run.environment),
        "implementation": dict(run.implementation),
        "copy_bandwidth_gbps": run.bandwidth_gbps,
        "peaks_tflops": run.peaks.as_dict() if run.peaks else None,
        "peaks_source": run.peaks.source if run.peaks else None,
        "settings": {
            "reps": c.reps, "warmup": c.warmup, "seed": c.seed,
            "flush_l2": bool(c.flush_l2 and run.is_cuda),
            "cudnn_benchmark": c.cudnn_benchmark, "recheck": c.recheck,
            "cpu_max_mflop": c.cpu_max_flops / 1e6,
        },
        "budgets": dict(BUDGETS),
        "suite": suite,
        "modes": [m.label for m in run.modes],
        "results": [_result(r) for r in run.results],
        "summary": run.summary(),
        "notes": list(run.notes),
        "ok": run.ok,
    }


def write_json(doc: dict[str, Any], path: str | Path) -> None:
    Path(path).write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n", encoding="utf-8")


# ---------------------------------------------------------------------------------------
# Plot
# ---------------------------------------------------------------------------------------

def write_plot(run: "BenchRun", path: str | Path, scale: str = "log") -> None:
    """Grouped bars per case, one panel per mode: PyTorch and the implementation as a
    fraction of the roofline (on a GPU), or as achieved TFLOP/s where there is no
    roofline (CPU runs). Failed cases show no bar for the implementation."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    if scale not in ("log", "linear"):
        raise ValueError(f"scale must be 'log' or 'linear', got {scale!r}")
    impl = run.implementation["name"]
    modes = [m for m in run.modes if run.results_for(m)]
    use_roofline = run.peaks is not None
    n_cases = max((len(run.results_for(m)) for m in modes), default=1)
    fig, axes = plt.subplots(len(modes) or 1, 1, squeeze=False,
                             figsize=(max(6.0, 0.6 * n_cases + 2), 3.6 * max(1, len(modes))))
    for ax, mode in zip(axes[:, 0], modes):
        results = run.results_for(mode)
        xs = range(len(results))
        width = 0.4

        def value(side: "SideResult") -> float:
            v = side.roofline_fraction * 100 if use_roofline else side.tflops
            return v if v is not None else float("nan")

        ref = [value(r.pytorch) if r.pytorch.ms else float("nan") for r in results]
        new = [value(r.convt) if r.ok else float("nan") for r in results]
        ax.bar([x - width / 2 for x in xs], [0 if math.isnan(v) else v for v in ref],
               width, label="PyTorch", color="#8c8c8c")
        ax.bar([x + width / 2 for x in xs], [0 if math.isnan(v) else v for v in new],
               width, label=impl, color="#2a9d4b")
        for x, r in zip(xs, results):
            if not r.ok:
                ax.annotate(r.status, (x + width / 2, 0), xycoords=("data", "axes fraction"),
                            xytext=(0, 4), textcoords="offset points", rotation=90,
                            ha="center", va="bottom", fontsize=7, color="#c0392b")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([r.case.id for r in results], rotation=45, ha="right", fontsize=8)
        if use_roofline:
            ax.set_ylabel("% of roofline")
            ax.axhline(100, color="black", linewidth=0.8, linestyle="--")
        else:
            ax.set_ylabel("TFLOP/s")
        finite = [v for v in ref + new if not math.isnan(v) and v > 0]
        if scale == "log" and finite:
            ax.set_yscale("log")
        title = mode.label
        if not use_roofline:
            title += " (no roofline on CPU: achieved TFLOP/s)"
        ax.set_title(title, fontsize=10, loc="left")
        ax.legend(fontsize=8, loc="upper right")
        ax.grid(axis="y", alpha=0.3)
    where = run.environment.get("gpu_name") or run.environment.get("cpu") or run.device
    fig.suptitle(f"{impl} vs PyTorch — {where}", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, format="png", dpi=120)
    plt.close(fig)
