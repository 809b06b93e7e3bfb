"""scripts/ab_summary.py: env_ab.py's table summarised per setting and dtype."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import ab_summary  # noqa: E402

LOG = """==== a step header
case dtype base[0] base[1] new[0] new[1] off[0] off[1]
c1 bf16 1.000 1.100 0.500 0.600 1.000 1.000
c2 bf16 2.000 2.000 2.000 4.000 nan nan
c3 bf16 1.000 1.000 1.250 1.300 1.000 0.990
c1 fp32 1.000 1.000 1.000 1.010 2.000 2.000
geomean bf16 base/new per round: 1.000 1.000
"""


def test_parse_and_summarise():
    table = ab_summary.parse(LOG)
    assert table["names"] == ["base", "new", "off"]
    assert table["rows"][1] == ("c2", "bf16", {"base": [2.0, 2.0], "new": [2.0, 4.0], "off": []})
    base, rows = ab_summary.summarise(table, 0.03)
    assert base == "base"
    by = {(r["setting"], r["dtype"]): r for r in rows}
    new = by[("new", "bf16")]
    # (best of rounds: c1 1.0 / 0.5 = 2x, c2 2.0 / 2.0 = 1x, c3 1.0 / 1.25 = 0.8x)
    assert new["cases"] == 3
    assert new["geomean"] == pytest.approx((2.0 * 1.0 * 0.8) ** (1 / 3))
    assert (new["faster"], new["slower"]) == (1, 1)
    assert new["min"] == ("c3", pytest.approx(0.8)) and new["max"] == ("c1", pytest.approx(2.0))
    assert new["losers"] == [("c3", pytest.approx(0.8))]
    # (a setting with no time for a case leaves the case out)
    assert by[("off", "bf16")]["cases"] == 2
    assert by[("off", "fp32")]["geomean"] == pytest.approx(0.5)


def test_cli_and_bad_input(tmp_path):
    log = tmp_path / "ab.log"
    log.write_text(LOG)
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "ab_summary.py"), str(log)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == (
        "new against base, bf16: 1.170x geomean over 3 cases (best of rounds); 1 faster and 1 "
        "slower by more than 3%; from 0.80x (c3) to 2.00x (c1)")
    assert "  slower: c3 0.80x" in out.stdout
    log.write_text("no table here\n")
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "ab_summary.py"), str(log)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1
    assert "ab_summary.py: no 'case dtype ...' header" in bad.stderr


def test_env_ab_table_and_json_from_stubbed_runs(tmp_path, monkeypatch, capsys):
    """scripts/env_ab.py with its time_cases.py runs stubbed: settings alternate round by
    round, the table is what ab_summary.py reads, and --json keeps every time."""
    import json

    import env_ab

    calls = []

    def fake_run(dtype, cases, reps, env, suite="kernelbench", gpu_time=False, channels_last=False):
        calls.append(env.get("X"))
        scale = 2.0 if env.get("X") == "1" else 1.0
        return {("c1", dtype): 0.0123 * scale, ("c2", dtype): 0.5 * scale}

    monkeypatch.setattr(env_ab, "run", fake_run)
    out = tmp_path / "ab.json"
    monkeypatch.setattr(sys, "argv", ["env_ab.py", "--dtype", "bf16", "--cases", "c1,c2", "--rounds", "2",
                                      "--json", str(out), "base=", "x=X=1"])
    env_ab.main()
    assert calls == [None, "1", "1", None]  # the second round in reverse order
    printed = capsys.readouterr().out
    assert "c1 bf16 0.0123 0.0123 0.0246 0.0246" in printed
    assert "geomean bf16 base/x per round: 0.500 0.500" in printed  # (time of base over x)
    table = ab_summary.parse(printed)
    assert table["rows"][0] == ("c1", "bf16", {"base": [0.0123, 0.0123], "x": [0.0246, 0.0246]})
    doc = json.loads(out.read_text())
    assert doc["settings"] == {"base": {}, "x": {"X": "1"}}
    assert doc["rows"][1] == {"case": "c2", "dtype": "bf16", "ms": {"base": [0.5, 0.5], "x": [1.0, 1.0]}}
