"""Session 15: the open perf find (B1 T1024 H16 HV64 K=V=16 bf16 backward, 10x its bound) and its
neighbours, timed under launch and kernel variants, one at a time on the GPU (device time, L2 flushed,
host work hidden: wy_ascend.testing.perf.device_time). Prints one JSON line per (shape, op, variant)
with the device time, its ratio to the perf bound, and the largest relative RMS difference of the
outputs to the shipped launch's (a variant that is fast but wrong shows here)."""
import dataclasses, importlib.util, json, os, sys, time
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = {
    "find_H16_HV64_K16": dict(B=1, T=1024, H=16, HV=64, K=16, V=16),
    "H8_HV32_K16": dict(B=1, T=1024, H=8, HV=32, K=16, V=16),
    "H16_HV64_K64": dict(B=1, T=1024, H=16, HV=64, K=64, V=64),
}


def make_variant(name, edits):
    src = open("src/wy_ascend/kernels.py").read()
    for old, new in edits:
        assert src.count(old) >= 1, old
        src = src.replace(old, new)
    path = os.path.join(HERE, f"var_{name}.py")
    open(path, "w").write(src)
    spec = importlib.util.spec_from_file_location(f"var_{name}", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


KERNEL_VARIANTS = {
    # A loaded row-major (coalesced along its columns) and transposed in registers
    "Atrans": [("b_At = _load_A(p_At, m_Ar, m_Ac, LOWP_DOT)",
                "b_At = tl.trans(_load_A(A + (row0 * HV + i_h) * BT + o_t[:, None] * (HV * BT) + o_t[None, :], m_Ac, m_Ar, LOWP_DOT))")],
    # no eviction hints
    "noevict": [('LOWP_DOT, "evict_last")', 'LOWP_DOT, "")'), ('LOWP_DOT, "evict_first")', 'LOWP_DOT, "")')],
}


def rel(a, b):
    a, b = a.double(), b.double()
    return float(((a - b).pow(2).mean() / b.pow(2).mean().clamp_min(1e-30)).sqrt())


def main():
    import wy_ascend, wy_ascend.backends as B, wy_ascend.ops as O, wy_ascend.kernels as Kn
    from wy_ascend.testing import perf
    from benchmarks.shapes import Shape
    from fla.ops.gated_delta_rule import wy_fast as fla
    shipped_cuda = B.BACKENDS["cuda"]
    shipped_kernels = dict(Kn.KERNELS)
    shipped_configs = list(B.CUDA_CONFIGS)
    bandwidth, floor = perf.device_limits("cuda")
    print(json.dumps(dict(copy_GBps=bandwidth / 1e6, floor_us=floor * 1e3)), flush=True)
    mods = {}

    def setup(warps, tile, kvar):
        os.environ.pop("WY_ASCEND_LOWP", None)
        B.BACKENDS["cuda"] = shipped_cuda
        B.CUDA_CONFIGS[:] = shipped_configs
        Kn.KERNELS.update(shipped_kernels)
        if warps:
            os.environ["WY_ASCEND_AUTOTUNE"] = "0"
            B.CUDA_CONFIGS[:] = [(warps, 1)]
        else:
            os.environ.pop("WY_ASCEND_AUTOTUNE", None)
        if tile == 16:
            B.BACKENDS["cuda"] = dataclasses.replace(shipped_cuda, min_tile=16)
            os.environ["WY_ASCEND_LOWP"] = "all"
        if kvar:
            if kvar not in mods:
                mods[kvar] = make_variant(kvar, KERNEL_VARIANTS[kvar])
            Kn.KERNELS["bwd"] = mods[kvar].wy_bwd_kernel
            Kn.KERNELS["fwd"] = mods[kvar].wy_fwd_kernel
        B._autotuned.cache_clear()
        O._CALLS.clear()
        perf.device_time.cache_clear()

    variants = [("ship", None, 64, None, None)]
    for grp in (True, False):
        for tile in (64, 16):
            for w in (2, 4, 8):
                variants.append((f"w{w}_t{tile}_grp{int(grp)}", w, tile, None, grp))
    for kvar in KERNEL_VARIANTS:
        for w in (4, 8):
            variants.append((f"w{w}_t64_grp1_{kvar}", w, 64, kvar, True))
    for sname, dims in SHAPES.items():
        x = Shape(sname, **dims).inputs("cuda")
        fa = (x["k"], x["v"], x["beta"], x["A"], x["g"], x["cu_seqlens"])
        ba = (x["k"], x["v"], x["beta"], x["A"], x["dw"], x["du"], x["g"], x["cu_seqlens"])
        ref = None
        for op, ours, theirs, args in (("fwd", wy_ascend.recompute_w_u_fwd, fla.recompute_w_u_fwd, fa),
                                        ("bwd", wy_ascend.prepare_wy_repr_bwd, fla.prepare_wy_repr_bwd, ba)):
            theirs(*args); torch.cuda.synchronize()
            row = dict(shape=sname, op=op, variant="fla-core", device_us=1e3 * perf.device_time(lambda: theirs(*args)))
            print(json.dumps(row), flush=True)
            ref = None
            for name, w, tile, kvar, grp in variants:
                if op == "fwd" and grp is False:
                    continue
                setup(w, tile, kvar)
                row = dict(shape=sname, op=op, variant=name)
                try:
                    t = time.time()
                    cfg = B.LaunchConfig(group_dk=grp) if grp is not None and dims["HV"] > dims["H"] else None
                    fn = (lambda: ours(*args, config=cfg))
                    res = [r for r in fn() if r is not None]; torch.cuda.synchronize()
                    row["first_s"] = round(time.time() - t, 1)
                    if ref is None:
                        ref = [r.clone() for r in res]
                    row["err_vs_ship"] = max(rel(a, b) for a, b in zip(res, ref))
                    row["device_us"] = 1e3 * perf.device_time(fn)
                    nb = sum(t_.numel() * t_.element_size() for t_ in list(args) + res if t_ is not None)
                    row["ratio_to_bound"] = row["device_us"] / 1e3 / max(nb / bandwidth, floor)
                except Exception as e:
                    row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
