"""Session 12 call 2: the cuda backward's device time per autotune config (warps, register cap) over small grouped
grids (the open perf finds) and the headline shapes; each config alone (CUDA_CONFIGS patched to one entry)."""
import dataclasses, json, sys, time
import torch
from wy_ascend import backends, ops
from wy_ascend.backends import LaunchConfig
from wy_ascend.testing import perf, properties
from wy_ascend.testing.case import Case

bw, floor = perf.device_limits("cuda:0")
print(json.dumps({"floor_us": floor * 1e3}), flush=True)
SHAPES = [dict(B=1, T=1024, H=8, HV=32, K=16, V=16), dict(B=1, T=1024, H=8, HV=32, K=64, V=64),
          dict(B=1, T=1024, H=1, HV=4, K=16, V=16), dict(B=2, T=1000, H=2, HV=6, K=64, V=32),
          dict(B=8, T=4096, H=16, HV=16, K=128, V=128), dict(B=8, T=4096, H=8, HV=32, K=128, V=128),
          dict(B=4, T=8192, H=4, HV=4, K=256, V=256), dict(B=1, T=8192, H=16, HV=16, K=128, V=128)]
CONFIGS = [(4, 1, None), (4, 1, 168), (4, 1, 128), (4, 1, 96), (8, 1, None), (8, 1, 128)]
for shape in SHAPES:
    case = Case(**shape, BT=64, dtype="bfloat16", use_g=True, backend="cuda", dist="realistic", seed=0)
    x = properties.build_inputs(case)
    row = dict(shape=shape)
    ref = None
    for cfg in CONFIGS:
        backends.CUDA_CONFIGS = [cfg]
        backends._autotuned.cache_clear(); ops._CALLS.clear()
        bwd = lambda: ops.prepare_wy_repr_bwd(x.k, x.v, x.beta, x.A, x.dw, x.du, x.g, x.cu_seqlens, backend="cuda")
        t0 = time.time()
        try:
            out = bwd(); torch.cuda.synchronize()
            first = time.time() - t0
            same = None
            if ref is None:
                ref = [o.clone() for o in out]
            else:
                same = all(torch.equal(a, b) for a, b in zip(ref, out))
            row[str(cfg)] = dict(bwd_us=round(perf.device_time(bwd) * 1e3, 2), first_s=round(first, 1), bitwise_same=same)
        except Exception as e:  # noqa: BLE001
            row[str(cfg)] = dict(error=f"{type(e).__name__}: {str(e)[:200]}")
    print(json.dumps(row), flush=True)
# the forward at the default and two caps, the perf find's shape and a headline one
for shape in (SHAPES[0], SHAPES[4]):
    case = Case(**shape, BT=64, dtype="bfloat16", use_g=True, backend="cuda", dist="realistic", seed=0)
    x = properties.build_inputs(case)
    row = dict(shape=shape, op="fwd")
    for cfg in CONFIGS[:3]:
        backends.CUDA_CONFIGS = [cfg]
        backends._autotuned.cache_clear(); ops._CALLS.clear()
        fwd = lambda: ops.recompute_w_u_fwd(x.k, x.v, x.beta, x.A, x.g, x.cu_seqlens, backend="cuda")
        fwd()
        row[str(cfg)] = round(perf.device_time(fwd) * 1e3, 2)
    print(json.dumps(row), flush=True)
