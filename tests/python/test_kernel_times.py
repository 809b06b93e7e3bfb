"""scripts/kernel_times.py: the GPU's time alone for convt and PyTorch, case by case."""
import json
import pathlib
import subprocess
import sys

import pytest
import torch

from conftest import requires_convt_cuda

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "kernel_times.py"


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present: the GPU test runs")
def test_needs_a_cuda_device():
    out = subprocess.run([sys.executable, str(SCRIPT), "--cases", "kb72"], capture_output=True,
                         text=True)
    assert out.returncode == 1
    assert "kernel_times.py needs a CUDA device" in out.stderr


@requires_convt_cuda
def test_times_both_sides_and_lists_their_kernels(tmp_path):
    path = tmp_path / "times.json"
    out = subprocess.run([sys.executable, str(SCRIPT), "--suite", "models", "--cases",
                          "dcgan_g5", "--dtype", "bf16", "--reps", "3", "--kernels", "--json",
                          str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    rows = json.loads(path.read_text())["rows"]
    assert [(r["case"], r["dtype"]) for r in rows] == [("dcgan_g5", "bf16")]
    row = rows[0]
    assert row["convt_ms"] > 0 and row["pytorch_ms"] > 0
    assert row["ratio"] == pytest.approx(row["pytorch_ms"] / row["convt_ms"])
    # convt's own kernels on its side, none of the flush's.
    assert any("convt::" in name for name, _ in row["convt_kernels"])
    assert not any("FillFunctor" in name
                   for name, _ in row["convt_kernels"] + row["pytorch_kernels"])
    assert "geomean PyTorch/convt (GPU time)" in out.stdout
