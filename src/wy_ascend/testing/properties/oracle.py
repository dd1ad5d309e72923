"""The oracle property (``check_oracle``): a case's outputs against the float64 oracle within the
bounds of ``bounds``, as whole outputs and block by block (``Blocks``, ``_worst_block``), all compared
on the oracle's device and read in one transfer (``compare_to_oracle``, which other tests and
benchmarks call on outputs of their own)."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from ..case import Case, Inputs, float64_device
from ..failure import Metrics, PropertyFailure
from ..phases import phase
from .bounds import (
    BLOCK_SLACK,
    FP32_RTOL,
    _bound_rows,
    _bounds,
    _moved,
    _norms,
    _ratio,
    _read,
    _term,
    precisions,
)
from .common import build_inputs, run_ops
from .exact import oracle_outputs


def check_oracle(case: Case) -> Metrics:
    """Forward and backward outputs match the float64 oracle within ``error_bounds``, as wholes
    and block by block (``Blocks``)."""
    inputs = build_inputs(case)
    got = run_ops(case, inputs)
    host_cu = torch.tensor(case.cu_seqlens) if case.cu_seqlens is not None else None  # the oracle's, read from the case
    return compare_to_oracle(got, inputs._replace(cu_seqlens=host_cu), case.dtype,
                             blocks_of(case, float64_device(inputs.k.device)))


class Blocks(NamedTuple):
    """The oracle check's blocks: (chunk, head) pairs, the unit of work of the WY step. ``chunk``
    maps each token row of the flattened [B*T] axis to its chunk (on the oracle's device);
    ``bounds`` lists each chunk's (batch, first token, end token) (``Case.chunk_bounds``)."""

    chunk: torch.Tensor
    bounds: list[tuple[int, int, int]]


def blocks_of(case: Case, device: torch.device) -> Blocks:
    """The blocks of ``case``, their token map built on ``device``."""
    cu = torch.arange(case.B + 1, device=device) * case.T if case.cu_seqlens is None else \
        torch.tensor(case.cu_seqlens, device=device)
    return Blocks(case.token_chunks(cu)[1], case.chunk_bounds())


def _block_norms(x: torch.Tensor, chunk: torch.Tensor, n_chunks: int) -> torch.Tensor:
    """||x|| per (chunk, head) of x [B, T, heads, ...]: [n_chunks, heads]."""
    sq = x.reshape(chunk.numel(), x.shape[2], -1).square().sum(-1)
    return sq.new_zeros(n_chunks, x.shape[2]).index_add_(0, chunk, sq).sqrt()


def _worst_block(out: torch.Tensor, ref: torch.Tensor, moved: dict[str, torch.Tensor], dtypes: tuple[str, ...],
                 blocks: Blocks, device: torch.device) -> torch.Tensor:
    """``[q, block, rel_rms, tol]`` of the block (flat index ``chunk * heads + head``) whose error
    is largest against its bound (q = rel_rms / tol), computed on ``device`` in float64.

    A block's rel_rms and bound are the whole output's (``_bound``, its terms measured on the block)
    relative to the block's scale: its own norm, or its share of the whole output's norm,
    ``||ref|| sqrt(block elements / elements)``, where that is larger. Rounding error is local (a
    block's outputs come from its own dots), so a kernel's error on a block scales with the block's
    magnitudes like the whole output's with the whole; the share keeps a block whose exact values
    cancel to nearly zero from being judged against its own tiny norm. Below float32 the bound is
    ``BLOCK_SLACK`` times that formula (the largest over ``dtypes``, the output's ``precisions``, each
    with its ``moved`` output): a block of a few elements does not average its roundings as
    a whole output does, and the cuda backend's bf16 dot operands (emulated in
    tests/test_lowp_dot_error.py) reached 1.01x the unslackened bound on one 6-token block's dg in
    ~600 blocks, the whole outputs at most 0.71x. In float32 it is FP32_RTOL or, where larger,
    ``BLOCK_SLACK`` times the sensitivity term, for the same reason."""
    chunk = blocks.chunk.to(device)
    n = len(blocks.bounds)
    ref = ref.detach().to(device, torch.float64)
    out = out.detach().to(device, torch.float64)

    def norms(x: torch.Tensor) -> torch.Tensor:
        return _block_norms(x, chunk, n)

    per_row = ref[0, 0, 0].numel() if ref.numel() else 1
    elems = torch.bincount(chunk, minlength=n).to(torch.float64)[:, None] * per_row
    share = torch.linalg.vector_norm(ref) * torch.sqrt(elems / max(ref.numel(), 1))
    scale = torch.maximum(norms(ref), share)

    def rel(diff: torch.Tensor) -> torch.Tensor:
        e = norms(diff)
        return torch.where(scale > 0, e / scale, torch.where(e == 0, 0.0, math.inf))

    err = rel(out - ref)
    tol = torch.full_like(err, FP32_RTOL)
    for d in dtypes:  # FP32_RTOL (above) or BLOCK_SLACK x the whole output's term (_term), the larger
        sensitivity = rel(moved[d].to(device, torch.float64) - ref)
        rounded = None if d == "float32" else rel(ref.to(getattr(torch, d)).to(torch.float64) - ref)
        tol = torch.maximum(tol, BLOCK_SLACK * _term(d, rounded, sensitivity))
    q = torch.nan_to_num(err / tol, nan=math.inf).flatten()
    i = torch.argmax(q)
    return torch.stack((q[i], i.to(torch.float64), err.flatten()[i], tol.flatten()[i]))


@phase("comparison")
def compare_to_oracle(got: dict[str, torch.Tensor | None], inputs: Inputs, dtype: str,
                      blocks: Blocks | None = None) -> Metrics:
    """Metrics of the outputs ``got`` of ``inputs`` against the oracle; PropertyFailure naming
    every output past its bound (``_bound``, with the rounding sensitivity for bf16/fp16), as a
    whole or, given ``blocks``, on any one block (``_worst_block``): an error confined to one
    chunk and head of a large case dilutes in the whole output's rel_rms, not in its block's.
    Everything stays on the oracle's device up to one read of all the norms."""
    # the outputs of the ops the subject implements (w and u alone for a forward-only one: run_ops)
    ref = {name: r for name, r in oracle_outputs(inputs).items() if r is not None and name in got}
    outs = {name: got[name] for name in ref}
    precs = precisions(dtype, {name: str(out.dtype).removeprefix("torch.") for name, out in outs.items()
                               if out is not None})
    if set(precs) != set(ref):
        raise PropertyFailure(f"outputs missing: {sorted(set(ref) - set(precs))}")
    moved = _moved(inputs, precs)
    rows = [_norms(out, ref[name]) for name, out in outs.items()]  # type: ignore[arg-type]
    worst = [_worst_block(out, r, {d: moved[d][name] for d in precs[name]},  # type: ignore[misc]
                          precs[name], blocks, float64_device(out.device))
             for name, r in ref.items() if (out := outs[name]) is not None] if blocks is not None and blocks.bounds else []
    n = len(ref)
    read = _read(rows + _bound_rows(ref, moved, precs) + worst)
    ratios = [_ratio(*row) for row in read[:len(read) - len(worst)]]
    metrics: Metrics = {}
    failures = []
    for err, name, bound in zip(ratios[:n], ref, _bounds(precs, ratios[n:]), strict=True):
        tol = bound["tol"]
        metrics[name] = {"rel_rms": err, "tol": tol, **{k: v for k, v in bound.items() if k in ("sensitivity", "bound_dtype")}}
        if not err <= tol:
            failures.append(f"{name}: rel_rms {err:.3e} > tol {tol:.3e}")
    for name, (q, flat, err, tol) in zip(ref, read[len(read) - len(worst):]):
        chunk, head = divmod(int(flat), ref[name].shape[2])
        b, t0, t1 = blocks.bounds[chunk]  # type: ignore[union-attr]
        where = {"chunk": chunk, "batch": b, "tokens": [t0, t1], "head": head}
        metrics[name]["worst_block"] = {**where, "rel_rms": err, "tol": tol}
        if not q <= 1:
            failures.append(f"{name}: rel_rms {err:.3e} > tol {tol:.3e} on the block of chunk {chunk} (rows {t0}:{t1} "
                            f"of the [B*T] token axis, batch {b}) and {'key' if name == 'dk' else 'value'} head {head}")
    if failures:
        raise PropertyFailure("kernel differs from the float64 oracle: " + "; ".join(failures), metrics)
    return metrics
