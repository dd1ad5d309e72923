"""Session 14, narrow bf16 tiles on cuda. Driver: runs workers in parallel processes, prints JSON lines.
Worker modes (argv[1]):
  bisect KxV MASK   : backward with tiles BK=min(K,64), BV=min(V,64) (min_tile 16), bf16 operands on the dots whose bit
                      is set in MASK (9 dots, numbered in source order of _bwd_task), fp32 dots elsewhere; prints each
                      output's relative RMS difference to the shipped launch (64-wide padded tiles, bf16 dots).
  mini BV MODE WARPS: standalone kernels (At loaded through transposed addresses, du, vb) checked against torch.
  time SHAPE VARIANT: do_bench of fwd and bwd of one shape: shipped | fp32narrow | bf16narrow, and fla-core."""
import json, os, re, subprocess, sys, time, dataclasses, importlib.util, functools
HERE = os.path.dirname(os.path.abspath(__file__))

def make_variant():
    src = open("src/wy_ascend/kernels.py").read()
    s0 = src.index("def _bwd_task("); s1 = src.index("def _sum_dk(")
    body = src[s0:s1]; out = []; i = 0; n = 0
    while True:
        j = body.find("_mm(", i)
        if j < 0: out.append(body[i:]); break
        depth = 0; p = j + 3
        while True:
            c = body[p]
            if c == "(": depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0: break
            p += 1
        call = body[j:p]  # without the closing paren
        assert call.endswith("LOWP_DOT"), call
        out.append(body[i:j]); out.append("_mmx(" + call[4:] + f", {n})"); n += 1; i = p + 1
    assert n == 9, n
    extra = '''
BF16_MASK = tl.constexpr(int(os.environ.get("NARROW_MASK", "511")))


@triton.jit
def _mmx(a, b, LOWP_DOT: tl.constexpr, I: tl.constexpr):
    if LOWP_DOT and ((BF16_MASK >> I) & 1):
        c = tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16))
    else:
        c = tl.dot(a.to(tl.float32), b.to(tl.float32), allow_tf32=False)
    return c

'''
    v = src[:s0] + "".join(out) + src[s1:]
    k = v.index("@triton.jit\ndef _fwd_task")
    v = v[:k] + extra + "\n" + v[k:]
    open(os.path.join(HERE, "var_mask.py"), "w").write(v)

def use_variant():
    import wy_ascend.kernels as K, wy_ascend.backends as B
    spec = importlib.util.spec_from_file_location("var_mask", os.path.join(HERE, "var_mask.py"))
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    K.KERNELS["bwd"] = m.wy_bwd_kernel
    B._autotuned.cache_clear()

def narrow_backend():
    import wy_ascend.backends as B
    B.BACKENDS["cuda"] = dataclasses.replace(B.BACKENDS["cuda"], min_tile=16)

def rel(a, b):
    a, b = a.double(), b.double()
    return float(((a - b).pow(2).mean() / b.pow(2).mean().clamp_min(1e-30)).sqrt())

def shape_inputs(K, V, B=2, T=1024, H=2, HV=2, seed=0):
    from benchmarks.shapes import Shape
    return Shape("x", B=B, T=T, H=H, HV=HV, K=K, V=V).inputs("cuda", seed=seed)

def bwd_args(x):
    return (x["k"], x["v"], x["beta"], x["A"], x["dw"], x["du"], x["g"], x["cu_seqlens"])

