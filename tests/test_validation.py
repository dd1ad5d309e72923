"""Every validation rule: the error type and a message naming the argument and the expectation."""

from __future__ import annotations

import pytest
import torch

import wy_ascend
from wy_ascend.testing.case import Case

X = Case(cu_seqlens=(0, 5, 40), H=1, HV=2, K=16, V=16, BT=16, use_g=True).build_inputs()
FIXED = Case(B=2, T=20, H=1, HV=2, K=16, V=16, BT=16, use_g=True).build_inputs()


def args(x=X, **changes):
    d = dict(k=x.k, v=x.v, beta=x.beta, A=x.A, dw=x.dw, du=x.du, g=x.g, cu_seqlens=x.cu_seqlens, chunk_indices=None)
    d.update(changes)
    return d


CASES = {
    "k not a tensor": (args(k=X.k.tolist()), TypeError, "k must be a torch.Tensor, got list"),
    "v not a tensor": (args(v=None), TypeError, "v must be a torch.Tensor, got NoneType"),
    "k 3-D": (args(k=X.k[0]), ValueError, r"k must be 4-D \[B, T, H, K\]"),
    "v 3-D": (args(v=X.v[0]), ValueError, r"v must be 4-D \[B, T, HV, V\]"),
    "beta 2-D": (args(beta=X.beta[0]), ValueError, r"beta must be 3-D \[B, T, HV\]"),
    "A 3-D": (args(A=X.A[0]), ValueError, r"A must be 4-D \[B, T, HV, BT\]"),
    "v other T": (args(v=X.v[:, :-1]), ValueError, r"v must share k's \[B, T\]"),
    "HV not a multiple of H": (args(k=X.k.repeat(1, 1, 3, 1)), ValueError, "must be a positive multiple of the key heads H=3"),
    "K too large": (args(k=torch.zeros(1, 40, 1, 300)), ValueError, r"K \(k.shape\[3\]\) must be in \[1, 256\], got 300"),
    "V too large": (args(v=torch.zeros(1, 40, 2, 257)), ValueError, r"V \(v.shape\[3\]\) must be in \[1, 256\], got 257"),
    "BT unsupported": (args(A=X.A[..., :8]), ValueError, r"BT = A.shape\[-1\] must be one of \(16, 32, 64, 128\), got 8"),
    "beta shape": (args(beta=X.beta[:, :, :1]), ValueError, r"beta must have shape \[B, T, HV\] = \(1, 40, 2\)"),
    "A shape": (args(A=X.A[:, :, :1]), ValueError, r"A must have shape \[B, T, HV, BT\]"),
    "k dtype": (args(k=X.k.double()), TypeError, "k must have dtype in"),
    "v dtype differs": (args(v=X.v.half()), TypeError, r"v must have the dtype of k \(torch.float32\)"),
    "A dtype differs": (args(A=X.A.bfloat16()), TypeError, "A must have the dtype of k"),
    "beta dtype": (args(beta=X.beta.double()), TypeError, "beta must have dtype in"),
    "g not a tensor": (args(g=1.0), TypeError, "g must be a torch.Tensor, got float"),
    "g shape": (args(g=X.g[:, :, :1]), ValueError, r"g must have shape \[B, T, HV\]"),
    "g dtype": (args(g=X.g.to(torch.int32)), TypeError, "g must have dtype in"),
    "dw without du": (args(du=None), ValueError, "dw and du must be given together"),
    "dw shape": (args(dw=X.dw[..., :8]), ValueError, r"dw must have shape \[B, T, HV, K\]"),
    "du shape": (args(du=X.du[..., :8]), ValueError, r"du must have shape \[B, T, HV, V\]"),
    "dw dtype": (args(dw=X.dw.half()), TypeError, "dw must have the dtype of k"),
    "du dtype": (args(du=X.du.half()), TypeError, "du must have the dtype of k"),
    "cu_seqlens not a tensor": (args(cu_seqlens=[0, 5, 40]), TypeError, "cu_seqlens must be a torch.Tensor"),
    "cu_seqlens 2-D": (args(cu_seqlens=X.cu_seqlens[None]), ValueError, r"cu_seqlens must be 1-D \[N\+1\]"),
    "cu_seqlens float": (args(cu_seqlens=X.cu_seqlens.float()), TypeError, "cu_seqlens must have an integer dtype"),
    "cu_seqlens too short": (args(cu_seqlens=torch.tensor([40])), ValueError, "cu_seqlens must hold at least 2 entries"),
    "cu_seqlens with B > 1": (args(FIXED, cu_seqlens=torch.tensor([0, 20])), ValueError,
                              "with cu_seqlens the batch must be packed into B == 1, got B=2"),
    "cu_seqlens not from 0": (args(cu_seqlens=torch.tensor([1, 5, 40])), ValueError,
                              r"cu_seqlens must start at 0, got cu_seqlens\[0\]=1"),
    "cu_seqlens decreasing": (args(cu_seqlens=torch.tensor([0, 30, 20, 40])), ValueError,
                              r"cu_seqlens must be non-decreasing, got cu_seqlens\[1\]=30 > cu_seqlens\[2\]=20"),
    "cu_seqlens not ending at T": (args(cu_seqlens=torch.tensor([0, 5, 39])), ValueError,
                                   r"cu_seqlens must end at T=40, got cu_seqlens\[-1\]=39"),
    "chunk_indices without cu_seqlens": (args(FIXED, cu_seqlens=None, chunk_indices=torch.zeros(2, 2)), ValueError,
                                         "chunk_indices was given without cu_seqlens"),
    "chunk_indices dtype": (args(chunk_indices=torch.zeros(4, 2)), TypeError, "chunk_indices must have an integer"),
    "chunk_indices wrong": (args(chunk_indices=torch.zeros(4, 2, dtype=torch.int64)), ValueError,
                            r"chunk_indices must equal prepare_chunk_indices\(cu_seqlens, 16\)"),
    "chunk_indices device": (args(chunk_indices=wy_ascend.prepare_chunk_indices(X.cu_seqlens, 16).to("meta")),
                             ValueError, "chunk_indices must be on k's device"),
    "tensor on another device": (args(v=X.v.to("meta")), ValueError, "v must be on k's device cpu, got meta"),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("op", ["fwd", "bwd"])
def test_validation_rule(name, op):
    kw, exc, message = CASES[name]
    if op == "fwd":
        if name.startswith(("dw", "du")):
            pytest.skip("the forward takes no dw/du")
        fn = lambda: wy_ascend.recompute_w_u_fwd(kw["k"], kw["v"], kw["beta"], kw["A"], kw["g"],  # noqa: E731
                                                 kw["cu_seqlens"], kw["chunk_indices"], backend="cpu")
    else:
        fn = lambda: wy_ascend.prepare_wy_repr_bwd(kw["k"], kw["v"], kw["beta"], kw["A"], kw["dw"],  # noqa: E731
                                                   kw["du"], kw["g"], kw["cu_seqlens"], kw["chunk_indices"],
                                                   backend="cpu")
    with pytest.raises(exc, match=message):
        fn()


def test_valid_arguments_pass(backend: str, device: torch.device) -> None:
    """The same arguments on the backend under test run (the rules above raise before any kernel)."""
    kw = {name: x.to(device) if isinstance(x, torch.Tensor) else x for name, x in args().items()}
    wy_ascend.prepare_wy_repr_bwd(kw["k"], kw["v"], kw["beta"], kw["A"], kw["dw"], kw["du"], kw["g"],
                                  kw["cu_seqlens"], wy_ascend.prepare_chunk_indices(kw["cu_seqlens"], 16),
                                  backend=backend)
