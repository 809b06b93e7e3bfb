"""``convt bench`` from the command line: CPU runs, JSON, plot, failures, usage errors."""

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402


from convt.bench.report import SCHEMA  # noqa: E402
from convt.bench.runner import ImplementationError, resolve_implementation  # noqa: E402
from convt.cli import main  # noqa: E402

TINY = "2d N=1 C=4->6 in=6x5 k=3 s=2 p=1 op=1 bias"
TINY_ARGS = ["bench", "--shape", TINY, "--reps", "3", "--warmup", "1", "--device", "cpu"]


class Noisy:
    """torch's ops plus noise of 1e-2 relative to the largest output."""

    name = "noisy"

    def _noisy(self, op):
        def run(*a, **k):
            y = op(*a, **k)
            return y + 1e-2 * y.abs().max() * torch.randn_like(y)
        return run

    def __getattr__(self, name):
        if name.startswith("conv_transpose"):
            return self._noisy(getattr(F, name))
        raise AttributeError(name)


# ---------------------------------------------------------------------------------------
# End to end
# ---------------------------------------------------------------------------------------

def test_cpu_end_to_end_with_convt(capsys):
    try:
        resolve_implementation(None)
    except ImplementationError as e:
        pytest.skip(f"the convt package is not importable here: {e}")
    code = main(TINY_ARGS)
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("CPU run")
    assert code == 0, out
    assert "geomean" in out and "ok" in out


def test_cpu_run_first_line_table_and_exit_code(capsys):
    code = main(TINY_ARGS + ["--impl", "torch.nn.functional", "--dtype", "fp32,bf16"])
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].startswith("CPU run (--device cpu)") and "scaled down" in lines[0]
    assert "fp32/strict/fwd" in out and "bf16/fwd" in out
    assert "geomean 1/1" in out and "n/a" in out
    assert "FAILED" not in out


def _check_side(side):
    assert isinstance(side["name"], str)
    for key in ("ms", "host_ms", "tflops", "gbps", "error"):
        assert isinstance(side[key], float) and side[key] >= 0, key
    assert side["roofline_fraction"] is None  # CPU
    assert isinstance(side["samples_ms"], list) and len(side["samples_ms"]) == 3
    assert all(isinstance(v, float) for v in side["samples_ms"])
    assert isinstance(side["errors"], dict) and "output" in side["errors"]


def test_json_and_plot(tmp_path, capsys):
    out_json = tmp_path / "bench.json"
    out_png = tmp_path / "bench.png"
    argv = TINY_ARGS + ["--direction", "fwd,fwd+bwd", "--json", str(out_json),
                        "--plot", str(out_png), "--plot-scale", "linear", "-q"]
    assert main(argv, impl=F) == 0
    capsys.readouterr()

    doc = json.loads(out_json.read_text())
    assert doc["schema"] == SCHEMA
    assert doc["command"].startswith("convt bench --shape")
    assert doc["argv"] == argv
    for key in ("date", "finished", "device"):
        assert isinstance(doc[key], str)
    env = doc["environment"]
    for key in ("gpu_name", "driver", "cuda", "torch", "cudnn", "python", "cpu"):
        assert key in env
    assert env["torch"] == torch.__version__
    assert doc["device"] == "cpu" and env["gpu_name"] is None
    assert doc["copy_bandwidth_gbps"] is None and doc["peaks_tflops"] is None
    assert doc["settings"]["reps"] == 3 and doc["settings"]["warmup"] == 1
    assert doc["budgets"]["fp32/strict"] == 4e-6
    assert doc["implementation"]["name"] == "functional"
    assert doc["modes"] == ["fp32/strict/fwd", "fp32/strict/fwd+bwd"]
    assert doc["ok"] is True
    assert len(doc["results"]) == 2
    for r in doc["results"]:
        assert r["case"] == "shape" and r["shape"] == TINY
        assert r["status"] == "ok" and r["message"] is None
        assert r["problem"]["output_size"] == [12, 10]
        assert r["scaled_from"] is None
        assert isinstance(r["flops"], int) and isinstance(r["bytes"], int)
        assert r["dtype"] == "fp32" and r["math"] == "strict"
        assert r["roofline_ms"] is None and r["peak_tflops"] is None
        assert isinstance(r["speedup"], float)
        assert r["budget"] == 4e-6
        _check_side(r["pytorch"])
        _check_side(r["convt"])
    assert set(doc["results"][1]["convt"]["errors"]) == {
        "output", "grad_input", "grad_weight", "grad_bias"}
    (s1, s2) = doc["summary"]
    assert s1["mode"] == "fp32/strict/fwd" and s1["passed"] == 1 and s1["failed"] == 0
    assert isinstance(s1["geomean_speedup"], float)
    assert s1["geomean_roofline_fraction_convt"] is None

    data = out_png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000


