"""scripts/wg_layout_sweep.py: the column caps it tries, the layouts it reads from the plans'
descriptions and the ones it picks to time (the timing itself needs a GPU)."""
import importlib.util
import pathlib

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "wg_layout_sweep.py"


def load_script():
    spec = importlib.util.spec_from_file_location("wg_layout_sweep", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


KB71 = ("implicit-GEMM wgmma persistent, tile 256 positions x 32 channels (1 rows x 206 of a "
        "1x208 box, 80% used), K step 32 channels x 1 H taps x 3 W taps, 3 stages")
KB71_114 = ("implicit-GEMM wgmma persistent, tile 256 positions x 32 channels (2 rows x 114 of "
            "a 2x116 box, 89% used), K step 32 channels x 1 H taps x 3 W taps, 3 stages")
KB71_49 = ("implicit-GEMM wgmma persistent, tile 256 positions x 32 channels (5 rows x 49 of a "
           "5x51 box, 95% used), K step 32 channels x 1 H taps x 3 W taps, 3 stages")
KB57 = ("implicit-GEMM wgmma persistent, tile 64 channels x 208 positions (3 rows x 64 of a "
        "3x66 box, 95% used), K step 64 channels x 1 H taps x 3 W taps, 4 stages")


def test_candidate_caps():
    caps = load_script().candidate_caps(1026, 1)
    assert caps[0] == 1026 and caps == sorted(set(caps), reverse=True)
    assert {206, 114, 103, 79, 49} <= set(caps)
    assert min(caps) >= 8
    # A W stride of 2: the phases' 513 columns and the whole row's 1026 both cut.
    caps2 = load_script().candidate_caps(1026, 2)
    assert {513, 257, 1026} <= set(caps2)
    # Narrow rows: caps of at least 8 columns only.
    assert load_script().candidate_caps(20, 1) == [20, 10]


def test_parse_layout():
    mod = load_script()
    assert mod.parse_layout(KB71) == ("256 positions x 32 channels", 1, 206, 1, 208, 0.80)
    assert mod.parse_layout(KB57) == ("64 channels x 208 positions", 3, 64, 3, 66, 0.95)
    assert mod.parse_layout("implicit-GEMM TMA + mma.sync, 3 W taps per box, tile 128 "
                            "positions x 32 channels x 32, 2 stages") is None
    assert mod.parse_layout("direct kernel, chunks of 16 output channels a thread") is None


def test_pick_layouts_keeps_the_planners_first_and_distinct_ones_by_use():
    mod = load_script()
    capped = [(1026, KB71), (206, KB71), (115, KB71_114), (114, KB71_114), (49, KB71_49),
              (30, "direct kernel, rows")]
    picked = mod.pick_layouts(KB71, capped, 10)
    assert picked == [(None, KB71), (49, KB71_49), (115, KB71_114)]
    assert mod.pick_layouts(KB71, capped, 2) == [(None, KB71), (49, KB71_49)]
    assert mod.pick_layouts(KB71, capped, 1) == [(None, KB71)]
