"""The forward's tail loops: without DOT_GUARD (cuda's path) it runs min(NK, NV) fused k/v tile pairs, then the
longer side's other tiles alone; with DOT_GUARD (Ascend's) every tile alone. Each output tile is one dot of the
same operands either way, so the two paths must agree to the bit where K and V take different numbers of tiles
(the invariance property checks dot_guard on drawn shapes; these pin the shapes where the tail loops run)."""

from __future__ import annotations

import pytest
import torch

from wy_ascend import ops
from wy_ascend.backends import LaunchConfig


# B, T, H, HV, K, V, cu_seqlens. On the cpu backend's 128-wide tiles: K=256 takes two tiles against V=64's one,
# V=200 two against K=48's one, K=192 two against V=32's one; a partial last chunk, a varlen batch.
@pytest.mark.parametrize("B,T,H,HV,K,V,cu", [(1, 128, 2, 4, 256, 64, None), (2, 100, 1, 1, 48, 200, None),
                                             (1, 200, 2, 2, 192, 32, [0, 64, 77, 200])])
def test_the_unguarded_forward_keeps_every_bit_of_the_guarded_one(B, T, H, HV, K, V, cu) -> None:
    torch.manual_seed(0)
    k = torch.randn(B, T, H, K, dtype=torch.bfloat16)
    v = torch.randn(B, T, HV, V, dtype=torch.bfloat16)
    beta = torch.rand(B, T, HV, dtype=torch.bfloat16)
    g = -torch.rand(B, T, HV).cumsum(1) * 0.05
    A = (torch.randn(B, T, HV, 64) * 0.1).to(torch.bfloat16)
    cu_seqlens = None if cu is None else torch.tensor(cu)
    outs = [ops.recompute_w_u_fwd(k, v, beta, A, g, cu_seqlens, backend="cpu",
                                  config=LaunchConfig(lowp_dot=True, dot_guard=guard, emulate=False))
            for guard in (False, True)]
    (w0, u0), (w1, u1) = outs
    assert torch.equal(w0, w1) and torch.equal(u0, u1)
    assert w0.abs().sum() > 0 and u0.abs().sum() > 0  # not two empty results agreeing
