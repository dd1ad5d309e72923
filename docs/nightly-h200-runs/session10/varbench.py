"""Time forward variants against fla-core on the headline shapes (same process, least of 3 do_bench
medians); each variant is NAME=KERNELFILE:TILE_CAP (tile cap 0: the backend's). Checks outputs
against the first variant's (max abs difference relative to the output's max abs)."""
import functools, importlib.util, json, os, sys, time
import torch, triton.testing
import wy_ascend, wy_ascend.kernels as K, wy_ascend.backends as B, wy_ascend.ops as O
from benchmarks.shapes import SHAPES, GRID
from fla.ops.gated_delta_rule import wy_fast as fla

def use(kfile):
    spec = importlib.util.spec_from_file_location(f"v_{kfile}", f"scratch_dev/var_{kfile}.py")
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    K.KERNELS["fwd"], K.KERNELS["bwd"] = m.wy_fwd_kernel, m.wy_bwd_kernel
    B._autotuned.cache_clear(); O._CALLS.clear()

def bench(fn, rounds=3):
    return min(triton.testing.do_bench(fn, warmup=25, rep=100) for _ in range(rounds))

variants = [(v.split("=")[0], v.split("=")[1].split(":")[0], int(v.split(":")[1])) for v in sys.argv[1].split(",")]
names = sys.argv[2].split(",") if len(sys.argv) > 2 else list(SHAPES)
table = {**SHAPES, **GRID}
out = []
for sname in names:
    x = table[sname].inputs("cuda")
    args = (x["k"], x["v"], x["beta"], x["A"], x["g"], x["cu_seqlens"])
    fla.recompute_w_u_fwd(*args); torch.cuda.synchronize()
    t_fla = bench(functools.partial(fla.recompute_w_u_fwd, *args))
    ref = None
    for name, kfile, cap in variants:
        use(kfile)
        cfg = wy_ascend.LaunchConfig(tile_cap=cap or None)
        fn = functools.partial(wy_ascend.recompute_w_u_fwd, *args, config=cfg)
        t0 = time.time(); res = fn(); torch.cuda.synchronize(); first = time.time() - t0
        if ref is None:
            ref = [r.clone() for r in res]
        diff = max(float((a.float() - b.float()).abs().max() / b.float().abs().max()) for a, b in zip(res, ref))
        t = bench(fn)
        row = dict(shape=sname, variant=name, ms=t, fla_ms=t_fla, ratio=t / t_fla, first_s=first, rel_maxdiff=diff)
        out.append(row); print(json.dumps(row), flush=True)
    t2 = bench(functools.partial(fla.recompute_w_u_fwd, *args))
    print(json.dumps(dict(shape=sname, fla_again=t2)), flush=True)
    del x; torch.cuda.empty_cache()
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "varbench-fwd.json"), "w"), indent=1)
