"""The backward's tail loops: with bf16 dot operands (lowp_dot) the fused first loop runs over min(NK, NV) tile
pairs where K and V take different numbers of tiles, then the longer side's other tiles alone, each next tile
prefetched into registers where DOT_GUARD and GROUP_DK are off. The prefetch moves loads, not arithmetic, so the
unguarded path must keep every bit of the guarded one (the launch-invariance check, dot_guard a knob that must
not change a bit), and both must meet the oracle, on shapes where the tails run (the properties' drawn shapes
are free to miss them)."""

from __future__ import annotations

import pytest

from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import check_launch_invariance, check_oracle

# cuda's backward tiles (64 wide, tile_cap=64) on the cpu backend, so each tail runs at least two tiles: K=16
# (NK=1) against V=256 (NV=4), K=256 against V=48, and a varlen batch of grouped heads with a partial chunk,
# K=192 (three tiles) against V=64 (one).
SHAPES = [dict(B=1, T=128, H=2, HV=4, K=16, V=256), dict(B=2, T=100, H=1, HV=1, K=256, V=48),
          dict(cu_seqlens=(0, 64, 77, 200), H=2, HV=2, K=192, V=64)]


def _case(shape: dict) -> Case:
    return Case(**shape, BT=64, use_g=True, dtype="bfloat16", backend="cpu",
                knobs=dict(lowp_dot=True, dot_guard=False, emulate=False, tile_cap=64))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"K{s['K']}-V{s['V']}")
def test_the_prefetching_tail_loops_keep_every_bit_of_the_guarded_ones(shape) -> None:
    check_launch_invariance(_case(shape))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"K{s['K']}-V{s['V']}")
def test_the_tail_loops_meet_the_oracle(shape) -> None:
    check_oracle(_case(shape))
