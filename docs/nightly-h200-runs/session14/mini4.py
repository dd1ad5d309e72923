"""Session 14 call 5: the reproducer's smallest failing variant (repro_narrow.py GATE=0 KL=1 VDA=0 TAIL=0) cut further:
one A^T tile as the left operand of two bf16 dots, dkb = A^T dw (64 wide) then dvb = A^T du (32 wide), with flags for
the tile loops, the row masks, the where on A^T and the reduction of dkb. argv: JSON dict of one variant (own process:
an illegal address poisons the CUDA context), or none: all variants."""
import json, os, subprocess, sys
import torch, triton, triton.language as tl
DEV = os.environ.get("DEV", "cuda")


@triton.jit
def _d(a, b, LOW: tl.constexpr):
    if LOW:
        c = tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16))
    else:
        c = tl.dot(a.to(tl.float32), b.to(tl.float32))
    return c


@triton.jit
def mini4(A, Kp, DW, DU, DV, DKB, DB, n, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
          BV: tl.constexpr, LOOP: tl.constexpr, MASK: tl.constexpr, WHERE: tl.constexpr, RED: tl.constexpr,
          LOW: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    o_t = tl.arange(0, BT)
    m_t = o_t < n
    if MASK:
        At = tl.load(A + pid * BT * BT + o_t[None, :] * BT + o_t[:, None], mask=m_t[None, :], other=0.0)
    else:
        At = tl.load(A + pid * BT * BT + o_t[None, :] * BT + o_t[:, None])
    if WHERE:
        At = tl.where(m_t[:, None], At, 0.0).to(At.dtype)
    db = tl.zeros([BT], dtype=tl.float32)
    NKL: tl.constexpr = K // BK if LOOP else 1
    for i in tl.range(0, NKL, num_stages=1):
        o_k = i * BK + tl.arange(0, BK)
        p = pid * BT * K + o_t[:, None] * K + o_k[None, :]
        if MASK:
            m_k = m_t[:, None] & (o_k[None, :] < K)
            k = tl.load(Kp + p, mask=m_k, other=0.0)
            dw = tl.load(DW + p, mask=m_k, other=0.0)
        else:
            k = tl.load(Kp + p)
            dw = tl.load(DW + p)
        dkb = _d(At, dw, LOW)
        if RED:
            db += tl.sum(dkb * k, 1)
        else:
            tl.store(DKB + p, dkb)
    NVL: tl.constexpr = V // BV if LOOP else 1
    for i in tl.range(0, NVL, num_stages=1):
        o_v = i * BV + tl.arange(0, BV)
        p = pid * BT * V + o_t[:, None] * V + o_v[None, :]
        if MASK:
            du = tl.load(DU + p, mask=m_t[:, None] & (o_v[None, :] < V), other=0.0)
        else:
            du = tl.load(DU + p)
        tl.store(DV + p, _d(At, du, LOW))
    tl.store(DB + pid * BT + o_t, db)


def rel(a, b):
    a, b = a.double(), b.double()
    return float(((a - b).pow(2).mean() / b.pow(2).mean().clamp_min(1e-30)).sqrt())


def run(K=64, V=32, LOOP=1, MASK=1, WHERE=1, RED=1, warps=4, P=16, BT=64, LOW=1):
    BK, BV = min(K, 64), min(V, 64)
    dt = torch.bfloat16 if LOW else torch.float32
    gen = torch.Generator(device=DEV).manual_seed(0)
    r = lambda *s: torch.randn(*s, device=DEV, generator=gen)
    A = r(P, BT, BT).to(dt); k, dw = r(P, BT, K).to(dt), r(P, BT, K).to(dt); du = r(P, BT, V).to(dt)
    dv = torch.zeros(P, BT, V, device=DEV); dkb = torch.zeros(P, BT, K, device=DEV); db = torch.zeros(P, BT, device=DEV)
    mini4[(P,)](A, k, dw, du, dv, dkb, db, BT, K, V, BT, BK, BV, LOOP, MASK, WHERE, RED, LOW, num_warps=warps, num_stages=1)
    At = A.double().transpose(-1, -2)
    out = dict(dv=rel(dv, At @ du.double()))
    out["dkb" if not RED else "db"] = rel(dkb, At @ dw.double()) if not RED else rel(db, ((At @ dw.double()) * k.double()).sum(-1))
    return out


VARIANTS = [dict(), dict(LOOP=0), dict(MASK=0), dict(WHERE=0), dict(RED=0), dict(LOOP=0, MASK=0, WHERE=0, RED=0),
            dict(K=32, V=32), dict(K=64, V=64), dict(warps=8), dict(K=64, V=16), dict(K=32, V=64), dict(K=16, V=64),
            dict(MASK=0, WHERE=0), dict(LOOP=0, RED=0), dict(P=1)]

if __name__ == "__main__":
    if len(sys.argv) > 1:
        kw = json.loads(sys.argv[1])
        try:
            print(json.dumps(dict(**kw, **run(**kw))), flush=True)
        except Exception as e:
            print(json.dumps(dict(**kw, error=f"{type(e).__name__}: {str(e)[:120]}")), flush=True)
    else:
        ps = [subprocess.Popen([sys.executable, __file__, json.dumps(v)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for v in VARIANTS]
        for v, p in zip(VARIANTS, ps):
            o, e = p.communicate(); print(o.strip() or json.dumps(dict(**v, rc=p.returncode, stderr=e[-300:])), flush=True)
