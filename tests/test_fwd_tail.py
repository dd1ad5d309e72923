"""The forward's tail loops: without DOT_GUARD (cuda's path) it runs min(NK, NV) fused k/v tile pairs, then the
longer side's other tiles alone; with DOT_GUARD (Ascend's) every tile alone. Each output tile is one dot of the
same operands either way, so the two paths must agree to the bit where K and V take different numbers of tiles:
the launch-invariance check (dot_guard is a knob that must not change a bit) on the shapes where the tail loops
run, the invariance property's drawn shapes being free to miss them."""

from __future__ import annotations

import pytest

from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import check_launch_invariance

# On the cpu backend's 128-wide tiles: K=256 takes two tiles against V=64's one, V=200 two against K=48's one,
# K=192 two against V=32's one; grouped heads, a partial last chunk, a varlen batch. cuda's bf16 dot operands
# (lowp_dot) without the guard, against the backend's guarded default.
SHAPES = [dict(B=1, T=128, H=2, HV=4, K=256, V=64), dict(B=2, T=100, H=1, HV=1, K=48, V=200),
          dict(cu_seqlens=(0, 64, 77, 200), H=2, HV=2, K=192, V=32)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"K{s['K']}-V{s['V']}")
def test_the_unguarded_forward_keeps_every_bit_of_the_guarded_one(shape) -> None:
    case = Case(**shape, BT=64, use_g=True, dtype="bfloat16", backend="cpu",
                knobs=dict(lowp_dot=True, dot_guard=False, emulate=False))
    check_launch_invariance(case)
