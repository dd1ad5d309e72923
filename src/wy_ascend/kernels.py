"""Triton kernels for the WY representation: one source for the npu, cuda and cpu backends.

Each op has one task body (``_fwd_task``, ``_bwd_task``) that handles one (chunk, value
head) pair, and one entry kernel that maps programs to tasks in either launch shape of
planning.py: ``PERSISTENT=False`` (one program per task, grid (t_count, bh_count), in launch order
the chunks of one batch-head or, for varlen batches and grouped heads, the batch-heads of one chunk in
turn: ``_grid_task``) or ``PERSISTENT=True`` (a core grid looping over flat task ids). Launch offsets and counts
and the length T are runtime arguments listed in ``do_not_specialize``, so splitting a grid
into many launches never compiles a new kernel. The persistent task loop is not software-pipelined
(``num_stages=1``): on CUDA the pipeliner otherwise buffers the next task's tiles too, and the
H200 nightly found a bf16 backward at BT=128, BK=BV=128 needing 448 KiB of shared memory
(131 KiB in grid mode) where the H200 has 227 KiB (regressions/oracle-cffde9801190.json).

K and V are runtime arguments (Triton specializes them by 16-divisibility only) whose values the
entry rebinds from the constexprs K_CONST/V_CONST when those are set (0: runtime), so their masks
and strides fold as constants. ops.py sets K_CONST = K where K fills its tiles (a runtime K with
masks cost up to ~10% on the H200 headline shapes) and, unless ``Backend.runtime_dims``, always:
the compiling backends keep one compile per K until runtime dims have run on a device. The
tile loops' trip counts NK = cdiv(K, BK) and NV = cdiv(V, BV) are constexprs either way, so each
loop compiles as with constexpr K and V (a one-tile loop is no loop; the pipeliner schedules the
others as before). H and HV stay compile-time: as runtime arguments they cost the backward 3%
(H = HV = 16) to 8% (H 8, HV 32) on the H200, their row strides no longer constants
(docs/ledger.md session 5). The other constexprs are the tiles BT/BK/BV, the feature flags
and (through the pointers) the dtypes: specialization.py names one compile.

Layouts (flash-linear-attention): k [B,T,H,K], v/u [B,T,HV,V], w [B,T,HV,K],
A [B,T,HV,BT]; beta/g/dbeta/dg are [B,T,HV] (token-major) or, with GATE_HEAD_MAJOR,
[B,HV,T] (head-major: contiguous per-head loads, the fast layout on Ascend). Value head
``i_h`` reads key head ``i_h // (HV // H)``. ``g`` is a chunk-local cumulative log2 gate.

Addressing: each task computes int64 scalar base offsets (token row x heads x dim), so
element offsets past 2**31 stay exact, and int32 in-tile offsets (< BT x heads x dim),
which are cheap on every backend and keep Triton's contiguity analysis (vector loads).

Dots accumulate in fp32. Their operands are fp32 with TF32 off (exact IEEE products),
or, with LOWP_DOT (cuda backend, bfloat16 I/O only), rounded to bf16 like
flash-linear-attention's kernels: tensor-core speed at an error below the bf16 output
rounding (measured by emulation, tests/test_lowp_dot_error.py). In the backward's
``dA = dw (k*beta*eg)^T + du (v*beta)^T`` beta is applied to dA's columns after the dots, so
the bf16 k and v enter them unrounded: rounding ``v*beta`` to bf16 perturbed v by up to half a
bf16 ulp a second time, and where long gates make dg ill-conditioned in v (the H200 nightly's
``regressions/oracle-9b568b6cb6df.json``, one chunk of a million tokens) that alone took dg to
4x its bound in emulation (1.8e-2 against 1.6e-2 on the device), against 2e-3 for exact operands.
The K and V tile loops are not software-pipelined (``num_stages=1``): triton 3.6 pipelines
a loop of bf16 dots with a write-after-read race on a dot operand's shared buffer (the next
iteration's copy lands while the async dot still reads it), which gave wrong dg/dbeta on
an H200 (tests/test_triton_bf16_repro.py, backends.Backend.lowp_dot). Unpipelined, ``k k^T``
takes ``tl.trans`` of the loaded k tile with LOWP_DOT too; the first workaround, a second load of
k through transposed addresses, was dropped once measured 1-4% slower on an H100 (docs/ledger.md
session 26).

Unpipelined, the cuda backward's loops hold the next tile pair in registers instead: where the fused
first loop runs (LOWP_DOT) and neither DOT_GUARD nor GROUP_DK is set, each iteration issues the loads
of the next k, dw (and v, du) tiles before its own dots, the longer side's tail tiles where NK != NV
likewise, and the dk loop's first pair is loaded before dA's products; the arithmetic is the same, bit
for bit. On an H100 the four headline backwards took 0.95, 0.97, 1.17 and 0.92x the time without
(docs/ledger.md session 34): the grouped program (GROUP_DK) spills with the extra tiles (196 bytes at
4 warps, offline), so it loads in place.

Guards for the triton-ascend traps (docs/design.md section 3):
* int64 scalar bases, int32 tile offsets (above);
* no block pointers (their offsets must be 32-bit on Ascend; triton 3.9 removed them);
* ``tl.dot`` may clobber its left operand on Ascend: a tile is a left operand only at
  its last use, and the tiles used as left operand more than once (A, the symmetric dL
  term) are reloaded or rebuilt before each dot when DOT_GUARD is set (npu, cpu,
  npu-cuda); with DOT_GUARD no dot takes one tile as both operands (``k k^T`` takes a
  copy as its right operand). The cuda backend clears it and keeps tiles in registers.
  The cpu backend's interpreter emulates the clobber (interpreter.py);
* no ``.to()`` on constexpr values, only constexpr ``if`` between load paths.
"""

