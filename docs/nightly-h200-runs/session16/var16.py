"""Session 16 call 1. (a) Why the grouped and per-value-head backwards were not bit-equal on H16 HV64 (session 15
call 4): per output, equal or not, how many elements and heads differ, and whether one way rerun is bit-equal to
itself. (b) The narrow backward's occupancy: 235-255 registers a thread at 4 warps (offline sm_90 compile) leave two
programs an SM; timed under variants: the kernel without the [BT,BT] k k^T tile (var_nokk: db, dg and dk's dL terms
from dL@k and (dL*beta)^T@k), 8 warps, ptxas maxnreg 168/128; grouped and per value head. Device time
(perf.device_time), ratio to the perf bound, the oracle check's worst error/bound (properties.check_oracle).
One process per (shape, group of variants); 8-warp variants alone (an illegal address poisons the context)."""
import dataclasses, importlib.util, json, os, subprocess, sys, time
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
NARROW = {
    "find_varlen": dict(B=1, T=1024, H=16, HV=64, K=16, V=16, cu_seqlens=(0, 865, 1024)),
    "find_fixed": dict(B=1, T=1024, H=16, HV=64, K=16, V=16),
    "T4096_H16_HV64_K16": dict(B=1, T=4096, H=16, HV=64, K=16, V=16),
}
WIDE = {
    "B8_T4096_H16_K128": dict(B=8, T=4096, H=16, HV=16, K=128, V=128),
    "B2_T4096_H8_HV32_K64": dict(B=2, T=4096, H=8, HV=32, K=64, V=64),
    "B1_T1024_H16_HV64_K64": dict(B=1, T=1024, H=16, HV=64, K=64, V=64),
}


