"""Session 8 diagnosis: where the time of small-K/V and K=256 shapes goes (device vs host),
ours (variants) against fla-core. Prints one JSON line per measurement."""
import functools
import json
import os
import sys
import time

import torch
import triton
import triton.testing

import wy_ascend
from wy_ascend import backends
from benchmarks.shapes import GRID, SHAPES, Shape

ALL = {**GRID, **SHAPES}
ALL["fixed_B4_T4096_H4_K256_V256"] = GRID["fixed_B4_T4096_H4_K256_V256"]


def kernel_us(fn, n=20):
    from torch.profiler import ProfilerActivity, profile
    fn(); torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
    out = {}
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
        if t:
            out[e.key[:60]] = round(t / n, 2)
    return out


def host_us(fn, n=50):
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    h = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    return round(h, 1)


def measure(tag, shape_name, fn):
    if os.environ.get("DIAG_WARM"):
        fn(); torch.cuda.synchronize(); return
    t0 = time.perf_counter(); fn(); torch.cuda.synchronize(); first = time.perf_counter() - t0
    ms = triton.testing.do_bench(fn, warmup=20, rep=80)
    row = dict(tag=tag, shape=shape_name, us=round(ms * 1e3, 1), first_s=round(first, 2), host_us=host_us(fn),
               kernels=kernel_us(fn))
    print(json.dumps(row), flush=True)


def variant(warps=None, mode=None, cap=None):
    backends._autotuned.cache_clear()
    if warps is not None:
        backends.CUDA_CONFIGS[:] = [(warps, 1)]
    return wy_ascend.LaunchConfig(mode=mode, tile_cap=cap)


def main():
    from fla.ops.gated_delta_rule import wy_fast as peer
    names = sys.argv[1:]
    os.environ["WY_ASCEND_AUTOTUNE"] = "0"
    a = torch.randn(4096, 4096, device="cuda")
    for _ in range(200):
        a @ a
    torch.cuda.synchronize()
    for name in names:
        s = ALL[name]
        x = s.inputs("cuda")
        fa = (x["k"], x["v"], x["beta"], x["A"], x["g"], x["cu_seqlens"])
        ba = (x["k"], x["v"], x["beta"], x["A"], x["dw"], x["du"], x["g"], x["cu_seqlens"])
        measure("fla", name + ":fwd", functools.partial(peer.recompute_w_u_fwd, *fa))
        measure("fla", name + ":bwd", functools.partial(peer.prepare_wy_repr_bwd, *ba))
        for kern in (peer.recompute_w_u_fwd_kernel, peer.prepare_wy_repr_bwd_kernel):
            print(json.dumps(dict(tag="fla-config", shape=name, kernel=kern.base_fn.__name__ if hasattr(kern, "base_fn") else str(kern),
                                  best=str(getattr(kern, "best_config", None)))), flush=True)
        for tag, kw in (("w4", dict(warps=4)), ("w8", dict(warps=8)), ("w2", dict(warps=2)),
                        ("w4-pers", dict(warps=4, mode="persistent")), ("w4-cap64", dict(warps=4, cap=64))):
            cfg = variant(**kw)
            measure(tag, name + ":fwd", functools.partial(wy_ascend.recompute_w_u_fwd, *fa, backend="cuda", config=cfg))
            measure(tag, name + ":bwd", functools.partial(wy_ascend.prepare_wy_repr_bwd, *ba, backend="cuda", config=cfg))
        del x
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