def test_wrong_implementation_is_failed_with_nonzero_exit(tmp_path, capsys):
    out_json = tmp_path / "bench.json"
    code = main(TINY_ARGS + ["--json", str(out_json), "--plot", str(tmp_path / "p.png")],
                impl=Noisy())
    out = capsys.readouterr().out
    assert code == 1
    assert "FAILED" in out and "above the budget" in out
    assert "geomean 0/1" in out
    doc = json.loads(out_json.read_text())
    (r,) = doc["results"]
    assert r["status"] == "FAILED" and r["speedup"] is None
    assert r["convt"]["error"] > r["budget"] and doc["ok"] is False
    assert doc["summary"][0]["failed"] == 1 and doc["summary"][0]["geomean_speedup"] is None
    assert (tmp_path / "p.png").stat().st_size > 0


def test_builtin_suite_scaled_on_cpu(tmp_path, capsys):
    out_json = tmp_path / "bench.json"
    code = main(["bench", "--case", "kb72", "--reps", "2", "--warmup", "0", "--device",
                 "cpu", "--impl", "torch.nn.functional", "--json", str(out_json), "-q"])
    capsys.readouterr()
    assert code == 0
    (r,) = json.loads(out_json.read_text())["results"]
    assert r["case"] == "kb72" and r["problem"]["batch"] == 1
    assert r["scaled_from"]["problem"]["batch"] == 8
    assert r["flops"] <= 50_000_000


# ---------------------------------------------------------------------------------------
# Command line handling
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["--shape", "2d C=4 in=4"], "no k="),
    (["--dtype", "fp64"], "unknown dtype 'fp64'"),
    (["--math", "fast"], "unknown math 'fast'"),
    (["--direction", "bwd"], "unknown direction 'bwd'"),
    (["--case", "kb99"], "unknown case id"),
    (["--suite", "/nonexistent/suite.json"], "suite file not found"),
    (["--reps", "0"], "--reps must be at least 1"),
    (["--peak", "tf32=fast"], "--peak 'tf32=fast'"),
    (["--impl", "no_such_module_for_convt_bench"], "cannot load implementation"),
    (["--device", "tpu"], "unknown device 'tpu'"),
])
def test_usage_errors(args, message, capsys):
    assert main(["bench"] + args) == 2
    assert message in capsys.readouterr().err


def test_two_shapes_and_case_filter(capsys):
    code = main(["bench", "--list", "--shape", "1d C=4 in=8 k=3",
                 "--shape", "2d C=4 in=8 k=3 id=mine", "--case", "mine,shape1"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.index("mine") < out.index("shape1")


def test_list_and_help(capsys):
    assert main(["bench", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(f"kb{i}" in out for i in (57, 64, 72, 81))
    assert main(["bench", "--help"]) == 0
    out = capsys.readouterr().out
    assert "C=64->128" in out and "op=1" in out  # the grammar is in the help
    assert main([]) == 2


def test_python_dash_m(tmp_path):
    # Runs the installed package (from a directory where no source tree shadows it).
    proc = subprocess.run([sys.executable, "-m", "convt", "bench", "--list", "--case",
                           "kb57"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "kb57" in proc.stdout and "618.48" in proc.stdout