from __future__ import annotations

import os

import triton
import triton.language as tl

# Runtime integer arguments of the entry kernels. Listed in do_not_specialize so that
# their values (1, multiples of 16, ...) never select a new compiled kernel.
RUNTIME_ARGS = ["T", "t_offset", "bh_offset", "bh_count", "num_tasks", "num_programs"]
# WY_ASCEND_FP32_DOT=tf32x3 (read once, when this module is imported; the cuda backend only:
# backends.check_fp32_dot): the dots that take fp32 operands (fp32 and fp16 I/O) run as three TF32
# tensor-core products (Triton's "tf32x3") instead of exact FMA loops. Off by default: offline it
# cut the fp32 BT=128 backward's compile to llir from over 120 s to 4 s (docs/ledger.md session
# 10), but it has not run on a GPU (its error against the fp32 bound and its speed are unmeasured).
FP32_DOT_TF32X3 = tl.constexpr(os.environ.get("WY_ASCEND_FP32_DOT", "ieee") == "tf32x3")
# Runtime dims that Triton specializes by class (specialization.int_class): a multiple of 16
# keeps the row strides' alignment, hence vector loads; one compile per class, not per value.
CLASSED_ARGS = ["K", "V"]


@triton.jit
def _chunk_rows(i_t, i_bh, cu_seqlens, chunk_indices, T, BT: tl.constexpr, HV, IS_VARLEN: tl.constexpr):
    """Locate task (i_t, i_bh): batch i_b, value head i_h, first token row0 (int64, a
    row of the flattened [B*T] token axis) and n, the number of valid rows (<= BT)."""
    i_b = i_bh // HV
    i_h = i_bh % HV
    if IS_VARLEN:
        i_n = tl.load(chunk_indices + i_t * 2).to(tl.int64)
        i_c = tl.load(chunk_indices + i_t * 2 + 1).to(tl.int64)
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
    else:
        i_c = i_t.to(tl.int64)
        bos = i_b.to(tl.int64) * T
        eos = bos + T
    row0 = bos + i_c * BT
    n = tl.minimum(eos - row0, BT)
    return i_b, i_h, row0, n


@triton.jit
def _gate_base(i_b, i_h, row0, T, HV, GATE_HEAD_MAJOR: tl.constexpr):
    """int64 offset of token row0, head i_h in a per-token tensor: [B,HV,T] (head-major,
    token stride 1) or [B,T,HV] (token-major, token stride HV). The head's offset i_h * T is
    int64 too: in int32 it wrapped once HV * T passed 2**31 (the index-width property's find)."""
    if GATE_HEAD_MAJOR:
        b_start = i_b.to(tl.int64) * T
        return (b_start * HV + tl.cast(i_h, tl.int64) * T) + (row0 - b_start)
    return row0 * HV + i_h


@triton.jit
def _mm(a, b, LOWP_DOT: tl.constexpr):
    """a @ b accumulated in fp32; operands exact fp32 (TF32 off), rounded to bf16, or (the
    FP32_DOT_TF32X3 switch) fp32 split into three TF32 products."""
    if LOWP_DOT:
        c = tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16))
    elif FP32_DOT_TF32X3:
        c = tl.dot(a, b, input_precision="tf32x3")
    else:
        c = tl.dot(a, b, allow_tf32=False)
    return c


@triton.jit
def _load_operand(ptr, mask, LOWP_DOT: tl.constexpr, EVICT: tl.constexpr):
    """A tile that feeds dots: kept in its bf16 storage type with LOWP_DOT (the dot
    rounds to bf16 anyway; fp32 arithmetic on it promotes exactly), else fp32. ``EVICT`` is
    the load's cache eviction hint ("": none; a PTX hint on CUDA, no effect on the values). It has
    no default: upstream Triton passes a jit helper's default as a plain str, not a constexpr."""
    x = tl.load(ptr, mask=mask, other=0.0, eviction_policy=EVICT)
    if not LOWP_DOT:
        x = x.to(tl.float32)
    return x  # one return: compiled Triton checks every return of a jit function has one type


@triton.jit
def _load_A(ptr, m_rows, m_cols, LOWP_DOT: tl.constexpr):
    """An A (or A^T) tile: loaded under the mask of A's token rows only, then its columns past
    the chunk's end zeroed in registers. A row holds all BT columns, so the load stays in
    bounds; a mask that varied along the contiguous columns would cost the vector loads."""
    x = _load_operand(ptr, m_rows, LOWP_DOT, "")
    return tl.where(m_cols, x, 0.0).to(x.dtype)


@triton.jit
def _A_for_dot(held, ptr, m_rows, m_cols, LOWP_DOT: tl.constexpr, DOT_GUARD: tl.constexpr):
    """The A (or A^T) tile for a dot inside a tile loop, where it is a left operand once per
    iteration: reloaded right before the dot with DOT_GUARD (Ascend's dot may clobber it),
    else the tile loaded once per task (``held``)."""
    b = held
    if DOT_GUARD:
        b = _load_A(ptr, m_rows, m_cols, LOWP_DOT)
    return b


