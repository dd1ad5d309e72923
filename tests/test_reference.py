"""The float64 oracle (wy_ascend.reference) against an independent, naive per-chunk Python loop,
against its own analytic backward, and against finite differences."""

from __future__ import annotations

import math
import re

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from wy_ascend.reference import _build_A, build_A, wy_bwd, wy_bwd_given_A, wy_fwd

F64 = torch.float64


# ----------------------------------------------------------------------------- naive oracle


def chunks_of(B: int, T: int, cu: list[int] | None, BT: int) -> list[tuple[int, int, int]]:
    """Every chunk as (batch index, first token, valid rows n), in order."""
    seqs = [(b, 0, T) for b in range(B)] if cu is None else [(0, cu[i], cu[i + 1]) for i in range(len(cu) - 1)]
    return [(b, s, min(BT, eos - s)) for b, bos, eos in seqs for s in range(bos, eos, BT)]


def naive_M(k, beta, g, b, s, n, hv, G):
    """M = I + strict_lower(beta_i (k_i.k_j) exp2(g_i - g_j)) of one chunk and value head, entry by entry."""
    kh = k[b, s : s + n, hv // G]
    L = beta[b, s : s + n, hv, None] * (kh @ kh.T)
    if g is not None:
        gh = g[b, s : s + n, hv]
        L = L * torch.exp2(gh[:, None] - gh[None, :])  # test gates are mild: no overflow above the diagonal
    return torch.eye(n, dtype=F64) + torch.tril(L, -1)


def naive_fwd(k, v, beta, g, cu, BT, A=None):
    """(w, u, A) by a loop over chunks and value heads; A = inv(M) unless given. Differentiable."""
    B, T, H, K = k.shape
    HV = v.shape[2]
    G = HV // H
    w = torch.zeros(B, T, HV, K, dtype=F64)
    u = torch.zeros(B, T, HV, v.shape[3], dtype=F64)
    A_out = torch.zeros(B, T, HV, BT, dtype=F64)
    w_rows, u_rows, A_rows = [], [], []
    for b, s, n in chunks_of(B, T, cu, BT):
        for hv in range(HV):
            if A is None:
                Ac = torch.linalg.inv(naive_M(k, beta, g, b, s, n, hv, G))
            else:
                Ac = A[b, s : s + n, hv, :n]
            eg = torch.ones(n, dtype=F64) if g is None else torch.exp2(g[b, s : s + n, hv])
            bt = beta[b, s : s + n, hv]
            w_rows.append(((b, s, n, hv), Ac @ (k[b, s : s + n, hv // G] * (bt * eg)[:, None])))
            u_rows.append(((b, s, n, hv), Ac @ (v[b, s : s + n, hv] * bt[:, None])))
            A_rows.append(((b, s, n, hv), Ac))
    for (b, s, n, hv), x in w_rows:
        w = w.index_put((torch.tensor([b]), torch.arange(s, s + n), torch.tensor([hv])), x)
    for (b, s, n, hv), x in u_rows:
        u = u.index_put((torch.tensor([b]), torch.arange(s, s + n), torch.tensor([hv])), x)
    for (b, s, n, hv), x in A_rows:
        A_out[b, s : s + n, hv, :n] = x.detach()
    return w, u, A_out


def naive_bwd(k, v, beta, g, dw, du, cu, BT):
    """Autograd through the naive forward; dg divided by ln 2 (the kernels' convention)."""
    xs = [x.detach().to(F64).requires_grad_(True) for x in (k, v, beta)]
    gl = None if g is None else g.detach().to(F64).requires_grad_(True)
    w, u, _ = naive_fwd(*xs, gl, cu, BT)
    loss = (w * dw).sum() + (u * du).sum()
    ins = xs if gl is None else [*xs, gl]
    if not loss.requires_grad:  # no chunk at all (T = 0)
        return *(torch.zeros_like(x) for x in xs), (None if gl is None else torch.zeros_like(gl))
    grads = torch.autograd.grad(loss, ins, allow_unused=True)
    grads = [torch.zeros_like(x) if d is None else d for x, d in zip(ins, grads, strict=True)]
    return grads[0], grads[1], grads[2], (None if gl is None else grads[3] / math.log(2))


# ----------------------------------------------------------------------------- inputs


def make_inputs(seed, B, T, H, HV, K, V, cu=None, BT=64, gated=True):
    """Realistic inputs: L2-normalized keys, beta in (0, 1), g a chunk-local cumsum (restarting at
    every chunk start) of log-sigmoid values in log2 units; plus cotangents dw, du."""
    gen = torch.Generator().manual_seed(seed)
    k = F.normalize(torch.randn(B, T, H, K, generator=gen, dtype=F64), dim=-1)
    v = torch.randn(B, T, HV, V, generator=gen, dtype=F64)
    beta = torch.sigmoid(torch.randn(B, T, HV, generator=gen, dtype=F64))
    g = None
    if gated:
        step = F.logsigmoid(torch.randn(B, T, HV, generator=gen, dtype=F64) + 2.0) / math.log(2)
        g = torch.zeros_like(step)
        for b, s, n in chunks_of(B, T, cu, BT):
            g[b, s : s + n] = step[b, s : s + n].cumsum(0)
    dw = torch.randn(B, T, HV, K, generator=gen, dtype=F64)
    du = torch.randn(B, T, HV, V, generator=gen, dtype=F64)
    cu_t = None if cu is None else torch.tensor(cu, dtype=torch.int32)
    return k, v, beta, g, dw, du, cu_t


def close(a, b, tol):
    """max |a - b| <= tol * max(1, max |b|)."""
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.dtype == F64 and b.dtype == F64
    if b.numel() == 0:
        return
    scale = max(1.0, b.abs().max().item())
    err = (a - b).abs().max().item()
    assert err <= tol * scale, f"max abs err {err:.3e} > {tol:.1e} * {scale:.3e}"


# (B, T, H, HV, K, V, cu_seqlens, BT): fixed and varlen layouts, with partial chunks, T < BT,
# empty and length-1 sequences, T = 0 and HV/H = 1, 2, 3.
LAYOUTS = [
    pytest.param(2, 100, 2, 2, 8, 6, None, 32, id="B2-T100-BT32-G1"),
    pytest.param(1, 64, 1, 2, 16, 8, None, 64, id="T64-BT64-G2"),
    pytest.param(1, 5, 2, 6, 4, 3, None, 64, id="T5-BT64-G3"),
    pytest.param(1, 130, 1, 3, 8, 5, [0, 0, 1, 40, 40, 97, 130], 16, id="varlen-empty-len1-G3"),
    pytest.param(1, 70, 2, 4, 7, 9, [0, 1, 2, 3, 35, 70], 32, id="varlen-len1s-G2"),
    pytest.param(1, 33, 1, 1, 5, 5, [0, 33, 33], 16, id="varlen-trailing-empty-G1"),
    pytest.param(1, 0, 1, 2, 4, 4, None, 16, id="T0"),
    pytest.param(1, 0, 1, 1, 4, 4, [0, 0], 16, id="T0-varlen"),
]


# ----------------------------------------------------------------------------- (a) naive vs vectorized


@pytest.mark.parametrize("gated", [False, True], ids=["nogate", "gate"])
@pytest.mark.parametrize("B,T,H,HV,K,V,cu,BT", LAYOUTS)
def test_matches_naive_loop(B, T, H, HV, K, V, cu, BT, gated):
    k, v, beta, g, dw, du, cu_t = make_inputs(1, B, T, H, HV, K, V, cu, BT, gated)
    w_ref, u_ref, A_ref = naive_fwd(k, v, beta, g, cu, BT)

    A = build_A(k, beta, g, cu_t, chunk_size=BT)
    assert A.shape == (B, T, HV, BT) and A.dtype == F64
    close(A, A_ref, 1e-12)

    w, u = wy_fwd(k, v, beta, A, g, cu_t)
    close(w, w_ref.detach(), 1e-12)
    close(u, u_ref.detach(), 1e-12)

    ref = naive_bwd(k, v, beta, g, dw, du, cu, BT)
    for name, fn in [
        ("wy_bwd", lambda: wy_bwd(k, v, beta, dw, du, g, cu_t, chunk_size=BT)),
        ("wy_bwd_given_A", lambda: wy_bwd_given_A(k, v, beta, A, dw, du, g, cu_t)),
    ]:
        got = fn()
        assert got[0].shape == k.shape, name
        for x, y in zip(got[:3], ref[:3], strict=True):
            close(x, y, 1e-12)
        if gated:
            close(got[3], ref[3], 1e-12)
        else:
            assert got[3] is None


@pytest.mark.parametrize("gated", [False, True], ids=["nogate", "gate"])
@pytest.mark.parametrize("B,T,H,HV,K,V,cu,BT", LAYOUTS)
def test_chunk_slices_give_the_one_slice_answer(B, T, H, HV, K, V, cu, BT, gated, monkeypatch):
    """The oracle runs its chunks in slices of at most SLICE_BYTES (a case of 32,787 short sequences needed
    200 GB in one): one chunk per slice gives the answer of one slice for all, in every layout (empty and
    partial chunks, grouped heads, gates), through build_A, wy_fwd and wy_bwd_given_A. Not bit for bit:
    the host's batched float64 BLAS blocks a batch by its size, so sums may round in another order; the
    bound is this file's float64 one (1e-12 of the largest entry: sums of at most 64 terms at unit
    roundoff 1.1e-16, times the triangular inverse's growth on these inputs)."""
    import wy_ascend.reference as reference

    k, v, beta, g, dw, du, cu_t = make_inputs(4, B, T, H, HV, K, V, cu, BT, gated)

    def run():
        A = build_A(k, beta, g, cu_t, chunk_size=BT)
        return [A, *wy_fwd(k, v, beta, A, g, cu_t), *wy_bwd_given_A(k, v, beta, A, dw, du, g, cu_t)]

    whole = run()
    monkeypatch.setattr(reference, "SLICE_BYTES", 1)  # one chunk a slice
    sliced = run()
    for name, x, y in zip(("A", "w", "u", "dk", "dv", "dbeta", "dg"), sliced, whole, strict=True):
        assert (x is None) == (y is None), name
        if x is not None:
            close(x, y, 1e-12)

def test_fwd_uses_given_A():
    """wy_fwd takes A as given: a perturbed A changes w, u exactly as the naive loop says."""
    cu = [0, 20, 45]
    k, v, beta, g, *_, cu_t = make_inputs(2, 1, 45, 1, 2, 8, 4, cu, 16)
    A = build_A(k, beta, g, cu_t, chunk_size=16)
    A = A + 1e-3 * torch.randn(A.shape, generator=torch.Generator().manual_seed(0), dtype=F64).tril()
    for b, s, n in chunks_of(1, 45, cu, 16):
        A[b, s : s + n, :, n:] = 0  # a partial chunk's padded columns are 0 by contract
    w_ref, u_ref, _ = naive_fwd(k, v, beta, g, cu, 16, A=A)
    w, u = wy_fwd(k, v, beta, A, g, cu_t)
    close(w, w_ref, 1e-12)
    close(u, u_ref, 1e-12)


# ----------------------------------------------------------------------------- (b) analytic vs autograd


@pytest.mark.parametrize("gated", [False, True], ids=["nogate", "gate"])
@pytest.mark.parametrize(
    "B,T,H,HV,K,V,cu,BT",
    [
        pytest.param(2, 200, 2, 4, 32, 16, None, 64, id="B2-T200-G2"),
        pytest.param(1, 300, 1, 3, 64, 128, [0, 1, 1, 130, 200, 300], 64, id="varlen-G3"),
    ],
)
def test_given_A_equals_autograd(B, T, H, HV, K, V, cu, BT, gated):
    k, v, beta, g, dw, du, cu_t = make_inputs(3, B, T, H, HV, K, V, cu, BT, gated)
    A = build_A(k, beta, g, cu_t, chunk_size=BT)
    got = wy_bwd_given_A(k, v, beta, A, dw, du, g, cu_t)
    ref = wy_bwd(k, v, beta, dw, du, g, cu_t, chunk_size=BT)
    for x, y in zip(got, ref, strict=True):
        if y is None:
            assert x is None
        else:
            close(x, y, 1e-10)


# ----------------------------------------------------------------------------- (c) finite differences


def test_bwd_matches_finite_differences():
    """Central differences of L = sum(w dw) + sum(u du) through the naive forward, A rebuilt from
    (k, beta, g) at every step; dg compared under the kernels' ln 2 convention."""
    cu, BT = [0, 1, 7], 4
    k, v, beta, g, dw, du, cu_t = make_inputs(4, 1, 7, 1, 2, 3, 2, cu, BT)
    dk, dv, dbeta, dg = wy_bwd(k, v, beta, dw, du, g, cu_t, chunk_size=BT)

    def loss(k, v, beta, g):
        w, u, _ = naive_fwd(k, v, beta, g, cu, BT)
        return ((w * dw).sum() + (u * du).sum()).item()

    args = [k, v, beta, g]
    eps = 1e-6
    for pos, got in enumerate([dk, dv, dbeta, dg * math.log(2)]):
        fd = torch.zeros_like(args[pos])
        for i in range(fd.numel()):
            plus = [a.clone() for a in args]
            minus = [a.clone() for a in args]
            plus[pos].view(-1)[i] += eps
            minus[pos].view(-1)[i] -= eps
            fd.view(-1)[i] = (loss(*plus) - loss(*minus)) / (2 * eps)
        close(got, fd, 1e-7)


def test_gradcheck_fwd_given_A():
    """wy_fwd is differentiable in (k, v, beta, A, g) and its autograd passes gradcheck."""
    k, v, beta, g, _, _, cu_t = make_inputs(5, 1, 6, 1, 2, 3, 2, [0, 2, 6], 4)
    A = _build_A(k, beta, g, cu_t, chunk_size=4)  # chunks of 4 keep gradcheck small; build_A takes the ops' sizes only
    ins = [x.clone().requires_grad_(True) for x in (k, v, beta, A, g)]
    assert torch.autograd.gradcheck(lambda k, v, b, A, g: wy_fwd(k, v, b, A, g, cu_t), ins)


# ----------------------------------------------------------------------------- (d), (e) structure of A


@pytest.mark.parametrize("gated", [False, True], ids=["nogate", "gate"])
def test_A_structure_and_inverse(gated):
    """Per chunk: A is unit lower triangular, its padded columns are 0, and M @ A == I."""
    cu, BT = [0, 1, 1, 50, 77, 140], 32
    k, v, beta, g, *_, cu_t = make_inputs(6, 1, 140, 2, 4, 16, 8, cu, BT, gated)
    A = build_A(k, beta, g, cu_t, chunk_size=BT)
    for b, s, n in chunks_of(1, 140, cu, BT):
        for hv in range(4):
            Ac = A[b, s : s + n, hv]
            assert torch.equal(Ac[:, n:], torch.zeros(n, BT - n, dtype=F64))
            Ac = Ac[:, :n]
            assert torch.equal(Ac, Ac.tril())
            assert torch.equal(Ac.diagonal(), torch.ones(n, dtype=F64))
            M = naive_M(k, beta, g, b, s, n, hv, 2)
            close(M @ Ac, torch.eye(n, dtype=F64), 1e-12)


# ----------------------------------------------------------------------------- dtypes, edges, errors


def test_dtypes():
    """Inputs of any float dtype are computed in float64; build_A casts to k.dtype or `dtype`."""
    k, v, beta, g, dw, du, _ = make_inputs(7, 1, 40, 1, 2, 8, 8, BT=16)
    k32, v32, b32, g32 = (x.float() for x in (k, v, beta, g))
    assert build_A(k32, b32, g32, chunk_size=16).dtype == torch.float32
    assert build_A(k32, b32, g32, chunk_size=16, dtype=torch.bfloat16).dtype == torch.bfloat16
    A64 = build_A(k32, b32, g32, chunk_size=16, dtype=F64)
    close(A64, build_A(k32.double(), b32.double(), g32.double(), chunk_size=16), 0)
    w, u = wy_fwd(k32, v32, b32, A64.bfloat16(), g32)
    assert w.dtype == u.dtype == F64
    grads = wy_bwd(k32, v32, b32, dw.float(), du.float(), g32, chunk_size=16)
    assert all(x.dtype == F64 for x in grads)


def test_strong_gates_stay_finite():
    """exp2(g_i - g_j) overflows above the diagonal for strong decay; it must not leak NaN/inf."""
    k, v, beta, _, dw, du, _ = make_inputs(8, 1, 64, 1, 1, 4, 4, BT=64)
    g = torch.full((1, 64, 1), -40.0, dtype=F64).cumsum(1)  # g_j - g_i up to 2520 above the diagonal
    A = build_A(k, beta, g)
    assert torch.isfinite(A).all()
    assert all(torch.isfinite(x).all() for x in wy_fwd(k, v, beta, A, g))
    assert all(torch.isfinite(x).all() for x in wy_bwd(k, v, beta, dw, du, g))
    assert all(torch.isfinite(x).all() for x in wy_bwd_given_A(k, v, beta, A, dw, du, g))


@pytest.mark.parametrize(
    "cu,match",
    [
        ([1, 5], "start at 0"),
        ([0, 5, 3, 10], "non-decreasing"),
        ([0, 11], "at most at T"),
    ],
)
def test_bad_cu_seqlens(cu, match):
    k, _, beta, *_ = make_inputs(9, 1, 10, 1, 1, 4, 4, gated=False)
    with pytest.raises(ValueError, match=match):
        build_A(k, beta, cu_seqlens=torch.tensor(cu))


@pytest.mark.parametrize(
    "K,chunk_size,match",
    [
        (8, 8, r"chunk_size must be one of \(16, 32, 64, 128\), got 8"),
        (8, 256, r"chunk_size must be one of \(16, 32, 64, 128\), got 256"),
        (257, 64, r"K \(k.shape\[3\]\) must be in \[1, 256\], got 257"),
        (0, 64, r"K \(k.shape\[3\]\) must be in \[1, 256\], got 0"),
    ],
)
def test_build_A_refuses_what_the_ops_refuse(K, chunk_size, match):
    """build_A builds kernel inputs, so a chunk size or K the ops reject fails here already, with
    the ops' message; the largest accepted sizes still build."""
    k, beta = torch.zeros(1, 4, 1, K, dtype=F64), torch.zeros(1, 4, 1, dtype=F64)
    with pytest.raises(ValueError, match=match):
        build_A(k, beta, chunk_size=chunk_size)
    assert build_A(torch.zeros(1, 4, 1, 256, dtype=F64), beta, chunk_size=128).shape == (1, 4, 1, 128)


def test_bad_shapes():
    k, _, beta, *_ = make_inputs(9, 2, 10, 2, 4, 4, 4, gated=False)
    with pytest.raises(ValueError, match="B == 1"):
        build_A(k, beta, cu_seqlens=torch.tensor([0, 10]))
    with pytest.raises(ValueError, match="multiple of H"):
        build_A(k, beta[:, :, :3])


def test_the_oracle_takes_the_smallest_valid_cu_seqlens_and_chunk_size() -> None:
    """Boundary inputs the oracle must accept: cu_seqlens = [0] (a packed batch of no sequence)
    and a given A of chunk size 1 (every chunk one token, A = M^-1 = 1)."""
    f64 = torch.float64
    empty = build_A(torch.zeros(1, 0, 1, 16, dtype=f64), torch.zeros(1, 0, 1, dtype=f64), None,
                    torch.tensor([0]), chunk_size=16, dtype=f64)
    assert empty.shape == (1, 0, 1, 16)
    k, v, beta = torch.randn(1, 5, 1, 16, dtype=f64), torch.randn(1, 5, 1, 8, dtype=f64), torch.rand(1, 5, 1, dtype=f64)
    w, u = wy_fwd(k, v, beta, torch.ones(1, 5, 1, 1, dtype=f64))  # one-token chunks: A = 1
    assert torch.equal(w, k * beta[..., None]) and torch.equal(u, v * beta[..., None])


def test_a_chunk_size_below_one_is_refused_by_name() -> None:
    """One below the smallest chunk size the oracle accepts (1): a given A of width 0 and a
    chunk_size of 0 fail with the oracle's message, not deep inside the chunking."""
    f64 = torch.float64
    k, v, beta = torch.randn(1, 5, 1, 16, dtype=f64), torch.randn(1, 5, 1, 8, dtype=f64), torch.rand(1, 5, 1, dtype=f64)
    dw, du, A0 = torch.randn(1, 5, 1, 16, dtype=f64), torch.randn(1, 5, 1, 8, dtype=f64), torch.ones(1, 5, 1, 0, dtype=f64)
    for call in (lambda: wy_fwd(k, v, beta, A0), lambda: wy_bwd_given_A(k, v, beta, A0, dw, du),
                 lambda: wy_bwd(k, v, beta, dw, du, chunk_size=0)):
        with pytest.raises(ValueError, match="chunk size must be >= 1, got 0"):
            call()


def test_a_small_case_is_one_slice_and_a_large_one_is_cut_within_the_bound():
    """_slices: a case whose float64 [chunks, HV, BT, width] block fits SLICE_BYTES runs as one slice (the fuzz
    suite's cases: no per-slice overhead); the nightly's 32,787 chunks of BT=128 are cut into slices of at most
    SLICE_BYTES each, every chunk in exactly one, in order."""
    from wy_ascend.reference import SLICE_BYTES, _Layout, _slices

    def layout(C: int, BT: int) -> _Layout:
        idx = torch.arange(C * BT).view(C, BT)
        return _Layout(idx, torch.ones(C, BT, dtype=torch.bool), idx.flatten())

    assert len(_slices(layout(32, 64), 4, 128)) == 1  # 8 MiB of blocks
    C, BT, HV, width = 32787, 128, 4, 128
    parts = _slices(layout(C, BT), HV, width)
    assert len(parts) > 1 and all(p.idx.shape[0] * HV * BT * width * 8 <= SLICE_BYTES for p in parts)
    assert torch.cat([p.idx for p in parts]).equal(layout(C, BT).idx)


@st.composite
def packed_layouts(draw: st.DrawFn) -> tuple[list[int], int, int]:
    """(cu_seqlens, T, BT): sequences of 0 to 120 tokens in all (every value fits int8), any chunk size."""
    lens = draw(st.lists(st.integers(0, 70), min_size=1, max_size=4).filter(lambda x: sum(x) <= 120))
    cu = [sum(lens[:i]) for i in range(len(lens) + 1)]
    return cu, cu[-1] + draw(st.integers(0, 3)), draw(st.sampled_from([16, 32, 64, 128]))


@given(layout=packed_layouts(), form=st.sampled_from(["uint8", "int8", "int16", "int32", "list", "strided"]),
       gated=st.booleans())
@settings(max_examples=40, deadline=None, derandomize=True, database=None)
def test_cu_seqlens_in_any_integer_form_gives_the_int64_answer(layout, form, gated):
    """The oracle takes cu_seqlens as any integer tensor (or a list) and counts chunks on the host in int64:
    every narrower dtype, a Python list and a strided view give the int64 tensor's A, w, u and gradients
    bit for bit (kept as given, torch's repeat_interleave refuses 8- and 16-bit chunk counts)."""
    cu, T, BT = layout
    k, v, beta, g, dw, du, _ = make_inputs(5, 1, T, 1, 2, 4, 3, cu, BT, gated)
    as_int64 = torch.tensor(cu, dtype=torch.int64)
    other = {"list": cu, "strided": torch.tensor(cu, dtype=torch.int64).repeat_interleave(2)[::2]}.get(form)
    other = other if other is not None else as_int64.to(getattr(torch, form))

    def run(cu_seqlens):
        A = build_A(k, beta, g, cu_seqlens, chunk_size=BT)
        return [A, *wy_fwd(k, v, beta, A, g, cu_seqlens), *wy_bwd(k, v, beta, dw, du, g, cu_seqlens, chunk_size=BT)]

    for name, x, y in zip(("A", "w", "u", "dk", "dv", "dbeta", "dg"), run(other), run(as_int64), strict=True):
        assert (x is None) == (y is None) and (x is None or torch.equal(x, y)), name


# Per argument of the oracle, the message its shape check raises, and which of its dims the check compares
# (k's dims define B, T, H; beta's last one HV, so those are not checked against anything).
SHAPE_CHECKS = {"k": ("k must be \\[B,T,H,K\\]", ()), "beta": ("beta must be \\[B,T,HV\\]", (0, 1)),
                "v": ("v must be \\[B,T,HV,V\\]", (0, 1, 2)), "g": ("g must be \\[B,T,HV\\]", (0, 1, 2)),
                "A": ("A must be \\[B,T,HV,BT\\]", (0, 1, 2))}


@st.composite
def misshapen(draw: st.DrawFn) -> tuple[str, tuple[int, ...], tuple[int, ...]]:
    """(argument, its right shape, a wrong one): a dim added or dropped, or a compared dim one larger."""
    name = draw(st.sampled_from(sorted(SHAPE_CHECKS)))
    B, T, H, G, K, V, BT = (draw(st.integers(1, 3)) for _ in range(7))
    shape = {"k": (B, T, H, K), "beta": (B, T, H * G), "v": (B, T, H * G, V), "g": (B, T, H * G),
             "A": (B, T, H * G, BT)}
    right = shape[name]
    how = draw(st.sampled_from(["add", "drop", *SHAPE_CHECKS[name][1]]))
    wrong = (right + (1,) if how == "add" else right[:-1] if how == "drop"
             else tuple(n + (i == how) for i, n in enumerate(right)))
    return name, wrong, tuple(shape.items())


@settings(max_examples=80, deadline=None, derandomize=True, database=None)
@given(bad=misshapen())
def test_the_oracle_refuses_a_misshapen_argument_naming_it_and_its_shape(bad) -> None:
    """Each oracle entry point checks every argument's shape against the fla layouts: one argument of a wrong
    rank, or with a leading dim not its batch's, raises ValueError naming that argument and the shape it got
    (the right shapes are accepted)."""
    name, wrong, shapes = bad
    args = {n: torch.rand(s, dtype=F64) for n, s in shapes}
    dw, du = torch.zeros(*args["v"].shape[:3], args["k"].shape[3], dtype=F64), torch.zeros_like(args["v"])
    calls = [lambda a: wy_fwd(a["k"], a["v"], a["beta"], a["A"], a["g"]),
             lambda a: wy_bwd_given_A(a["k"], a["v"], a["beta"], a["A"], dw, du, a["g"])]
    for call in calls:
        assert all(torch.isfinite(x).all() for x in call(args) if x is not None)
        with pytest.raises(ValueError, match=f"^{SHAPE_CHECKS[name][0]}.*got shape {re.escape(str(wrong))}$"):
            call({**args, name: torch.rand(wrong, dtype=F64)})


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(T=st.integers(1, 6), form=st.sampled_from(["2-D", "empty", "float32", "float64", "bool"]))
def test_the_oracle_refuses_cu_seqlens_that_are_no_1d_integer_tensor(T: int, form: str) -> None:
    """cu_seqlens must be a non-empty 1-D integer tensor: a 2-D or empty one raises ValueError naming its
    shape, a floating or bool one TypeError naming its dtype; the same values as int64 are accepted."""
    k, v, beta, g, *_ = make_inputs(3, 1, T, 1, 1, 2, 2, gated=False)
    good = torch.tensor([0, T])
    cu = {"2-D": good[None], "empty": good[:0], "float32": good.float(), "float64": good.double(),
          "bool": good.bool()}[form]
    assert build_A(k, beta, cu_seqlens=good, chunk_size=16).shape == (1, T, 1, 16)
    if form in ("2-D", "empty"):
        with pytest.raises(ValueError, match=f"^cu_seqlens must be 1-D with at least one entry, got shape "
                                             f"{re.escape(str(tuple(cu.shape)))}$"):
            build_A(k, beta, cu_seqlens=cu, chunk_size=16)
    else:
        with pytest.raises(TypeError, match=f"^cu_seqlens must be an integer tensor, got dtype {cu.dtype}$"):
            build_A(k, beta, cu_seqlens=cu, chunk_size=16)
