"""convt bench: suite files, the --shape grammar and the CPU scale-down rule."""

import json
from pathlib import Path

import pytest


from convt.bench import roofline
from convt.bench.suite import (
    Case,
    ShapeError,
    SuiteError,
    builtin_suite_path,
    load_suite,
    parse_shape,
    scale_down,
    select_cases,
)

KERNELBENCH_IDS = ["kb57", "kb58", "kb61", "kb64", "kb65", "kb68", "kb69", "kb70", "kb71",
                   "kb72", "kb73", "kb74", "kb75", "kb77", "kb78", "kb79", "kb81"]


# ---------------------------------------------------------------------------------------
# The shipped suite
# ---------------------------------------------------------------------------------------

def test_kernelbench_suite_has_17_cases():
    suite = load_suite("kernelbench")
    assert suite.name == "kernelbench"
    assert suite.ids() == KERNELBENCH_IDS
    assert Path(suite.path) == builtin_suite_path("kernelbench")


def test_kernelbench_figures_match_the_file():
    """Output size, GFLOP and fp32 MB computed here agree with the figures in the file."""
    raw = json.loads(builtin_suite_path("kernelbench").read_text())["cases"]
    suite = load_suite("kernelbench")
    for entry, case in zip(raw, suite.cases):
        assert list(case.output_size) == entry["output_size"], case.id
        assert round(case.flops() / 1e9, 2) == pytest.approx(entry["gflop"], abs=0.006), case.id
        mbytes = roofline.problem_bytes(case, "fp32", "fwd") / 1e6
        assert mbytes == pytest.approx(entry["min_mbytes_fp32"], abs=0.06), case.id


MODEL_IDS = ["dcgan_g1", "dcgan_g2", "dcgan_g3", "dcgan_g4", "dcgan_g5", "unet_up1",
             "unet_up4", "unet3d_up1", "unet3d_up3", "hifigan_up1", "hifigan_up2",
             "hifigan_up3", "hifigan_up4", "fcn8s_up2", "fcn8s_up8", "enet_up", "vae_dec",
             "centernet_dw", "centernet_res", "vgan_up2", "vgan_up4"]


def test_models_suite_cases_and_figures():
    """The published-model layers: every case names its source, and the output size and
    GFLOP in the file agree with the ones computed from the arguments."""
    suite = load_suite("models")
    assert suite.name == "models"
    assert suite.ids() == MODEL_IDS
    raw = json.loads(builtin_suite_path("models").read_text())["cases"]
    for entry, case in zip(raw, suite.cases):
        assert entry["source"], case.id
        assert list(case.output_size) == entry["output_size"], case.id
        assert case.flops() / 1e9 == pytest.approx(entry["gflop"], abs=6e-4), case.id
    dw = {c.id: c for c in suite.cases}["centernet_dw"]
    assert dw.groups == dw.in_channels == dw.out_channels == 64
    assert dw.weight_shape == (64, 1, 4, 4)


def test_small_groups_suite_file_loads():
    """docs/data/small-groups-suite.json (the depthwise and small-group layers that time the
    direct forward, docs/kernels.md) is a valid suite file of groups of 1 to 4 input
    channels."""
    path = Path(__file__).resolve().parents[2] / "docs" / "data" / "small-groups-suite.json"
    suite = load_suite(path)
    assert suite.ids() == ["dw2d_s2", "dw2d_s1", "dw1d", "dw3d", "g16_2d", "cig2_2d"]
    for case in suite.cases:
        assert 1 <= case.in_channels // case.groups <= 4, case.id
    assert {c.dims for c in suite.cases} == {1, 2, 3}


