"""The KernelBench example runs and checks itself (on the CPU here, with a short input)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_kernelbench_modelnew_example_on_cpu():
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "kernelbench_modelnew.py"), "--device", "cpu", "--length", "64", "--runs", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "allclose(atol=rtol=1e-2): True" in result.stdout


def test_host_overhead_script_runs():
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "host_overhead.py"), "--device", "cpu", "--calls", "20", "--repeats", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "functional, no grad" in result.stdout
