"""The forward WY step of the chunked gated delta rule, in plain torch, in this package's own conventions:

    w, u = wy_forward(k, v, g, A, beta, *, offsets=None, chunks=None)

* k [B, T, Hg, K] (``Hg`` key heads), v [B, T, H, V] (``H`` value heads, a multiple of Hg);
* g and beta head-major, [B, H, T]; g a natural-log gate (the step takes ``exp(g)``), always float32, or
  None (no gate);
* A [B, T, H, BT] in float32, whatever k's dtype; BT read from A;
* a packed batch (B = 1): ``offsets`` (the sequences' token offsets, int64, like cu_seqlens) and ``chunks``,
  the [chunks, 2] (first token, end token) of every chunk, prebuilt by ``prepare_chunks(offsets, BT)``;
  a fixed-length batch computes its chunks itself.

Per chunk of BT tokens (or fewer at a sequence's end) and value head: ``w = A (k beta exp(g))`` and
``u = A (v beta)``, computed in float32 and returned in k's dtype. Forward only (an inference engine's).
"""

from __future__ import annotations

import torch


def prepare_chunks(offsets: torch.Tensor, BT: int) -> torch.Tensor:
    """The (first token, end token) of every chunk of the packed batch ``offsets`` describes: [chunks, 2] int64."""
    bounds = []
    for start, end in zip(offsets[:-1].tolist(), offsets[1:].tolist()):
        bounds += [(t, min(t + BT, end)) for t in range(start, end, BT)]
    return torch.tensor(bounds, dtype=torch.int64).reshape(-1, 2)


def wy_forward(k: torch.Tensor, v: torch.Tensor, g: torch.Tensor | None, A: torch.Tensor, beta: torch.Tensor, *,
               offsets: torch.Tensor | None = None, chunks: torch.Tensor | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """``w`` [B, T, H, K] and ``u`` [B, T, H, V] (module doc). Views are copied contiguous first: torch's matmul
    may add in another order for another layout, and the results must not depend on it."""
    k, v, A, beta = (x.contiguous() for x in (k, v, A, beta))
    g = g.contiguous() if g is not None else None
    B, T, Hg, K = k.shape
    H, BT = v.shape[2], A.shape[-1]
    if offsets is None:
        bounds = [(b, t, min(t + BT, T)) for b in range(B) for t in range(0, T, BT)]
    else:
        bounds = [(0, int(s), int(e)) for s, e in chunks.tolist()]
    w = torch.empty(B, T, H, K, dtype=k.dtype, device=k.device)
    u = torch.empty(B, T, H, v.shape[-1], dtype=k.dtype, device=k.device)
    heads = torch.arange(H, device=k.device) // (H // Hg)  # each value head's key head
    for b, s, e in bounds:
        n = e - s
        a = A[b, s:e, :, :n].float().transpose(0, 1)  # [H, n, n]: the chunk's own columns
        scale = beta[b, :, s:e].float()  # [H, n]
        gate = torch.exp(g[b, :, s:e].float()) if g is not None else 1.0
        kb = k[b, s:e, heads].float().transpose(0, 1) * (scale * gate)[..., None]
        vb = v[b, s:e].float().transpose(0, 1) * scale[..., None]
        w[b, s:e] = (a @ kb).transpose(0, 1).to(k.dtype)
        u[b, s:e] = (a @ vb).transpose(0, 1).to(k.dtype)
    return w, u