def test_short_rows_suite_file_loads():
    """scripts/suites/short_rows.json (the dispatch's short-row layers, docs/kernels.md) is a
    valid suite file whose phases have rows of 8 to 24 positions, and one control of 64."""
    path = Path(__file__).resolve().parents[2] / "scripts" / "suites" / "short_rows.json"
    suite = load_suite(path)
    assert suite.ids() == ["sr3d_k2", "sr2d_k2", "sr2d_k4", "sr2d_k3", "sr1d_k4", "sr2d_w24",
                           "sr3d_k3", "sr2d_w64"]
    rows = {c.id: -(-c.output_size[-1] // c.stride[-1]) for c in suite.cases}
    assert rows == {"sr3d_k2": 8, "sr2d_k2": 16, "sr2d_k4": 16, "sr2d_k3": 16, "sr1d_k4": 16,
                    "sr2d_w24": 24, "sr3d_k3": 16, "sr2d_w64": 64}
    assert {c.dims for c in suite.cases} == {1, 2, 3}


def test_more_models_suite_file_loads():
    """scripts/suites/more_models.json (more layers of published models, for measuring the
    forward beyond the built-in models suite) is a valid suite file over 1-D, 2-D and 3-D
    layers, each case with its source."""
    path = Path(__file__).resolve().parents[2] / "scripts" / "suites" / "more_models.json"
    suite = load_suite(path)
    assert len(suite.cases) == 18
    assert len(set(suite.ids())) == 18
    assert {c.dims for c in suite.cases} == {1, 2, 3}
    by_id = {c.id: c for c in suite.cases}
    assert by_id["maskrcnn_mask"].output_size == (28, 28)
    assert by_id["wavegan_up1"].output_size == (64,)
    assert by_id["convtasnet_dec"].output_size == (32000,)
    assert by_id["fsrcnn_x3"].output_size == (384, 384)
    assert by_id["unet3d_64"].output_size == (128, 128, 128)
    raw = json.loads(path.read_text())
    assert all(c.get("source") for c in raw["cases"])


def test_one_tap_suite_file_loads():
    """scripts/suites/one_tap.json (layers of kernel 2, stride 2, for measuring the W phase
    pairs, docs/kernels.md) is a valid suite file whose every phase has one tap: outputs
    twice the inputs, 1-D to 3-D, narrow (at most 32 output channels) and wide."""
    path = Path(__file__).resolve().parents[2] / "scripts" / "suites" / "one_tap.json"
    suite = load_suite(path)
    assert suite.ids() == ["ot3d_64_32", "ot3d_32_16", "ot3d_64_64", "ot2d_64_32", "ot2d_32_16",
                           "ot2d_128_64", "ot1d_32_16"]
    for case in suite.cases:
        assert set(case.kernel_size) == {2} and set(case.stride) == {2}, case.id
        assert case.output_size == tuple(2 * n for n in case.input_size), case.id
    assert {c.dims for c in suite.cases} == {1, 2, 3}
    assert {c.out_channels <= 32 for c in suite.cases} == {True, False}


def test_few_channels_suite_file_loads():
    """scripts/suites/few_channels.json (layers of 1 to 32 input channels and batches of small
    images or volumes, for measuring the direct forward's several output channels a thread,
    docs/kernels.md) is a valid suite file: groups of one, 1-D to 3-D, eight layers below the
    implicit GEMM's 8 input channels (1, 2, 3 and 4) with at least 16 output channels, and
    four controls of 8 to 32 that run it."""
    path = Path(__file__).resolve().parents[2] / "scripts" / "suites" / "few_channels.json"
    suite = load_suite(path)
    assert len(suite.cases) == 12 and len(set(suite.ids())) == 12
    assert {c.groups for c in suite.cases} == {1}
    assert {c.dims for c in suite.cases} == {1, 2, 3}
    few = [c for c in suite.cases if c.in_channels < 8]
    assert len(few) == 8
    assert {c.in_channels for c in few} == {1, 2, 3, 4}
    assert all(c.out_channels >= 16 for c in few)
    assert sorted(c.in_channels for c in suite.cases if c.in_channels >= 8) == [8, 16, 32, 32]
    by_id = {c.id: c for c in suite.cases}
    assert by_id["c3_2d_s2"].output_size == (64, 64)
    assert by_id["c3_3d_s1"].output_size == (18, 34, 34)


def regenerated(name, tmp_path):
    """scripts/suites/NAME.json written again by scripts/fuzz_suite.py with the command its
    description records (the output path put back as recorded)."""
    import shlex
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    path = root / "scripts" / "suites" / f"{name}.json"
    command = json.loads(path.read_text())["about"].split("Written by `")[1].split("`")[0]
    args = shlex.split(command)[2:]
    out = tmp_path / "again.json"
    args[args.index("--out") + 1] = str(out)
    subprocess.run([sys.executable, str(root / "scripts" / "fuzz_suite.py"), *args], check=True)
    return out.read_text().replace(str(out), f"scripts/suites/{name}.json")


@pytest.mark.parametrize("name", ["few_channels_fuzz", "few_channels_heldout"])
def test_few_channels_fuzz_suites_are_the_generators_output(name, tmp_path):
    """scripts/suites/few_channels_fuzz.json and few_channels_heldout.json (24 fuzzed layers
    each of 1-7 input channels and groups of one, of two seeds: the first for choosing the
    few-channel rules, the second for checking them on layers that played no part in the
    choice) are valid suite files, and scripts/fuzz_suite.py run with the command each
    description records writes it again byte for byte."""
    check_channel_draw(name, tmp_path, 24, (1, 7), (3, 64))


def check_channel_draw(name, tmp_path, count, in_range, out_range):
    """A fuzzed draw of groups of one: `count` distinct layers of every dimensionality, their
    channels a group within the ranges, which scripts/fuzz_suite.py run with the command its
    description records writes again byte for byte. Returns the suite."""
    root = Path(__file__).resolve().parents[2]
    path = root / "scripts" / "suites" / f"{name}.json"
    suite = load_suite(path)
    assert len(suite.cases) == count and len(set(suite.ids())) == count
    assert {c.groups for c in suite.cases} == {1}
    assert {c.dims for c in suite.cases} == {1, 2, 3}
    assert all(in_range[0] <= c.in_channels <= in_range[1] and
               out_range[0] <= c.out_channels <= out_range[1] for c in suite.cases)
    command = json.loads(path.read_text())["about"].split("Written by `")[1].split("`")[0]
    assert command.endswith(f"--out scripts/suites/{name}.json")
    assert regenerated(name, tmp_path) == path.read_text()
    return suite



@pytest.mark.parametrize("name", ["few_outputs_fuzz", "few_outputs_heldout", "few_outputs_third",
                                  "few_outputs_fourth"])
def test_few_outputs_fuzz_suites_are_the_generators_output(name, tmp_path):
    """scripts/suites/few_outputs_fuzz.json, few_outputs_heldout.json, few_outputs_third.json
    and few_outputs_fourth.json (40 fuzzed layers each of 8-512 input and 1-4 output
    channels, groups of one, of four seeds: each for checking rules on layers that played no
    part in choosing them, then for choosing the next) are valid suite files, and scripts/fuzz_suite.py run with the command each description records writes it
    again byte for byte."""
    suite = check_channel_draw(name, tmp_path, 40, (8, 512), (1, 4))
    root_suites = Path(__file__).resolve().parents[2] / "scripts" / "suites"
    if name != "few_outputs_fuzz":
        key = lambda c: (c.dims, c.batch, c.in_channels, c.out_channels, tuple(c.input_size),
                         tuple(c.kernel_size), tuple(c.stride), tuple(c.padding),
                         tuple(c.output_padding), tuple(c.dilation))
        chosen = {key(c) for c in load_suite(root_suites / "few_outputs_fuzz.json").cases}
        assert not chosen & {key(c) for c in suite.cases}


@pytest.mark.parametrize("name", ["dispatch_audit", "dispatch_audit_any"])
def test_dispatch_audit_suites_are_the_generators_output(name, tmp_path):
    """scripts/suites/dispatch_audit.json (input sizes powers of two times a starting side,
    the generator's default) and dispatch_audit_any.json (--any-sizes: sizes of any value,
    rows that are not 16-byte aligned among them) are what scripts/fuzz_suite.py writes
    with the command each description records, byte for byte."""
    root = Path(__file__).resolve().parents[2]
    path = root / "scripts" / "suites" / f"{name}.json"
    suite = load_suite(path)
    assert len(suite.cases) == 120
    pow2 = [all(n & (n - 1) == 0 for n in c.input_size) for c in suite.cases]
    if name.endswith("_any"):
        assert sum(pow2) < 12, "sizes of any value: few are all powers of two"
        assert any(c.input_size[-1] % 8 for c in suite.cases)
    else:
        assert all(pow2)
    command = json.loads(path.read_text())["about"].split("Written by `")[1].split("`")[0]
    assert ("--any-sizes" in command) == name.endswith("_any")
    assert regenerated(name, tmp_path) == path.read_text()


F32_DRAWS = ("f32_aligned_fuzz", "f32_aligned_fuzz2", "f32_aligned_fuzz3", "f32_aligned_3d",
             "f32_aligned_3d2")


@pytest.mark.parametrize("name,seed,count", [("f32_aligned_fuzz", 3101, 79),
                                             ("f32_aligned_fuzz2", 3102, 98),
                                             ("f32_aligned_fuzz3", 3103, 81),
                                             ("f32_aligned_3d", 3104, 88),
                                             ("f32_aligned_3d2", 3105, 108)])
def test_float32_wgmma_rule_suites_hold_its_class(name, seed, count):
    """scripts/suites/f32_aligned_*.json (five draws of fuzzed layers of the float32
    wgmma rule's class, the last two of 3-D layers only; docs/kernels.md "Float32 on the
    wgmma kernel where its MMAs pay for the copy") are valid suite files of that class only: no stride, one group, 17-32 output
    channels, a reduction (input channels x taps) under 1024, an even-wide output; each
    description names its seed; the draws share no layer."""
    root = Path(__file__).resolve().parents[2] / "scripts" / "suites"
    suite = load_suite(root / f"{name}.json")
    assert len(suite.cases) == count and len(set(suite.ids())) == count
    for c in suite.cases:
        taps = 1
        for k in c.kernel_size:
            taps *= k
        assert c.groups == 1 and set(c.stride) == {1}, c.id
        assert 17 <= c.out_channels <= 32, c.id
        assert c.in_channels * taps < 1024, c.id
        assert c.output_size[-1] % 2 == 0, c.id
    about = json.loads((root / f"{name}.json").read_text())["about"]
    assert f"--seed {seed} " in about and f"--write-suite scripts/suites/{name}.json" in about

    def key(c):
        return (c.dims, c.in_channels, c.out_channels, tuple(c.input_size), c.kernel_size,
                c.padding, c.dilation, c.batch)
    others = [n for n in F32_DRAWS if n != name]
    mine = {key(c) for c in suite.cases}
    for other in others:
        assert not mine & {key(c) for c in load_suite(root / f"{other}.json").cases}


def test_dispatch_audit_suite_is_the_generators_output(tmp_path):
    """scripts/suites/dispatch_audit.json (fuzzed layers over the argument space the
    dispatcher decides on, for gpu_check.sh dispatch-audit) is a valid suite of 120 layers
    of 1-3 dimensions, one or two groups and strides up to 3, and scripts/fuzz_suite.py run
    with the command its description records writes it again byte for byte."""
    import shlex
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    path = root / "scripts" / "suites" / "dispatch_audit.json"
    suite = load_suite(path)
    assert len(suite.cases) == 120 and len(set(suite.ids())) == 120
    assert {c.groups for c in suite.cases} == {1, 2}
    assert {c.dims for c in suite.cases} == {1, 2, 3}
    assert max(max(c.stride) for c in suite.cases) == 3
    command = json.loads(path.read_text())["about"].split("Written by `")[1].split("`")[0]
    args = shlex.split(command)[2:]
    out = tmp_path / "again.json"
    args[args.index("--out") + 1] = str(out)
    subprocess.run([sys.executable, str(root / "scripts" / "fuzz_suite.py"), *args], check=True)
    assert out.read_text().replace(str(out), "scripts/suites/dispatch_audit.json") == \
        path.read_text()

@pytest.mark.parametrize("name,count,dims", [("f32_tma_fuzz", 164, {1, 2, 3}),
                                             ("volumes_fuzz", 130, {3}),
                                             ("planes_fuzz", 159, {2}),
                                             ("planes_fuzz2", 173, {2}),
                                             ("reduction16_fuzz", 59, {1, 2}),
                                             ("reduction16_fuzz2", 51, {1, 2}),
                                             ("f32_pairs_fuzz", 60, {1, 2, 3}),
                                             ("hfirst_fuzz", 202, {2, 3}),
                                             ("hfirst_fuzz2", 144, {2, 3}),
                                             ("xp_hfull_fuzz", 76, {2, 3}),
                                             ("xp_hfull_fuzz2", 59, {2, 3}),
                                             ("xp_hfull_fuzz3", 39, {2, 3}),
                                             ("xp_hfull16_fuzz", 96, {2, 3}),
                                             ("xp_hfull16_fuzz2", 108, {2, 3}),
                                             ("tsplit_fuzz", 90, {2, 3}),
                                             ("f32_pairs_1d", 52, {1})])
def test_dispatch_draws_are_layers_of_their_pools(tmp_path, name, count, dims):
    """scripts/suites/f32_tma_fuzz.json, volumes_fuzz.json, planes_fuzz.json,
    planes_fuzz2.json, reduction16_fuzz.json, reduction16_fuzz2.json and f32_pairs_fuzz.json
    (fuzzed layers whose plan is not the wgmma kernel's in float32, 3-D layers whose plan the
    volume rule changes, two draws of 2-D layers the float32 plane rule is checked on, two of
    16-bit layers the reduction rule gave the TMA kernel, float32 layers whose plan the W
    phase pairs change (two draws: f32_pairs_fuzz.json, f32_pairs_1d.json), layers whose
    plan more H taps a K step change (hfirst_fuzz.json, and hfirst_fuzz2.json drawn after
    the rule was picked), float32 layers whose plan an H-complete K step transposed in the
    kernel changes (xp_hfull_fuzz.json, and xp_hfull_fuzz2.json and xp_hfull_fuzz3.json
    drawn after the form and its bound were chosen; xp_hfull16_fuzz.json in 16-bit types, and
    xp_hfull16_fuzz2.json drawn after it was measured; channel-major layers whose plan splitting
    the taps changes, tsplit_fuzz.json);
    docs/kernels.md, "Volumes on the wgmma kernel whatever the reduction") hold only layers
    of the pool their description's scripts/fuzz_suite.py command draws, unchanged and in
    the pool's order; no two share a layer."""
    import shlex
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    path = root / "scripts" / "suites" / f"{name}.json"
    suite = load_suite(path)
    assert len(suite.cases) == count and len(set(suite.ids())) == count
    assert {c.dims for c in suite.cases} == dims
    command = json.loads(path.read_text())["about"].split("The pool: `")[1].split("`")[0]
    args = shlex.split(command)[2:]
    pool_path = tmp_path / "pool.json"
    args[args.index("--out") + 1] = str(pool_path)
    subprocess.run([sys.executable, str(root / "scripts" / "fuzz_suite.py"), *args], check=True)
    pool = {c.id: c for c in load_suite(pool_path).cases}
    order = list(pool)
    assert [order.index(i) for i in suite.ids()] == sorted(order.index(i) for i in suite.ids())
    for c in suite.cases:
        assert c == pool[c.id], c.id


def test_dispatch_draws_differ():
    root = Path(__file__).resolve().parents[2] / "scripts" / "suites"
    def key(c):
        return (c.dims, c.in_channels, c.out_channels, tuple(c.input_size), c.kernel_size,
                c.stride, c.padding, c.dilation, c.groups, c.batch)
    draws = [{key(c) for c in load_suite(root / f"{n}.json").cases}
             for n in ("f32_tma_fuzz", "volumes_fuzz", "planes_fuzz", "planes_fuzz2",
                       "reduction16_fuzz", "reduction16_fuzz2", "f32_pairs_fuzz",
                       "hfirst_fuzz", "hfirst_fuzz2", "f32_pairs_1d", "xp_hfull_fuzz",
                       "xp_hfull_fuzz2", "xp_hfull_fuzz3", "xp_hfull16_fuzz",
                       "xp_hfull16_fuzz2", "tsplit_fuzz")]
    for i, a in enumerate(draws):
        for b in draws[i + 1:]:
            assert not a & b


def test_few_channel_suites_differ():
    """The held-out suite shares no layer with the one the rules were chosen on."""
    root = Path(__file__).resolve().parents[2] / "scripts" / "suites"
    def key(c):
        return (c.dims, c.in_channels, c.out_channels, tuple(c.input_size), c.kernel_size,
                c.stride, c.padding, c.dilation)
    chosen = {key(c) for c in load_suite(root / "few_channels_fuzz.json").cases}
    assert not chosen & {key(c) for c in load_suite(root / "few_channels_heldout.json").cases}


def test_fuzz_suite_rejects_bad_ranges():
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "scripts" / "fuzz_suite.py"
    r = subprocess.run([sys.executable, str(script), "--in-channels", "5-2"], capture_output=True,
                       text=True)
    assert r.returncode == 2
    assert "expected N or LO-HI with 1 <= LO <= HI, got '5-2'" in r.stderr


def test_groups_1d_suite_file_loads():
    """scripts/suites/groups_1d.json (1-D layers of 1, 2 and 4 input channels a group, for
    measuring narrow groups merged onto the wgmma kernel against the direct kernel in one
    dimension) is a valid suite file of 1-D grouped layers only."""
    path = Path(__file__).resolve().parents[2] / "scripts" / "suites" / "groups_1d.json"
    suite = load_suite(path)
    assert suite.ids() == ["dw1d_k4_s2", "dw1d_k8_s4", "dw1d_k3_s1", "g2_1d_k4_s2",
                           "g4_1d_k16_s8", "g4_1d_k5_s1"]
    assert {c.dims for c in suite.cases} == {1}
    assert sorted({c.in_channels // c.groups for c in suite.cases}) == [1, 2, 4]


def test_kb72_fields():
    case = {c.id: c for c in load_suite("kernelbench").cases}["kb72"]
    assert case.dims == 3 and case.groups == 4 and not case.bias
    assert case.stride == (2, 2, 2) and case.padding == (1, 2, 3)
    assert case.output_padding == (1, 1, 1) and case.kernel_size == (3, 5, 7)
    assert case.weight_shape == (32, 8, 3, 5, 7)
    assert case.output_shape == (8, 32, 24, 48, 96)


# ---------------------------------------------------------------------------------------
# User suite files
# ---------------------------------------------------------------------------------------

GOOD_CASE = {"id": "mine", "dims": 2, "batch": 2, "in_channels": 8, "out_channels": 4,
             "input_size": [16, 16], "kernel_size": 4, "stride": 2, "padding": 1,
             "bias": True}


def write(tmp_path, data, name="suite.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_user_suite_loads_with_defaults_and_scalars(tmp_path):
    suite = load_suite(write(tmp_path, {"about": "x", "cases": [GOOD_CASE]}))
    (case,) = suite.cases
    assert suite.name == "suite" and suite.about == "x"
    assert case.kernel_size == (4, 4) and case.stride == (2, 2) and case.padding == (1, 1)
    assert case.output_padding == (0, 0) and case.dilation == (1, 1) and case.groups == 1
    assert case.bias is True
    assert case.output_size == (32, 32)


def test_user_suite_as_bare_list(tmp_path):
    assert load_suite(write(tmp_path, [GOOD_CASE])).ids() == ["mine"]


@pytest.mark.parametrize("change, message", [
    ({"stride": [2, 2, 2]}, "stride must have 2 entries"),
    ({"strides": 2}, "unknown key 'strides'"),
    ({"groups": 3}, "divisible by groups"),
    ({"output_padding": 2}, "output_padding"),
    ({"padding": -1}, "padding must be non-negative"),
    ({"dims": 4}, "dims must be 1, 2 or 3"),
    ({"batch": "2"}, "batch must be an integer"),
    ({"bias": 1}, "bias must be true or false"),
    ({"output_size": [31, 32]}, "does not match"),
    ({"kernel_size": 3, "padding": 20}, "too small"),
    ({"id": ""}, "id must be a non-empty string"),
])
def test_user_suite_bad_case_names_file_case_and_problem(tmp_path, change, message):
    path = write(tmp_path, {"cases": [GOOD_CASE, {**GOOD_CASE, "id": "bad", **change}]})
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    text = str(info.value)
    assert str(path) in text and "case #2" in text and message in text


def test_user_suite_missing_key(tmp_path):
    entry = dict(GOOD_CASE)
    del entry["kernel_size"]
    with pytest.raises(SuiteError, match="missing required key.*kernel_size"):
        load_suite(write(tmp_path, {"cases": [entry]}))


def test_user_suite_structural_errors(tmp_path):
    with pytest.raises(SuiteError, match="not found"):
        load_suite(tmp_path / "nope.json")
    with pytest.raises(SuiteError, match=r"not valid JSON.*line 1"):
        load_suite(write(tmp_path, "{cases: [}"))
    with pytest.raises(SuiteError, match="no \"cases\" list"):
        load_suite(write(tmp_path, {"shapes": []}))
    with pytest.raises(SuiteError, match="no cases"):
        load_suite(write(tmp_path, {"cases": []}))
    with pytest.raises(SuiteError, match="duplicate id 'mine'"):
        load_suite(write(tmp_path, {"cases": [GOOD_CASE, GOOD_CASE]}))
    with pytest.raises(SuiteError, match="must be a JSON object"):
        load_suite(write(tmp_path, {"cases": [3]}))


def test_select_cases():
    cases = load_suite("kernelbench").cases
    picked = select_cases(cases, ["kb72,kb57", "kb81", "kb57"])
    assert [c.id for c in picked] == ["kb72", "kb57", "kb81"]
    assert len(select_cases(cases, [])) == 17
    with pytest.raises(SuiteError, match="unknown case id.*kb99"):
        select_cases(cases, ["kb57,kb99"])


# ---------------------------------------------------------------------------------------
# The shape grammar
# ---------------------------------------------------------------------------------------

def test_shape_example_from_the_docs():
    case = parse_shape("2d N=8 C=64->64 in=512x512 k=3 s=2 p=1 op=1")
    assert case == Case(id="shape", dims=2, batch=8, in_channels=64, out_channels=64,
                        input_size=(512, 512), kernel_size=(3, 3), stride=(2, 2),
                        padding=(1, 1), output_padding=(1, 1), dilation=(1, 1))
    assert case.output_size == (1024, 1024)


def test_shape_all_keys_and_per_dim_values():
    case = parse_shape("3d id=up N=2 C=32->64 in=4x8x16 k=3x5x7 s=2x2x1 p=1x2x3 op=1x0x0 "
                       "d=1x1x2 g=4 bias")
    assert case.id == "up" and case.batch == 2 and case.groups == 4 and case.bias
    assert case.in_channels == 32 and case.out_channels == 64
    assert case.kernel_size == (3, 5, 7) and case.stride == (2, 2, 1)
    assert case.padding == (1, 2, 3) and case.output_padding == (1, 0, 0)
    assert case.dilation == (1, 1, 2)


def test_shape_infers_dims_and_defaults():
    case = parse_shape("in=4096 C=512->256 k=16 s=8 p=4")
    assert case.dims == 1 and case.batch == 1 and not case.bias
    assert case.output_size == ((4096 - 1) * 8 - 8 + 15 + 1,)
    same = parse_shape("C=16 in=10x12 k=3")
    assert same.in_channels == same.out_channels == 16 and same.dims == 2
    # a single in= entry with an explicit dimension applies to every dimension
    assert parse_shape("2d C=4 in=9 k=3").input_size == (9, 9)


def test_shape_aliases_and_bias_values():
    a = parse_shape("2d batch=3 cin=4 cout=8 input=5x6 kernel=3 stride=2 padding=1 "
                    "output_padding=1 dilation=1 groups=2 bias=true")
    b = parse_shape("2d N=3 C=4->8 in=5x6 k=3 s=2 p=1 op=1 g=2 bias")
    assert a == b
    assert parse_shape("2d C=4 in=5 k=3 bias=0").bias is False
    assert parse_shape("2d C=4→8 in=5 k=3").out_channels == 8


def test_shape_round_trips_through_spec():
    for case in load_suite("kernelbench").cases:
        assert parse_shape(case.spec(), default_id=case.id) == case
    odd = parse_shape("2d N=2 C=6->9 in=7x5 k=2x4 s=3x1 p=1x0 op=2x0 d=1x2 g=3 bias")
    assert parse_shape(odd.spec()) == odd


@pytest.mark.parametrize("text, message", [
    ("", "empty shape"),
    ("2d N=8 C=64->64 k=3", "no in="),
    ("2d N=8 C=64->64 in=32x32", "no k="),
    ("2d N=8 in=32x32 k=3", "no C="),
    ("2d N=8 C=64->64 in=32x32 k=3 foo=1", "unknown key 'foo'"),
    ("2d N=8 C=64->64 in=32x32 k=3 hello", "unknown token 'hello'"),
    ("2d N=8 C=64->64 in=32x32x32 k=3", "3 entries but the case is 2d"),
    ("2d N=8 C=64->64 in=32x32 k=3x3x3", "3 entries but the case is 2d"),
    ("2d N=8 C=64->64 in=32x32 k=3 s=2 op=2", "output_padding"),
    ("2d N=8 C=64->60 in=32x32 k=3 g=8", "divisible by groups"),
    ("2d N=8 C=64->64 in=32xx32 k=3", "in='32xx32'"),
    ("2d N=8 C=64->64 in=32x32 k=-3", "k='-3'"),
    ("2d N=8 C=64->64 in=32x32 k=3 s=0", "stride must be positive"),
    ("2d N=0 C=64->64 in=32x32 k=3", "batch must be positive"),
    ("2d N=x C=64->64 in=32x32 k=3", "whole number"),
    ("2d C=64-64 in=32x32 k=3", "C=IN->OUT"),
    ("2d 3d C=4 in=4 k=3", "given twice"),
    ("2d C=4 in=4 k=3 k=5", "given twice"),
    ("2d C=4 in=1 k=1 p=1", "too small"),
    ("in=2x2x2x2 C=4 k=3", "1, 2 or 3 entries"),
    ("2d C=4 in=4 k=3 bias=maybe", "bias takes true or false"),
])
def test_shape_errors(text, message):
    with pytest.raises(ShapeError) as info:
        parse_shape(text)
    assert message in str(info.value)


# ---------------------------------------------------------------------------------------
# CPU scale-down
# ---------------------------------------------------------------------------------------

def test_scale_down_kernelbench():
    limit = 50_000_000
    for case in load_suite("kernelbench").cases:
        small = scale_down(case, limit)
        assert small.id == case.id and small.scaled_from is case
        assert small.batch == 1
        assert 0 < small.flops() <= limit, case.id
        assert small.flops() > limit / 2 ** case.dims / 2, case.id  # not shrunk needlessly
        assert all(o >= 1 for o in small.output_size)
        for field in ("in_channels", "out_channels", "kernel_size", "stride", "padding",
                      "output_padding", "dilation", "groups", "bias"):
            assert getattr(small, field) == getattr(case, field), (case.id, field)


def test_scale_down_rule_by_hand():
    # kb57: 2*64*64*9 = 73728 flops per input pixel; 1024x1024 halves, largest extent
    # first (the first among equals), until at most 50e6 / 73728 = 678 pixels: 16x32.
    kb57 = {c.id: c for c in load_suite("kernelbench").cases}["kb57"]
    assert scale_down(kb57).input_size == (16, 32)
    assert scale_down(kb57).flops() == 73728 * 512


def test_scale_down_keeps_small_cases_and_can_be_disabled():
    case = parse_shape("2d N=4 C=8 in=16 k=3")
    assert scale_down(case) is case
    big = parse_shape("2d N=8 C=64 in=1024 k=3")
    assert scale_down(big, 0) is big


def test_scale_down_stops_when_output_would_be_empty():
    # k=3, p=2, s=1: output = L - 2, so halving 4 to 2 would leave an empty output.
    case = parse_shape("1d N=2 C=512->512 in=64 k=3 p=2")
    small = scale_down(case, 1000)
    assert small.input_size == (4,)
    assert small.output_size == (2,)


# The pools of the draws that measured the scattered W taps' grown staging area and the
# limits on zeros along W, the W phase pairs over scattered taps, sparse volumes and strided
# float32 rows on the wgmma kernel (docs/kernels.md), by seed: scripts/fuzz_suite.py's arguments.
_NARROW = ["--in-channels", "4-128", "--out-channels", "1-16", "--groups", "1-2",
           "--max-kernel", "7", "--max-stride", "3", "--count", "3000", "--any-sizes"]
_NARROW32 = ["--in-channels", "4-128", "--out-channels", "1-32", "--groups", "1-2",
             "--max-kernel", "7", "--max-stride", "3", "--count", "3000", "--any-sizes"]
_VOLUMES = ["--in-channels", "4-256", "--out-channels", "1-256", "--groups", "1-2", "--dims", "3",
            "--max-kernel", "7", "--max-stride", "3", "--count", "3000", "--any-sizes"]
_ROWS = ["--in-channels", "4-256", "--out-channels", "4-256", "--groups", "1-4", "--dims", "1",
         "--max-kernel", "7", "--max-stride", "4", "--count", "3000", "--any-sizes"]
_AUDIT_WIDE = ["--any-sizes", "--in-channels", "4-256", "--out-channels", "4-256", "--groups",
               "1-4", "--dims", "1,2,2,3", "--max-kernel", "7", "--max-stride", "4", "--count",
               "3000"]
_WIDE = ["--any-sizes", "--in-channels", "4-256", "--out-channels", "4-256", "--groups", "1-2",
         "--dims", "1,2,2,3", "--count", "3000"]
_XP_COOP = ["--any-sizes", "--in-channels", "8-256", "--out-channels", "65-256", "--groups", "1-2",
            "--dims", "1,2,2,3", "--max-kernel", "7", "--max-stride", "3", "--count", "3000"]
_XP_W2 = ["--any-sizes", "--in-channels", "8-256", "--out-channels", "9-32", "--groups", "1-2",
          "--dims", "1,2,2,3", "--max-kernel", "7", "--max-stride", "3", "--count", "3000"]
_POOLS = {4881: _WIDE + ["--seed", "4881"],
          4890: _NARROW + ["--dims", "1,1,2", "--seed", "4890"],
          4891: _NARROW + ["--dims", "1,2,2,3", "--seed", "4891"],
          4893: _NARROW + ["--dims", "1,1,2,3", "--seed", "4893"],
          4894: _WIDE + ["--seed", "4894"],
          4896: _NARROW32 + ["--dims", "1,2,2,3", "--seed", "4896"],
          4897: _NARROW + ["--dims", "1,1,2,3", "--seed", "4897"],
          4898: _NARROW + ["--dims", "1,1,2,3", "--seed", "4898"],
          4900: _VOLUMES + ["--seed", "4900"],
          4901: _VOLUMES + ["--seed", "4901"],
          4911: _ROWS + ["--seed", "4911"],
          4913: _ROWS + ["--seed", "4913"],
          4915: _AUDIT_WIDE + ["--seed", "4915"],
          4920: _XP_COOP + ["--seed", "4920"],
          4921: _XP_COOP + ["--seed", "4921"],
          4930: _XP_COOP + ["--seed", "4930"],
          4931: _XP_COOP + ["--seed", "4931"],
          4940: _XP_W2 + ["--seed", "4940"],
          4941: _XP_W2 + ["--seed", "4941"]}


@pytest.mark.parametrize("name,count,seeds", [("sc_segs2_fuzz", 100, (4890, 4891)),
                                              ("wup_fuzz", 70, (4881,)),
                                              ("sc_wup_heldout", 110, (4893, 4894)),
                                              ("sc_xp_fuzz", 115, (4890, 4891, 4893)),
                                              ("sc_xp_heldout", 72, (4896, 4897, 4898)),
                                              ("volume_sparse_fuzz", 88, (4900,)),
                                              ("volume_sparse_heldout", 76, (4901,)),
                                              ("f32_rows_heldout", 80, (4911,)),
                                              ("f32_rows_heldout2", 80, (4913,)),
                                              ("wtap1_fuzz", 80, (4915,)),
                                              ("xp_coop_fuzz", 51, (4920,)),
                                              ("xp_coop_heldout", 57, (4921,)),
                                              ("xp_coop_macs_fuzz", 54, (4930,)),
                                              ("xp_coop_macs_heldout", 41, (4931,)),
                                              ("xp_w2_pos_fuzz", 80, (4940,)),
                                              ("xp_w2_pos_heldout", 80, (4941,))])
def test_multi_pool_draws_are_layers_of_their_pools(tmp_path, name, count, seeds):
    """scripts/suites/sc_segs2_fuzz.json, wup_fuzz.json, sc_wup_heldout.json, sc_xp_fuzz.json,
    sc_xp_heldout.json, volume_sparse_fuzz.json, volume_sparse_heldout.json,
    f32_rows_heldout.json, f32_rows_heldout2.json, wtap1_fuzz.json, xp_coop_fuzz.json,
    xp_coop_heldout.json, xp_coop_macs_fuzz.json, xp_coop_macs_heldout.json,
    xp_w2_pos_fuzz.json and xp_w2_pos_heldout.json hold only layers of the pools their
    descriptions name, each case id the
    pool's seed and the pool's own id, unchanged; no two cases share an id."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    path = root / "scripts" / "suites" / f"{name}.json"
    suite = load_suite(path)
    about = json.loads(path.read_text())["about"]
    assert len(suite.cases) == count and len(set(suite.ids())) == count
    pools = {}
    for seed in seeds:
        assert f"--seed {seed}" in about
        out = tmp_path / f"pool{seed}.json"
        subprocess.run([sys.executable, str(root / "scripts" / "fuzz_suite.py"), *_POOLS[seed],
                        "--out", str(out)], check=True)
        pools[seed] = {c.id: c for c in load_suite(out).cases}
    for c in suite.cases:
        prefix, own = c.id.split("_", 1)
        seed = int(prefix[1:])
        assert seed in seeds, c.id
        expected = pools[seed][own]
        assert (c.dims, c.batch, c.in_channels, c.out_channels, c.groups, tuple(c.input_size),
                c.kernel_size, c.stride, c.padding, c.output_padding, c.dilation, c.bias) == (
            expected.dims, expected.batch, expected.in_channels, expected.out_channels,
            expected.groups, tuple(expected.input_size), expected.kernel_size, expected.stride,
            expected.padding, expected.output_padding, expected.dilation, expected.bias), c.id


def test_held_out_draw_shares_no_layer_with_the_draws_the_rules_were_chosen_on():
    """scripts/suites/sc_wup_heldout.json shares no layer with sc_segs_fuzz.json,
    sc_segs2_fuzz.json or wup_fuzz.json, nor sc_xp_heldout.json with sc_xp_fuzz.json, nor
    volume_sparse_heldout.json with volume_sparse_fuzz.json, nor f32_rows_heldout.json with
    dispatch_audit_wide.json, nor f32_rows_heldout2.json with either, nor xp_coop_heldout.json
    with xp_coop_fuzz.json, nor xp_coop_macs_heldout.json with xp_coop_macs_fuzz.json, nor
    xp_w2_pos_heldout.json with xp_w2_pos_fuzz.json."""
    root = Path(__file__).resolve().parents[2] / "scripts" / "suites"
    def key(c):
        return (c.dims, c.batch, c.in_channels, c.out_channels, c.groups, tuple(c.input_size),
                c.kernel_size, c.stride, c.padding, c.output_padding, c.dilation)
    held = {key(c) for c in load_suite(root / "sc_wup_heldout.json").cases}
    for name in ("sc_segs_fuzz", "sc_segs2_fuzz", "wup_fuzz"):
        assert not held & {key(c) for c in load_suite(root / f"{name}.json").cases}, name
    held_xp = {key(c) for c in load_suite(root / "sc_xp_heldout.json").cases}
    assert not held_xp & {key(c) for c in load_suite(root / "sc_xp_fuzz.json").cases}
    held_rows = {key(c) for c in load_suite(root / "f32_rows_heldout.json").cases}
    assert not held_rows & {key(c) for c in load_suite(root / "dispatch_audit_wide.json").cases}
    held_rows2 = {key(c) for c in load_suite(root / "f32_rows_heldout2.json").cases}
    assert not held_rows2 & held_rows
    assert not held_rows2 & {key(c) for c in load_suite(root / "dispatch_audit_wide.json").cases}
    held_vol = {key(c) for c in load_suite(root / "volume_sparse_heldout.json").cases}
    assert not held_vol & {key(c) for c in load_suite(root / "volume_sparse_fuzz.json").cases}
    held_xc = {key(c) for c in load_suite(root / "xp_coop_heldout.json").cases}
    assert not held_xc & {key(c) for c in load_suite(root / "xp_coop_fuzz.json").cases}
    held_xcm = {key(c) for c in load_suite(root / "xp_coop_macs_heldout.json").cases}
    assert not held_xcm & {key(c) for c in load_suite(root / "xp_coop_macs_fuzz.json").cases}
    held_w2 = {key(c) for c in load_suite(root / "xp_w2_pos_heldout.json").cases}
    assert not held_w2 & {key(c) for c in load_suite(root / "xp_w2_pos_fuzz.json").cases}
