"""scripts/profile_suite.py --table: Nsight Compute rows assigned to their (case, dtype)."""
import argparse
import csv
import importlib.util
import pathlib

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "profile_suite.py"


def load_script():
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("profile_suite", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def write_raw(path, kernels):
    """An ncu --page raw CSV: a preamble line, the header, the units, one row per kernel."""
    with open(path, "w", newline="") as f:
        f.write("==PROF== Disconnected\n")
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(["ID", "Kernel Name", "Grid Size", "gpu__time_duration.sum"])
        w.writerow(["", "", "", "us"])
        for i, (name, us) in enumerate(kernels):
            w.writerow([str(i), f"void convt::cuda::{name}(int)", "(1, 1, 1)", str(us)])


def test_rows_follow_their_case_including_trailing_checks(tmp_path, capsys):
    raw = tmp_path / "ncu.csv"
    write_raw(raw, [
        # kb75 fp32: packing, copy, wgmma forward, then the direct kernel's non-finite check
        ("wg::pack_weight_wgmma_kernel<float>", 5),
        ("wg::transpose_input_tiled_kernel<float, true>", 90),
        ("wg::fprop_wgmma_kernel<float, 256>", 660),
        ("direct::forward_kernel<float>", 5),
        # kb75 bf16: the direct kernel is the forward itself
        ("direct::forward_kernel<__nv_bfloat16>", 700),
        # kb77 fp32: packing and the TMA kernel
        ("tma::pack_weight_tma_kernel<float>", 4),
        ("tma::fprop_tma_kernel<float>", 650),
    ])
    mod = load_script()
    args = argparse.Namespace(suite="kernelbench", cases="kb75,kb77", dtype="fp32,bf16",
                              table=str(raw))
    mod.table(args)
    rows = [line.split()[:3] for line in capsys.readouterr().out.splitlines()[1:]]
    assert rows == [
        ["kb75", "fp32", "pack_weight_wgmma_kernel"],
        ["kb75", "fp32", "transpose_input_tiled_kernel"],
        ["kb75", "fp32", "fprop_wgmma_kernel"],
        ["kb75", "fp32", "forward_kernel"],
        ["kb75", "bf16", "forward_kernel"],
        ["kb77", "fp32", "pack_weight_tma_kernel"],
        ["kb77", "fp32", "fprop_tma_kernel"],
    ]
