"""Every kernel property checks that each launch is the one its case and knobs ask for
(properties.run_ops, ``_launched_as_asked``).

A knob dropped on its way to the launch leaves every output right (each plan and kernel variant
is correct), and the properties that vary knobs (launch_invariance above all) then compare a
launch with itself and pass. Only a look at the launches themselves sees it.
"""

from __future__ import annotations

import dataclasses
import functools
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from wy_ascend import backends, ops
from wy_ascend.backends import LaunchConfig
from wy_ascend.testing import properties
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import PropertyFailure, check_launch_invariance, check_oracle, common, run_ops

pytestmark = pytest.mark.cpu_backend

# Two sequences (a partial chunk), grouped heads, a gate; its knobs move every flag and limit off
# the cpu backend's defaults: grid launches, token-major gates, bf16 dot operands, dk summed in
# the kernel, a block limit that splits the grid.
KNOBS = dict(mode="grid", gate_head_major=False, lowp_dot=True, group_dk=True, max_blocks=3)
CASE = Case(cu_seqlens=(0, 7, 40), H=1, HV=2, K=16, V=24, BT=16, use_g=True, dtype="bfloat16", backend="cpu",
            knobs=KNOBS)


def test_the_case_and_its_defaults_pass() -> None:
    check_oracle(CASE)
    check_launch_invariance(CASE)


# With group_dk off the backward runs per value head, and dk_sum_kernel has it sum their dk with cuda's kernel.
PER_HEAD = {**KNOBS, "group_dk": False, "dk_sum_kernel": True}


@pytest.mark.parametrize(("knob", "knobs"), [(knob, KNOBS) for knob in sorted(KNOBS)] + [("dk_sum_kernel", PER_HEAD)])
def test_a_dropped_knob_fails_naming_what_it_should_have_changed(monkeypatch: pytest.MonkeyPatch, knob: str,
                                                                 knobs: dict[str, Any]) -> None:
    """The call plans and specializes as if ``knob`` were not given (what a dropped knob looks like
    anywhere between the config and the launch): launch_invariance alone passes it, the check fails it."""
    case = CASE.replace(knobs=knobs)
    real = ops.current_config

    def dropped(config: LaunchConfig | None = None) -> LaunchConfig:
        return dataclasses.replace(real(config), **{knob: None})

    monkeypatch.setattr(ops, "current_config", dropped)
    monkeypatch.setattr(ops, "_CALLS", ops.OrderedDict())
    with pytest.raises(PropertyFailure, match="not the one the case's knobs|blocks > max_blocks"):
        check_launch_invariance(case)
    monkeypatch.setattr(common, "_launched_as_asked", lambda case, kernel, launches: None)
    check_launch_invariance(case)


def test_a_memo_that_ignores_the_config_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """The catalog's call_memo_ignores_config, planted: a call with other knobs gets the first call's plan."""
    memo: dict[Any, ops._Call] = {}
    real = ops._call

    def ignoring(kernel: str, problem: Any, backend_name: Any, config: Any, *rest: Any) -> ops._Call:
        return memo.setdefault((kernel, problem), real(kernel, problem, backend_name, config, *rest))

    monkeypatch.setattr(ops, "_call", ignoring)
    run_ops(CASE, properties.build_inputs(CASE))
    with pytest.raises(PropertyFailure, match="GATE_HEAD_MAJOR=False \\(asked: True\\)"):
        run_ops(CASE, properties.build_inputs(CASE), gate_head_major=True)


def _launches(case: Case, kernel: str) -> properties.Seen:
    seen: properties.Seen = []
    with ops.observed(lambda call, grid, kw: seen.append((call, grid, kw))):
        run_ops(case, properties.build_inputs(case))
    return [launch for launch in seen if launch[0].kernel is ops.kernel_for(launch[0].backend, kernel)]


@pytest.mark.parametrize("mode", ["grid", "persistent"])
@pytest.mark.parametrize("kernel", ["fwd", "bwd"])
def test_a_repeated_or_missing_launch_fails(kernel: str, mode: str) -> None:
    split = {"max_blocks": 2} if mode == "grid" else {"max_tasks": 3}  # several launches either way
    case = CASE.replace(knobs={**KNOBS, "mode": mode, **split})
    launches = _launches(case, kernel)
    assert len(launches) >= 2
    common._launched_as_asked(case, kernel, launches)
    with pytest.raises(PropertyFailure, match=r"tasks never and [1-9]\d* more than once"):
        common._launched_as_asked(case, kernel, launches + launches[:1])
    with pytest.raises(PropertyFailure, match=r"run [1-9]\d* of the .* tasks never and 0 more"):
        common._launched_as_asked(case, kernel, launches[1:])


@pytest.mark.parametrize(("change", "message"), [
    (dict(num_programs=1), "num_programs 1 != its grid's"),
    (dict(t_offset=5), "tasks past the"),
    (dict(bh_offset=1), "tasks past the"),  # the grouped backward's one key head: no head 1
    (dict(num_tasks=10**6), "tasks past the"),
])
def test_a_launch_outside_its_limits_fails(change: dict[str, int], message: str) -> None:
    case = CASE.replace(knobs={**KNOBS, "mode": "persistent", "num_cores": 2})
    (call, grid, kw), *rest = _launches(case, "bwd")
    with pytest.raises(PropertyFailure, match=message):
        common._launched_as_asked(case, "bwd", [(call, grid, {**kw, **change}), *rest])


