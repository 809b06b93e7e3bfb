"""scripts/dispatch_audit.py: where a forced kernel beat the dispatch, from env_ab.py's table."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import ab_summary  # noqa: E402
import dispatch_audit  # noqa: E402

LOG = """case dtype base[0] base[1] wg[0] wg[1] tma[0] tma[1]
a bf16 1.000 1.100 0.500 0.600 1.000 1.000
b bf16 2.000 2.000 2.100 2.100 1.900 1.950
c bf16 1.000 1.000 nan nan 1.200 1.300
a fp32 1.000 1.000 1.000 1.000 0.800 0.900
"""

SUITE = {"about": "x", "cases": [
    {"id": "a", "dims": 3, "batch": 2, "in_channels": 64, "out_channels": 17,
     "input_size": [4, 8, 8], "kernel_size": [2, 4, 1], "stride": [1, 1, 1],
     "padding": [1, 0, 0], "output_padding": [0, 0, 0], "dilation": [1, 1, 1], "bias": False},
    {"id": "b", "dims": 2, "batch": 2, "in_channels": 96, "out_channels": 96,
     "input_size": [8, 8], "kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1],
     "output_padding": [1, 1], "dilation": [1, 1], "bias": True, "groups": 2},
    {"id": "c", "dims": 1, "batch": 2, "in_channels": 32, "out_channels": 64,
     "input_size": [64], "kernel_size": [3], "stride": [1], "padding": [0],
     "output_padding": [0], "dilation": [2], "bias": False},
]}


def test_audit_finds_the_best_setting_per_layer():
    cases = {c["id"]: c for c in SUITE["cases"]}
    base, rows = dispatch_audit.audit(ab_summary.parse(LOG), cases, 0.10)
    assert base == "base"
    by = {r["dtype"]: r for r in rows}
    bf = by["bf16"]
    # (a: 1.0 / 0.5 = 2x with wg; b: 2.0 / 1.9 = 1.053x with tma; c: no faster setting)
    assert bf["cases"] == 3
    assert bf["oracle"] == pytest.approx((2.0 * 2.0 / 1.9 * 1.0) ** (1 / 3))
    assert bf["wins"] == [(pytest.approx(2.0), "a", "wg", 1.0, 0.5)]
    assert bf["kinds"]["3-D"] == (1, pytest.approx(2.0))
    assert bf["kinds"]["strided"] == (1, pytest.approx(2.0 / 1.9))
    assert bf["kinds"]["unstrided"] == (2, pytest.approx(2.0 ** 0.5))
    # (b: 96 output channels in 2 groups, 48 a group)
    assert bf["kinds"]["> 32 output channels a group"] == (2, pytest.approx((2.0 / 1.9) ** 0.5))
    assert by["fp32"]["wins"] == [(pytest.approx(1.25), "a", "tma", 1.0, 0.8)]


def test_describe():
    by = {c["id"]: c for c in SUITE["cases"]}
    assert dispatch_audit.describe(by["a"]) == "3-D 64->17 k2x4x1 p1x0x0"
    assert dispatch_audit.describe(by["b"]) == "2-D 96->96 g2 k3x3 s2x2 p1x1"
    assert dispatch_audit.describe(by["c"]) == "1-D 32->64 k3 d2"


def test_cli(tmp_path):
    log, suite = tmp_path / "audit.log", tmp_path / "suite.json"
    log.write_text("==== a step header\n" + LOG)
    suite.write_text(json.dumps(SUITE))
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "dispatch_audit.py"), str(log),
                          str(suite)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == ("bf16: the fastest setting of each layer against base: 1.282x geomean "
                        "over 3 layers; 1 layers faster by more than 10% with a kernel forced")
    assert "  a 2.00x with wg (1.000 -> 0.500 ms): 3-D 64->17 k2x4x1 p1x0x0" in lines
    log.write_text("nothing\n")
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "dispatch_audit.py"), str(log),
                          str(suite)], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1
    assert "dispatch_audit.py: no 'case dtype ...' header" in bad.stderr
