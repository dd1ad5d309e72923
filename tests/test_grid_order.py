"""The grid launch's program order: kernels._grid_task, run by the interpreter, maps each program of a
launch to the task planning.program_tasks says, in both orders, so the plan_coverage property's walk
over a plan is the kernels' own walk."""

from __future__ import annotations

import os

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

if os.environ.get("WY_ASCEND_BACKEND", "cpu") != "cpu":
    pytest.skip("runs a kernel helper in the interpreter (the cpu backend)", allow_module_level=True)

import triton  # noqa: E402  (after conftest set TRITON_INTERPRET)
import triton.language as tl  # noqa: E402

from wy_ascend import backends  # noqa: E402
from wy_ascend.planning import Launch, heads_first, program_tasks  # noqa: E402

backends.kernel_for(backends.BACKENDS["cpu"], "fwd")  # the interpreter, prepared
from wy_ascend import kernels  # noqa: E402


@triton.jit
def _record(out, t_offset, bh_offset, IS_VARLEN: tl.constexpr, H: tl.constexpr, HV: tl.constexpr):
    """out[program in launch order] = the (i_t, i_bh) kernels._grid_task gives that program."""
    i_t, i_bh = kernels._grid_task(t_offset, bh_offset, IS_VARLEN, H, HV)
    flat = tl.program_id(0) + tl.program_id(1) * tl.num_programs(0)
    tl.store(out + 2 * flat, i_t)
    tl.store(out + 2 * flat + 1, i_bh)


@settings(max_examples=60, deadline=None)
@given(t_count=st.integers(1, 7), bh_count=st.integers(1, 7), t_offset=st.integers(0, 5),
       bh_offset=st.integers(0, 5), varlen=st.booleans(), heads=st.sampled_from([(1, 1), (2, 2), (1, 3), (2, 4)]))
@example(t_count=3, bh_count=2, t_offset=0, bh_offset=0, varlen=True, heads=(2, 2))  # the orders differ here
@example(t_count=3, bh_count=2, t_offset=0, bh_offset=0, varlen=False, heads=(1, 3))
@example(t_count=1, bh_count=1, t_offset=4, bh_offset=2, varlen=True, heads=(1, 1))
def test_each_program_runs_the_task_the_plan_model_gives(t_count, bh_count, t_offset, bh_offset, varlen, heads):
    """The kernels' order (their rule from IS_VARLEN, H and HV) is the one planning.heads_first gives the model."""
    H, HV = heads
    launch = Launch(t_offset, t_count, bh_offset, bh_count, (t_count, bh_count))
    out = torch.full((t_count * bh_count, 2), -1, dtype=torch.int32)
    _record[launch.grid](out, t_offset, bh_offset, varlen, H, HV)
    order = heads_first(varlen, H, HV)
    programs = [(x, y) for y in range(bh_count) for x in range(t_count)]  # launch order: axis 0 fastest
    assert [tuple(r) for r in out.tolist()] == [program_tasks(launch, "grid", p, order)[0] for p in programs]


def test_heads_first_in_launch_order_takes_the_heads_of_one_chunk_in_turn():
    """The first programs the GPU starts run chunk 0 of every batch-head, heads first; chunks first runs
    batch-head 0's chunks first. And the rule: heads first for varlen batches and grouped heads only."""
    launch = Launch(0, 3, 0, 2, (3, 2))
    first = [program_tasks(launch, "grid", (x, y), order)[0] for order in (True, False) for y, x in [(0, 0), (0, 1)]]
    assert first == [(0, 0), (0, 1), (0, 0), (1, 0)]
    assert [heads_first(v, 4, hv) for v, hv in [(False, 4), (True, 4), (False, 8), (True, 8)]] == [False, True, True, True]
