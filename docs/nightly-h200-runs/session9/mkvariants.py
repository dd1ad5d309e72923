"""Write variant copies of src/wy_ascend/kernels.py into scratch_dev/var_<name>.py (text edits, each asserted)."""
import pathlib, re, sys
root = pathlib.Path(__file__).resolve().parent.parent
src = (root / "src/wy_ascend/kernels.py").read_text()

FWD_LOOPS_OLD = src[src.index("    p_v = v + (row0 * HV + i_h) * V\n    p_u = u"):src.index("@triton.jit\ndef _bwd_task")]
FWD_FUSED = '''    p_v = v + (row0 * HV + i_h) * V
    p_u = u + (row0 * HV + i_h) * V
    p_k = k + (row0 * H + i_hk) * K
    p_w = w + (row0 * HV + i_h) * K
    NI: tl.constexpr = NK if NK >= NV else NV
    for i in tl.range(0, NI, num_stages=1):
        o_v = i * BV + tl.arange(0, BV)
        m_v = m_t[:, None] & (o_v[None, :] < V)
        o_x = o_t[:, None] * (HV * V) + o_v[None, :]
        o_k = i * BK + tl.arange(0, BK)
        m_k = m_t[:, None] & (o_k[None, :] < K)
        b_v = _load_operand(p_v + o_x, m_v, LOWP_DOT)
        b_k = _load_operand(p_k + o_t[:, None] * (H * K) + o_k[None, :], m_k, LOWP_DOT)
        b_u = _mm(_A_for_dot(b_A, p_A, m_Ar, m_Ac, LOWP_DOT, DOT_GUARD), b_v * b_beta[:, None], LOWP_DOT)
        tl.store(p_u + o_x, b_u.to(u.dtype.element_ty), mask=m_v)
        b_w = _mm(_A_for_dot(b_A, p_A, m_Ar, m_Ac, LOWP_DOT, DOT_GUARD), b_k * b_kscale[:, None], LOWP_DOT)
        tl.store(p_w + o_t[:, None] * (HV * K) + o_k[None, :], b_w.to(w.dtype.element_ty), mask=m_k)


'''
SPANS_OLD = '''        i_n = tl.load(chunk_indices + i_t * 2).to(tl.int64)
        i_c = tl.load(chunk_indices + i_t * 2 + 1).to(tl.int64)
        bos = tl.load(cu_seqlens + i_n).to(tl.int64)
        eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
    else:'''
SPANS_NEW = '''        bos = tl.load(chunk_indices + i_t * 2).to(tl.int64)
        eos = tl.load(chunk_indices + i_t * 2 + 1).to(tl.int64)
        i_c = i_t.to(tl.int64) * 0
    else:'''
REMAP = [("        _fwd_task(t_offset + tl.program_id(0), bh_offset + tl.program_id(1),",
          "        pid = tl.program_id(0) + tl.program_id(1) * tl.num_programs(0)\n"
          "        _fwd_task(t_offset + pid // bh_count, bh_offset + pid % bh_count,"),
         ("        _bwd_group(t_offset + tl.program_id(0), bh_offset + tl.program_id(1),",
          "        pid = tl.program_id(0) + tl.program_id(1) * tl.num_programs(0)\n"
          "        _bwd_group(t_offset + pid // bh_count, bh_offset + pid % bh_count,")]

HELPER = ("@triton.jit\ndef _load_A(", '''@triton.jit
def _load_ev(ptr, mask, LOWP_DOT: tl.constexpr, EV: tl.constexpr):
    x = tl.load(ptr, mask=mask, other=0.0, eviction_policy=EV)
    if not LOWP_DOT:
        x = x.to(tl.float32)
    return x


@triton.jit
def _load_A(''')
FWD_EV = [HELPER,
    ("        b_v = _load_operand(p_v + o_x, m_v, LOWP_DOT)\n        b_u = _mm(", "        b_v = _load_ev(p_v + o_x, m_v, LOWP_DOT, 'evict_first')\n        b_u = _mm("),
    ("        b_k = _load_operand(p_k + o_t[:, None] * (H * K) + o_k[None, :], m_k, LOWP_DOT)\n        b_w = _mm(",
     "        b_k = _load_ev(p_k + o_t[:, None] * (H * K) + o_k[None, :], m_k, LOWP_DOT, 'evict_first')\n        b_w = _mm(")]
FWD_CS = [("b_u.to(u.dtype.element_ty), mask=m_v)", "b_u.to(u.dtype.element_ty), mask=m_v, cache_modifier='.cs')"),
          ("b_w.to(w.dtype.element_ty), mask=m_k)", "b_w.to(w.dtype.element_ty), mask=m_k, cache_modifier='.cs')")]
BWD_EV = [HELPER,
    ("        b_k = _load_operand(p_k + o_t[:, None] * (H * K) + o_k[None, :], m_k, LOWP_DOT)\n        b_dw = _load_operand(p_dw + o_t[:, None] * (HV * K) + o_k[None, :], m_k, LOWP_DOT)",
     "        b_k = _load_ev(p_k + o_t[:, None] * (H * K) + o_k[None, :], m_k, LOWP_DOT, 'evict_last')\n        b_dw = _load_ev(p_dw + o_t[:, None] * (HV * K) + o_k[None, :], m_k, LOWP_DOT, 'evict_last')"),
    ("        b_v = _load_operand(p_v + o_x, m_v, LOWP_DOT)\n        b_du = _load_operand(p_du + o_x, m_v, LOWP_DOT)",
     "        b_v = _load_ev(p_v + o_x, m_v, LOWP_DOT, 'evict_first')\n        b_du = _load_ev(p_du + o_x, m_v, LOWP_DOT, 'evict_first')"),
    ("        o_x = o_t[:, None] * (HV * K) + o_k[None, :]\n        b_dw = _load_operand(p_dw + o_x, m_k, LOWP_DOT)",
     "        o_x = o_t[:, None] * (HV * K) + o_k[None, :]\n        b_dw = _load_ev(p_dw + o_x, m_k, LOWP_DOT, 'evict_first')")]

def edit(text, pairs):
    for old, new in pairs:
        assert text.count(old) == 1, old[:80]
        text = text.replace(old, new)
    return text

variants = {
    "base": [],
    "fused": [(FWD_LOOPS_OLD, FWD_FUSED)],
    "spans": [(SPANS_OLD, SPANS_NEW)],
    "remap": REMAP,
    "fused_spans": [(FWD_LOOPS_OLD, FWD_FUSED), (SPANS_OLD, SPANS_NEW)],
    "fused_remap": [(FWD_LOOPS_OLD, FWD_FUSED)] + REMAP,
    "ev": FWD_EV,
    "ev_cs": FWD_EV + FWD_CS,
    "spans_ev": [(SPANS_OLD, SPANS_NEW)] + FWD_EV,
    "bev": BWD_EV,
    "spans_bev": [(SPANS_OLD, SPANS_NEW)] + BWD_EV,
}
for name, pairs in variants.items():
    (root / f"scratch_dev/var_{name}.py").write_text(edit(src, pairs))
print(sorted(variants))
