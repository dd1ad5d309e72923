import pathlib, sys
src = pathlib.Path("src/wy_ascend/kernels.py").read_text()
def rep(old, new, count=1):
    global src
    assert src.count(old) == count, (old, src.count(old))
    src = src.replace(old, new)
rep("""    b_dA = tl.zeros([BT, BT], dtype=tl.float32)
    b_kk = tl.zeros([BT, BT], dtype=tl.float32)
""", """    b_dA = tl.zeros([BT, BT], dtype=tl.float32)
""")
rep("""        b_dA += _mm(b_dw, tl.trans(b_kb), LOWP_DOT)
        if DOT_GUARD:
            b_kt = tl.trans(b_k + 0.0)  # a copy: one tile as both operands is unsafe where dots clobber
        elif LOWP_DOT:
            # k^T loaded on its own: triton 3.6 miscompiles a bf16 dot of one loaded tile with its
            # own transpose next to another dot in a pipelined loop (tests/test_triton_bf16_repro.py).
            b_kt = _load_operand(p_k + o_t[None, :] * (H * K) + o_k[:, None], m_t[None, :] & (o_k[:, None] < K), LOWP_DOT, "")
        else:
            b_kt = tl.trans(b_k)
        b_kk += _mm(b_k, b_kt, LOWP_DOT)
""", """        b_dA += _mm(b_dw, tl.trans(b_kb), LOWP_DOT)
""")
rep("""    b_P = b_dL * b_kk
    b_db += tl.sum(b_P, 1)
    if USE_G:
        b_Q = b_P * b_beta[:, None]
        b_dg += tl.sum(b_Q, 1) - tl.sum(b_Q, 0)
    b_dLb = b_dL * b_beta[:, None]
    b_S = b_dLb + tl.trans(b_dLb)  # symmetric dL term, the left operand of every dk dot
""", """    b_dLbT = tl.trans(b_dL * b_beta[:, None])
""")
rep("""        b_Si = b_S
        if DOT_GUARD:
            b_Si = b_dLb + tl.trans(b_dLb)  # rebuilt per tile: the dot may clobber its left operand
        b_dk = b_dkb * b_kscale[:, None] + _mm(b_Si, b_k, LOWP_DOT)
""", """        b_X = _mm(b_dL + 0.0 if DOT_GUARD else b_dL, b_k, LOWP_DOT)
        b_Y = _mm(b_dLbT + 0.0 if DOT_GUARD else b_dLbT, b_k, LOWP_DOT)
        b_xk = tl.sum(b_X * b_k, 1)
        b_db += b_xk
        if USE_G:
            b_dg += b_xk * b_beta - tl.sum(b_Y * b_k, 1)
        b_dk = b_dkb * b_kscale[:, None] + b_X * b_beta[:, None] + b_Y
""")
pathlib.Path(sys.argv[1]).write_text(src)