def worker_bisect(kv, mask):
    os.environ["WY_ASCEND_AUTOTUNE"] = "0"
    import torch, wy_ascend
    K, V = map(int, kv.split("x"))
    x = shape_inputs(K, V)
    ref = wy_ascend.prepare_wy_repr_bwd(*bwd_args(x)); torch.cuda.synchronize()
    ref = [r.clone() for r in ref if r is not None]
    os.environ["NARROW_MASK"] = str(mask); os.environ["WY_ASCEND_LOWP"] = "all"
    narrow_backend(); use_variant()
    import wy_ascend.ops as O
    O._CALLS.clear() if hasattr(O, "_CALLS") else None
    t = time.time()
    try:
        res = wy_ascend.prepare_wy_repr_bwd(*bwd_args(x)); torch.cuda.synchronize()
        res = [r for r in res if r is not None]
        errs = {n: rel(a, b) for n, a, b in zip(["dk", "dv", "dbeta", "dg"], res, ref)}
        print(json.dumps(dict(mode="bisect", kv=kv, mask=mask, s=round(time.time() - t, 1), **errs)))
    except Exception as e:
        print(json.dumps(dict(mode="bisect", kv=kv, mask=mask, error=f"{type(e).__name__}: {str(e)[:300]}")))

def worker_mini(BV, mode, warps):
    import torch, triton, triton.language as tl
    @triton.jit
    def mini(At_ptr, du_ptr, vb_ptr, o1, o2, BT: tl.constexpr, BV: tl.constexpr, MODE: tl.constexpr):
        r = tl.arange(0, BT); c = tl.arange(0, BV)
        if MODE & 4:
            At = tl.load(At_ptr + r[:, None] * BT + r[None, :])
        else:
            At = tl.load(At_ptr + r[None, :] * BT + r[:, None])  # At[i, j] = A[j, i]
        du = tl.load(du_ptr + r[:, None] * BV + c[None, :])
        vb = tl.load(vb_ptr + r[:, None] * BV + c[None, :])
        if MODE & 1:
            tl.store(o1 + r[:, None] * BV + c[None, :], tl.dot(At, du))
        if MODE & 2:
            tl.store(o2 + r[:, None] * BT + r[None, :], tl.dot(du, tl.trans(vb.to(tl.float32) * 0.5).to(tl.bfloat16)))
    BT = 64
    g = torch.Generator(device="cuda").manual_seed(0)
    A = torch.randn(BT, BT, device="cuda", generator=g).bfloat16()
    du = torch.randn(BT, BV, device="cuda", generator=g).bfloat16()
    vb = torch.randn(BT, BV, device="cuda", generator=g).bfloat16()
    o1 = torch.zeros(BT, BV, device="cuda"); o2 = torch.zeros(BT, BT, device="cuda")
    try:
        mini[(1,)](A, du, vb, o1, o2, BT, BV, mode, num_warps=warps, num_stages=1); torch.cuda.synchronize()
        At = A.float() if mode & 4 else A.float().t()
        e1 = rel(o1, At @ du.float()) if mode & 1 else None
        e2 = rel(o2, du.float() @ (vb.float() * 0.5).bfloat16().float().t()) if mode & 2 else None
        print(json.dumps(dict(mode="mini", BV=BV, MODE=mode, warps=warps, e_At_du=e1, e_du_vbT=e2)))
    except Exception as e:
        print(json.dumps(dict(mode="mini", BV=BV, MODE=mode, warps=warps, error=f"{type(e).__name__}: {str(e)[:300]}")))

TIME_SHAPES = {"k16": dict(B=1, T=1024, H=16, HV=64, K=16, V=16), "k16b": dict(B=4, T=4096, H=4, HV=4, K=16, V=16),
               "k32": dict(B=4, T=4096, H=4, HV=4, K=32, V=32), "k48": dict(B=4, T=4096, H=4, HV=4, K=48, V=48),
               "k64v32": dict(B=4, T=4096, H=4, HV=4, K=64, V=32)}