def test_a_grid_past_the_block_limit_fails() -> None:
    (call, grid, kw), *rest = _launches(CASE, "fwd")
    with pytest.raises(PropertyFailure, match="blocks > max_blocks 3"):
        common._launched_as_asked(CASE, "fwd", [(call, (grid[0] + 3, *grid[1:]), kw), *rest])


def test_the_emulation_knob_reaches_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """emulate=False must run the interpreter without Ascend semantics."""
    case = CASE.replace(knobs={"emulate": False})
    monkeypatch.setattr(backends.Backend, "variant", lambda self, config: (True, True, True))
    monkeypatch.setattr(ops, "_CALLS", ops.OrderedDict())
    with pytest.raises(PropertyFailure, match="emulate=True"):
        run_ops(case, properties.build_inputs(case))


@settings(max_examples=40, derandomize=True, database=None, deadline=None)
@given(name=st.sampled_from(sorted(backends.BACKENDS)), kernel=st.sampled_from(["fwd", "bwd"]),
       dtype=st.sampled_from(["float32", "bfloat16", "float16"]), lowp_dot=st.sampled_from([None, False, True]))
def test_the_lowp_dot_flag_asked_of_a_launch_is_each_backend_s(name: str, kernel: str, dtype: str,
                                                              lowp_dot: bool | None) -> None:
    """_knob_flags' LOWP_DOT over every backend, op, dtype and lowp_dot knob: the interpreter runs it exactly for
    bfloat16 with the knob on; a compiled backend without bf16 dot operands (npu, npu-cuda) never; one with them
    (cuda) leaves it to specialization (no flag stated)."""
    backend = backends.BACKENDS[name]
    case = Case(dtype=dtype, backend=name)
    flags = common._knob_flags(case, kernel, backend, LaunchConfig(lowp_dot=lowp_dot))
    if backend.interpret:
        assert flags["LOWP_DOT"] is (bool(lowp_dot) and dtype == "bfloat16")
    elif not backend.lowp_dot_for_bf16:
        assert flags["LOWP_DOT"] is False
    else:
        assert "LOWP_DOT" not in flags


@settings(max_examples=20, derandomize=True, database=None, deadline=None)
@given(dtype=st.sampled_from(["float32", "bfloat16", "float16"]), wrong=st.sampled_from([None, "w", "u"]),
       to=st.sampled_from([torch.float64, torch.float32, torch.bfloat16, torch.float16]))
def test_an_output_in_another_dtype_than_the_contract_fails(dtype: str, wrong: str | None, to: torch.dtype) -> None:
    """run_ops over drawn I/O dtypes and a forward (of a stand-in forward-only subject) returning one output in
    another dtype: a PropertyFailure naming that output, its dtype and the one expected; in k's dtype, the
    outputs pass as returned."""
    case = Case(T=16, HV=1, dtype=dtype, backend="cpu")
    inputs = case.build_inputs()
    own = getattr(torch, dtype)
    made: dict[str, torch.Tensor] = {}

    def forward(**kw: Any) -> tuple[torch.Tensor, torch.Tensor]:
        made.update({n: torch.zeros(2, dtype=to if n == wrong else own) for n in ("w", "u")})
        return made["w"], made["u"]

    subject = SimpleNamespace(ops=lambda backend: (forward, None), foreign=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(common, "subject_of", lambda case: subject)
        if wrong is not None and to != own:
            with pytest.raises(PropertyFailure, match="outputs of the wrong dtype") as e:
                run_ops(case, inputs)
            assert e.value.metrics == {"dtypes": {wrong: f"{to} (expected {own})"}}
        else:
            assert run_ops(case, inputs) == made


@functools.cache
def _one_launch(kernel: str, HV: int) -> tuple[Case, Any]:
    """A persistent case of HV value heads and its one launch of ``kernel`` (run once: shrinking reuses it)."""
    case = CASE.replace(H=1, HV=HV, knobs={**KNOBS, "mode": "persistent", "group_dk": False})
    (launch,) = _launches(case, kernel)
    return case, launch


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(kernel=st.sampled_from(["fwd", "bwd"]), HV=st.sampled_from([2, 3, 4]), at=st.floats(0, 1, exclude_max=True))
def test_launches_splitting_a_row_of_heads_cover_each_task_once(kernel: str, HV: int, at: float) -> None:
    """A persistent launch whose task count is no whole number of head rows runs its last row's first heads (the
    kernel's f -> (t_offset + f // bh_count, bh_offset + f % bh_count)): the plan's one launch split at a drawn
    task inside a row, the row's other heads launched next, passes as running every task once; without that
    next launch the split row's other heads run never."""
    case, (call, grid, kw) = _one_launch(kernel, HV)
    total, BH = kw["num_tasks"], kw["bh_count"]
    rows = total // BH
    s = min(total - 1, max(1, int(at * total)))
    if s % BH == 0:
        s += 1
    r, rest = divmod(s, BH)
    split = [(call, grid, {**kw, "num_tasks": s}),
             (call, grid, {**kw, "t_offset": r, "bh_offset": rest, "bh_count": BH - rest, "num_tasks": BH - rest})]
    if r + 1 < rows:
        split.append((call, grid, {**kw, "t_offset": r + 1, "num_tasks": (rows - r - 1) * BH}))
    common._launched_as_asked(case, kernel, split)
    with pytest.raises(PropertyFailure, match=rf"run {BH - rest} of the .* tasks never and 0 more"):
        common._launched_as_asked(case, kernel, [split[0], *split[2:]])
