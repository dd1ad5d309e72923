"""Float64 oracle of the WY representation of the chunked gated delta rule (docs/design.md section 2).

Everything here computes in float64 on the inputs' device and is vectorized over chunks and
heads: every chunk is gathered into a padded ``[C, HV, BT, ...]`` tensor through an index map
built once per call (pad rows read a zero row, so ``beta = 0`` there and the pad rows of ``M``
are identity rows), the ``C * HV`` triangular systems are solved in one batched
``torch.linalg.solve_triangular``, and results are scattered back to ``[B, T, ...]``.

Public functions:

- ``build_A``: the ``A [B,T,HV,BT]`` tensor the kernels take as input (``M^-1`` per chunk).
- ``wy_fwd``: ``w, u`` from a GIVEN ``A`` (what the forward kernel computes).
- ``wy_bwd``: exact gradients with ``A`` treated as the function of ``(k, beta, g)``, by autograd.
- ``wy_bwd_given_A``: the same gradients from the analytic formulas with a GIVEN ``A`` plugged in
  (the same-precision baseline for bf16/fp16: the kernel also uses its given, rounded ``A``).

``dg`` convention (measured on the seed): ``dg`` is autograd's gradient with respect to ``g``
divided by ``ln 2``; the kernels drop the ``ln 2`` of ``d exp2(x)/dx``.

Speed (2-core CPU, torch 2.13 CPU, default 2 threads, idle machine): ``build_A + wy_fwd + wy_bwd``
(autograd) for B=1, T=256, H=HV=4, K=V=64, BT=64, gated: median 6.3-6.9 ms, min 5.8 ms per call
over 300 calls (under 20 ms; a loaded machine is several times slower). Measured with::

    python - <<'EOF'
    import time, torch
    from wy_ascend.reference import build_A, wy_bwd, wy_fwd
    torch.manual_seed(0)
    B, T, H, K = 1, 256, 4, 64
    k = torch.nn.functional.normalize(torch.randn(B, T, H, K), dim=-1)
    v, b = torch.randn(B, T, H, K), torch.rand(B, T, H)
    g = -torch.rand(B, T, H).view(B, 4, 64, H).cumsum(2).view(B, T, H)
    dw, du = torch.randn(B, T, H, K), torch.randn(B, T, H, K)
    def f():
        wy_fwd(k, v, b, build_A(k, b, g), g)
        wy_bwd(k, v, b, dw, du, g)
    for _ in range(20):
        f()
    ts = []
    for _ in range(300):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    print(f"min {ts[0] * 1e3:.2f} ms  median {ts[150] * 1e3:.2f} ms")
    EOF
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from .validation import check_chunk_size, check_dim

__all__ = ["build_A", "wy_fwd", "wy_bwd", "wy_bwd_given_A"]

_LN2 = math.log(2.0)
_F64 = torch.float64


# ----------------------------------------------------------------------------- layout


class _Layout(NamedTuple):
    """Index map of one call: ``idx [C, BT]`` flat token index per (chunk, row) into ``[B*T + 1]``
    (pad rows point at the extra zero row ``B*T``), ``valid [C, BT]``, ``tok [Nv]`` the flat token
    index of every valid (chunk, row) in chunk-major order."""

    idx: torch.Tensor
    valid: torch.Tensor
    tok: torch.Tensor


def _check_cu_seqlens(cu_seqlens: torch.Tensor, B: int, T: int) -> torch.Tensor:
    """Validate ``cu_seqlens`` against a ``[B, T, ...]`` batch and return it as CPU int64."""
    cu = torch.as_tensor(cu_seqlens)
    if cu.dim() != 1 or cu.numel() < 1:
        raise ValueError(f"cu_seqlens must be 1-D with at least one entry, got shape {tuple(cu.shape)}")
    if cu.dtype.is_floating_point or cu.dtype.is_complex or cu.dtype == torch.bool:
        raise TypeError(f"cu_seqlens must be an integer tensor, got dtype {cu.dtype}")
    if B != 1:
        raise ValueError(f"cu_seqlens requires B == 1, got B={B}")
    cu = cu.detach().to("cpu", torch.int64)
    if int(cu[0]) != 0:
        raise ValueError(f"cu_seqlens must start at 0, got cu_seqlens[0]={int(cu[0])}")
    if int(cu[-1]) > T:
        raise ValueError(f"cu_seqlens must end at most at T={T}, got cu_seqlens[-1]={int(cu[-1])}")
    if cu.numel() > 1 and bool((cu[1:] < cu[:-1]).any()):
        raise ValueError(f"cu_seqlens must be non-decreasing, got {cu.tolist()}")
    return cu


def _chunk_layout(cu_seqlens: torch.Tensor | None, B: int, T: int, BT: int, device: torch.device) -> _Layout:
    """Build the (chunk, row) -> token map with tensor ops only. Without ``cu_seqlens`` the batch
    is treated as ``B`` sequences of length ``T`` packed into ``B*T`` flat tokens. Chunks restart
    at every sequence start; an empty sequence has no chunk; the last chunk may be partial."""
    if BT < 1:
        raise ValueError(f"chunk size must be >= 1, got {BT}")
    host = torch.device("cpu")  # built on the host whatever torch's default device (one upload below)
    if cu_seqlens is None:
        cu = torch.arange(B + 1, dtype=torch.int64, device=host) * T
    else:
        cu = _check_cu_seqlens(cu_seqlens, B, T)
    lens = cu[1:] - cu[:-1]
    counts = (lens + BT - 1) // BT
    C = int(counts.sum())
    seq = torch.repeat_interleave(torch.arange(lens.numel(), device=host), counts)
    first = torch.cumsum(counts, 0) - counts
    local = torch.arange(C, device=host) - first[seq]
    start = cu[seq] + local * BT
    n = torch.minimum(cu[seq + 1] - start, torch.tensor(BT, device=host))
    rows = torch.arange(BT, device=host)
    idx = torch.where(rows < n[:, None], start[:, None] + rows, torch.tensor(B * T, device=host)).to(device)
    # One upload (each is a sync on a GPU); the valid rows in chunk-major order are the tokens
    # 0 .. cu[-1] - 1 in order, as chunks tile every sequence in order.
    return _Layout(idx, idx < B * T, torch.arange(int(cu[-1]), device=device))


def _gather(x: torch.Tensor, lay: _Layout) -> torch.Tensor:
    """``[B, T, *rest]`` -> ``[C, BT, *rest]`` float64, zero in pad rows (differentiable). A pad row reads
    the last token and is then zeroed, so no padded copy of the whole input is made (once a slice of the
    chunks, ``_slices``)."""
    flat = x.to(_F64).reshape(-1, *x.shape[2:])
    rows = flat[lay.idx.clamp(max=max(flat.shape[0] - 1, 0))]
    return torch.where(lay.valid.view(*lay.valid.shape, *[1] * (rows.dim() - 2)), rows, 0.0)


def _gather_A(A: torch.Tensor, lay: _Layout) -> torch.Tensor:
    """``A [B, T, HV, BT]`` -> ``[C, HV, BT, BT]`` float64 with the columns past each chunk's end
    set to 0 whatever they hold: they meet no token, so the ops must never read them (the fuzz
    cases fill them with NaN, testing.case)."""
    Ac = _gather(A, lay)
    return _heads_first(torch.where(lay.valid[:, None, None, :], Ac, 0.0))


def _scatter(xc: torch.Tensor, lay: _Layout, B: int, T: int, into: torch.Tensor | None = None) -> torch.Tensor:
    """``[C, BT, *rest]`` -> ``[B, T, *rest]``, dropping pad rows; tokens in no chunk get 0. With ``into``
    (the ``[B, T, *rest]`` result of the earlier slices, ``_slices``) the rows are written into a copy of it
    (out of place: differentiable)."""
    rest = xc.shape[2:]
    base = xc.new_zeros(B * T, *rest) if into is None else into.reshape(B * T, *rest)
    return base.index_copy(0, lay.tok, xc[lay.valid]).reshape(B, T, *rest)


# The chunk form holds C x BT rows however short the sequences are: 32,787 sequences of 11 tokens at BT=128
# (an H200 nightly's case, regressions/crash-c92294b758fe.json) made [C, HV, BT, BT] float64 blocks of 8.6 GB
# each, about 200 GB at once, past the GPU's memory and 12x the tokens' share. So the oracle runs the chunks in
# slices whose largest block is at most SLICE_BYTES (chunks are independent; a small case is one slice).
SLICE_BYTES = 2**28


def _slices(lay: _Layout, HV: int, width: int) -> list[_Layout]:
    """``lay`` cut along its chunks into layouts whose ``[chunks, HV, BT, width]`` float64 blocks hold at most
    SLICE_BYTES (at least one chunk each)."""
    C, BT = lay.idx.shape
    per = max(1, SLICE_BYTES // (8 * HV * BT * width))
    if per >= C:
        return [lay]
    parts = []
    for c0 in range(0, C, per):
        idx, valid = lay.idx[c0:c0 + per], lay.valid[c0:c0 + per]
        parts.append(_Layout(idx, valid, idx[valid]))
    return parts


def _heads_first(xc: torch.Tensor) -> torch.Tensor:
    """``[C, BT, HV, ...]`` -> ``[C, HV, BT, ...]``."""
    return xc.movedim(2, 1)


def _heads_last(xc: torch.Tensor) -> torch.Tensor:
    """``[C, HV, BT, ...]`` -> ``[C, BT, HV, ...]``."""
    return xc.movedim(1, 2)


def _check_heads(k: torch.Tensor, v: torch.Tensor | None, beta: torch.Tensor, g: torch.Tensor | None) -> int:
    """Validate shapes against the fla layouts and return the group size ``HV // H``."""
    if k.dim() != 4:
        raise ValueError(f"k must be [B,T,H,K], got shape {tuple(k.shape)}")
    B, T, H, _ = k.shape
    if beta.dim() != 3 or beta.shape[:2] != (B, T):
        raise ValueError(f"beta must be [B,T,HV] with B={B}, T={T}, got shape {tuple(beta.shape)}")
    HV = beta.shape[2]
    if H == 0 or HV % H != 0:
        raise ValueError(f"HV must be a multiple of H, got H={H}, HV={HV}")
    if v is not None and (v.dim() != 4 or v.shape[:3] != (B, T, HV)):
        raise ValueError(f"v must be [B,T,HV,V] with B={B}, T={T}, HV={HV}, got shape {tuple(v.shape)}")
    if g is not None and tuple(g.shape) != (B, T, HV):
        raise ValueError(f"g must be [B,T,HV] = {(B, T, HV)}, got shape {tuple(g.shape)}")
    return HV // H


