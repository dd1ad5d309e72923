"""Launch planning: pure functions from a problem and a device spec to a launch plan.

Nothing here touches a device. A plan is data (launches with offsets and sizes, tile
sizes, the number of programs) so the fuzz suite can check plans by the thousand:
every (chunk, head) task covered exactly once, no launch above the device's limits.

Work is a rectangle of tasks: ``NT`` chunks (axis 0) by ``BH = B * HV`` batch-heads
(axis 1; ``batch_heads``: B * H for a backward that sums grouped heads' dk in one program). Two launch shapes exist:

* ``grid``: one program per task, grid ``(t_count, bh_count)``; a launch is bounded per
  axis (CUDA: 2**31-1 on x, 65535 on y) and in total blocks (Ascend: 65535).
* ``persistent``: a "core grid" of ``min(num_cores, max_blocks, tasks)`` programs that
  loop over the launch's flat task ids with stride ``num_programs`` (Ascend's cube cores).
  A launch's tasks are bounded by ``max_tasks`` so flat task ids stay int32.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

LaunchMode = Literal["grid", "persistent"]

INT32_MAX = 2**31 - 1
# The devices' launch limits: an Ascend launch holds at most this many blocks (the product of its grid's
# dimensions); a CUDA grid at most INT32_MAX programs on its x axis and 65535 on y (and on z).
ASCEND_MAX_BLOCKS = 65535
CUDA_MAX_GRID = (INT32_MAX, 65535)  # grid x, grid y
# A CUDA launch's programs, at most: the kernels' heads-first order (kernels._grid_task, ``heads_first``) numbers
# a launch's programs in int32.
CUDA_MAX_BLOCKS = INT32_MAX

# Minimum tile width: tl.dot needs every dimension >= 16 on all Triton backends.
MIN_TILE = 16
# Fraction of the unified buffer a kernel may plan for; the rest is left to the
# compiler's own temporaries (the seed's measured-safe margin on A2).
UB_SAFETY_MARGIN = 0.75

# UB model: each kernel body keeps some BT x BT fp32 matrices alive for the whole
# task and some BT x tile fp32 buffers per K/V tile. The counts are the live buffers
# of the kernel bodies in kernels.py:
#   forward : A                                   | tile: x, x*beta(*gate), A @ (.), store cast
#   backward: A, dA (-> dM), k k^T, dL (-> S)     | tile: k|v, dw|du, scaled, A^T @ d, out, temp
UB_MODEL: dict[str, tuple[int, int]] = {
    "fwd": (1, 4),
    "bwd": (4, 6),
}
FP32_BYTES = 4


@dataclass(frozen=True)
class DeviceSpec:
    """Launch limits of one backend, as data.

    ``max_grid`` bounds each grid axis (chunk axis, batch-head axis); ``max_blocks``
    bounds the product of a launch's grid (None: no product limit); ``num_cores`` is
    the persistent core-grid size; ``ub_bytes`` the per-core unified buffer used for
    tile sizing (None: no UB, tiles capped by ``tile_cap`` only); ``min_tile`` the
    narrowest tile a narrower K or V is padded to (masked), below ``tile_cap``;
    ``bwd_tile_cap`` the backward's own cap where it differs (None: ``tile_cap``, see ``cap``);
    ``narrow_tiles``: where K and V both pad to ``min_tile``, they share one narrower tile instead,
    next_power_of_2(max(K, V)) (``shared_narrow_dim``); ``halve_padded``: where a K or V takes more than one
    tile, a tile half as wide (not below ``min_tile``) where it pads the axis less (``ub_tile``).
    """

    name: str
    mode: LaunchMode
    max_grid: tuple[int, int]
    max_blocks: int | None
    num_cores: int
    ub_bytes: int | None
    tile_cap: int = 128
    max_tasks: int = INT32_MAX
    min_tile: int = MIN_TILE
    bwd_tile_cap: int | None = None
    narrow_tiles: bool = False
    halve_padded: bool = False

    def cap(self, kernel: str) -> int:
        """The widest tile ``kernel`` ("fwd"/"bwd") may plan."""
        return self.bwd_tile_cap if kernel == "bwd" and self.bwd_tile_cap is not None else self.tile_cap

    def __post_init__(self) -> None:
        if self.mode not in ("grid", "persistent"):
            raise ValueError(f"mode must be 'grid' or 'persistent', got {self.mode!r}")
        for label, value in (
            ("max_grid[0]", self.max_grid[0]),
            ("max_grid[1]", self.max_grid[1]),
            ("num_cores", self.num_cores),
            ("max_tasks", self.max_tasks),
        ):
            _require_positive(label, value)
        if self.max_blocks is not None:
            _require_positive("max_blocks", self.max_blocks)
        if self.ub_bytes is not None:
            _require_positive("ub_bytes", self.ub_bytes)
        for label, tile in (("tile_cap", self.tile_cap), ("min_tile", self.min_tile),
                            ("bwd_tile_cap", self.cap("bwd"))):
            if tile < MIN_TILE or tile & (tile - 1):
                raise ValueError(f"{label} must be a power of two >= {MIN_TILE}, got {tile}")


@dataclass(frozen=True)
class Launch:
    """One kernel launch over the task rectangle [t_offset, +t_count) x [bh_offset, +bh_count)."""

    t_offset: int
    t_count: int
    bh_offset: int
    bh_count: int
    grid: tuple[int, ...]

    @property
    def tasks(self) -> int:
        return self.t_count * self.bh_count


@dataclass(frozen=True)
class LaunchPlan:
    """Everything a backend needs to launch one op: launches, tiles, launch shape."""

    kernel: str
    mode: LaunchMode
    NT: int
    BH: int
    BK: int
    BV: int
    launches: tuple[Launch, ...]
    ub_footprint: int

    @property
    def num_launches(self) -> int:
        return len(self.launches)


class UnsupportedProblemError(ValueError):
    """Raised by the planner when no tile fits the device (e.g. BT too large for the UB)."""


def _require_positive(label: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{label} must be a positive int, got {value!r}")


def next_power_of_2(n: int) -> int:
    """Smallest power of two >= n (1 for n <= 1)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def split_rectangle(
    NT: int, BH: int, max_t: int, max_bh: int, max_area: int | None
) -> list[tuple[int, int, int, int]]:
    """Cut the NT x BH task rectangle into sub-rectangles (t_off, t_len, bh_off, bh_len).

    Each piece has t_len <= max_t, bh_len <= max_bh and t_len * bh_len <= max_area.
    The batch-head axis is cut first so that a tight area limit still leaves whole
    chunk rows together; pieces are listed chunk-major.
    """
    for label, value in (("max_t", max_t), ("max_bh", max_bh)):
        _require_positive(label, value)
    if max_area is not None:
        _require_positive("max_area", max_area)
    if NT <= 0 or BH <= 0:
        return []
    area = max_area if max_area is not None else NT * BH
    bh_len = min(BH, max_bh, area)
    t_len = min(NT, max_t, max(1, area // bh_len))
    return [
        (t_off, min(t_len, NT - t_off), bh_off, min(bh_len, BH - bh_off))
        for t_off in range(0, NT, t_len)
        for bh_off in range(0, BH, bh_len)
    ]


def batch_heads(kernel: str, B: int, H: int, HV: int, group_dk: bool) -> int:
    """The task rectangle's second axis: B x HV value heads, or B x H key heads for a backward
    that runs each key head's value heads in one program (``group_dk``, kernels.GROUP_DK)."""
    return B * (H if kernel == "bwd" and group_dk else HV)


def grid_launches(NT: int, BH: int, spec: DeviceSpec) -> list[Launch]:
    """One program per task: grids (t_count, bh_count) under the per-axis and block limits."""
    return [
        Launch(t, tn, bh, bn, (tn, bn))
        for t, tn, bh, bn in split_rectangle(NT, BH, spec.max_grid[0], spec.max_grid[1], spec.max_blocks)
    ]


def persistent_launches(NT: int, BH: int, spec: DeviceSpec) -> list[Launch]:
    """Core-grid launches: each covers at most ``max_tasks`` tasks with a 1-D grid of
    ``min(num_cores, max_blocks, max_grid[0], tasks)`` programs striding over them."""
    cap = min(spec.num_cores, spec.max_grid[0], spec.max_blocks or spec.num_cores)
    return [
        Launch(t, tn, bh, bn, (min(cap, tn * bn),))
        for t, tn, bh, bn in split_rectangle(NT, BH, NT or 1, BH or 1, spec.max_tasks)
    ]


def heads_first(varlen: bool, H: int, HV: int) -> bool:
    """Whether a grid launch's programs, in launch order, take the batch-heads of one chunk in turn (True)
    or the chunks of one batch-head (False): heads first for varlen batches and grouped heads, where it
    was measured faster (kernels._grid_task, which computes the same from its constexprs)."""
    return varlen or HV != H


def program_tasks(launch: Launch, mode: LaunchMode, program: tuple[int, ...],
                  heads_first: bool = False) -> list[tuple[int, int]]:
    """The (i_t, i_bh) tasks one program of ``launch`` runs, exactly as the kernels map them.

    grid: program (x, y) runs (t_offset + x, bh_offset + y), or with ``heads_first`` its flat launch-order
    index f = x + y * t_count runs (t_offset + f // bh_count, bh_offset + f % bh_count).
    persistent: program p runs flat ids p, p + P, ... < tasks, with flat id
    f -> (t_offset + f // bh_count, bh_offset + f % bh_count).
    """
    if mode == "grid":
        x, y = program
        if heads_first:
            return [_flat_task(launch, x + y * launch.grid[0], launch.grid[1])]
        return [(launch.t_offset + x, launch.bh_offset + y)]
    (p,) = program
    return [_flat_task(launch, f, launch.bh_count) for f in range(p, launch.tasks, launch.grid[0])]


def _flat_task(launch: Launch, f: int, heads: int) -> tuple[int, int]:
    """The task of flat id ``f`` over ``heads`` batch-heads a chunk, batch-heads fastest (heads-first grids
    divide by their grid's y size, core grids by the launch's bh_count: each as its kernel does)."""
    return launch.t_offset + f // heads, launch.bh_offset + f % heads


def ub_tile(BT: int, dim: int, kernel: str, ub_bytes: int | None, tile_cap: int,
            min_tile: int = MIN_TILE, halve_padded: bool = False) -> int | None:
    """Widest power-of-two tile over a K or V axis of size ``dim`` for ``kernel``.

    The tile is ``next_power_of_2(dim)``, at least ``min_tile`` and at most ``tile_cap``
    (the cap wins); with a UB it must also satisfy the UB model: (mats * BT * BT +
    tile_mult * BT * tile) * 4 bytes <= ub_bytes * UB_SAFETY_MARGIN. With ``halve_padded``, half
    that tile where half-wide tiles pad the axis less (K=192: three 64-wide tiles, not two 128-wide ones
    padding it to 256), not below ``min_tile``. Returns None when not even MIN_TILE fits.
    """
    tile = max(MIN_TILE, min(max(next_power_of_2(dim), min_tile), tile_cap))
    while ub_bytes is not None and tile >= MIN_TILE and ub_footprint(kernel, BT, tile) > ub_bytes * UB_SAFETY_MARGIN:
        tile //= 2
    if tile < MIN_TILE:
        return None
    if halve_padded and tile // 2 >= max(min_tile, MIN_TILE) and _padded(dim, tile // 2) < _padded(dim, tile):
        tile //= 2
    return tile


def _padded(dim: int, tile: int) -> int:
    """``dim`` rounded up to whole ``tile``-wide tiles."""
    return -(-dim // tile) * tile


def shared_narrow_dim(K: int, V: int, spec: DeviceSpec) -> int | None:
    """The dim whose tile K and V share under ``spec.narrow_tiles`` (max(K, V), where both would
    pad to ``spec.min_tile``), else None (each axis its own tile)."""
    if spec.narrow_tiles and next_power_of_2(max(K, V)) < spec.min_tile:
        return max(K, V)
    return None


def ub_footprint(kernel: str, BT: int, tile: int) -> int:
    """Modeled UB bytes of one program of ``kernel`` with chunk ``BT`` and tile width ``tile``."""
    mats, tile_mult = UB_MODEL[kernel]
    return (mats * BT * BT + tile_mult * BT * tile) * FP32_BYTES


@lru_cache(maxsize=512)
def plan(kernel: str, *, NT: int, BH: int, BT: int, K: int, V: int, spec: DeviceSpec) -> LaunchPlan:
    """Plan ``kernel`` ("fwd" or "bwd") over NT chunks x BH batch-heads on ``spec``
    (memoized: plans are immutable and an op is called with few distinct shapes)."""
    if kernel not in UB_MODEL:
        raise ValueError(f"kernel must be one of {sorted(UB_MODEL)}, got {kernel!r}")
    shared = shared_narrow_dim(K, V, spec)
    if shared is not None:
        BK = BV = ub_tile(BT, shared, kernel, spec.ub_bytes, spec.cap(kernel))
    else:
        BK = ub_tile(BT, K, kernel, spec.ub_bytes, spec.cap(kernel), spec.min_tile, spec.halve_padded)
        BV = ub_tile(BT, V, kernel, spec.ub_bytes, spec.cap(kernel), spec.min_tile, spec.halve_padded)
    if BK is None or BV is None:
        need = ub_footprint(kernel, BT, MIN_TILE)
        raise UnsupportedProblemError(
            f"chunk size BT={BT} does not fit the {kernel} kernel in the unified buffer of "
            f"backend {spec.name!r}: even {MIN_TILE}-wide tiles need {need} bytes, capacity "
            f"{spec.ub_bytes} x margin {UB_SAFETY_MARGIN}; use a smaller BT or a larger ub_bytes"
        )
    launches = (grid_launches if spec.mode == "grid" else persistent_launches)(NT, BH, spec)
    footprint = ub_footprint(kernel, BT, max(BK, BV))
    return LaunchPlan(kernel, spec.mode, NT, BH, BK, BV, tuple(launches), footprint)
