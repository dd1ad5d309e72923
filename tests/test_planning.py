"""Launch planning as pure data: coverage, limits and the UB model, without a device."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wy_ascend.planning import (
    MIN_TILE,
    UB_SAFETY_MARGIN,
    DeviceSpec,
    UnsupportedProblemError,
    plan,
    program_tasks,
    split_rectangle,
    ub_footprint,
    ub_tile,
)


def covered(p, mode, heads_first=False) -> list[tuple[int, int]]:
    tasks = []
    for launch in p.launches:
        programs = ([(x, y) for x in range(launch.grid[0]) for y in range(launch.grid[1])] if mode == "grid"
                    else [(q,) for q in range(launch.grid[0])])
        for prog in programs:
            tasks += program_tasks(launch, mode, prog, heads_first)
    return tasks


specs = st.builds(
    DeviceSpec,
    name=st.just("test"),
    mode=st.sampled_from(["grid", "persistent"]),
    max_grid=st.tuples(st.integers(1, 9), st.integers(1, 9)),
    max_blocks=st.one_of(st.none(), st.integers(1, 20)),
    num_cores=st.integers(1, 12),
    ub_bytes=st.none(),
    max_tasks=st.integers(1, 30),
)


@settings(max_examples=300, deadline=None)
@given(NT=st.integers(0, 40), BH=st.integers(0, 12), spec=specs, heads_first=st.booleans())
def test_every_task_exactly_once_within_the_limits(NT, BH, spec, heads_first):
    p = plan("fwd", NT=NT, BH=BH, BT=16, K=16, V=16, spec=spec)
    tasks = covered(p, spec.mode, heads_first)
    assert sorted(tasks) == [(t, b) for t in range(NT) for b in range(BH)]
    for launch in p.launches:
        if spec.max_blocks is not None:
            assert math.prod(launch.grid) <= spec.max_blocks
        if spec.mode == "grid":
            assert launch.grid[0] <= spec.max_grid[0] and launch.grid[1] <= spec.max_grid[1]
        else:  # one axis of min(cores, its axis limit, the block limit, tasks) programs: no fewer, no more
            assert launch.tasks <= spec.max_tasks and launch.grid[0] <= spec.max_grid[0]
            assert launch.grid[0] == min(spec.num_cores, spec.max_grid[0], spec.max_blocks or spec.num_cores,
                                         launch.tasks)


def test_ascend_limit_splits_a_big_grid():
    spec = DeviceSpec("npu", "grid", (65535, 65535), 65535, 24, 192 * 1024)
    p = plan("fwd", NT=70_000, BH=4, BT=64, K=128, V=128, spec=spec)
    assert p.num_launches > 1 and all(math.prod(launch.grid) <= 65535 for launch in p.launches)
    assert sum(launch.tasks for launch in p.launches) == 280_000


def test_split_rectangle_rejects_bad_limits():
    with pytest.raises(ValueError, match="max_t must be a positive int, got 0"):
        split_rectangle(4, 4, 0, 1, None)


@pytest.mark.parametrize("kernel", ["fwd", "bwd"])
@pytest.mark.parametrize("BT", [16, 32, 64, 128])
def test_ub_tiles_fit_the_model(kernel, BT):
    ub = 192 * 1024
    for dim in (16, 48, 80, 128, 256):
        tile = ub_tile(BT, dim, kernel, ub, 128)
        if tile is None:
            assert ub_footprint(kernel, BT, MIN_TILE) > ub * UB_SAFETY_MARGIN
            continue
        assert tile >= MIN_TILE and tile & (tile - 1) == 0
        assert ub_footprint(kernel, BT, tile) <= ub * UB_SAFETY_MARGIN
        # the widest that fits: twice the tile would overflow or exceed the dim/cap
        assert tile * 2 > min(128, max(MIN_TILE, 1 << (dim - 1).bit_length())) or \
            ub_footprint(kernel, BT, tile * 2) > ub * UB_SAFETY_MARGIN


@pytest.mark.parametrize("cap,min_tile", [(128, 64), (128, 16), (64, 64), (256, 32)])
def test_halved_tiles_pad_less_and_are_taken_only_then(cap, min_tile):
    """With halve_padded, over every dim: the tile is the unhalved one or half of it (never below min_tile);
    half exactly where its whole tiles pad the dim strictly less (K=192 under cuda's cap: 3 x 64, not 2 x 128;
    K=100: one 128, a tie), so no dim takes more padded columns or a narrower tile than it must."""
    halved = 0
    for dim in range(1, 2 * cap + 1):
        wide = ub_tile(64, dim, "fwd", None, cap, min_tile)
        tile = ub_tile(64, dim, "fwd", None, cap, min_tile, halve_padded=True)
        pads_less = wide // 2 >= min_tile and math.ceil(dim / (wide // 2)) * (wide // 2) < math.ceil(dim / wide) * wide
        assert tile == (wide // 2 if pads_less else wide), (dim, wide, tile)
        halved += tile != wide
    assert halved > 0 or min_tile == cap  # the rule took effect somewhere where it can
    assert ub_tile(64, 192, "fwd", None, 128, 64, halve_padded=True) == 64
    assert ub_tile(64, 100, "fwd", None, 128, 64, halve_padded=True) == 128


def test_bt_that_cannot_fit_is_a_clear_error():
    spec = DeviceSpec("npu", "persistent", (65535, 65535), 65535, 24, 192 * 1024)
    with pytest.raises(UnsupportedProblemError, match="BT=128 does not fit the bwd kernel"):
        plan("bwd", NT=1, BH=1, BT=128, K=64, V=64, spec=spec)


def test_device_spec_rejects_nonsense():
    with pytest.raises(ValueError, match="mode must be 'grid' or 'persistent'"):
        DeviceSpec("x", "tiles", (1, 1), None, 1, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_cores must be a positive int, got 0"):
        DeviceSpec("x", "grid", (1, 1), None, 0, None)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(kernel=st.one_of(st.sampled_from(["fwd", "bwd", "Fwd", "bwd ", "fwd_bwd", ""]), st.text(max_size=6)))
def test_plan_takes_the_two_kernels_and_refuses_any_other_name(kernel: str) -> None:
    """plan() models only the forward and backward kernels' unified buffer: any other kernel name (a case
    variant, whitespace, a typo) is a ValueError naming it, never a plan from another kernel's model."""
    spec = DeviceSpec("npu", "persistent", (65535, 65535), 65535, 24, 192 * 1024)
    if kernel in ("fwd", "bwd"):
        assert plan(kernel, NT=3, BH=2, BT=64, K=64, V=64, spec=spec).kernel == kernel
        return
    with pytest.raises(ValueError, match=rf"^kernel must be one of \['bwd', 'fwd'\], got {re.escape(repr(kernel))}$"):
        plan(kernel, NT=3, BH=2, BT=64, K=64, V=64, spec=spec)