@triton.jit
def _tile(o_t, m_t, i, BX: tl.constexpr, X, row_stride):
    """In-tile offsets and mask of tile ``i`` (BX wide) of a [rows, X] slab with ``row_stride``."""
    o_x = i * BX + tl.arange(0, BX)
    return o_t[:, None] * row_stride + o_x[None, :], m_t[:, None] & (o_x[None, :] < X)


@triton.jit
def _fwd_out(b_x, b_scale, b_A, p_A, m_Ar, m_Ac, p_out, mask, LOWP_DOT: tl.constexpr, DOT_GUARD: tl.constexpr):
    """Store A @ (x * scale) for one x tile (u from v and beta, w from k and beta * exp2(g))."""
    b_o = _mm(_A_for_dot(b_A, p_A, m_Ar, m_Ac, LOWP_DOT, DOT_GUARD), b_x * b_scale[:, None], LOWP_DOT)
    tl.store(p_out, b_o.to(p_out.dtype.element_ty), mask=mask)


@triton.jit
def _fwd_task(
    i_t, i_bh,
    k, v, beta, g, A, w, u,
    cu_seqlens, chunk_indices, T,
    H: tl.constexpr, HV: tl.constexpr, K, V,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, NK: tl.constexpr, NV: tl.constexpr,
    USE_G: tl.constexpr, IS_VARLEN: tl.constexpr, GATE_HEAD_MAJOR: tl.constexpr, LOWP_DOT: tl.constexpr,
    DOT_GUARD: tl.constexpr,
):
    """w = A @ (k * beta * exp2(g)), u = A @ (v * beta) for one chunk and value head."""
    i_b, i_h, row0, n = _chunk_rows(i_t, i_bh, cu_seqlens, chunk_indices, T, BT, HV, IS_VARLEN)
    i_hk = i_h // (HV // H)
    o_t = tl.arange(0, BT)
    m_t = o_t < n
    p_A = A + (row0 * HV + i_h) * BT + o_t[:, None] * (HV * BT) + o_t[None, :]
    m_Ar, m_Ac = m_t[:, None], m_t[None, :]  # A's token rows (strided), its columns (contiguous)
    b_A = _load_A(p_A, m_Ar, m_Ac, LOWP_DOT)  # with DOT_GUARD never a dot operand itself (dead code)
    o_gate = o_t * (1 if GATE_HEAD_MAJOR else HV)
    gate_base = _gate_base(i_b, i_h, row0, T, HV, GATE_HEAD_MAJOR)
    b_beta = tl.load(beta + gate_base + o_gate, mask=m_t, other=0.0).to(tl.float32)
    b_kscale = b_beta
    if USE_G:
        b_kscale = b_beta * tl.exp2(tl.load(g + gate_base + o_gate, mask=m_t, other=0.0).to(tl.float32))

    p_v = v + (row0 * HV + i_h) * V
    p_u = u + (row0 * HV + i_h) * V
    p_k = k + (row0 * H + i_hk) * K
    p_w = w + (row0 * HV + i_h) * K
    # Without DOT_GUARD the first NF tile pairs run in one loop: a v tile and a k tile are in flight before the
    # first dot, so a task waits on memory once per tile pair, not twice (H200, ours/fla-core on the four
    # headline shapes: 0.964, 1.037, 1.033, 1.010 -> 0.988, 0.989, 0.977, 0.992; docs/ledger.md session 9).
    # NF = min(NK, NV); the longer side's other tiles then run alone, as every tile does with DOT_GUARD (Ascend:
    # one x tile in the unified buffer at a time; planning.UB_MODEL counts one). Pairing max(NK, NV) tiles with
    # the shorter side's extras masked out (dots of zeros) took 14-26% more time on an H100's NK != NV grid
    # forwards (docs/ledger.md session 37).
    NF: tl.constexpr = 0 if DOT_GUARD else (NK if NK < NV else NV)
    for i in tl.range(0, NF, num_stages=1):
        o_u, m_v = _tile(o_t, m_t, i, BV, V, HV * V)
        o_w, m_k = _tile(o_t, m_t, i, BK, K, HV * K)
        o_k, m_k = _tile(o_t, m_t, i, BK, K, H * K)
        b_v = _load_operand(p_v + o_u, m_v, LOWP_DOT, "")
        b_k = _load_operand(p_k + o_k, m_k, LOWP_DOT, "")
        _fwd_out(b_v, b_beta, b_A, p_A, m_Ar, m_Ac, p_u + o_u, m_v, LOWP_DOT, DOT_GUARD)
        _fwd_out(b_k, b_kscale, b_A, p_A, m_Ar, m_Ac, p_w + o_w, m_k, LOWP_DOT, DOT_GUARD)
    for i_v in tl.range(NF, NV, num_stages=1):
        o_u, m_v = _tile(o_t, m_t, i_v, BV, V, HV * V)
        b_v = _load_operand(p_v + o_u, m_v, LOWP_DOT, "")
        _fwd_out(b_v, b_beta, b_A, p_A, m_Ar, m_Ac, p_u + o_u, m_v, LOWP_DOT, DOT_GUARD)
    for i_k in tl.range(NF, NK, num_stages=1):
        o_w, m_k = _tile(o_t, m_t, i_k, BK, K, HV * K)
        o_k, m_k = _tile(o_t, m_t, i_k, BK, K, H * K)  # k's rows hold H heads, w's HV
        b_k = _load_operand(p_k + o_k, m_k, LOWP_DOT, "")
        _fwd_out(b_k, b_kscale, b_A, p_A, m_Ar, m_Ac, p_w + o_w, m_k, LOWP_DOT, DOT_GUARD)


