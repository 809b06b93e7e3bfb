"""What a dispatch rule would make of layers already timed both ways: reads an A/B file of
scripts/env_ab.py (--json) that timed each layer with a kernel off and forced, asks the
planner's tool (scripts/plan_suite.py) which of them the current tree's rules give that
kernel, and prints, per dtype, the geomean speed-up over "off" of running each layer as
planned (its "on" time where the plan names the kernel, its "off" time elsewhere), with the
layers taken and the slowest. No GPU: every time comes from the file.

    python3 scripts/rule_outcome.py docs/data/h200-2026-11-28-few-outputs-draw4-ab.json \
        --marker "GEMM and fold" [--off off --on on] [--tool build/gpu/tests/cpp/convt_plan]

The times stand for the rule only where forcing the kernel runs it as the rule would (the
same plan); a layer's "on" time is that of the kernel forced.
"""
import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# env_ab.py's dtype names -> plan_suite.py's dtype and math mode
MODES = {"fp32": ("fp32", "tf32"), "fp32s": ("fp32", "strict"), "bf16": ("bf16", "tf32"),
         "fp16": ("fp16", "tf32")}


def planned(suite, dtype, math_mode, marker, tool):
    cmd = [sys.executable, str(ROOT / "scripts" / "plan_suite.py"), "--suite", suite,
           "--dtype", dtype, "--math", math_mode]
    if tool:
        cmd += ["--tool", tool]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    taken = {}
    for line in out.splitlines():
        if not line.strip() or line.startswith(" "):
            continue
        case, rest = line.split(" ", 1)
        taken[case] = f": {marker}" in rest
    return taken


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ab", help="an env_ab.py --json file with an 'off' and an 'on' setting")
    ap.add_argument("--marker", required=True,
                    help="the words that open the kernel's plan description")
    ap.add_argument("--off", default="off", help="the setting with the kernel off")
    ap.add_argument("--on", default="on", help="the setting with the kernel forced")
    ap.add_argument("--tool", default=None, help="the convt_plan binary (plan_suite.py --tool)")
    args = ap.parse_args(argv)
    data = json.loads(Path(args.ab).read_text())
    suite = data["suite"]
    for name in dict.fromkeys(r["dtype"] for r in data["rows"]):
        dtype, math_mode = MODES[name]
        taken = planned(suite, dtype, math_mode, args.marker, args.tool)
        logs, worst, n = [], None, 0
        for r in (r for r in data["rows"] if r["dtype"] == name):
            off, on = min(r["ms"][args.off]), min(r["ms"][args.on])
            ran = on if taken[r["case"]] else off
            n += taken[r["case"]]
            logs.append(math.log(off / ran))
            if worst is None or off / ran < worst[0]:
                worst = (off / ran, r["case"])
        print(f"{name}: {math.exp(sum(logs) / len(logs)):.2f}x geomean over {len(logs)} layers "
              f"against {args.off}; {n} taken; slowest {worst[0]:.2f}x ({worst[1]})")


if __name__ == "__main__":
    main()
