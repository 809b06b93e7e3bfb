"""What convt's CUDA forward would run for each case of a suite, without a GPU: feeds the
cases to the planner's tool (tools/plan_forward.cpp, built as convt_plan with the C++ tests
of a CUDA build) and prints its lines. For working on the dispatcher: diff two trees'
output, or look up a case's tile, K step, stages, tile count and L2 -> shared memory bytes.

    python3 scripts/plan_suite.py --suite models --dtype fp32,bf16 [--math tf32,strict]
        [--cases dcgan_g1,vgan_up2] [--tool build/gpu/tests/cpp/convt_plan]

With --against SETTINGS (NAME=VALUE[,NAME=VALUE...], environment settings of the planner),
only the plans those settings change, each with the other one beneath it; --write-suite
PATH then writes the cases with a changed plan (in any dtype or math mode) as a suite file,
for timing a planner rule on exactly the layers it touches (scripts/env_ab.py --suite):

    python3 scripts/plan_suite.py --suite fuzzed.json --dtype bf16 --against CONVT_WG_EVEN=0 \
        --write-suite touched.json

Needs only the Python sources of convt.bench (the suite files), not a built extension.
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_suite_module():
    # convt.bench.suite without importing convt (whose extension may not be built here).
    path = ROOT / "python" / "convt" / "bench" / "suite.py"
    spec = importlib.util.spec_from_file_location("convt_bench_suite", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def case_line(case, dtype, math):
    ints = lambda v: ",".join(str(x) for x in v)  # noqa: E731
    return (f"id={case.id} dims={case.dims} batch={case.batch} cin={case.in_channels} "
            f"cout={case.out_channels} groups={case.groups} in={ints(case.input_size)} "
            f"k={ints(case.kernel_size)} s={ints(case.stride)} p={ints(case.padding)} "
            f"op={ints(case.output_padding)} d={ints(case.dilation)} dtype={dtype} math={math}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="kernelbench", help="a built-in suite or a suite file")
    ap.add_argument("--cases", default=None, help="comma-separated case ids (default: all)")
    ap.add_argument("--dtype", default="fp32,bf16")
    ap.add_argument("--math", default="tf32", help="tf32, strict or both (float32 only)")
    ap.add_argument("--tool", default=None,
                    help="the convt_plan binary (default: the first of build/*/tests/cpp)")
    ap.add_argument("--against", default=None, metavar="SETTINGS",
                    help="NAME=VALUE[,NAME=VALUE...]: print only the plans these change")
    ap.add_argument("--write-suite", default=None, metavar="PATH",
                    help="with --against: write the cases whose plan changes as a suite file")
    args = ap.parse_args(argv)
    if args.write_suite and not args.against:
        ap.error("--write-suite needs --against")
    settings = {}
    if args.against:
        for kv in args.against.split(","):
            name, eq, value = kv.partition("=")
            if not eq or not name:
                ap.error(f"--against: {kv!r} is not NAME=VALUE")
            settings[name] = value
    suite = load_suite_module()
    cases = suite.load_suite(args.suite).cases
    if args.cases:
        cases = suite.select_cases(cases, args.cases.split(","))
    tool = args.tool
    if tool is None:
        found = sorted(ROOT.glob("build/*/tests/cpp/convt_plan"))
        if not found:
            sys.exit("plan_suite.py: no convt_plan under build/*/tests/cpp: build the C++ tests "
                     "of a CUDA build, or pass --tool")
        tool = str(found[0])
    modes = [(c, dt, m) for c in cases for dt in args.dtype.split(",")
             for m in args.math.split(",") if m == "tf32" or dt == "fp32"]
    text = "\n".join(case_line(c, dt, m) for c, dt, m in modes) + "\n"
    out = subprocess.run([tool], input=text, capture_output=True, text=True)
    if not settings or out.returncode != 0:
        sys.stdout.write(out.stdout)
        sys.stderr.write(out.stderr)
        return out.returncode
    other = subprocess.run([tool], input=text, capture_output=True, text=True,
                           env={**os.environ, **settings})
    sys.stderr.write(other.stderr)
    if other.returncode != 0:
        sys.stdout.write(other.stdout)
        return other.returncode
    base, alt = out.stdout.splitlines(), other.stdout.splitlines()
    if len(base) != len(modes) or len(alt) != len(modes):
        sys.exit("plan_suite.py: the tool did not answer one line a case")
    changed = []
    for (case, _, _), a, b in zip(modes, base, alt):
        if a != b:
            print(a)
            print(f"  with {args.against}: {b.split(': ', 1)[1]}")
            if case not in changed:
                changed.append(case)
    print(f"{len(changed)} of {len(cases)} cases changed by {args.against}")
    if args.write_suite:
        about = (f"{len(changed)} of the {len(cases)} cases of {args.suite} whose "
                 f"{args.dtype} plan changes with {args.against}. Written by `python3 "
                 f"scripts/plan_suite.py --suite {args.suite} --dtype {args.dtype} --math "
                 f"{args.math} --against {args.against} --write-suite {args.write_suite}`.")
        write_suite(args.write_suite, about, changed)
    return 0


def case_dict(case):
    d = {"id": case.id, "dims": case.dims, "batch": case.batch,
         "in_channels": case.in_channels, "out_channels": case.out_channels}
    for key in ("input_size", "kernel_size", "stride", "padding", "output_padding",
                "dilation"):
        d[key] = list(getattr(case, key))
    if case.groups != 1:
        d["groups"] = case.groups
    d["bias"] = case.bias
    return d


def write_suite(path, about, cases):
    text = "{\n \"about\": " + json.dumps(about) + ",\n \"cases\": [\n" + ",\n".join(
        "  " + json.dumps(case_dict(c)) for c in cases) + "\n ]\n}\n"
    Path(path).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
