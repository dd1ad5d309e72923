"""Session 12 call 1: where the small grouped backward's time goes (the open perf find perf-d16759ef3d4b).
Per shape and variant: device time of each op (perf.device_time), and its kernels (torch.profiler), against the
launch floor. Variants by monkeypatching the cuda backend in-process: group_dk on/off, one warps config each,
narrow 16-wide tiles with fp32 dots (min_tile=16). Then the dk sum alone: torch's sum+cast vs one Triton kernel."""
import dataclasses, json, sys, time
import torch, triton, triton.language as tl
from wy_ascend import backends, ops
from wy_ascend.backends import LaunchConfig
from wy_ascend.testing import perf, properties
from wy_ascend.testing.case import Case

bw, floor = perf.device_limits("cuda:0")
print(json.dumps({"floor_us": floor * 1e3, "copy_GBs": bw / 1e6}), flush=True)

def kernels_of(fn):
    from torch.profiler import profile, ProfilerActivity
    fn(); torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", 0) or getattr(e, "cuda_time_total", 0)
        if t > 0 and e.count:
            rows.append((e.key[:60], e.count // 10, round(t / e.count, 2)))
    return rows

def reset(**changes):
    backends.BACKENDS["cuda"] = dataclasses.replace(ORIG, **changes)
    backends._autotuned.cache_clear(); ops._CALLS.clear()

ORIG = backends.BACKENDS["cuda"]
SHAPES = [dict(B=1, T=1024, H=8, HV=32, K=16, V=16), dict(B=1, T=1024, H=1, HV=4, K=16, V=16),
          dict(B=1, T=1024, H=8, HV=8, K=16, V=16), dict(B=1, T=64, H=1, HV=1, K=16, V=16),
          dict(B=1, T=1024, H=8, HV=32, K=64, V=64)]
VARIANTS = [("default", {}, {}), ("group_dk", {"group_dk": True}, {}), ("per_head", {"group_dk": False}, {}),
            ("w2", {}, {"cfg": [(2, 1)]}), ("w4", {}, {"cfg": [(4, 1)]}), ("w8", {}, {"cfg": [(8, 1)]}),
            ("tile16", {}, {"min_tile": 16}), ("tile16_group", {"group_dk": True}, {"min_tile": 16})]
for shape in SHAPES:
    case = Case(**shape, BT=64, dtype="bfloat16", use_g=True, backend="cuda", dist="realistic", seed=0)
    x = properties.build_inputs(case)
    for name, knobs, patch in VARIANTS:
        backends.CUDA_CONFIGS = patch.get("cfg", [(4, 1), (8, 1), (2, 1)])
        reset(**({"min_tile": patch["min_tile"]} if "min_tile" in patch else {}))
        cfg = LaunchConfig(**knobs)
        t0 = time.time()
        try:
            fwd = lambda: ops.recompute_w_u_fwd(x.k, x.v, x.beta, x.A, x.g, x.cu_seqlens, backend="cuda", config=cfg)
            bwd = lambda: ops.prepare_wy_repr_bwd(x.k, x.v, x.beta, x.A, x.dw, x.du, x.g, x.cu_seqlens, backend="cuda", config=cfg)
            fwd(); bwd()
            row = dict(shape=shape, variant=name, first_s=round(time.time() - t0, 1),
                       fwd_us=round(perf.device_time(fwd) * 1e3, 2), bwd_us=round(perf.device_time(bwd) * 1e3, 2),
                       bwd_kernels=kernels_of(bwd), fwd_kernels=kernels_of(fwd))
            row["bwd_x_floor"] = round(row["bwd_us"] / (floor * 1e3), 2)
            if name == "default":
                call = ops._call("bwd", __import__("wy_ascend.validation", fromlist=["validate"]).validate(
                    x.k, x.v, x.beta, x.A, x.g, x.cu_seqlens, None, dw=x.dw, du=x.du), "cuda", cfg, x.beta, x.g, x.cu_seqlens)
                row["group_dk"] = call.group_dk
                kern = call.kernel
                row["best_config"] = str(getattr(kern, "best_config", None))
        except Exception as e:  # noqa
            row = dict(shape=shape, variant=name, error=f"{type(e).__name__}: {str(e)[:300]}")
        print(json.dumps(row), flush=True)
backends.BACKENDS["cuda"] = ORIG

@triton.jit
def _group_sum(src, dst, n_rows, G: tl.constexpr, K: tl.constexpr, BR: tl.constexpr):
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    o = tl.arange(0, K)
    m = (r < n_rows)[:, None]
    acc = tl.load(src + (r[:, None] * G) * K + o[None, :], mask=m, other=0.0)
    for j in tl.static_range(1, G):
        acc += tl.load(src + (r[:, None] * G + j) * K + o[None, :], mask=m, other=0.0)
    tl.store(dst + r[:, None] * K + o[None, :], acc.to(dst.dtype.element_ty), mask=m)

for (B, T, H, HV, K) in [(1, 1024, 8, 32, 16), (1, 1024, 1, 4, 16), (8, 4096, 8, 32, 128)]:
    G = HV // H
    dk = torch.randn(B, T, HV, K, device="cuda", dtype=torch.float32)
    ref = dk.view(B, T, H, G, K).sum(3).to(torch.bfloat16)
    out = torch.empty(B, T, H, K, device="cuda", dtype=torch.bfloat16)
    rows = B * T * H
    BR = max(1, 4096 // K)
    tri = lambda: _group_sum[(triton.cdiv(rows, BR),)](dk, out, rows, G, K, BR)
    tri()
    same = bool(torch.equal(out, ref))
    print(json.dumps(dict(sum_shape=[B, T, H, HV, K], torch_us=round(perf.device_time(lambda: dk.view(B, T, H, G, K).sum(3).to(torch.bfloat16)) * 1e3, 2),
                          triton_us=round(perf.device_time(tri) * 1e3, 2), bitwise_equal_torch=same,
                          torch_kernels=kernels_of(lambda: dk.view(B, T, H, G, K).sum(3).to(torch.bfloat16)))), flush=True)