@triton.jit
def _bwd_dA_k(b_dA, b_k, b_dw, b_eg, b_kscale, USE_G: tl.constexpr, LOWP_DOT: tl.constexpr):
    """dA += dw (k*beta*eg)^T for one K tile; with LOWP_DOT dw (k*eg)^T, beta applied to dA later."""
    if LOWP_DOT:  # beta applied after the dots: bf16 k and v are exact operands (module doc)
        b_ke = b_k
        if USE_G:
            b_ke = b_k * b_eg[:, None]
        b_dA += _mm(b_dw, tl.trans(b_ke), LOWP_DOT)
    else:
        b_dA += _mm(b_dw, tl.trans(b_k * b_kscale[:, None]), LOWP_DOT)
    return b_dA


@triton.jit
def _bwd_v_tile(b_dA, b_db, b_v, b_du, b_beta, b_At, p_At, m_Ar, m_Ac, p_dv, m_v, LOWP_DOT: tl.constexpr,
                DOT_GUARD: tl.constexpr):
    """One V tile: dv = beta * A^T du stored, its dbeta term, and dA += du (v*beta)^T (with
    LOWP_DOT du v^T). du is the last dot's left operand, its last use (Ascend's clobber trap)."""
    b_dvb = _mm(_A_for_dot(b_At, p_At, m_Ar, m_Ac, LOWP_DOT, DOT_GUARD), b_du, LOWP_DOT)
    b_db += tl.sum(b_dvb * b_v, 1)
    tl.store(p_dv, (b_dvb * b_beta[:, None]).to(p_dv.dtype.element_ty), mask=m_v)
    if LOWP_DOT:
        b_dA += _mm(b_du, tl.trans(b_v), LOWP_DOT)
    else:
        b_dA += _mm(b_du, tl.trans(b_v * b_beta[:, None]), LOWP_DOT)
    return b_dA, b_db


@triton.jit
def _kdw_tiles(p_k, p_dw, o_t, m_t, i, BK: tl.constexpr, K, H: tl.constexpr, HV: tl.constexpr,
               LOWP_DOT: tl.constexpr, EVICT_K: tl.constexpr, EVICT_DW: tl.constexpr):
    """K tile ``i`` of k ([B,T,H,K] rows) and of dw ([B,T,HV,K] rows): all masked past K."""
    o_k, m_k = _tile(o_t, m_t, i, BK, K, H * K)
    o_w, m_k = _tile(o_t, m_t, i, BK, K, HV * K)
    return _load_operand(p_k + o_k, m_k, LOWP_DOT, EVICT_K), _load_operand(p_dw + o_w, m_k, LOWP_DOT, EVICT_DW)


@triton.jit
def _vdu_tiles(p_v, p_du, o_t, m_t, i, BV: tl.constexpr, V, HV: tl.constexpr, LOWP_DOT: tl.constexpr):
    """V tile ``i`` of v and du (read once: evict_first)."""
    o_x, m_v = _tile(o_t, m_t, i, BV, V, HV * V)
    return (_load_operand(p_v + o_x, m_v, LOWP_DOT, "evict_first"),
            _load_operand(p_du + o_x, m_v, LOWP_DOT, "evict_first"))


