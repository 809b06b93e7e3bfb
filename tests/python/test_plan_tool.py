"""scripts/plan_suite.py and the convt_plan tool (tools/plan_forward.cpp): every case of the
built-in suites gets one plan line in every mode, without a GPU. Skips where no CUDA build of
the C++ tests made the tool (build/*/tests/cpp/convt_plan)."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "plan_suite.py"
TOOLS = sorted(ROOT.glob("build/*/tests/cpp/convt_plan"))

pytestmark = pytest.mark.skipif(not TOOLS, reason="no convt_plan: a CUDA build of the C++ tests "
                                "makes it (build/*/tests/cpp/convt_plan)")


def plan_lines(*args):
    out = subprocess.run([sys.executable, str(SCRIPT), "--tool", str(TOOLS[0]), *args],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.splitlines()


@pytest.mark.parametrize("suite,count", [("kernelbench", 17), ("models", 21)])
def test_every_case_and_mode_gets_a_plan(suite, count):
    lines = plan_lines("--suite", suite, "--dtype", "fp32,bf16,fp16", "--math", "tf32,strict")
    # (strict only for float32: four modes a case)
    assert len(lines) == 4 * count
    modes = set()
    for line in lines:
        m = re.match(r"^(\S+) (fp32|bf16|fp16) (tf32|strict): (.+)$", line)
        assert m, line
        modes.add((m.group(2), m.group(3)))
        what = m.group(4)
        assert "error" not in what, line
        assert what.startswith(("implicit-GEMM", "direct kernel", "GEMM and fold")), line
        # (wgmma plans carry their tile count and bytes)
        assert ("wgmma persistent" in what) == (" | tiles " in what), line
        # (the other implicit-GEMM plans say why the wgmma kernel does not run them)
        if what.startswith("implicit-GEMM") and "wgmma persistent" not in what:
            assert re.search(r" \| not wgmma: \S", what), line
    assert modes == {("fp32", "tf32"), ("fp32", "strict"), ("bf16", "tf32"), ("fp16", "tf32")}


def test_a_known_plan_and_a_bad_line():
    (line,) = plan_lines("--suite", "kernelbench", "--cases", "kb57", "--dtype", "bf16")
    # (Tiles of 4 rows for an H-complete K step: every H tap a step, the input transposed in
    # the kernel.)
    assert line.startswith("kb57 bf16 tf32: implicit-GEMM wgmma persistent, tile 64 channels x "
                           "224 positions (4 rows x 54 of a 6x56 box"), line
    assert line.endswith("| tiles 39064 x K steps 4, boxes 1680.1 MB, weight tiles 2880.1 MB")
    # (The transposition's ring: 7 pieces of 4 rows x 32 columns x 16 channels, loaded ahead
    # of the stages.)
    assert (", K step 16 channels x 3 H taps x 3 W taps, 2 stages, input transposed in the "
            "kernel (a ring of 7 pieces of 4096 B, loaded ahead of the stages),") in line, line
    out = subprocess.run([str(TOOLS[0])], input="id=x dims=2 batch=1 cin=4 cout=4 in=8 k=3,3\n",
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stdout == "x: error: each of in, k, s, p, op, d needs dims values\n"


def test_against_prints_and_writes_the_changed_cases(tmp_path):
    """--against: only the plans a setting changes, each with the other beneath it;
    --write-suite: those cases as a suite file that loads back with the same shapes."""
    from convt.bench.suite import load_suite

    out = tmp_path / "touched.json"
    lines = plan_lines("--suite", "kernelbench", "--dtype", "fp32,bf16", "--against",
                       "CONVT_WG_EVEN=0", "--write-suite", str(out))
    # (Pair-aligned layouts: by default in 16-bit types where W has stride 1, and in float32
    # on the wgmma kernel where it takes the TMA kernel's place, kb71 and kb78; without them
    # those two run the TMA kernel in float32. kb71 in bfloat16 keeps its 2-row tiles either
    # way: the tiles of more rows for its H-complete K step are the aligned ones.)
    assert lines[-1] == "4 of 17 cases changed by CONVT_WG_EVEN=0", lines
    changed = [tuple(ln.split()[:2]) for ln in lines[:-1] if not ln.startswith("  with ")]
    assert changed == [("kb69", "bf16"), ("kb70", "bf16"), ("kb71", "fp32"),
                       ("kb78", "fp32"), ("kb78", "bf16")], lines
    assert all(ln.startswith("  with CONVT_WG_EVEN=0: implicit-GEMM") for ln in lines[1:-1:2])
    assert lines[lines.index(next(ln for ln in lines if ln.startswith("kb78 bf16"))) + 1].find(
        "3 rows x 79 of a 5x85 box") > 0, lines
    assert lines[lines.index(next(ln for ln in lines if ln.startswith("kb71 fp32"))) + 1].find(
        "TMA + mma.sync") > 0, lines
    suite = load_suite(out)
    assert [c.id for c in suite.cases] == ["kb69", "kb70", "kb71", "kb78"]
    kb = {c.id: c for c in load_suite("kernelbench").cases}
    for c in suite.cases:
        assert c == kb[c.id]
    assert "CONVT_WG_EVEN=0" in suite.about
    # A setting that changes nothing, and a malformed one.
    lines = plan_lines("--suite", "kernelbench", "--dtype", "bf16", "--against", "CONVT_NOTHING=1")
    assert lines == ["0 of 17 cases changed by CONVT_NOTHING=1"]
    bad = subprocess.run([sys.executable, str(SCRIPT), "--tool", str(TOOLS[0]), "--against",
                          "CONVT_WG_EVEN"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert "--against: 'CONVT_WG_EVEN' is not NAME=VALUE" in bad.stderr
    bad = subprocess.run([sys.executable, str(SCRIPT), "--tool", str(TOOLS[0]),
                          "--write-suite", str(out)], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert "--write-suite needs --against" in bad.stderr


def test_rule_outcome_runs_each_layer_as_planned(tmp_path):
    """scripts/rule_outcome.py: a layer the rules give GEMM and fold (Conv-TasNet's decoder)
    counts at its forced time, one they leave to the other kernels (DCGAN's last layer) at
    its time with it off."""
    suite = tmp_path / "suite.json"
    common = {"groups": 1, "padding": [0], "output_padding": [0], "dilation": [1],
              "bias": False}
    suite.write_text(json.dumps({"about": "two last layers", "cases": [
        dict(common, id="tasnet", dims=1, batch=2, in_channels=512, out_channels=1,
             input_size=[999], kernel_size=[16], stride=[8]),
        dict(common, id="dcgan", dims=2, batch=4, in_channels=64, out_channels=3,
             input_size=[32, 32], kernel_size=[4, 4], stride=[2, 2], padding=[1, 1],
             output_padding=[0, 0], dilation=[1, 1]),
    ]}))
    ab = tmp_path / "ab.json"
    ab.write_text(json.dumps({"suite": str(suite), "rows": [
        {"case": "tasnet", "dtype": "fp32", "ms": {"off": [2.0, 2.1], "on": [1.0, 1.2]}},
        {"case": "dcgan", "dtype": "fp32", "ms": {"off": [1.0, 1.1], "on": [4.0, 4.0]}},
    ]}))
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "rule_outcome.py"), str(ab),
                          "--marker", "GEMM and fold", "--tool", str(TOOLS[0])],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == ("fp32: 1.41x geomean over 2 layers against off; 1 taken; "
                                  "slowest 1.00x (dcgan)")
