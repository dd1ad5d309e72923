"""Session 15 call 2: shared narrow tiles (WY_ASCEND_NARROW_TILES=1) against the shipped padded tiles, one
process per (shape, variant) (an illegal address breaks a process's CUDA context). Device times from
wy_ascend.testing.perf.device_time (L2 flushed, host hidden), fla-core's too, outputs compared between
variants (relative RMS). Worker: narrowtime.py SHAPE VARIANT OUTFILE; driver: no arguments."""
import json, os, subprocess, sys, time

SHAPES = {
    "find_B1_T1024_H16_HV64_K16": dict(B=1, T=1024, H=16, HV=64, K=16, V=16),
    "B1_T1024_H8_HV32_K16": dict(B=1, T=1024, H=8, HV=32, K=16, V=16),
    "B4_T4096_H4_K16": dict(B=4, T=4096, H=4, HV=4, K=16, V=16),
    "B4_T4096_H4_K32": dict(B=4, T=4096, H=4, HV=4, K=32, V=32),
    "B4_T4096_H4_K16_V32": dict(B=4, T=4096, H=4, HV=4, K=16, V=32),
    "varlen_T2048_N8_H2_HV8_K16": dict(B=1, T=2048, H=2, HV=8, K=16, V=16, n_seqs=8),
    "varlen_T2048_N8_H2_HV8_K32": dict(B=1, T=2048, H=2, HV=8, K=32, V=32, n_seqs=8),
}
VARIANTS = {"padded": {}, "narrow": {"WY_ASCEND_NARROW_TILES": "1"},
            "narrow_w8": {"WY_ASCEND_NARROW_TILES": "1", "NARROW_W": "8"},
            "narrow_w2": {"WY_ASCEND_NARROW_TILES": "1", "NARROW_W": "2"}}


def worker(shape, variant, out):
    import torch
    import wy_ascend, wy_ascend.backends as B
    from wy_ascend.testing import perf
    from benchmarks.shapes import Shape
    if os.environ.get("NARROW_W"):
        B.NARROW_WARPS = int(os.environ["NARROW_W"])
    x = Shape(shape, **SHAPES[shape]).inputs("cuda")
    fa = (x["k"], x["v"], x["beta"], x["A"], x["g"], x["cu_seqlens"])
    ba = (x["k"], x["v"], x["beta"], x["A"], x["dw"], x["du"], x["g"], x["cu_seqlens"])
    bandwidth, floor = perf.device_limits("cuda")
    row = dict(shape=shape, variant=variant)
    saved = {}
    for op, ours, args in (("fwd", wy_ascend.recompute_w_u_fwd, fa), ("bwd", wy_ascend.prepare_wy_repr_bwd, ba)):
        t = time.time()
        res = [r for r in ours(*args) if r is not None]
        torch.cuda.synchronize()
        row[op + "_first_s"] = round(time.time() - t, 1)
        saved[op] = [r.cpu() for r in res]
        row[op + "_us"] = round(1e3 * perf.device_time(lambda: ours(*args)), 2)
        nb = sum(t_.numel() * t_.element_size() for t_ in list(args) + res if t_ is not None)
        row[op + "_x_bound"] = round(row[op + "_us"] / 1e3 / max(nb / bandwidth, floor), 2)
    if variant == "padded":
        from fla.ops.gated_delta_rule import wy_fast as fla
        for op, theirs, args in (("fwd", fla.recompute_w_u_fwd, fa), ("bwd", fla.prepare_wy_repr_bwd, ba)):
            theirs(*args)
            torch.cuda.synchronize()
            row[op + "_fla_us"] = round(1e3 * perf.device_time(lambda: theirs(*args)), 2)
    torch.save(saved, out)
    print(json.dumps(row), flush=True)


def rel(a, b):
    a, b = a.double(), b.double()
    return float(((a - b).pow(2).mean() / b.pow(2).mean().clamp_min(1e-30)).sqrt())


def driver():
    import torch
    for shape in SHAPES:
        outs = {}
        for variant, env in VARIANTS.items():
            if variant in ("narrow_w8", "narrow_w2") and not shape.startswith(("find", "B4_T4096_H4_K32")):
                continue
            out = f"/tmp/nt_{shape}_{variant}.pt"
            p = subprocess.run([sys.executable, __file__, shape, variant, out], env={**os.environ, **env},
                               capture_output=True, text=True, timeout=240)
            lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
            if p.returncode or not lines:
                print(json.dumps(dict(shape=shape, variant=variant, rc=p.returncode, stderr=p.stderr[-400:])), flush=True)
                continue
            print(lines[-1], flush=True)
            outs[variant] = torch.load(out)
        if "padded" in outs:
            for variant in outs:
                if variant != "padded":
                    d = {op: max(rel(a, b) for a, b in zip(outs[variant][op], outs["padded"][op])) for op in ("fwd", "bwd")}
                    print(json.dumps(dict(shape=shape, variant=variant, rel_vs_padded=d)), flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 1:
        driver()
    else:
        worker(*sys.argv[1:4])
