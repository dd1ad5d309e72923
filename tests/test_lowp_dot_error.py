"""The cuda backend's bf16 dot operands stay well inside the bf16 test bound.

The kernels are emulated in float64 with every dot operand the cuda backend rounds to
bf16 (the forward's k*beta*eg and v*beta; the backward's k*eg, dA, dA A^T, S) rounded the
same way; the emulation's error
against the given-A oracle must stay below 0.75x the oracle property's bound
(properties.error_bounds, the rounding sensitivity included), on each whole output and on
its worst block (a chunk and head: compare_to_oracle's block bound), on every input
distribution, including the ill-conditioned case the H200 nightly run found. This is the
measurement behind the LOWP_DOT paragraph of kernels.py.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from wy_ascend.testing.case import DISTRIBUTIONS, Case
from wy_ascend.testing.properties import (
    LOW_PRECISION_FACTOR,
    UNIT_ROUNDOFF,
    blocks_of,
    compare_to_oracle,
    error_bounds,
    oracle_outputs,
    rel_rms,
)


def _r(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).double()


def emulate(case: Case, x) -> dict[str, torch.Tensor]:
    """One chunk and head at a time (clarity over speed), operands rounded like LOWP_DOT."""
    k, v, beta, A, g, dw, du = (t.double() if t is not None else None for t in x[:7])
    B, T, H, K = k.shape
    HV, G = v.shape[2], v.shape[2] // H
    out = dict(w=torch.zeros(B, T, HV, K), u=torch.zeros_like(v), dk=torch.zeros(B, T, HV, K), dv=torch.zeros_like(v),
               dbeta=torch.zeros_like(beta), dg=torch.zeros_like(beta))
    out = {n: t.double() for n, t in out.items()}
    for b, s, e in case.chunk_bounds():
        n = e - s
        for h in range(HV):
            kk, bb = k[b, s:e, h // G], beta[b, s:e, h]
            gg = g[b, s:e, h] if g is not None else torch.zeros(n, dtype=torch.float64)
            Ac, eg = A[b, s:e, h, :n], torch.exp2(gg)
            kb, vb = kk * (bb * eg)[:, None], v[b, s:e, h] * bb[:, None]
            out["w"][b, s:e, h], out["u"][b, s:e, h] = Ac @ _r(kb), Ac @ _r(vb)
            dwc, duc = dw[b, s:e, h], du[b, s:e, h]
            dkb, dvb = Ac.T @ dwc, Ac.T @ duc
            dA = torch.tril((dwc @ _r(kk * eg[:, None]).T + duc @ v[b, s:e, h].T) * bb[None, :], -1)  # beta after
            dL = -torch.tril(Ac.T @ _r(_r(dA) @ Ac.T), -1) * torch.tril(torch.exp2(gg[:, None] - gg[None, :]), -1)
            KK, dLb = kk @ kk.T, dL * bb[:, None]
            out["dk"][b, s:e, h] = dkb * (bb * eg)[:, None] + _r(dLb + dLb.T) @ kk
            out["dv"][b, s:e, h] = dvb * bb[:, None]
            out["dbeta"][b, s:e, h] = (dkb * kk).sum(1) * eg + (dvb * v[b, s:e, h]).sum(1) + (dL * KK).sum(1)
            Q = dLb * KK
            out["dg"][b, s:e, h] = (dkb * kb).sum(1) + Q.sum(1) - Q.sum(0)
    out["dk"] = out["dk"].view(B, T, H, G, K).sum(3)
    return {n: t.to(torch.bfloat16) for n, t in out.items()}


def _worst_ratio(case: Case) -> tuple[float, str]:
    """The emulation's largest error over the property's bound (sensitivity included), on a whole
    output or on one block (chunk and head: compare_to_oracle's block bound), and where."""
    x = case.build_inputs()
    ref, got = oracle_outputs(x), emulate(case, x)
    ref = {name: r for name, r in ref.items() if r is not None}
    bounds = error_bounds(x, ref, "bfloat16")
    ratios = {name: rel_rms(got[name], r) / bounds[name]["tol"] for name, r in ref.items()}
    metrics = compare_to_oracle(got, x, "bfloat16", blocks_of(case, torch.device("cpu")))
    ratios |= {f"{name} block": m["worst_block"]["rel_rms"] / m["worst_block"]["tol"] for name, m in metrics.items()}
    worst = max(ratios, key=ratios.__getitem__)
    return ratios[worst], worst


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_bf16_operand_error_is_well_inside_the_bound(dist):
    for seed, cu in itertools.product(range(3), ((0, 1, 30, 64, 130), (0, 2, 66, 200, 257, 300))):
        case = Case(cu_seqlens=cu, H=1, HV=2, K=64, V=64, BT=64, use_g=True, dtype="bfloat16", dist=dist, seed=seed)
        ratio, name = _worst_ratio(case)
        assert ratio <= 0.75, (name, seed, ratio)


def test_ill_conditioned_nightly_find_is_inside_the_bound():
    """The shape of the H200 nightly find (regressions/oracle-295735d84e54.json: seed 1 under
    torch's generator, which build_inputs no longer uses; there the cuda kernel's w error,
    7.890e-03, equalled this emulation's and was 0.52x the bound with the sensitivity term).
    Seed 0 of rng's inputs is such a case again: repeated keys make w = A (k*beta) cancel; the
    emulation's w error (9.26e-03) exceeds the bound without the sensitivity term (7.81e-03),
    and the worst output (dk) is 0.64x the bound with it."""
    case = Case(B=1, T=41, H=1, HV=1, K=64, V=64, BT=64, use_g=False, dtype="bfloat16", dist="repeated_keys", seed=0)
    x = case.build_inputs()
    w_ref = oracle_outputs(x)["w"]
    round_err = error_bounds(x, {"w": w_ref}, "bfloat16")["w"]["round_err"]
    assert rel_rms(emulate(case, x)["w"], w_ref) > LOW_PRECISION_FACTOR * max(round_err, UNIT_ROUNDOFF["bfloat16"] / 2)
    ratio, name = _worst_ratio(case)
    assert ratio <= 0.75, (name, ratio)
