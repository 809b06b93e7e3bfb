"""The kept workspace against one allocated per call, in one process (the host's state,
which moves more between processes than an allocation costs, shared by both): convt's
call timed the benchmark's way (a PyTorch call, the L2 written, a start event, the call,
an end event), the two ways in alternate calls.

    python scripts/keep_workspace_ab.py models bf16 dcgan_g1,hifigan_up3,fcn8s_up2
    python scripts/keep_workspace_ab.py kernelbench fp32 kb72,kb58
    AB_KEPT_MIB=1024 python scripts/keep_workspace_ab.py kernelbench fp32 kb58,kb75

Prints each case's workspace, median times (ms) and allocated / kept, then the geomean.
AB_KEPT_MIB sets the largest workspace kept for these calls (default: the
package's limit), so that larger ones can be timed kept too.
"""
import os
import math
import statistics
import sys

import torch
import torch.nn.functional as F

import convt
from convt import _kernels
from convt.bench.suite import load_suite, select_cases
from convt.bench.timing import L2Flusher, time_call

if len(sys.argv) != 4:
    sys.exit(__doc__)
suite, dtype, ids = sys.argv[1], sys.argv[2], sys.argv[3]
dt = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
torch.backends.cudnn.allow_tf32 = True
if os.environ.get("AB_KEPT_MIB"):
    _kernels._WORKSPACE_KEPT_BYTES = int(os.environ["AB_KEPT_MIB"]) << 20
flush = L2Flusher("cuda")
res = []
for case in select_cases(load_suite(suite).cases, ids.split(",")):
    x = torch.rand(case.batch, case.in_channels, *case.input_size, device="cuda", dtype=dt)
    w = torch.randn(case.in_channels, case.out_channels // case.groups, *case.kernel_size, device="cuda", dtype=dt)
    b = torch.randn(case.out_channels, device="cuda", dtype=dt) if case.bias else None
    kw = dict(stride=case.stride, padding=case.padding, output_padding=case.output_padding, groups=case.groups, dilation=case.dilation)
    ours = getattr(convt, f"conv_transpose{case.dims}d")
    theirs = getattr(F, f"conv_transpose{case.dims}d")
    ws = _kernels._C.prepare_forward(_kernels.describe(x), _kernels.describe(w), None if b is None else _kernels.describe(b),
        (case.dims, case.stride, case.padding, case.output_padding, case.dilation, case.groups), 0, 0, True)[3]
    t = {True: [], False: []}
    with torch.no_grad():
        for i in range(8):
            ours(x, w, b, **kw)
            theirs(x, w, b, **kw)
        torch.cuda.synchronize()
        for i in range(60):
            keep = i % 2 == 0
            flush()
            time_call(lambda: theirs(x, w, b, **kw), "cuda")
            _kernels._KEEP_WORKSPACE = keep
            flush()
            t[keep].append(time_call(lambda: ours(x, w, b, **kw), "cuda")[0])
    _kernels._KEEP_WORKSPACE = True
    k, a = statistics.median(t[True]), statistics.median(t[False])
    res.append(a / k)
    print(f"{case.id:16} {dtype} workspace {ws/2**20:8.2f} MiB  kept {k:.4f} ms  allocated {a:.4f} ms  ratio {a/k:.3f}", flush=True)
print(f"geomean allocated/kept {math.exp(sum(map(math.log, res))/len(res)):.3f} over {len(res)}")
