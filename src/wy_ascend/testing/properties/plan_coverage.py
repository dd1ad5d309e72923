"""The plan_coverage property (``check_plan_coverage``): the launch planner plans each kernel exactly when
the UB model (``common.plannable``) says it fits, with the widest tiles that fit, and its launches
cover every (chunk, head) task once within the limits. It launches no kernel."""

from __future__ import annotations

import math

from ...backends import BACKENDS
from ...planning import MIN_TILE, UnsupportedProblemError, batch_heads, heads_first, plan, program_tasks
from ..case import Case
from ..failure import Metrics, PropertyFailure
from .common import _chunk_rows, _groups_dk, plan_spec, plannable, widest_tile


def check_plan_coverage(case: Case) -> Metrics:
    """On the case's device spec (``plan_spec``), the planner plans each kernel exactly when the
    UB model says it fits (``plannable``); every plan covers each (chunk, head) task exactly once
    within the limits, and its tiles are the widest that fit the unified buffer (the model with
    its margin)."""
    spec = plan_spec(case)
    NT = _chunk_rows(case)
    group_dk = _groups_dk(BACKENDS[spec.name], case)
    metrics: Metrics = {}
    for kernel in ("fwd", "bwd"):
        BH = batch_heads(kernel, case.B, case.H, case.HV, group_dk)
        fits = plannable(kernel, case.BT, spec.ub_bytes)
        try:
            p = plan(kernel, NT=NT, BH=BH, BT=case.BT, K=case.K, V=case.V, spec=spec)
        except UnsupportedProblemError as e:
            if fits:
                raise PropertyFailure(f"{kernel}: the planner refuses BT={case.BT} on {spec.name} (UB "
                                      f"{spec.ub_bytes}), which the UB model says fits: {e}") from e
            metrics[kernel] = {"refused": True}
            continue
        if not fits:
            raise PropertyFailure(f"{kernel}: the planner planned BT={case.BT} on {spec.name} although even "
                                  f"{MIN_TILE}-wide tiles overflow its UB of {spec.ub_bytes} bytes")
        # with narrow tiles (cuda), K and V that both pad to min_tile share the wider one's tile instead
        shared = spec.narrow_tiles and max(case.K, case.V) <= spec.min_tile // 2
        for dim, tile in (("K", p.BK), ("V", p.BV)):
            size, least = (max(case.K, case.V), MIN_TILE) if shared else (getattr(case, dim), spec.min_tile)
            widest = widest_tile(kernel, case.BT, size, spec.cap(kernel), spec.ub_bytes, least,
                                 spec.halve_padded and not shared)
            if tile != widest:
                raise PropertyFailure(f"{kernel}: B{dim}={tile} for {dim}={getattr(case, dim)}, but the widest tile "
                                      f"the UB model fits is {widest} (UB {spec.ub_bytes}, cap {spec.cap(kernel)}, "
                                      f"min {spec.min_tile}, halved where that pads less: {spec.halve_padded})")
        # (each tile the widest the model fits, so the tiles fit: a plan where none fits failed above)
        seen: dict[tuple[int, int], int] = {}
        order = heads_first(case.cu_seqlens is not None, case.H, case.HV)
        for launch in p.launches:
            blocks = math.prod(launch.grid)  # stated here, not by the plan under test
            if spec.max_blocks is not None and blocks > spec.max_blocks:
                raise PropertyFailure(f"{kernel}: a launch has {blocks} blocks > max_blocks {spec.max_blocks}")
            if any(d < 1 for d in launch.grid):
                raise PropertyFailure(f"{kernel}: launch grid {launch.grid} has an empty axis")
            if p.mode == "grid":
                if launch.grid[0] > spec.max_grid[0] or launch.grid[1] > spec.max_grid[1]:
                    raise PropertyFailure(f"{kernel}: grid {launch.grid} exceeds the per-axis limit {spec.max_grid}")
                programs: list[tuple[int, ...]] = [(x, y) for x in range(launch.grid[0])
                                                   for y in range(launch.grid[1])]
            else:
                if launch.tasks > spec.max_tasks:
                    raise PropertyFailure(f"{kernel}: a launch has {launch.tasks} tasks > max_tasks {spec.max_tasks}")
                programs = [(p_,) for p_ in range(launch.grid[0])]
            for prog in programs:
                for task in program_tasks(launch, p.mode, prog, order):
                    seen[task] = seen.get(task, 0) + 1
        expected = {(t, bh) for t in range(NT) for bh in range(BH)}
        missing = expected - set(seen)
        extra = set(seen) - expected
        twice = [t for t, n in seen.items() if n > 1]
        if missing or extra or twice:
            raise PropertyFailure(
                f"{kernel}: plan covers tasks wrongly: {len(missing)} missing (e.g. {sorted(missing)[:3]}), "
                f"{len(extra)} outside the grid (e.g. {sorted(extra)[:3]}), {len(twice)} run twice (e.g. {twice[:3]})"
            )
        metrics[kernel] = {"launches": p.num_launches, "tasks": NT * BH, "BK": p.BK, "BV": p.BV}
    return metrics
