"""Session 12 call 3: the per-value-head grouped backward with its dk sum (torch: a reduce and a cast kernel) replaced by
one Triton kernel (sum of the G fp32 slices in head order, rounded once): whole-op device time on the perf find's shapes."""
import json
import torch, triton, triton.language as tl
from wy_ascend import ops
from wy_ascend.backends import LaunchConfig
from wy_ascend.testing import perf, properties
from wy_ascend.testing.case import Case
from wy_ascend.validation import validate

@triton.jit
def _group_sum(src, dst, n_rows, G: tl.constexpr, K: tl.constexpr, KP: tl.constexpr, BR: tl.constexpr):
    r = (tl.program_id(0) * BR + tl.arange(0, BR)).to(tl.int64)
    o = tl.arange(0, KP)
    m = (r < n_rows)[:, None] & (o < K)[None, :]
    acc = tl.load(src + (r[:, None] * G) * K + o[None, :], mask=m, other=0.0)
    for j in tl.static_range(1, G):
        acc += tl.load(src + (r[:, None] * G + j) * K + o[None, :], mask=m, other=0.0)
    tl.store(dst + r[:, None] * K + o[None, :], acc.to(dst.dtype.element_ty), mask=m)

def bwd_fused_sum(BR, k, v, beta, A, dw, du, g, cu):
    p = validate(k, v, beta, A, g, cu, None, dw=dw, du=du)
    call = ops._call("bwd", p, "cuda", None, beta, g, cu)
    assert not call.group_dk
    dk_out = call.new((p.B, p.T, p.HV, p.K), torch.float32)
    dv = call.new((p.B, p.T, p.HV, p.V), p.dtype)
    dbeta = call.new((p.B, p.T, p.HV), beta.dtype)
    dg = call.new((p.B, p.T, p.HV), g.dtype)
    call.launch(k, v, beta, g, A, cu, p.chunk_indices, dw=dw, du=du, dk=dk_out, dk_acc=None, dv=dv, dbeta=dbeta, dg=dg)
    dk = torch.empty((p.B, p.T, p.H, p.K), dtype=p.dtype, device=k.device)
    rows = p.B * p.T * p.H
    _group_sum[(triton.cdiv(rows, BR),)](dk_out, dk, rows, p.HV // p.H, p.K, triton.next_power_of_2(p.K), BR)
    return dk, dv, dbeta, dg

for shape in [dict(B=1, T=1024, H=8, HV=32, K=16, V=16), dict(B=1, T=1024, H=8, HV=32, K=64, V=64),
              dict(B=1, T=1024, H=1, HV=4, K=16, V=16), dict(B=2, T=1000, H=2, HV=6, K=64, V=32)]:
    case = Case(**shape, BT=64, dtype="bfloat16", use_g=True, backend="cuda", dist="realistic", seed=0)
    x = properties.build_inputs(case)
    args = (x.k, x.v, x.beta, x.A, x.dw, x.du, x.g, x.cu_seqlens)
    base = lambda: ops.prepare_wy_repr_bwd(*args, backend="cuda")
    ref = base()
    row = dict(shape=shape, torch_sum_us=round(perf.device_time(base) * 1e3, 2))
    for BR in (16, 32, 64, 128):
        fn = lambda BR=BR: bwd_fused_sum(BR, *args)
        out = fn()
        row[f"triton_BR{BR}_us"] = round(perf.device_time(fn) * 1e3, 2)
        row[f"BR{BR}_bitwise"] = all(torch.equal(a, b) for a, b in zip(out, ref))
    print(json.dumps(row), flush=True)
