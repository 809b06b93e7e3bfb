"""Summarise ``convt kernelbench-check`` results next to ``convt bench``'s.

    python -m convt.kernelbench.summary --checks DIR [--bench BENCH.json] [--json OUT.json]

Reads every check JSON of DIR (one per problem, as ``kernelbench-check --json`` writes
it) and, when given, a ``convt bench --json`` file of the same cases, and prints one row
per problem and precision mode: correctness, the solution's speedup over Model, the
benchmark's speedup of convt over PyTorch on the same shape, and their ratio. A row
passes when the check passed and (with a benchmark) the two speedups agree within
``--tolerance`` (default 10%). Exit status 0 when every row passes, 1 otherwise.

Problems map to benchmark cases by their KernelBench number (``57_...py`` -> ``kb57``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any, Sequence

__all__ = ["summarise", "main"]


def _case_id(problem: str) -> str | None:
    m = re.match(r"(?:kb)?(\d+)_", Path(problem).name)
    return f"kb{int(m.group(1))}" if m else None


def _bench_speedups(doc: dict[str, Any]) -> dict[tuple[str, str], float | None]:
    out: dict[tuple[str, str], float | None] = {}
    for r in doc.get("results", []):
        if r.get("dtype") == "fp32" and r.get("direction") == "fwd":
            out[(r["case"], r.get("math") or "default")] = r.get("speedup")
    return out


def summarise(checks: Sequence[dict[str, Any]], bench: dict[str, Any] | None, tolerance: float = 0.10
              ) -> list[dict[str, Any]]:
    """One row per (problem, mode)."""
    speedups = _bench_speedups(bench) if bench else {}
    rows = []
    for check in checks:
        case = _case_id(check.get("problem", ""))
        modes = check.get("modes") or [{"math": "-", "ok": False}]
        for mode in modes:
            row = {
                "problem": Path(check.get("problem", "?")).name,
                "case": case,
                "math": mode.get("math"),
                "correct": bool(mode.get("correct")),
                "backward_ok": mode.get("backward_ok"),
                "weights_identical": bool(check.get("weights_identical")),
                "max_rel_err": mode.get("max_rel_err"),
                "check_speedup": mode.get("speedup"),
                "bench_speedup": speedups.get((case, mode.get("math"))) if case else None,
                "ratio": None,
                "within_tolerance": None,
                "error": check.get("error") or mode.get("message"),
            }
            if row["check_speedup"] and row["bench_speedup"]:
                row["ratio"] = row["check_speedup"] / row["bench_speedup"]
                row["within_tolerance"] = abs(row["ratio"] - 1) <= tolerance
            row["pass"] = bool(
                check.get("ok") and mode.get("ok")
                and (bench is None or row["within_tolerance"] is True)
            )
            rows.append(row)
    return rows


def _fmt(v: Any, spec: str, suffix: str = "") -> str:
    return "-" if v is None else format(v, spec) + suffix


def format_rows(rows: Sequence[dict[str, Any]], tolerance: float) -> str:
    head = (f"{'case':<6} {'mode':<8} {'correct':>7} {'grads':>5} {'rel err':>8} {'check':>8} "
            f"{'bench':>8} {'ratio':>6}  {'pass':<4} problem")
    lines = [head]
    for r in rows:
        grads = "-" if r["backward_ok"] is None else ("ok" if r["backward_ok"] else "FAIL")
        lines.append(
            f"{r['case'] or '-':<6} {r['math'] or '-':<8} {'yes' if r['correct'] else 'NO':>7} {grads:>5} "
            f"{_fmt(r['max_rel_err'], '.1e'):>8} {_fmt(r['check_speedup'], '.2f', 'x'):>8} "
            f"{_fmt(r['bench_speedup'], '.2f', 'x'):>8} {_fmt(r['ratio'], '.3f'):>6}  "
            f"{'yes' if r['pass'] else 'NO':<4} {r['problem']}"
        )
        if r["error"] and not r["pass"]:
            lines.append(f"       {r['error']}")
    passed = sum(r["pass"] for r in rows)
    lines.append(f"{passed}/{len(rows)} rows pass (check correct in the mode, weights identical, "
                 f"speedup within {tolerance:.0%} of convt bench's where a benchmark is given)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m convt.kernelbench.summary", description=__doc__.split("\n\n")[0])
    parser.add_argument("--checks", required=True, metavar="DIR", help="directory of kernelbench-check JSON files")
    parser.add_argument("--bench", metavar="FILE", help="a convt bench --json file of the same cases")
    parser.add_argument("--tolerance", type=float, default=0.10, help="allowed relative speedup difference")
    parser.add_argument("--json", metavar="FILE", help="write the rows to FILE")
    args = parser.parse_args(argv)
    checks = []
    for path in sorted(Path(args.checks).glob("*.json")):
        try:
            checks.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError) as e:
            print(f"skipping {path}: {e}", file=sys.stderr)
    if not checks:
        print(f"no check results in {args.checks}", file=sys.stderr)
        return 1
    bench = None
    if args.bench:
        try:
            bench = json.loads(Path(args.bench).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            print(f"cannot read {args.bench}: {e}", file=sys.stderr)
            return 1
    rows = summarise(checks, bench, args.tolerance)
    print(format_rows(rows, args.tolerance))
    if args.json:
        Path(args.json).write_text(json.dumps({"tolerance": args.tolerance, "rows": rows}, indent=1) + "\n",
                                   encoding="utf-8")
        print(f"wrote {args.json}")
    return 0 if rows and all(r["pass"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