def load_var(name):
    spec = importlib.util.spec_from_file_location(f"var_{name}", os.path.join(HERE, f"var_{name}.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def setup(kvar, warps, maxnreg):
    import triton
    import wy_ascend.backends as B, wy_ascend.ops as O, wy_ascend.kernels as Kn
    from wy_ascend.testing import perf
    if not hasattr(setup, "ship"):
        setup.ship = (dict(Kn.KERNELS), B._autotuned)
    Kn.KERNELS.update(setup.ship[0])
    if kvar != "base":
        m = load_var(kvar)
        Kn.KERNELS["bwd"] = m.wy_bwd_kernel
    B.NARROW_WARPS = warps
    orig = setup.ship[1]
    orig.cache_clear()
    if maxnreg:
        def tuned(kernel_name, w=None):
            search = B.search_configs(w)
            cfgs = [triton.Config({}, num_warps=a, num_stages=s, maxnreg=maxnreg) for a, s in search]
            key = ["H", "HV", "K", "V", "BT", "BK", "BV", "USE_G", "IS_VARLEN", "LOWP_DOT", "DOT_GUARD", "GROUP_DK"]
            return triton.autotune(configs=cfgs, key=key, use_cuda_graph=True)(Kn.KERNELS[kernel_name])
        B._autotuned = tuned
    else:
        B._autotuned = orig
    O._CALLS.clear()
    perf.device_time.cache_clear()


def regs():
    import wy_ascend.kernels as Kn
    out = []
    fn = Kn.KERNELS["bwd"]
    for cache in getattr(fn, "device_caches", {}).values():
        for k in cache[0].values():
            try:
                out.append(dict(regs=k.n_regs, spills=k.n_spills, shared=k.metadata.shared, warps=k.metadata.num_warps))
            except Exception as e:  # noqa: BLE001
                out.append(str(e)[:80])
    return out


def worker_time(shape, variants):
    import wy_ascend.backends as B
    from wy_ascend import prepare_wy_repr_bwd
    from wy_ascend.testing import perf, properties as P
    from wy_ascend.testing.case import Case
    dims = {**NARROW, **WIDE}[shape]
    bandwidth, floor = perf.device_limits("cuda")
    for v in variants:
        kvar, warps, maxnreg, grp = v
        setup(kvar, warps, maxnreg)
        knobs = {"group_dk": grp} if dims["HV"] > dims["H"] else {}
        case = Case(backend="cuda", BT=64, dtype="bfloat16", use_g=True, dist="realistic", knobs=knobs, **dims)
        row = dict(shape=shape, kvar=kvar, warps=warps, maxnreg=maxnreg, grouped=grp)
        try:
            k, v_, beta, A, g, dw, du, cu = P.build_inputs(case)
            cfg = B.LaunchConfig(group_dk=grp) if knobs else None
            fn = lambda: prepare_wy_repr_bwd(k, v_, beta, A, dw, du, g, cu, backend="cuda", config=cfg)
            t = time.time(); out = [o for o in fn() if o is not None]; torch.cuda.synchronize()
            row["first_s"] = round(time.time() - t, 2)
            us = 1e3 * perf.device_time(fn)
            nb = sum(x.numel() * x.element_size() for x in (k, v_, beta, A, g, dw, du, cu, *out) if x is not None)
            row.update(bwd_us=round(us, 2), x_bound=round(us / 1e3 / max(nb / bandwidth, floor), 2))
            if shape in NARROW or shape == "B1_T1024_H16_HV64_K64":
                m = P.check_oracle(case)
                row["oracle"] = {n: round(m[n]["rel_rms"] / m[n]["tol"], 3) for n in ("dk", "dv", "dbeta", "dg") if n in m}
                row["oracle_blk"] = {n: round(m[n]["worst_block"]["rel_rms"] / m[n]["worst_block"]["tol"], 3) for n in ("dk", "dv", "dbeta", "dg") if n in m}
            row["regs"] = regs()
        except Exception as e:  # noqa: BLE001
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        print(json.dumps(row), flush=True)


def worker_biteq():
    """Grouped vs per value head, each twice, base kernel, narrow on and off."""
    import wy_ascend.backends as B, wy_ascend.ops as O
    from wy_ascend import prepare_wy_repr_bwd
    from wy_ascend.testing import properties as P
    from wy_ascend.testing.case import Case
    names = ("dk", "dv", "dbeta", "dg")
    for narrow in ("1", "0"):
        os.environ["WY_ASCEND_NARROW_TILES"] = narrow
        os.environ["WY_ASCEND_AUTOTUNE"] = "0"
        for shape, dims in (("find_fixed", NARROW["find_fixed"]), ("find_varlen", NARROW["find_varlen"]),
                            ("H8_HV32_T2048", dict(B=1, T=2048, H=8, HV=32, K=16, V=16))):
            O._CALLS.clear()
            case = Case(backend="cuda", BT=64, dtype="bfloat16", use_g=True, dist="realistic", **dims)
            k, v, beta, A, g, dw, du, cu = P.build_inputs(case)
            runs = {}
            for way in ("grouped", "per_head"):
                cfg = B.LaunchConfig(group_dk=way == "grouped")
                runs[way] = [[o.clone() for o in prepare_wy_repr_bwd(k, v, beta, A, dw, du, g, cu, backend="cuda", config=cfg)] for _ in range(2)]
            torch.cuda.synchronize()
            row = dict(shape=shape, narrow=narrow)
            for n, i in zip(names, range(4)):
                a, a2, b, b2 = runs["grouped"][0][i], runs["grouped"][1][i], runs["per_head"][0][i], runs["per_head"][1][i]
                d = (a.float() - b.float()).abs()
                ne = (a != b) & ~(a.isnan() & b.isnan())
                heads = sorted(set(torch.nonzero(ne)[:, 2].tolist())) if ne.any() else []
                rows_ = sorted(set(torch.nonzero(ne)[:, 1].tolist()))[:12] if ne.any() else []
                row[n] = dict(g_rerun_eq=bool(torch.equal(a, a2)), ph_rerun_eq=bool(torch.equal(b, b2)), eq=bool(torch.equal(a, b)),
                              n_diff=int(ne.sum()), of=a.numel(), max_abs=float(d.max()), heads=heads[:20], n_heads=len(heads), rows=rows_)
            print(json.dumps(row), flush=True)


def driver():
    jobs = [("biteq", None)]
    for shape in NARROW:
        safe = [(kv, 4, r, grp) for grp in (True, False) for kv, r in (("base", None), ("nokk", None), ("base", 168), ("nokk", 168), ("nokk", 128))]
        jobs.append((shape, safe))
        for grp in (True, False):
            jobs.append((shape, [("nokk", 8, None, grp)]))
        if shape == "find_fixed":
            jobs.append((shape, [("base", 8, None, True)]))
    for shape in WIDE:
        grp = [None] if WIDE[shape]["HV"] == WIDE[shape]["H"] else [True, False]
        jobs.append((shape, [(kv, 4, None, g) for g in grp for kv in ("base", "nokk")]))
    for shape, variants in jobs:
        args = [sys.executable, __file__, shape, json.dumps(variants)]
        t = time.time()
        try:
            p = subprocess.run(args, capture_output=True, text=True, timeout=150)
            lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
            for l in lines:
                print(l, flush=True)
            if p.returncode:
                print(json.dumps(dict(shape=shape, variants=variants, rc=p.returncode, err=p.stderr[-400:])), flush=True)
        except subprocess.TimeoutExpired:
            print(json.dumps(dict(shape=shape, variants=variants, timeout=True)), flush=True)
        print(json.dumps(dict(job=shape, s=round(time.time() - t, 1))), flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 1:
        driver()
    elif sys.argv[1] == "biteq":
        worker_biteq()
    else:
        worker_time(sys.argv[1], [tuple(v) for v in json.loads(sys.argv[2])])