def worker_time(name, variant):
    import fcntl
    if variant != "shipped_autotune":
        os.environ["WY_ASCEND_AUTOTUNE"] = "0"
    import torch, triton.testing, wy_ascend
    from benchmarks.shapes import Shape
    from fla.ops.gated_delta_rule import wy_fast as fla
    x = Shape(name, **TIME_SHAPES[name]).inputs("cuda")
    fa = (x["k"], x["v"], x["beta"], x["A"], x["g"], x["cu_seqlens"]); ba = bwd_args(x)
    ref = {"fwd": wy_ascend.recompute_w_u_fwd(*fa), "bwd": wy_ascend.prepare_wy_repr_bwd(*ba)}
    ref = {k: [r.clone() for r in v if r is not None] for k, v in ref.items()}
    lock = open("/tmp/narrow_time.lock", "w")
    if variant.endswith("narrow"):
        narrow_backend()
        if variant == "bf16narrow":
            os.environ["WY_ASCEND_LOWP"] = "all"
        import wy_ascend.backends as B, wy_ascend.ops as O
        B._autotuned.cache_clear()
        O._CALLS.clear() if hasattr(O, "_CALLS") else None
    row = dict(mode="time", shape=name, variant=variant)
    for op, ours, peer, args in (("fwd", wy_ascend.recompute_w_u_fwd, fla.recompute_w_u_fwd, fa),
                                 ("bwd", wy_ascend.prepare_wy_repr_bwd, fla.prepare_wy_repr_bwd, ba)):
        try:
            if variant == "shipped_autotune":
                fcntl.flock(lock, fcntl.LOCK_EX)
            t = time.time(); res = ours(*args); torch.cuda.synchronize(); row[op + "_first_s"] = round(time.time() - t, 1)
            fcntl.flock(lock, fcntl.LOCK_EX)
            res = [r for r in res if r is not None]
            row[op + "_err_vs_shipped"] = max(rel(a, b) for a, b in zip(res, ref[op]))
            row[op + "_us"] = 1e3 * min(triton.testing.do_bench(functools.partial(ours, *args), warmup=25, rep=100) for _ in range(3))
            peer(*args); torch.cuda.synchronize()
            row[op + "_fla_us"] = 1e3 * min(triton.testing.do_bench(functools.partial(peer, *args), warmup=25, rep=100) for _ in range(3))
            fcntl.flock(lock, fcntl.LOCK_UN)
        except Exception as e:
            fcntl.flock(lock, fcntl.LOCK_UN)
            row[op + "_error"] = f"{type(e).__name__}: {str(e)[:300]}"
    print(json.dumps(row), flush=True)

def driver():
    make_variant()
    jobs = []
    for m in [511, 0] + [1 << i for i in range(9)] + [511 ^ (1 << i) for i in range(9)]:
        jobs.append(["bisect", "64x32", str(m)])
    for kv in ["32x32", "16x16", "64x16", "16x64", "128x32", "32x64"]:
        jobs.append(["bisect", kv, "511"])
    for bv in (16, 32, 64):
        for mode in (1, 2, 3, 5, 7):
            jobs.append(["mini", str(bv), str(mode), "4"])
    jobs.append(["mini", "32", "3", "8"])
    tjobs = [["time", s, v] for s in TIME_SHAPES for v in ("shipped", "shipped_autotune", "fp32narrow", "bf16narrow")]
    nproc = int(os.environ.get("NPROC", "12"))
    def run(batch, n):
        procs = []; outs = []
        pending = list(batch)
        while pending or procs:
            while pending and len(procs) < n:
                a = pending.pop(0)
                procs.append((a, subprocess.Popen([sys.executable, __file__] + a, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
            time.sleep(0.5)
            for pr in list(procs):
                a, p = pr
                if p.poll() is not None:
                    o, e = p.communicate(); procs.remove(pr)
                    lines = [l for l in o.splitlines() if l.startswith("{")]
                    print("\n".join(lines) if lines else json.dumps(dict(args=a, rc=p.returncode, stderr=e[-600:])), flush=True)
    t = time.time(); run(jobs + tjobs, nproc); print(f"# all jobs {time.time()-t:.0f} s", flush=True)

if __name__ == "__main__":
    if len(sys.argv) == 1: driver()
    elif sys.argv[1] == "bisect": worker_bisect(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == "mini": worker_mini(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    elif sys.argv[1] == "time": worker_time(sys.argv[2], sys.argv[3])
