"""scripts/ncu_src_summary.py on a small SASS page of the shape Nsight Compute writes."""
import csv
import importlib.util
import pathlib

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "ncu_src_summary.py"


def load_script():
    spec = importlib.util.spec_from_file_location("ncu_src_summary", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def write_page(path, samples):
    header = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(["Kernel Name", "void k(int)"])
        w.writerow(header)
        for i, s in enumerate(samples):
            w.writerow([hex(0x1000 + 16 * i), f"  OP{i} R{i}", str(s), "1,000"])


def test_busiest_instructions_and_regions(tmp_path, capsys):
    page = tmp_path / "page.csv"
    # 10 instructions: 80 samples in the first region of 5, 20 in the second.
    write_page(page, [10, 50, 10, 5, 5, 0, 0, 20, 0, 0])
    assert load_script().main([str(page), "--top", "2", "--region", "5"]) == 0
    out = capsys.readouterr().out
    assert "10 instructions, 100 samples, 10000 warp instructions executed" in out
    lines = out.splitlines()
    top = lines[lines.index("busiest 2 instructions (index: samples, share, SASS)") + 1:][:2]
    assert top[0].split() == ["1:", "50", "50.0%", "OP1", "R1"]
    assert top[1].split() == ["7:", "20", "20.0%", "OP7", "R7"]
    assert "0-     4:  80.0% of samples, 5000 warp instructions executed" in out
    assert "5-     9:  20.0% of samples, 5000 warp instructions executed" in out
