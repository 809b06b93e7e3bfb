"""Writes a suite file of fuzzed transposed-convolution layers for `convt bench --suite` and
scripts/env_ab.py: random 1-D to 3-D layers within given channel and group ranges, with
strides, padding, dilation and output padding as PyTorch allows, sized so that each layer's
output holds between --min-outputs and --max-outputs elements (its batch and input size
scaled to that), so that the kernels' times are neither launch-bound nor long. A rule
measured over such a suite is measured over layers nobody picked.

    python3 scripts/fuzz_suite.py --in-channels 1-7 --out-channels 3-64 --groups 1 \\
        --count 24 --seed 1127 --out scripts/suites/few_channels_fuzz.json
"""
import argparse
import json
import random
import sys


def span(text):
    lo, _, hi = text.partition("-")
    lo, hi = int(lo), int(hi or lo)
    if lo < 1 or hi < lo:
        raise argparse.ArgumentTypeError(f"expected N or LO-HI with 1 <= LO <= HI, got {text!r}")
    return lo, hi


def output_size(size, k, s, p, op, d):
    return [(n - 1) * si - 2 * pi + di * (ki - 1) + oi + 1
            for n, ki, si, pi, oi, di in zip(size, k, s, p, op, d)]


def fuzzed_layer(rng, args, index):
    """One layer, or None where the draw gives an empty output or cannot reach the sizes."""
    dims = rng.choice(args.dims)
    groups = rng.randint(*args.groups)
    cin = groups * rng.randint(*args.in_channels)
    cout = groups * rng.randint(*args.out_channels)
    k = [rng.randint(1, args.max_kernel) for _ in range(dims)]
    s = [rng.randint(1, args.max_stride) for _ in range(dims)]
    d = [rng.choice((1, 1, 1, 2)) for _ in range(dims)]
    p = [rng.randint(0, (ki - 1) * di) for ki, di in zip(k, d)]
    op = [rng.randint(0, max(si, di) - 1) for si, di in zip(s, d)]
    # Input sizes: a cube-ish input, then the batch, grown until the output reaches the
    # drawn number of elements.
    target = rng.uniform(args.min_outputs, args.max_outputs)
    side, cap = {1: (256, 1 << 20), 2: (8, 1024), 3: (4, 128)}[dims]
    size = [side] * dims
    if args.any_sizes:
        # (Sizes of any value: each side from side/2 to 2 side, grown by 1.25x-2x.)
        size = [rng.randint(max(1, side // 2), 2 * side) for _ in range(dims)]
    batch = 1
    for _ in range(64):
        out = output_size(size, k, s, p, op, d)
        if min(out) < 1:
            return None
        elems = batch * cout
        for o in out:
            elems *= o
        if elems >= target:
            break
        grow = [i for i in range(dims) if size[i] < cap]
        if batch < args.max_batch and (not grow or rng.random() < 0.4):
            batch *= 2
        elif grow:
            i = rng.choice(grow)
            size[i] = (max(size[i] + 1, int(size[i] * rng.uniform(1.25, 2.0)))
                       if args.any_sizes else size[i] * 2)
        else:
            break
    out = output_size(size, k, s, p, op, d)
    elems = batch * cout
    for o in out:
        elems *= o
    if not args.min_outputs <= elems <= 4 * args.max_outputs:
        return None
    case = {"id": f"f{index:02d}_{dims}d_c{cin}_{cout}", "dims": dims, "batch": batch,
            "in_channels": cin, "out_channels": cout, "input_size": size, "kernel_size": k,
            "stride": s, "padding": p, "output_padding": op, "dilation": d,
            "bias": rng.random() < 0.7}
    if groups > 1:
        case["groups"] = groups
    return case


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--in-channels", type=span, default=(1, 7), help="per group: N or LO-HI")
    ap.add_argument("--out-channels", type=span, default=(3, 64), help="per group: N or LO-HI")
    ap.add_argument("--groups", type=span, default=(1, 1), help="N or LO-HI")
    ap.add_argument("--dims", default="1,2,2,3,3",
                    help="spatial dimensions drawn from this list (repeats weigh)")
    ap.add_argument("--max-kernel", type=int, default=5)
    ap.add_argument("--max-stride", type=int, default=3)
    ap.add_argument("--max-batch", type=int, default=128)
    ap.add_argument("--min-outputs", type=float, default=4e6,
                    help="least output elements of a layer")
    ap.add_argument("--max-outputs", type=float, default=6e7,
                    help="most output elements drawn for a layer (up to 4x that kept)")
    ap.add_argument("--any-sizes", action="store_true",
                    help="input sizes of any value (by default powers of two times the "
                         "starting side): odd widths, rows that are not 16-byte aligned")
    ap.add_argument("--count", type=int, default=24)
    ap.add_argument("--seed", type=int, default=1127)
    ap.add_argument("--about", default=None, help="the suite's description")
    ap.add_argument("--out", default="-", help="the suite file to write ('-': stdout)")
    args = ap.parse_args(argv)
    args.dims = [int(v) for v in args.dims.split(",")]
    if not set(args.dims) <= {1, 2, 3}:
        ap.error("--dims: 1, 2 or 3")
    rng = random.Random(args.seed)
    cases = []
    for _ in range(1000 * args.count):
        if len(cases) == args.count:
            break
        case = fuzzed_layer(rng, args, len(cases))
        if case is not None:
            cases.append(case)
    if len(cases) < args.count:
        ap.error(f"only {len(cases)} layers within the sizes after {1000 * args.count} draws")
    command = "python3 scripts/fuzz_suite.py " + " ".join(
        a for a in (argv if argv is not None else sys.argv[1:]) if a)
    suite = {"about": args.about or (
        f"{args.count} fuzzed layers (seed {args.seed}): {args.in_channels[0]}-"
        f"{args.in_channels[1]} input and {args.out_channels[0]}-{args.out_channels[1]} output "
        f"channels a group, {args.groups[0]}-{args.groups[1]} groups, dimensions drawn from "
        f"{args.dims}, kernels up to {args.max_kernel}, strides up to {args.max_stride}, "
        f"dilation 1 or 2, padding and output padding as PyTorch allows, each output "
        f"{args.min_outputs:.0e} to {4 * args.max_outputs:.0e} elements"
        f"{', input sizes of any value' if args.any_sizes else ''}. Written by `{command}`."),
        "cases": cases}
    text = "{\n \"about\": " + json.dumps(suite["about"]) + ",\n \"cases\": [\n" + ",\n".join(
        "  " + json.dumps(c) for c in cases) + "\n ]\n}\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
