"""What convt's CUDA forward would run for each case of a suite, without a GPU: feeds the
cases to the planner's tool (tools/plan_forward.cpp, built as convt_plan with the C++ tests
of a CUDA build) and prints its lines. For working on the dispatcher: diff two trees'
output, or look up a case's tile, K step, stages, tile count and L2 -> shared memory bytes.

    python3 scripts/plan_suite.py --suite models --dtype fp32,bf16 [--math tf32,strict]
        [--cases dcgan_g1,vgan_up2] [--tool build/gpu/tests/cpp/convt_plan]

Needs only the Python sources of convt.bench (the suite files), not a built extension.
"""
import argparse
import importlib.util
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="kernelbench", help="a built-in suite or a suite file")
    ap.add_argument("--cases", default=None, help="comma-separated case ids (default: all)")
    ap.add_argument("--dtype", default="fp32,bf16")
    ap.add_argument("--math", default="tf32", help="tf32, strict or both (float32 only)")
    ap.add_argument("--tool", default=None,
                    help="the convt_plan binary (default: the first of build/*/tests/cpp)")
    args = ap.parse_args()
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
    lines = [case_line(c, dt, m) for c in cases for dt in args.dtype.split(",")
             for m in args.math.split(",") if m == "tf32" or dt == "fp32"]
    out = subprocess.run([tool], input="\n".join(lines) + "\n", capture_output=True, text=True)
    sys.stdout.write(out.stdout)
    sys.stderr.write(out.stderr)
    sys.exit(out.returncode)


if __name__ == "__main__":
    main()