# ----------------------------------------------------------------------------- chunk math


def _strict_lower(n: int, device: torch.device) -> torch.Tensor:
    return torch.ones(n, n, dtype=torch.bool, device=device).tril(-1)


def _gate(gc: torch.Tensor | None, mask: torch.Tensor) -> torch.Tensor | None:
    """``exp2(g_i - g_j)`` on the strict lower triangle, 1 elsewhere (masked before exp2 so the
    upper triangle cannot overflow into inf and then NaN through ``inf * 0``)."""
    if gc is None:
        return None
    diff = gc[..., :, None] - gc[..., None, :]
    return torch.exp2(torch.where(mask, diff, torch.zeros((), dtype=diff.dtype, device=diff.device)))


def _A_chunks(kc: torch.Tensor, bc: torch.Tensor, gc: torch.Tensor | None) -> torch.Tensor:
    """Per-chunk ``A = M^-1`` with ``kc [C,HV,BT,K]``, ``bc, gc [C,HV,BT]`` -> ``[C,HV,BT,BT]``."""
    BT = kc.shape[-2]
    mask = _strict_lower(BT, kc.device)
    Lm = bc[..., :, None] * (kc @ kc.transpose(-1, -2))
    eg = _gate(gc, mask)
    if eg is not None:
        Lm = Lm * eg
    eye = torch.eye(BT, dtype=_F64, device=kc.device)
    M = torch.where(mask, Lm, torch.zeros((), dtype=_F64, device=kc.device)) + eye
    return torch.linalg.solve_triangular(M, eye.expand_as(M), upper=False, unitriangular=True)