@triton.jit
def _bwd_task(
    i_t, i_bh, j,
    k, v, beta, g, A, dw, du, dk, dk_acc, dv, dbeta, dg,
    cu_seqlens, chunk_indices, T,
    H: tl.constexpr, HV: tl.constexpr, K, V,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, NK: tl.constexpr, NV: tl.constexpr,
    USE_G: tl.constexpr, IS_VARLEN: tl.constexpr, GATE_HEAD_MAJOR: tl.constexpr, LOWP_DOT: tl.constexpr,
    DOT_GUARD: tl.constexpr, GROUP_DK: tl.constexpr,
):
    """Gradients of one chunk and value head, with A = M^-1 a function of (k, beta, g).

    Direct terms: d(k*beta*eg) = A^T dw, d(v*beta) = A^T du, dA = dw (k*beta*eg)^T + du (v*beta)^T.
    Through A: dM = -A^T dA A^T on the strict lower triangle, dL = dM * exp2(g_i - g_j),
    dk += (dL*beta_i + (dL*beta_i)^T) @ k, dbeta_i += sum_j dL_ij k_i.k_j and
    dg_i += rowsum(Q) - colsum(Q) with Q = dL * beta_i * k_i.k_j. dg omits the ln 2 of
    d exp2(x)/dx (the seed's convention). dk is written per value head ([B,T,HV,K]), or with
    GROUP_DK summed over the value heads of key head i_hk, this task being the group's j-th
    (``_sum_dk``). In each loop a tile's dot as left operand is its last use (Ascend's clobber trap).
    """
    i_b, i_h, row0, n = _chunk_rows(i_t, i_bh, cu_seqlens, chunk_indices, T, BT, HV, IS_VARLEN)
    i_hk = i_h // (HV // H)
    o_t = tl.arange(0, BT)
    m_t = o_t < n
    # A^T read directly through transposed addresses: b_At[i, j] = A[j, i].
    p_At = A + (row0 * HV + i_h) * BT + o_t[None, :] * (HV * BT) + o_t[:, None]
    m_Ar, m_Ac = m_t[None, :], m_t[:, None]  # A's token rows (strided here), its columns
    m_A = m_t[:, None] & m_t[None, :]
    # The loops take reloads of it with DOT_GUARD; the dA and dM dots take this tile: dA as the
    # right operand (never clobbered), dM as the left one at its last use.
    b_At = _load_A(p_At, m_Ar, m_Ac, LOWP_DOT)
    o_gate = o_t * (1 if GATE_HEAD_MAJOR else HV)
    gate_base = _gate_base(i_b, i_h, row0, T, HV, GATE_HEAD_MAJOR)
    b_beta = tl.load(beta + gate_base + o_gate, mask=m_t, other=0.0).to(tl.float32)
    b_kscale = b_beta
    if USE_G:
        b_g = tl.load(g + gate_base + o_gate, mask=m_t, other=0.0).to(tl.float32)
        b_eg = tl.exp2(b_g)
        b_kscale = b_beta * b_eg
        b_dg = tl.zeros([BT], dtype=tl.float32)
    else:
        b_eg = b_beta  # not read without USE_G (_bwd_dA_k takes it as an argument)
    b_db = tl.zeros([BT], dtype=tl.float32)
    b_dA = tl.zeros([BT, BT], dtype=tl.float32)

    p_k = k + (row0 * H + i_hk) * K
    p_dw = dw + (row0 * HV + i_h) * K  # dw and dk (per value head) share one layout
    p_dk = dk + (row0 * HV + i_h) * K
    p_v = v + (row0 * HV + i_h) * V
    p_du = du + (row0 * HV + i_h) * V
    p_dv = dv + (row0 * HV + i_h) * V
    # The next tile pair loaded into registers an iteration ahead (module doc): the fused loop's path without
    # DOT_GUARD's reloads and without GROUP_DK, whose program spills with the extra tiles.
    # The fused loop runs min(NK, NV) tile pairs, then the longer side's other tiles alone (the forward's tail
    # loops): on an H100 that took 1-13% off seven of the grid's ten NK != NV backwards, which ran two unfused
    # loops before (K16/V256 0.0595 -> 0.0557 ms; fla-core's took 0.0582 in session 39), and 11% more on one,
    # varlen K48/V80 (docs/ledger.md session 40).
    FUSED: tl.constexpr = LOWP_DOT
    NF: tl.constexpr = NK if NK < NV else NV
    PREFETCH: tl.constexpr = FUSED and (not DOT_GUARD and not GROUP_DK)
    # dA, and dv with its dbeta terms. k and dw are read again by the dk loop below: kept in L2
    # (evict_last); v and du are read once.
    if FUSED:
        # One loop over both (the forward's fused loop): a k, dw, v and du tile in flight before the
        # first dot, so a task waits on memory once per tile pair, not twice (H100, the four headline
        # backwards 5.7-7.2% faster: docs/ledger.md session 27). It adds dA's k and v products tile by
        # tile, in another order than the two loops below: LOWP_DOT's own, so the knobs that must
        # keep every bit (dot_guard) never switch between the orders.
        if PREFETCH:
            b_kn, b_dwn = _kdw_tiles(p_k, p_dw, o_t, m_t, 0, BK, K, H, HV, LOWP_DOT, "evict_last", "evict_last")
            b_vn, b_dun = _vdu_tiles(p_v, p_du, o_t, m_t, 0, BV, V, HV, LOWP_DOT)
        for i in tl.range(0, NF, num_stages=1):
            o_x, m_v = _tile(o_t, m_t, i, BV, V, HV * V)
            if PREFETCH:
                b_k, b_dw, b_v, b_du = b_kn, b_dwn, b_vn, b_dun
                b_kn, b_dwn = _kdw_tiles(p_k, p_dw, o_t, m_t, i + 1, BK, K, H, HV, LOWP_DOT, "evict_last", "evict_last")
            else:
                b_k, b_dw = _kdw_tiles(p_k, p_dw, o_t, m_t, i, BK, K, H, HV, LOWP_DOT, "evict_last", "evict_last")
                b_v, b_du = _vdu_tiles(p_v, p_du, o_t, m_t, i, BV, V, HV, LOWP_DOT)
            b_dA = _bwd_dA_k(b_dA, b_k, b_dw, b_eg, b_kscale, USE_G, LOWP_DOT)
            if PREFETCH:
                b_vn, b_dun = _vdu_tiles(p_v, p_du, o_t, m_t, i + 1, BV, V, HV, LOWP_DOT)
            b_dA, b_db = _bwd_v_tile(b_dA, b_db, b_v, b_du, b_beta, b_At, p_At, m_Ar, m_Ac, p_dv + o_x, m_v,
                                     LOWP_DOT, DOT_GUARD)
        # The longer side's other tiles (none where NK == NV), the first of them prefetched by the last pair.
        for i_v in tl.range(NF, NV, num_stages=1):
            o_x, m_v = _tile(o_t, m_t, i_v, BV, V, HV * V)
            if PREFETCH:
                b_v, b_du = b_vn, b_dun
                b_vn, b_dun = _vdu_tiles(p_v, p_du, o_t, m_t, i_v + 1, BV, V, HV, LOWP_DOT)
            else:
                b_v, b_du = _vdu_tiles(p_v, p_du, o_t, m_t, i_v, BV, V, HV, LOWP_DOT)
            b_dA, b_db = _bwd_v_tile(b_dA, b_db, b_v, b_du, b_beta, b_At, p_At, m_Ar, m_Ac, p_dv + o_x, m_v,
                                     LOWP_DOT, DOT_GUARD)
        for i_k in tl.range(NF, NK, num_stages=1):
            if PREFETCH:
                b_k, b_dw = b_kn, b_dwn
                b_kn, b_dwn = _kdw_tiles(p_k, p_dw, o_t, m_t, i_k + 1, BK, K, H, HV, LOWP_DOT, "evict_last", "evict_last")
            else:
                b_k, b_dw = _kdw_tiles(p_k, p_dw, o_t, m_t, i_k, BK, K, H, HV, LOWP_DOT, "evict_last", "evict_last")
            b_dA = _bwd_dA_k(b_dA, b_k, b_dw, b_eg, b_kscale, USE_G, LOWP_DOT)
    else:
        for i_k in tl.range(0, NK, num_stages=1):
            b_k, b_dw = _kdw_tiles(p_k, p_dw, o_t, m_t, i_k, BK, K, H, HV, LOWP_DOT, "evict_last", "evict_last")
            b_dA = _bwd_dA_k(b_dA, b_k, b_dw, b_eg, b_kscale, USE_G, LOWP_DOT)
        for i_v in tl.range(0, NV, num_stages=1):
            o_x, m_v = _tile(o_t, m_t, i_v, BV, V, HV * V)
            b_v, b_du = _vdu_tiles(p_v, p_du, o_t, m_t, i_v, BV, V, HV, LOWP_DOT)
            b_dA, b_db = _bwd_v_tile(b_dA, b_db, b_v, b_du, b_beta, b_At, p_At, m_Ar, m_Ac, p_dv + o_x, m_v,
                                     LOWP_DOT, DOT_GUARD)

    if PREFETCH:  # the dk loop's first pair, during dA's products
        b_kn, b_dwn = _kdw_tiles(p_k, p_dw, o_t, m_t, 0, BK, K, H, HV, LOWP_DOT, "", "evict_first")
    m_L = (o_t[:, None] > o_t[None, :]) & m_A
    if LOWP_DOT:
        b_dA = b_dA * b_beta[None, :]  # dA's column j carries beta_j (LOWP_DOT paragraph above)
    b_dA = tl.where(m_L, b_dA, 0.0)
    b_dA = _mm(b_dA, b_At, LOWP_DOT)
    b_dM = _mm(b_At, b_dA, LOWP_DOT)  # b_At's last use: the last loop reloads it with DOT_GUARD
    b_dL = tl.where(m_L, -b_dM, 0.0)
    if USE_G:
        b_dL = b_dL * tl.exp2(tl.where(m_L, b_g[:, None] - b_g[None, :], 0.0))
    b_dLb = b_dL * b_beta[:, None]
    b_S = b_dLb + tl.trans(b_dLb)  # symmetric dL term, the left operand of every dk dot

    # A^T dw (d(k*beta*eg)) and k k^T are taken here, tile by tile, not in the first loop: the loops
    # before hold fewer accumulators, and A^T dw is taken once (docs/ledger.md session 27).
    p_dkk = (row0 * H + i_hk) * K  # GROUP_DK: the key head's rows in dk and dk_acc ([B,T,H,K])
    if GROUP_DK:
        tl.debug_barrier()  # the group's previous task stored dk_acc from other threads of this program
    for i_k in tl.range(0, NK, num_stages=1):
        o_k, m_k = _tile(o_t, m_t, i_k, BK, K, H * K)
        o_x, m_k = _tile(o_t, m_t, i_k, BK, K, HV * K)
        # dw's last read (evict_first); k's is not (the group's other heads)
        if PREFETCH:
            b_k, b_dw = b_kn, b_dwn
            b_kn, b_dwn = _kdw_tiles(p_k, p_dw, o_t, m_t, i_k + 1, BK, K, H, HV, LOWP_DOT, "", "evict_first")
        else:
            b_k, b_dw = _kdw_tiles(p_k, p_dw, o_t, m_t, i_k, BK, K, H, HV, LOWP_DOT, "", "evict_first")
        b_dkb = _mm(_A_for_dot(b_At, p_At, m_Ar, m_Ac, LOWP_DOT, DOT_GUARD), b_dw, LOWP_DOT)
        b_dkk = tl.sum(b_dkb * b_k, 1)  # d(k*beta*eg) . k, row by row: the dbeta and dg terms
        if USE_G:
            b_db += b_dkk * b_eg
            b_dg += b_dkk * b_kscale
        else:
            b_db += b_dkk
        b_Si = b_S
        if DOT_GUARD:
            b_Si = b_dLb + tl.trans(b_dLb)  # rebuilt per tile: the dot may clobber its left operand
        b_dk = b_dkb * b_kscale[:, None] + _mm(b_Si, b_k, LOWP_DOT)
        if GROUP_DK:
            _sum_dk(b_dk, j, HV // H, dk, dk_acc, p_dkk + o_k, m_k)
        else:
            tl.store(p_dk + o_x, b_dk.to(dk.dtype.element_ty), mask=m_k)
        # This tile's k k^T, weighted by dL: its dbeta and dg terms (k's last use, as the left operand)
        if DOT_GUARD:
            b_kt = tl.trans(b_k + 0.0)  # a copy: one tile as both operands is unsafe where dots clobber
        else:
            b_kt = tl.trans(b_k)
        b_P = b_dL * _mm(b_k, b_kt, LOWP_DOT)
        b_db += tl.sum(b_P, 1)
        if USE_G:
            b_Q = b_P * b_beta[:, None]
            b_dg += tl.sum(b_Q, 1) - tl.sum(b_Q, 0)

    tl.store(dbeta + gate_base + o_gate, b_db.to(dbeta.dtype.element_ty), mask=m_t)
    if USE_G:
        tl.store(dg + gate_base + o_gate, b_dg.to(dg.dtype.element_ty), mask=m_t)


@triton.jit
def _sum_dk(b_dk, j, G: tl.constexpr, dk, dk_acc, o, mask):
    """dk of value head j of a key head's G: added to the fp32 partial sum the group's earlier
    heads left in dk_acc, stored there, or, for the last head, rounded once into dk."""
    if j > 0:
        b_dk += tl.load(dk_acc + o, mask=mask, other=0.0)
    if j < G - 1:
        tl.store(dk_acc + o, b_dk, mask=mask)
    else:
        tl.store(dk + o, b_dk.to(dk.dtype.element_ty), mask=mask)


@triton.jit
def _bwd_group(
    i_t, i_bh,
    k, v, beta, g, A, dw, du, dk, dk_acc, dv, dbeta, dg,
    cu_seqlens, chunk_indices, T,
    H: tl.constexpr, HV: tl.constexpr, K, V,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, NK: tl.constexpr, NV: tl.constexpr,
    USE_G: tl.constexpr, IS_VARLEN: tl.constexpr, GATE_HEAD_MAJOR: tl.constexpr, LOWP_DOT: tl.constexpr,
    DOT_GUARD: tl.constexpr, GROUP_DK: tl.constexpr,
):
    """Backward task i_bh: one value head, or with GROUP_DK a batch and key head (i_bh over B*H)
    whose value heads run in order in this program, so dk is summed here, not by a later pass."""
    if GROUP_DK:
        for j in tl.range(0, HV // H, num_stages=1):
            _bwd_task(i_t, i_bh * (HV // H) + j, j,
                      k, v, beta, g, A, dw, du, dk, dk_acc, dv, dbeta, dg, cu_seqlens, chunk_indices, T,
                      H, HV, K, V, BT, BK, BV, NK, NV, USE_G, IS_VARLEN, GATE_HEAD_MAJOR, LOWP_DOT, DOT_GUARD,
                      GROUP_DK)
    else:
        _bwd_task(i_t, i_bh, 0,
                  k, v, beta, g, A, dw, du, dk, dk_acc, dv, dbeta, dg, cu_seqlens, chunk_indices, T,
                  H, HV, K, V, BT, BK, BV, NK, NV, USE_G, IS_VARLEN, GATE_HEAD_MAJOR, LOWP_DOT, DOT_GUARD, GROUP_DK)


@triton.jit
def _grid_task(t_offset, bh_offset, IS_VARLEN: tl.constexpr, H: tl.constexpr, HV: tl.constexpr):
    """The task (i_t, i_bh) of this program of a grid launch (t_count, bh_count). The GPU starts programs in
    launch order, axis 0 fastest: chunks first runs the chunks of one batch-head in turn; heads first the
    batch-heads of one chunk, so the programs in flight read neighbouring rows of the token-major tensors and
    the value heads of a key head share its k. On an H100 heads first took varlen's headline forward and
    backward 9% and 8% less time and the grouped one's 2%, and the fixed-length H == HV backward 1% more
    (docs/ledger.md session 35): heads first for varlen batches and grouped heads (planning.heads_first,
    the same rule on the host). A launch has at most INT32_MAX programs (planning.CUDA_MAX_BLOCKS), so
    the flat index stays in int32."""
    if IS_VARLEN or HV != H:
        flat = tl.program_id(0) + tl.program_id(1) * tl.num_programs(0)
        i_t = t_offset + flat // tl.num_programs(1)
        i_bh = bh_offset + flat % tl.num_programs(1)
    else:
        i_t = t_offset + tl.program_id(0)
        i_bh = bh_offset + tl.program_id(1)
    return i_t, i_bh


@triton.jit(do_not_specialize=RUNTIME_ARGS)
def wy_fwd_kernel(
    # tensors: inputs, outputs, varlen index (None when fixed-length)
    k, v, beta, g, A, w, u, cu_seqlens, chunk_indices,
    # runtime: padded length, launch offsets and sizes (never specialized: no recompiles)
    T, t_offset, bh_offset, bh_count, num_tasks, num_programs,
    # heads (compile-time: row strides), runtime dims specialized by class only (CLASSED_ARGS)
    H: tl.constexpr, HV: tl.constexpr, K, V,
    # tiles, tile-loop trip counts NK = cdiv(K, BK), NV = cdiv(V, BV), K and V when known (compile-time)
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, NK: tl.constexpr, NV: tl.constexpr,
    K_CONST: tl.constexpr, V_CONST: tl.constexpr,
    # feature flags: gate present, varlen, beta/g layout, bf16 dot operands, operand reloads, launch shape
    USE_G: tl.constexpr, IS_VARLEN: tl.constexpr, GATE_HEAD_MAJOR: tl.constexpr,
    LOWP_DOT: tl.constexpr, DOT_GUARD: tl.constexpr, PERSISTENT: tl.constexpr,
):
    """Forward entry: grid (t_count, bh_count) or a persistent core grid (see module doc)."""
    if K_CONST:
        K = K_CONST  # K at compile time: its masks and strides fold as constants
    if V_CONST:
        V = V_CONST
    if PERSISTENT:
        for f in tl.range(tl.program_id(0), num_tasks, num_programs, num_stages=1):
            _fwd_task(t_offset + f // bh_count, bh_offset + f % bh_count,
                      k, v, beta, g, A, w, u, cu_seqlens, chunk_indices, T,
                      H, HV, K, V, BT, BK, BV, NK, NV, USE_G, IS_VARLEN, GATE_HEAD_MAJOR, LOWP_DOT, DOT_GUARD)
    else:
        i_t, i_bh = _grid_task(t_offset, bh_offset, IS_VARLEN, H, HV)
        _fwd_task(i_t, i_bh,
                  k, v, beta, g, A, w, u, cu_seqlens, chunk_indices, T,
                  H, HV, K, V, BT, BK, BV, NK, NV, USE_G, IS_VARLEN, GATE_HEAD_MAJOR, LOWP_DOT, DOT_GUARD)


@triton.jit(do_not_specialize=RUNTIME_ARGS)
def wy_bwd_kernel(
    # tensors: inputs, incoming grads, outputs (dk per value head, or per key head with its fp32
    # partial sums dk_acc under GROUP_DK), varlen index
    k, v, beta, g, A, dw, du, dk, dk_acc, dv, dbeta, dg, cu_seqlens, chunk_indices,
    # runtime: padded length, launch offsets and sizes (never specialized: no recompiles)
    T, t_offset, bh_offset, bh_count, num_tasks, num_programs,
    # heads (compile-time: row strides), runtime dims specialized by class only (CLASSED_ARGS)
    H: tl.constexpr, HV: tl.constexpr, K, V,
    # tiles, tile-loop trip counts NK = cdiv(K, BK), NV = cdiv(V, BV), K and V when known (compile-time)
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, NK: tl.constexpr, NV: tl.constexpr,
    K_CONST: tl.constexpr, V_CONST: tl.constexpr,
    # feature flags: gate present, varlen, beta/g layout, bf16 dot operands, operand reloads, launch
    # shape, dk summed per key head in the kernel (tasks over B*H, not B*HV)
    USE_G: tl.constexpr, IS_VARLEN: tl.constexpr, GATE_HEAD_MAJOR: tl.constexpr,
    LOWP_DOT: tl.constexpr, DOT_GUARD: tl.constexpr, PERSISTENT: tl.constexpr, GROUP_DK: tl.constexpr,
):
    """Backward entry: grid (t_count, bh_count) or a persistent core grid (see module doc)."""
    if K_CONST:
        K = K_CONST  # K at compile time: its masks and strides fold as constants
    if V_CONST:
        V = V_CONST
    if PERSISTENT:
        for f in tl.range(tl.program_id(0), num_tasks, num_programs, num_stages=1):
            _bwd_group(t_offset + f // bh_count, bh_offset + f % bh_count,
                       k, v, beta, g, A, dw, du, dk, dk_acc, dv, dbeta, dg, cu_seqlens, chunk_indices, T,
                       H, HV, K, V, BT, BK, BV, NK, NV, USE_G, IS_VARLEN, GATE_HEAD_MAJOR, LOWP_DOT, DOT_GUARD,
                       GROUP_DK)
    else:
        i_t, i_bh = _grid_task(t_offset, bh_offset, IS_VARLEN, H, HV)
        _bwd_group(i_t, i_bh,
                   k, v, beta, g, A, dw, du, dk, dk_acc, dv, dbeta, dg, cu_seqlens, chunk_indices, T,
                   H, HV, K, V, BT, BK, BV, NK, NV, USE_G, IS_VARLEN, GATE_HEAD_MAJOR, LOWP_DOT, DOT_GUARD,
                   GROUP_DK)


@triton.jit
def wy_dk_group_sum_kernel(dk_heads, dk, rows, G: tl.constexpr, K: tl.constexpr, BK: tl.constexpr, BR: tl.constexpr):
    """dk[r] = sum over j of dk_heads[r, j] for BR rows r of the [rows, G, K] fp32 per-value-head dk, the G
    heads added in order (the GROUP_DK running sum's order) and rounded once into dk's dtype: the
    grouped backward's sum in one launch where torch took two (a reduction, then a cast)."""
    o_r = tl.program_id(0).to(tl.int64) * BR + tl.arange(0, BR)
    o_k = tl.arange(0, BK)
    mask = (o_r < rows)[:, None] & (o_k < K)[None, :]
    p_src = dk_heads + o_r[:, None] * (G * K) + o_k[None, :]
    b_dk = tl.load(p_src, mask=mask, other=0.0)
    for j in tl.static_range(1, G):
        b_dk += tl.load(p_src + j * K, mask=mask, other=0.0)
    tl.store(dk + o_r[:, None] * K + o_k[None, :], b_dk.to(dk.dtype.element_ty), mask=mask)


KERNELS = {"fwd": wy_fwd_kernel, "bwd": wy_bwd_kernel}
