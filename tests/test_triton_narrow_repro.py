"""Standalone reproducer: triton 3.6 on an H200 gets a bf16 dot of a held A^T tile wrong when a wider bf16
dot ran before it (here: A^T dw 64 wide, then A^T du 32 or 16 wide; the second is off, the first exact).

This is the "narrow tiles" failure of issue 13 (docs/ledger.md, sessions 4 and 14), the reason the
cuda backend never mixes tile widths under bf16 dots: a K or V below 64 next to a wider one is padded to 64-wide
tiles (``backends.LOWP_MIN_TILE``, ``Backend.lowp_dot``), and K and V both below 64 share one tile
(``Backend.narrow_tiles``).
How it was found (session 14, one H200, torch 2.11.0+cu130, triton 3.6.0; scripts and output in
git history: docs/ledger.md):

* The backward with bf16 dots in BK=64, BV=32 tiles (K64 V32): dk, dv, dbeta and dg ~0.8 relative off.
  Its nine dots switched to bf16 one at a time: all right. All but one: wrong, unless the one left in
  fp32 is ``dv = A^T du`` (the V loop's first dot; then bit-equal to the padded launch). In pairs,
  ``A^T du`` goes wrong next to any bf16 dot of the K loop before it (``A^T dw``, ``dw (k beta)^T``,
  ``k k^T``), right next to any later one. Tiles of one width are right (BK = BV = 16 or 32: bit-equal to
  the 64-wide padded launch); K32 V64 and K16 V64 gave a wrong dk (and an illegal address in a copy).
* A standalone copy of the backward's per-chunk math (no wy_ascend code) fails the same way, and keeps
  failing with the gate, the k k^T and dA dots, the tail, the masks, the where on A^T, the row sums and
  the tile loops cut to one iteration. What is left is the kernel below (session 14 call 5's ``mini4``, each case
  in its own process): ``A^T`` loaded once (bf16), ``A^T @ x`` (64 wide) stored, then ``A^T @ y`` (32 or
  16 wide) stored: y's product ~1.1-1.2 relative off, x's exact, with or without the row masks, the
  where on A^T, the row sum of the first product and one-iteration tile loops around each dot (the
  flags below: the parts of the backward the cut removed); right with y as wide as x or wider and with
  num_warps=8. The same two dots with both right operands loaded before the first dot, in one program
  with int32 offsets, were right (call 2's ``mini2``); the kernel with the flags' code deleted instead
  of switched off ran once in one process (call 6): its two failing cases failed, one of them with an
  illegal address that broke the process's CUDA context for the cases after it. So each device case
  below runs in a process of its own.

Verdict: Triton's (cut down, the kernel is two dots and four memory operations whose addresses are in
bounds; in the backward each dot alone in bf16 is right, and all of them with fp32 operands, and so is
the standalone copy with fp32 operands; the CPU test below checks the kernel's math in the interpreter). Versions: triton
3.6.0 on sm_90 only (the device machine has no other triton). ``test_narrower_second_dot_is_exact`` is
an expected failure where it fails; an XPASS on another triton says the bug is gone there.
The shipped kernels avoid it by never mixing tile widths under bf16 dots on cuda: a K or V below 64 next
to a wider one runs in 64-wide masked tiles (``min_tile``); K and V both below 64 share one narrow tile, right
in session 14 and 11-24% faster backward than padded in session 15 (docs/ledger.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
import triton
import triton.language as tl

from wy_ascend.testing.properties import rel_rms

INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"
ON_DEVICE = torch.cuda.is_available() and not INTERPRETING
BT = 64
PROGRAMS = 16
# bf16 x bf16 products are exact in fp32, so only the fp32 accumulation of BT=64 terms rounds: at most
# ~64 x 2^-24 = 4e-6 relative, ~1e-7 RMS as measured (6.5e-8 to 1.1e-7); the wrong results are ~1 off.
EXACT = 1e-5
FULL = dict(LOOP=1, MASK=1, WHERE=1, RED=1)  # the backward's parts around the two dots, all kept
CUT = dict(LOOP=0, MASK=0, WHERE=0, RED=0)  # all switched off: still wrong


@triton.jit
def _at_dot(at, x, LOWP: tl.constexpr):
    """at @ x in fp32: bf16 operands (the cuda kernels' LOWP_DOT) or exact fp32 ones."""
    if LOWP:
        c = tl.dot(at.to(tl.bfloat16), x.to(tl.bfloat16))
    else:
        c = tl.dot(at.to(tl.float32), x.to(tl.float32))
    return c


@triton.jit
def _two_dots(A, Kp, DW, DU, DV, DKB, DB, n, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
              BV: tl.constexpr, LOOP: tl.constexpr, MASK: tl.constexpr, WHERE: tl.constexpr, RED: tl.constexpr,
              LOWP: tl.constexpr):
    """Per program: A^T (A [BT, BT] read through transposed addresses, as the backward reads it), then
    dkb = A^T dw (K wide; RED: summed into DB with k, as dbeta, else stored to DKB), then dv = A^T du
    (V wide) stored. LOOP: tile loops over K and V (else one-iteration loops); MASK: rows masked by n;
    WHERE: A^T's rows past n zeroed."""
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
        dkb = _at_dot(At, dw, LOWP)
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
        tl.store(DV + p, _at_dot(At, du, LOWP))
    tl.store(DB + pid * BT + o_t, db)


def errors(device: str, K: int, V: int, flags: dict, lowp: bool, num_warps: int = 4) -> dict[str, float]:
    """Relative RMS errors of dv and of the first product (its row sums with RED) against float64
    products of the same (bf16 or fp32) values."""
    dtype = torch.bfloat16 if lowp else torch.float32
    gen = torch.Generator(device=device).manual_seed(0)
    A, k, dw, du = (torch.randn(PROGRAMS, BT, n, device=device, generator=gen).to(dtype) for n in (BT, K, K, V))
    dv = torch.zeros(PROGRAMS, BT, V, device=device)
    dkb = torch.zeros(PROGRAMS, BT, K, device=device)
    db = torch.zeros(PROGRAMS, BT, device=device)
    _two_dots[(PROGRAMS,)](A, k, dw, du, dv, dkb, db, BT, K, V, BT, min(K, 64), min(V, 64), flags["LOOP"],
                           flags["MASK"], flags["WHERE"], flags["RED"], lowp, num_warps=num_warps, num_stages=1)
    At = A.double().transpose(-1, -2)
    first = At @ dw.double()
    got = rel_rms(db, (first * k.double()).sum(-1)) if flags["RED"] else rel_rms(dkb, first)
    return {"dv": rel_rms(dv, At @ du.double()), "first": got}


def _on_device(K: int, V: int, flags: dict, num_warps: int = 4) -> dict[str, float]:
    """``errors`` of bf16 operands on cuda in a process of its own: an illegal address there breaks
    that process's CUDA context, not this one's (it is reported as the case's failure)."""
    case = json.dumps(dict(K=K, V=V, flags=flags, num_warps=num_warps))
    run = subprocess.run([sys.executable, __file__, case], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"the case's process failed ({run.returncode}): {run.stderr[-800:]}"
    return json.loads(run.stdout.strip().splitlines()[-1])


WRONG_ON_SM90 = pytest.mark.xfail(reason="triton 3.6, sm_90: the narrower second bf16 dot is wrong")


@pytest.mark.device
@pytest.mark.skipif(not ON_DEVICE, reason="needs a CUDA device and compiled Triton")
@pytest.mark.parametrize("K, V, flags", [
    pytest.param(64, 32, FULL, marks=WRONG_ON_SM90, id="K64-V32-full"),
    pytest.param(64, 32, CUT, marks=WRONG_ON_SM90, id="K64-V32-cut"),
    pytest.param(64, 16, FULL, marks=WRONG_ON_SM90, id="K64-V16-full"),
])
def test_narrower_second_dot_is_exact(K: int, V: int, flags: dict) -> None:
    assert _on_device(K, V, flags) == pytest.approx({"dv": 0, "first": 0}, abs=EXACT)


@pytest.mark.device
@pytest.mark.skipif(not ON_DEVICE, reason="needs a CUDA device and compiled Triton")
@pytest.mark.parametrize("K, V, num_warps", [(32, 32, 4), (64, 64, 4), (32, 64, 4), (16, 64, 4), (64, 32, 8)])
def test_the_controls_are_exact(K: int, V: int, num_warps: int) -> None:
    """Right on the H200 beside the failing cases (second as wide or wider, or 8 warps): the reproducer
    fails for the width mismatch, so an XPASS above is Triton changing, not the kernel."""
    assert _on_device(K, V, FULL, num_warps) == pytest.approx({"dv": 0, "first": 0}, abs=EXACT)


@pytest.mark.skipif(not INTERPRETING, reason="the interpreter's check of the kernel's math (cpu runs)")
@pytest.mark.parametrize("flags", [FULL, CUT], ids=["full", "cut"])
@pytest.mark.parametrize("K, V", [(64, 32), (64, 16), (32, 64)])
def test_the_kernel_math_is_exact_in_the_interpreter(K: int, V: int, flags: dict) -> None:
    """With fp32 operands the interpreter computes both products exactly: the device failure is not
    the reproducer's indexing (fp32 here: the unpatched interpreter's bf16 dot returned garbage in a trial)."""
    assert errors("cpu", K, V, flags, lowp=False) == pytest.approx({"dv": 0, "first": 0}, abs=EXACT)


if __name__ == "__main__":  # one device case (``_on_device``): print its errors as JSON
    spec = json.loads(sys.argv[1])
    print(json.dumps(errors("cuda", spec["K"], spec["V"], spec["flags"], lowp=True, num_warps=spec["num_warps"])))