class _Chunks(NamedTuple):
    """Inputs gathered into chunk form, value heads first: ``k [C,HV,BT,K]`` (key heads repeated
    over their value heads), ``v [C,HV,BT,V]``, ``beta, g [C,HV,BT]`` (``g`` may be None)."""

    k: torch.Tensor
    v: torch.Tensor | None
    beta: torch.Tensor
    g: torch.Tensor | None


def _to_chunks(lay: _Layout, G: int, k, v, beta, g) -> _Chunks:
    kc = _heads_first(_gather(k, lay).repeat_interleave(G, dim=2))
    vc = None if v is None else _heads_first(_gather(v, lay))
    bc = _heads_first(_gather(beta, lay))
    gc = None if g is None else _heads_first(_gather(g, lay))
    return _Chunks(kc, vc, bc, gc)


def _wu_chunks(ch: _Chunks, Ac: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``w = A @ (k*beta*exp2(g))``, ``u = A @ (v*beta)`` in chunk form."""
    assert ch.v is not None
    scale = ch.beta if ch.g is None else ch.beta * torch.exp2(ch.g)
    return Ac @ (ch.k * scale[..., None]), Ac @ (ch.v * ch.beta[..., None])


# ----------------------------------------------------------------------------- public API


def build_A(
    k: torch.Tensor,
    beta: torch.Tensor,
    g: torch.Tensor | None = None,
    cu_seqlens: torch.Tensor | None = None,
    chunk_size: int = 64,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """``A [B,T,HV,BT]``: per chunk and value head, ``M^-1`` with
    ``M = I + strict_lower(beta_i (k_i.k_j) exp2(g_i - g_j))``, computed in float64 and cast to
    ``dtype`` (default ``k.dtype``). ``A[b,t,h,j]`` is row (t within its chunk), column j; rows
    are unit lower triangular and columns ``j >= n`` of a partial chunk are 0. Callers use it to
    build kernel inputs consistent with ``k, beta, g``, so it refuses what the ops refuse: a
    ``chunk_size`` outside ``SUPPORTED_BT`` and a ``K`` outside ``[1, MAX_DIM]`` (ValueError, the
    ops' own checks). The oracle's other functions take any chunk size (its tests use tiny ones)."""
    check_chunk_size("chunk_size", chunk_size)
    _check_heads(k, None, beta, g)
    check_dim("K (k.shape[3])", k.shape[3])
    return _build_A(k, beta, g, cu_seqlens, chunk_size, dtype)


def _build_A(
    k: torch.Tensor,
    beta: torch.Tensor,
    g: torch.Tensor | None = None,
    cu_seqlens: torch.Tensor | None = None,
    chunk_size: int = 64,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """``build_A`` for any chunk size and K (the oracle's own tests use chunks of 4)."""
    G = _check_heads(k, None, beta, g)
    B, T, _, K = k.shape
    HV = beta.shape[2]
    lay = _chunk_layout(cu_seqlens, B, T, chunk_size, k.device)
    A = None
    with torch.no_grad():
        for part in _slices(lay, HV, max(chunk_size, K)):
            ch = _to_chunks(part, G, k, None, beta, g)
            A = _scatter(_heads_last(_A_chunks(ch.k, ch.beta, ch.g)), part, B, T, A)
    assert A is not None  # _slices gives at least one part
    return A.reshape(B, T, HV, chunk_size).to(k.dtype if dtype is None else dtype)


def wy_fwd(
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    A: torch.Tensor,
    g: torch.Tensor | None = None,
    cu_seqlens: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(w [B,T,HV,K], u [B,T,HV,V])`` float64 from the GIVEN ``A`` (chunk size ``A.shape[-1]``):
    ``w = A @ (k*beta*exp2(g))``, ``u = A @ (v*beta)`` per chunk, the whole ``BT x BT`` block of
    ``A`` used as given except its columns past a partial chunk's end, which meet no token and count as 0
    whatever they hold. Differentiable."""
    G = _check_heads(k, v, beta, g)
    B, T = k.shape[:2]
    if A.dim() != 4 or A.shape[:3] != beta.shape:
        raise ValueError(f"A must be [B,T,HV,BT] with [B,T,HV]={tuple(beta.shape)}, got shape {tuple(A.shape)}")
    lay = _chunk_layout(cu_seqlens, B, T, A.shape[-1], k.device)
    w = u = None
    for part in _slices(lay, beta.shape[2], max(A.shape[-1], k.shape[3], v.shape[3])):
        wc, uc = _wu_chunks(_to_chunks(part, G, k, v, beta, g), _gather_A(A, part))
        w, u = _scatter(_heads_last(wc), part, B, T, w), _scatter(_heads_last(uc), part, B, T, u)
    assert w is not None and u is not None  # _slices gives at least one part
    return w, u


def wy_bwd(
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    dw: torch.Tensor,
    du: torch.Tensor,
    g: torch.Tensor | None = None,
    cu_seqlens: torch.Tensor | None = None,
    chunk_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Exact ``(dk [B,T,H,K], dv, dbeta, dg)`` float64 of ``L = sum(w*dw) + sum(u*du)`` with ``A``
    recomputed from ``(k, beta, g)`` and differentiated through (autograd in float64). ``dg`` is
    autograd's gradient divided by ``ln 2`` (the kernels' convention); None when ``g`` is None."""
    G = _check_heads(k, v, beta, g)
    B, T = k.shape[:2]
    lay = _chunk_layout(cu_seqlens, B, T, chunk_size, k.device)
    with torch.enable_grad():
        leaves = [x.detach().to(_F64).requires_grad_(True) for x in (k, v, beta)]
        gl = None if g is None else g.detach().to(_F64).requires_grad_(True)
        ch = _to_chunks(lay, G, leaves[0], leaves[1], leaves[2], gl)
        wc, uc = _wu_chunks(ch, _A_chunks(ch.k, ch.beta, ch.g))
        dwc, duc = (_heads_first(_gather(x.detach(), lay)) for x in (dw, du))
        loss = (wc * dwc).sum() + (uc * duc).sum()
        inputs = leaves if gl is None else [*leaves, gl]
        grads = torch.autograd.grad(loss, inputs, allow_unused=True)
    full = [torch.zeros_like(x) if gr is None else gr for x, gr in zip(inputs, grads, strict=True)]
    dg = None if gl is None else full[3] / _LN2
    return full[0], full[1], full[2], dg


def wy_bwd_given_A(
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    A: torch.Tensor,
    dw: torch.Tensor,
    du: torch.Tensor,
    g: torch.Tensor | None = None,
    cu_seqlens: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``(dk, dv, dbeta, dg)`` float64 from the analytic formulas with the GIVEN ``A`` plugged in,
    as a kernel computes them from its inputs (the same-precision baseline for low-precision
    tests). Equals ``wy_bwd`` when ``A`` is exactly ``build_A(k, beta, g)``. Per chunk, with
    ``kbg = k*beta*exp2(g)``::

        dkb = A^T dw   dvb = A^T du   dA = dw kbg^T + du (v*beta)^T
        dM = strict_lower(-A^T dA A^T)   dL = dM * exp2(g_i - g_j)   Q = dL * beta_i * (k_i.k_j)
        dk = dkb*beta*exp2(g) + (dL*beta_i + (dL*beta_i)^T) @ k   (summed over each key head's value heads)
        dv = dvb*beta   dbeta = rowsum(dkb*k)*exp2(g) + rowsum(dvb*v) + rowsum(dL*(k_i.k_j))
        dg = rowsum(dkb*kbg) + rowsum(Q) - colsum(Q)
    """
    G = _check_heads(k, v, beta, g)
    B, T, H, K = k.shape
    if A.dim() != 4 or A.shape[:3] != beta.shape:
        raise ValueError(f"A must be [B,T,HV,BT] with [B,T,HV]={tuple(beta.shape)}, got shape {tuple(A.shape)}")
    BT = A.shape[-1]
    lay = _chunk_layout(cu_seqlens, B, T, BT, k.device)
    mask = _strict_lower(BT, k.device)
    zero = torch.zeros((), dtype=_F64, device=k.device)
    dk = dv = db = dg = None
    with torch.no_grad():
        for part in _slices(lay, beta.shape[2], max(BT, K, v.shape[3])):
            ch = _to_chunks(part, G, k, v, beta, g)
            Ac = _gather_A(A, part)
            dwc, duc = (_heads_first(_gather(x, part)) for x in (dw, du))
            kc, vc, bc = ch.k, ch.v, ch.beta
            assert vc is not None
            eg = torch.ones_like(bc) if ch.g is None else torch.exp2(ch.g)
            At = Ac.transpose(-1, -2)
            kbg = kc * (bc * eg)[..., None]
            dkb = At @ dwc
            dvb = At @ duc
            dA = dwc @ kbg.transpose(-1, -2) + duc @ (vc * bc[..., None]).transpose(-1, -2)
            dM = torch.where(mask, -(At @ dA @ At), zero)
            gate = _gate(ch.g, mask)
            dL = dM if gate is None else dM * gate
            KK = kc @ kc.transpose(-1, -2)
            dLb = dL * bc[..., :, None]
            dkc = dkb * (bc * eg)[..., None] + (dLb + dLb.transpose(-1, -2)) @ kc
            dbeta = (dkb * kc).sum(-1) * eg + (dvb * vc).sum(-1) + (dL * KK).sum(-1)
            dvc = dvb * bc[..., None]
            C = dkc.shape[0]
            dkc = dkc.reshape(C, H, G, BT, K).sum(2)
            dk = _scatter(_heads_last(dkc), part, B, T, dk)
            dv = _scatter(_heads_last(dvc), part, B, T, dv)
            db = _scatter(_heads_last(dbeta), part, B, T, db)
            if ch.g is not None:
                Q = dLb * KK
                dgc = (dkb * kbg).sum(-1) + Q.sum(-1) - Q.sum(-2)
                dg = _scatter(_heads_last(dgc), part, B, T, dg)
    assert dk is not None and dv is not None and db is not None  # _slices gives at least one part
    return dk, dv, db, dg
