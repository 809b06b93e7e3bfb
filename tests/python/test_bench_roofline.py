"""convt bench: roofline arithmetic against figures worked out by hand."""


import pytest


from convt.bench import roofline as rl
from convt.bench.suite import load_suite, parse_shape


@pytest.fixture(scope="module")
def kb():
    return {c.id: c for c in load_suite("kernelbench").cases}


def test_kb57_fp32_forward_by_hand(kb):
    # kb57: N=8, C 64->64, 1024x1024 input, 3x3 kernel, stride 1, no padding.
    #   input  8*64*1024*1024 = 536,870,912 elements
    #   weight 64*64*3*3      =      36,864
    #   output 8*64*1026*1026 = 538,970,112
    #   bytes  (536,870,912 + 36,864 + 538,970,112) * 4 = 4,303,511,552
    #   flops  2*8*64*64*9*1024*1024 = 618,475,290,624
    case = kb["kb57"]
    assert case.numels() == {"input": 536_870_912, "weight": 36_864, "bias": 0,
                             "output": 538_970_112}
    assert rl.problem_bytes(case, "fp32", "fwd") == 4_303_511_552
    assert rl.problem_flops(case, "fwd") == 618_475_290_624
    # H200, TF32 allowed: peak 494.7 TFLOP/s; with a 4000 GB/s copy bandwidth:
    #   memory  4,303,511,552 B / 4.0e12 B/s      = 1.075877888 ms
    #   compute 618,475,290,624 / 494.7e12 flop/s = 1.250202730 ms  -> compute-bound
    ms, bound = rl.roofline_ms(618_475_290_624, 4_303_511_552, 494.7, 4000.0)
    assert bound == "compute"
    assert ms == pytest.approx(1.250202730, rel=1e-9)
    # strict float32 (66.9 TFLOP/s): 618,475,290,624 / 66.9e12 = 9.244772655 ms
    ms, bound = rl.roofline_ms(618_475_290_624, 4_303_511_552, 66.9, 4000.0)
    assert (bound, ms) == ("compute", pytest.approx(9.244772655, rel=1e-9))


def test_kb72_bf16_forward_backward_by_hand(kb):
    # kb72: N=8, C 32->32, groups 4, 12x24x48 input, 3x5x7 kernel -> 24x48x96 output.
    #   input  8*32*12*24*48 =  3,538,944 elements
    #   weight 32*8*3*5*7    =     26,880
    #   output 8*32*24*48*96 = 28,311,552
    #   forward flops 2*8*32*8*105*13,824 = 5,945,425,920
    # forward+backward: flops x3 = 17,836,277,760;
    #   elements 3*input + 3*weight + 2*output = 10,616,832 + 80,640 + 56,623,104
    #            = 67,320,576; bf16 bytes = 134,641,152
    case = kb["kb72"]
    assert case.numels() == {"input": 3_538_944, "weight": 26_880, "bias": 0,
                             "output": 28_311_552}
    assert rl.problem_flops(case, "fwd") == 5_945_425_920
    assert rl.problem_flops(case, "fwd+bwd") == 17_836_277_760
    assert rl.problem_bytes(case, "bf16", "fwd+bwd") == 134_641_152
    # forward only, fp32: (3,538,944 + 26,880 + 28,311,552) * 4 = 127,509,504
    assert rl.problem_bytes(case, "fp32", "fwd") == 127_509_504
    # H200 BF16 989.4 TFLOP/s, 4000 GB/s:
    #   memory  134,641,152 / 4.0e12        = 0.033660288 ms  -> memory-bound
    #   compute 17,836,277,760 / 989.4e12   = 0.018027368 ms
    ms, bound = rl.roofline_ms(17_836_277_760, 134_641_152, 989.4, 4000.0)
    assert bound == "memory"
    assert ms == pytest.approx(0.033660288, rel=1e-9)


def test_bias_counts_once_forward_and_twice_forward_backward():
    case = parse_shape("1d N=1 C=2->3 in=4 k=2 bias")
    # input 1*2*4 = 8, weight 2*3*2 = 12, bias 3, output 1*3*5 = 15
    assert case.numels() == {"input": 8, "weight": 12, "bias": 3, "output": 15}
    assert rl.problem_bytes(case, "fp32", "fwd") == (8 + 12 + 3 + 15) * 4
    assert rl.problem_bytes(case, "fp16", "fwd+bwd") == (3 * 8 + 3 * 12 + 2 * 3 + 2 * 15) * 2
    with pytest.raises(ValueError, match="direction"):
        rl.problem_bytes(case, "fp32", "bwd")


@pytest.mark.parametrize("name, label", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"),
    ("NVIDIA H200", "H200 SXM"),
    ("NVIDIA GH200 480GB", "GH200"),
    ("NVIDIA A100-SXM4-80GB", "A100"),
    ("NVIDIA A100 80GB PCIe", "A100"),
    ("NVIDIA L40S", "L40S"),
])
def test_known_gpus(name, label):
    peaks = rl.lookup_peaks(name)
    assert peaks is not None and peaks.source == f"table: {label}"


def test_hopper_peaks_are_the_spec_figures():
    for name in ("NVIDIA H100 80GB HBM3", "NVIDIA H200"):
        p = rl.lookup_peaks(name)
        assert (p.tf32, p.bf16, p.fp16, p.fp32) == (494.7, 989.4, 989.4, 66.9)


@pytest.mark.parametrize("name", ["NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200 NVL",
                                  "NVIDIA L40", "NVIDIA GeForce RTX 4090", "Tesla V100"])
def test_unknown_gpus_fall_back_to_measurement(name):
    assert rl.lookup_peaks(name) is None


def test_peak_keys_and_overrides():
    assert rl.peak_key("fp32", "default") == "tf32"
    assert rl.peak_key("fp32", "strict") == "fp32"
    assert rl.peak_key("bf16", None) == "bf16"
    p = rl.lookup_peaks("NVIDIA H200").with_overrides({"tf32": 400.0})
    assert p.get("tf32") == 400.0 and p.get("bf16") == 989.4
    assert p.source == "table: H200 SXM + --peak"
