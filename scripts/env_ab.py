"""Times convt's forward under several environment settings of one installed build,
alternating them round by round, every other round in reverse order (kernel variants
selected by CONVT_* variables), and prints each case's medians side by side with the
geomean of each setting against the first. Only convt runs (scripts/time_cases.py in a
subprocess per setting and round).

    python scripts/env_ab.py --dtype fp32,bf16 --cases kb57,kb68 --rounds 2 \\
        base= noxp=CONVT_WG_XP=0 nc24=CONVT_WG_NC=24

A setting is NAME=VAR=VALUE[,VAR=VALUE...], or NAME= for the environment as it is.
--json FILE also writes every case's times per setting and round (ms), for fits over a
suite's layers (scripts/ab_summary.py reads the printed table).
"""
import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ALL_CASES = ("kb57,kb58,kb61,kb64,kb65,kb68,kb69,kb70,kb71,kb72,kb73,kb74,kb75,kb77,kb78,"
             "kb79,kb81")


def parse_setting(spec):
    name, _, rest = spec.partition("=")
    if not name:
        raise SystemExit(f"setting {spec!r}: expected NAME=[VAR=VALUE,...]")
    env = {}
    for item in filter(None, rest.split(",")):
        var, eq, value = item.partition("=")
        if not eq:
            raise SystemExit(f"setting {spec!r}: {item!r} is not VAR=VALUE")
        env[var] = value
    return name, env


def run(dtype, cases, reps, env, suite="kernelbench", gpu_time=False, channels_last=False):
    out = subprocess.run([sys.executable, str(HERE / "time_cases.py"), dtype, cases, "--reps", str(reps),
                          "--suite", suite] + (["--gpu-time"] if gpu_time else []) +
                         (["--channels-last"] if channels_last else []),
                         env={**os.environ, **env}, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"time_cases.py failed ({env}):\n{out.stderr[-3000:]}")
    times = {}
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[3] == "ms":
            times[(parts[0], parts[1])] = float(parts[2])
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("settings", nargs="+", help="NAME=[VAR=VALUE,...]")
    ap.add_argument("--dtype", default="fp32,bf16",
                    help="comma-separated: fp32, fp32s (strict float32), bf16, fp16")
    ap.add_argument("--cases", default=None,
                    help="comma-separated case ids (default: every case of the suite)")
    ap.add_argument("--suite", default="kernelbench", help="a built-in suite or a suite file")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--gpu-time", action="store_true",
                    help="the GPU's time alone (time_cases.py --gpu-time): for small layers")
    ap.add_argument("--json", default=None, help="also write the times (ms) to this file")
    ap.add_argument("--channels-last", action="store_true",
                    help="channels_last inputs (time_cases.py --channels-last); the outputs "
                         "take PyTorch's memory format for them (channels_last where its do)")
    args = ap.parse_args()
    settings = [parse_setting(s) for s in args.settings]
    runs = {name: [] for name, _ in settings}
    for r in range(args.rounds):
        # (Every other round in reverse order: a setting's place in the round, e.g. the
        # first after a pause, biases it by a few percent otherwise.)
        for name, env in settings if r % 2 == 0 else settings[::-1]:
            times = {}
            for dtype in args.dtype.split(","):
                times.update(run(dtype, args.cases or ALL_CASES if args.suite == "kernelbench"
                                 else args.cases or "all", args.reps, env, args.suite,
                                 args.gpu_time, args.channels_last))
            runs[name].append(times)
    keys = list(runs[settings[0][0]][0])
    header = "case dtype " + " ".join(f"{name}[{i}]" for name, _ in settings for i in range(args.rounds))
    print(header)
    for key in keys:
        cols = [f"{runs[name][i].get(key, float('nan')):.4f}" for name, _ in settings
                for i in range(args.rounds)]
        print(f"{key[0]} {key[1]} " + " ".join(cols))
    if args.json:
        doc = {"suite": args.suite, "gpu_time": args.gpu_time, "channels_last": args.channels_last,
               "rounds": args.rounds, "reps": args.reps,
               "settings": {name: env for name, env in settings},
               "rows": [{"case": k[0], "dtype": k[1],
                         "ms": {name: [runs[name][i].get(k) for i in range(args.rounds)]
                                for name, _ in settings}} for k in keys]}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    base = settings[0][0]
    for dtype in args.dtype.split(","):
        ks = [k for k in keys if k[1] == dtype]
        for name, _ in settings[1:]:
            ratios = []
            for i in range(args.rounds):
                logs = [math.log(runs[base][i][k] / runs[name][i][k]) for k in ks
                        if k in runs[name][i]]
                ratios.append(math.exp(sum(logs) / len(logs)) if logs else float("nan"))
            print(f"geomean {dtype} {base}/{name} per round: " + " ".join(f"{r:.3f}" for r in ratios))


if __name__ == "__main__":
    main()
