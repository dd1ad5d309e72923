"""Time kernel variants (scratch_dev/var_*.py) against fla-core on the headline shapes; check outputs equal base."""
import functools, importlib.util, json, os, sys, time
import torch, triton.testing
import wy_ascend, wy_ascend.kernels as K, wy_ascend.backends as B, wy_ascend.ops as O, wy_ascend.validation as VAL
from benchmarks.shapes import SHAPES, GRID
from fla.ops.gated_delta_rule import wy_fast as fla

ORIG_VARLEN = VAL._varlen_chunks
def spans_varlen(cu, Bn, T, BT):
    expected, on_dev = ORIG_VARLEN(cu, Bn, T, BT)
    cu64 = cu.to(torch.int64)
    row0 = cu64[on_dev[:, 0]] + on_dev[:, 1] * BT
    return expected, torch.stack([row0, cu64[on_dev[:, 0] + 1]], 1).contiguous()

def use(name):
    spec = importlib.util.spec_from_file_location(f"var_{name}", f"scratch_dev/var_{name}.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    K.KERNELS["fwd"], K.KERNELS["bwd"] = m.wy_fwd_kernel, m.wy_bwd_kernel
    B._autotuned.cache_clear(); O._CALLS.clear(); VAL._VARLEN_CACHE.clear()
    VAL._varlen_chunks = spans_varlen if "spans" in name else ORIG_VARLEN

def bench(fn, rounds=3):
    return min(triton.testing.do_bench(fn, warmup=25, rep=100) for _ in range(rounds))

variants = sys.argv[1].split(",")
ops = sys.argv[2].split(",")
names = sys.argv[3].split(",") if len(sys.argv) > 3 else list(SHAPES)
table = {**SHAPES, **GRID}
out = []
for sname in names:
    shape = table[sname]
    x = shape.inputs("cuda")
    fa = (x["k"], x["v"], x["beta"], x["A"], x["g"], x["cu_seqlens"])
    ba = (x["k"], x["v"], x["beta"], x["A"], x["dw"], x["du"], x["g"], x["cu_seqlens"])
    fns = {"fwd": (wy_ascend.recompute_w_u_fwd, fla.recompute_w_u_fwd, fa),
           "bwd": (wy_ascend.prepare_wy_repr_bwd, fla.prepare_wy_repr_bwd, ba)}
    for op in ops:
        ours, peer, args = fns[op]
        peer(*args); torch.cuda.synchronize()
        t_fla = bench(functools.partial(peer, *args))
        ref = None
        for var in variants:
            use(var)
            t0 = time.time(); res = ours(*args); torch.cuda.synchronize(); first = time.time() - t0
            res = [r for r in res if r is not None]
            if ref is None:
                ref = [r.clone() for r in res]; diff = 0.0
            else:
                diff = max(float((a.float() - b.float()).abs().max()) for a, b in zip(res, ref))
            t = bench(functools.partial(ours, *args))
            row = dict(shape=sname, op=op, variant=var, ms=t, fla_ms=t_fla, ratio=t / t_fla, first_s=first, maxdiff_vs_first=diff)
            out.append(row); print(json.dumps(row), flush=True)
        # fla again at the end, the least counts
        t_fla2 = bench(functools.partial(peer, *args))
        print(json.dumps(dict(shape=sname, op=op, fla_again=t_fla2)), flush=True)
    del x; torch.cuda.empty_cache()
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), f"varbench-{'-'.join(ops)}.json"), "w"), indent=1)
