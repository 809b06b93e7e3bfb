"""Run one convt forward per (case, dtype) of a suite, for Nsight Compute.

Each (case, dtype) runs one forward; convt's kernels follow each other in that order, the
weight packing and the input copy (where the chosen kernel has them) before the forward
kernel, the direct kernel's check for non-finite inputs after a wgmma forward that has one. `--table CSV`
turns an Nsight Compute raw CSV of such a run into one row per (case, dtype):

    ncu --csv --page raw --kernel-name-base demangled --kernel-name regex:convt:: \
        --metrics ... --log-file ncu.csv python scripts/profile_suite.py --dtype fp32,bf16
    python scripts/profile_suite.py --dtype fp32,bf16 --table ncu.csv
"""
import argparse
import csv

import torch

from convt.bench.suite import load_suite, select_cases
from convt.bench.timing import case_forward


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="", help="comma-separated case ids (default: all)")
    ap.add_argument("--dtype", default="fp32,bf16")
    ap.add_argument("--math", default="default", choices=["default", "strict"])
    ap.add_argument("--suite", default="kernelbench")
    ap.add_argument("--table", default=None, help="summarise this ncu raw CSV and exit")
    args = ap.parse_args()
    if args.table:
        return table(args)
    torch.backends.cudnn.allow_tf32 = args.math == "default"
    cases = load_suite(args.suite).cases
    if args.cases:
        cases = select_cases(cases, args.cases.split(","))
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    for case in cases:
        for name in args.dtype.split(","):
            dtype = dtypes[name]
            fn, call = case_forward(case, dtype)

            def run():
                return fn(*call)

            run()
            torch.cuda.synchronize()
            print(case.id, name, flush=True)
            del call
            torch.cuda.empty_cache()


SHORT = {
    "gpu__time_duration.sum": "us",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm%",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram%",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": "l2%",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": "hmma%",
    "smsp__issue_active.avg.pct_of_peak_sustained_active": "issue%",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occ%",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed": "smem%",
    "lts__t_sectors_op_write.sum": "l2wr_sect",
    "dram__bytes_write.sum": "dram_wr",
    "dram__bytes_read.sum": "dram_rd",
}


def table(args):
    cases = load_suite(args.suite).cases
    if args.cases:
        cases = select_cases(cases, args.cases.split(","))
    order = [(c.id, d) for c in cases for d in args.dtype.split(",")]
    lines = open(args.table).read().splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith('"ID"'))
    rows = list(csv.reader(lines[start:]))
    head, rows = rows[0], rows[2:]  # the second row holds the units
    col = {h: i for i, h in enumerate(head)}
    keys = [k for k in SHORT if k in col]
    print("case dtype kernel grid " + " ".join(SHORT[k] for k in keys))
    it = iter(order)
    label = next(it, ("?", "?"))
    done = False  # the label's own forward kernel has been seen
    prev = ""
    for r in rows:
        name = r[col["Kernel Name"]]
        kern = name.split("(")[0].split("::")[-1].split("<")[0]
        # (The direct kernel right after a wgmma forward is that forward's: split TF32 and
        # zeros inserted along W launch it to recompute non-finite inputs, and its blocks
        # exit at once elsewhere.)
        trailing = kern.startswith("forward_") and prev.startswith("fprop_wgmma")
        if done and not trailing:
            label = next(it, ("?", "?"))
            done = False
        vals = []
        for k in keys:
            v = r[col[k]].replace(",", "")
            try:
                f = float(v)
                v = f"{f:.3g}" if f < 1e5 else f"{f:.3e}"
            except ValueError:
                pass
            vals.append(v)
        grid = r[col["Grid Size"]] if "Grid Size" in col else ""
        print(label[0], label[1], kern, grid.replace(" ", ""), " ".join(vals))
        # The weight packing and the input copy run before a forward's own kernel.
        if not trailing and not any(k in kern for k in ("pack", "transpose_input", "pad_input")):
            done = True
        prev = kern

if __name__ == "__main__":
    main()
