"""Standalone: the backward's per-chunk math of kernels.py copied (no wy_ascend import), bf16 dot operands, with
flags that drop parts of it; checked against float64 torch. argv: variants as JSON list of dicts, or none: ladder."""
import json, os, sys, time, subprocess
import torch, triton, triton.language as tl
DEV = os.environ.get("DEV", "cuda")

@triton.jit
def _d(a, b, LOW: tl.constexpr):
    """a @ b in fp32: bf16 operands (kernels.py's _mm with LOWP_DOT), or exact fp32 ones (LOW=0: a CPU check)."""
    if LOW:
        c = tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16))
    else:
        c = tl.dot(a.to(tl.float32), b.to(tl.float32))
    return c


@triton.jit
def bwd_chunk(A, Kp, V, DW, DU, BETA, G, DK, DV, DB, DG, n, K: tl.constexpr, Vd: tl.constexpr, BT: tl.constexpr,
              BK: tl.constexpr, BV: tl.constexpr, GATE: tl.constexpr, KL: tl.constexpr, VDA: tl.constexpr,
              TAIL: tl.constexpr, TRANS_FP32: tl.constexpr, LOW: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    o_t = tl.arange(0, BT)
    m_t = o_t < n
    At = tl.load(A + pid * BT * BT + o_t[None, :] * BT + o_t[:, None], mask=m_t[None, :], other=0.0)
    At = tl.where(m_t[:, None], At, 0.0).to(At.dtype)
    beta = tl.load(BETA + pid * BT + o_t, mask=m_t, other=0.0)
    kscale = beta
    if GATE:
        g = tl.load(G + pid * BT + o_t, mask=m_t, other=0.0)
        eg = tl.exp2(g)
        kscale = beta * eg
        dg = tl.zeros([BT], dtype=tl.float32)
    db = tl.zeros([BT], dtype=tl.float32)
    dA = tl.zeros([BT, BT], dtype=tl.float32)
    kk = tl.zeros([BT, BT], dtype=tl.float32)
    pk = Kp + pid * BT * K
    pdw = DW + pid * BT * K
    for i in tl.range(0, tl.cdiv(K, BK), num_stages=1):
        o_k = i * BK + tl.arange(0, BK)
        m_k = m_t[:, None] & (o_k[None, :] < K)
        k = tl.load(pk + o_t[:, None] * K + o_k[None, :], mask=m_k, other=0.0)
        dw = tl.load(pdw + o_t[:, None] * K + o_k[None, :], mask=m_k, other=0.0)
        kb = k * kscale[:, None]
        if KL & 1:
            dkb = _d(At, dw, LOW)
            if GATE:
                db += tl.sum(dkb * k, 1) * eg
                dg += tl.sum(dkb * kb, 1)
            else:
                db += tl.sum(dkb * k, 1)
        if KL & 2:
            if TRANS_FP32:
                dA += _d(dw, tl.trans(kb), LOW)
            else:
                dA += _d(dw, tl.trans(kb.to(k.dtype)), LOW)
        if KL & 4:
            kt = tl.load(pk + o_t[None, :] * K + o_k[:, None], mask=m_t[None, :] & (o_k[:, None] < K), other=0.0)
            kk += _d(k, kt, LOW)
    pv = V + pid * BT * Vd
    pdu = DU + pid * BT * Vd
    for i in tl.range(0, tl.cdiv(Vd, BV), num_stages=1):
        o_v = i * BV + tl.arange(0, BV)
        m_v = m_t[:, None] & (o_v[None, :] < Vd)
        o_x = o_t[:, None] * Vd + o_v[None, :]
        v = tl.load(pv + o_x, mask=m_v, other=0.0)
        du = tl.load(pdu + o_x, mask=m_v, other=0.0)
        dvb = _d(At, du, LOW)
        db += tl.sum(dvb * v, 1)
        tl.store(DV + pid * BT * Vd + o_x, dvb * beta[:, None], mask=m_v)
        if VDA:
            if TRANS_FP32:
                dA += _d(du, tl.trans(v * beta[:, None]), LOW)
            else:
                dA += _d(du, tl.trans((v * beta[:, None]).to(v.dtype)), LOW)
    if TAIL >= 1:
        m_L = (o_t[:, None] > o_t[None, :]) & m_t[:, None] & m_t[None, :]
        dA = tl.where(m_L, dA, 0.0)
        dA = _d(dA, At, LOW)
        dM = _d(At, dA, LOW)
        dL = tl.where(m_L, -dM, 0.0)
        if GATE:
            dL = dL * tl.exp2(tl.where(m_L, g[:, None] - g[None, :], 0.0))
        P = dL * kk
        db += tl.sum(P, 1)
        if GATE:
            Q = P * beta[:, None]
            dg += tl.sum(Q, 1) - tl.sum(Q, 0)
        dLb = dL * beta[:, None]
        S = dLb + tl.trans(dLb)
        if TAIL >= 2:
            for i in tl.range(0, tl.cdiv(K, BK), num_stages=1):
                o_k = i * BK + tl.arange(0, BK)
                m_k = m_t[:, None] & (o_k[None, :] < K)
                k = tl.load(pk + o_t[:, None] * K + o_k[None, :], mask=m_k, other=0.0)
                dw = tl.load(pdw + o_t[:, None] * K + o_k[None, :], mask=m_k, other=0.0)
                dkb = _d(At, dw, LOW)
                dk = dkb * kscale[:, None] + _d(S, k, LOW)
                tl.store(DK + pid * BT * K + o_t[:, None] * K + o_k[None, :], dk, mask=m_k)
    tl.store(DB + pid * BT + o_t, db, mask=m_t)
    if GATE:
        tl.store(DG + pid * BT + o_t, dg, mask=m_t)


def reference(A, k, v, dw, du, beta, g):
    """float64 per-chunk backward (kernels.py's docstring), the same bf16 inputs."""
    A, k, v, dw, du = (x.double() for x in (A, k, v, dw, du)); beta, g = beta.double(), g.double()
    At = A.transpose(-1, -2)
    eg = torch.exp2(g); ks = beta * eg
    kb = k * ks[..., None]
    dkb = At @ dw
    dvb = At @ du
    dA = dw @ kb.transpose(-1, -2) + du @ (v * beta[..., None]).transpose(-1, -2)
    BT = A.shape[-1]
    L = torch.tril(torch.ones(BT, BT, dtype=torch.bool, device=A.device), -1)
    dA = torch.where(L, dA, 0.0) @ At
    dL = torch.where(L, -(At @ dA), 0.0) * torch.exp2(g[..., :, None] - g[..., None, :]) * L
    P = dL * (k @ k.transpose(-1, -2))
    Q = P * beta[..., None]
    db = (dkb * k).sum(-1) * eg + (dvb * v).sum(-1) + P.sum(-1)
    dg = (dkb * kb).sum(-1) + Q.sum(-1) - Q.sum(-2)
    dLb = dL * beta[..., None]
    dk = dkb * ks[..., None] + (dLb + dLb.transpose(-1, -2)) @ k
    return dict(dk=dk, dv=dvb * beta[..., None], dbeta=db, dg=dg)


def rel(a, b):
    a, b = a.double(), b.double()
    return float(((a - b).pow(2).mean() / b.pow(2).mean().clamp_min(1e-30)).sqrt())


def run(K, V, BK, BV, GATE=1, KL=7, VDA=1, TAIL=2, TRANS_FP32=1, warps=4, P=16, BT=64, LOW=1):
    gen = torch.Generator(device=DEV).manual_seed(0)
    r = lambda *s: torch.randn(*s, device=DEV, generator=gen)
    dt = torch.bfloat16 if LOW else torch.float32  # LOW=0: fp32 I/O and dots (the interpreter's bf16 dot is not usable)
    A = (torch.tril(r(P, BT, BT), -1) * 0.1 + torch.eye(BT, device=DEV)).to(dt)
    k = torch.nn.functional.normalize(r(P, BT, K), dim=-1).to(dt)
    v, dw, du = r(P, BT, V).to(dt), r(P, BT, K).to(dt), r(P, BT, V).to(dt)
    beta = torch.rand(P, BT, device=DEV, generator=gen)
    g = -torch.rand(P, BT, device=DEV, generator=gen).cumsum(-1) * 0.1
    out = dict(dk=torch.zeros(P, BT, K, device=DEV), dv=torch.zeros(P, BT, V, device=DEV),
               dbeta=torch.zeros(P, BT, device=DEV), dg=torch.zeros(P, BT, device=DEV))
    bwd_chunk[(P,)](A, k, v, dw, du, beta, g, out["dk"], out["dv"], out["dbeta"], out["dg"], BT, K, V, BT, BK, BV,
                    GATE, KL, VDA, TAIL, TRANS_FP32, LOW, num_warps=warps, num_stages=1)
    if DEV == "cuda":
        torch.cuda.synchronize()
    ref = reference(A, k, v, dw, du, beta, g if GATE else torch.zeros_like(g))
    errs = {"dv": rel(out["dv"], ref["dv"])}
    if KL == 7 and VDA and TAIL == 2:
        errs.update({n: rel(out[n], ref[n]) for n in ("dk", "dbeta", "dg") if GATE or n != "dg"})
    return errs


LADDER = [dict(K=64, V=32, BK=64, BV=32), dict(K=32, V=64, BK=32, BV=64), dict(K=32, V=32, BK=32, BV=32),
          dict(K=64, V=64, BK=64, BV=64), dict(K=64, V=32, BK=64, BV=64), dict(K=16, V=64, BK=16, BV=64),
          dict(K=64, V=32, BK=64, BV=32, TRANS_FP32=0), dict(K=64, V=32, BK=64, BV=32, GATE=0),
          dict(K=64, V=32, BK=64, BV=32, TAIL=1), dict(K=64, V=32, BK=64, BV=32, TAIL=0),
          dict(K=64, V=32, BK=64, BV=32, KL=1), dict(K=64, V=32, BK=64, BV=32, KL=2), dict(K=64, V=32, BK=64, BV=32, KL=4),
          dict(K=64, V=32, BK=64, BV=32, KL=0), dict(K=64, V=32, BK=64, BV=32, VDA=0),
          dict(K=64, V=32, BK=64, BV=32, GATE=0, KL=2, VDA=0, TAIL=0), dict(K=64, V=32, BK=64, BV=32, GATE=0, KL=2, TAIL=0),
          dict(K=64, V=32, BK=64, BV=32, GATE=0, KL=4, VDA=0, TAIL=0), dict(K=64, V=32, BK=64, BV=32, GATE=0, KL=1, VDA=0, TAIL=0),
          dict(K=64, V=32, BK=64, BV=32, warps=8), dict(K=128, V=32, BK=64, BV=32), dict(K=64, V=16, BK=64, BV=16),
          dict(K=64, V=32, BK=64, BV=32, LOW=0), dict(K=64, V=32, BK=64, BV=32, P=1), dict(K=16, V=16, BK=16, BV=16)]

if __name__ == "__main__":
    if len(sys.argv) > 1:
        for kw in json.loads(sys.argv[1]):
            try:
                print(json.dumps(dict(**kw, **run(**kw))), flush=True)
            except Exception as e:
                print(json.dumps(dict(**kw, error=f"{type(e).__name__}: {str(e)[:300]}")), flush=True)
    else:
        n = int(os.environ.get("NPROC", "8")); chunks = [LADDER[i::n] for i in range(n)]
        ps = [subprocess.Popen([sys.executable, __file__, json.dumps(c)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in chunks if c]
        for p in ps:
            o, e = p.communicate(); print(o, end="", flush=True)
            if p.returncode: print(json.dumps(dict(rc=p.returncode, stderr=e[-800:])), flush=True)
