"""Each place where the fuzz suite was blind by construction (issue 11) has a test here that fails
if it reopens: memory layouts, caller-supplied optional arguments, plannability decided by the
planner under test, one device spec, fixed corruption positions."""

from __future__ import annotations

import dataclasses
from collections import Counter
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from drawing import draw_many
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzz.strategies import UB_CHOICES, arguments, bad_input_cases, cases, chunk_sizes, memory_layout, plan_cases
from wy_ascend import backends, ops, planning, validation
from wy_ascend.backends import BACKENDS, CUDA_MAX_GRID, DEVICES, LaunchConfig, device_spec
from wy_ascend.planning import CUDA_MAX_BLOCKS, UnsupportedProblemError
from wy_ascend.planning import plan as real_plan
from wy_ascend.testing import properties
from wy_ascend.testing.case import MEMORY_ARGS, Case, lay_out
from wy_ascend.testing.properties import (
    CORRUPTIONS,
    PropertyFailure,
    check_bad_input,
    check_memory_layout,
    check_oracle,
    check_plan_coverage,
    check_varlen_split,
    invariance,
    plan_coverage,
)

# Every argument passed: a gate, two sequences (2 chunks of BT=16), precomputed chunk_indices.
FULL = Case(cu_seqlens=(0, 7, 20), H=1, HV=2, use_g=True, chunk_indices=True)


@pytest.fixture
def full(backend: str) -> Case:
    """FULL on the backend under test: layouts and caller arguments reach every backend's launch alike."""
    return FULL.replace(backend=backend)


# ----------------------------------------------------------------------------- memory layout


def spread(name: str) -> str:
    """A layout of ``name`` that moves its elements: every other element of a dim longer than one."""
    return "strided:0" if MEMORY_ARGS[name] <= 2 else "strided:1"


def test_layouts_keep_the_values_and_change_the_memory() -> None:
    x = torch.arange(2 * 3 * 4 * 5, dtype=torch.float32).view(2, 3, 4, 5)
    for layout in ("offset", "strided:0", "strided:3", "sliced:1", "sliced:3", "transposed:0", "transposed:2"):
        y = lay_out(x, layout, "k")
        assert torch.equal(y, x) and y.shape == x.shape, layout
        assert (y.stride(), y.storage_offset()) != (x.stride(), 0), layout
    assert lay_out(x, "offset", "k").is_contiguous()
    for bad in ("strided", "sliced:4", "transposed:3", "offset:1", "reversed:0"):
        with pytest.raises(ValueError, match="memory layout of k"):
            lay_out(x, bad, "k")
    with pytest.raises(ValueError, match="does not pass"):
        Case(memory={"g": "offset"})  # no gate
    with pytest.raises(ValueError, match="needs cu_seqlens"):
        Case(chunk_indices=True)


@st.composite
def _laid_out(draw: st.DrawFn) -> tuple[str, str, torch.Tensor]:
    """An argument, a valid layout of it and a tensor of its rank (floating or integer)."""
    name = draw(st.sampled_from(sorted(MEMORY_ARGS)))
    ndim = MEMORY_ARGS[name]
    kinds = ["offset", "strided", "sliced", *(["transposed"] if ndim > 1 else [])]
    kind = draw(st.sampled_from(kinds))
    layout = kind if kind == "offset" else f"{kind}:{draw(st.integers(0, ndim - (2 if kind == 'transposed' else 1)))}"
    shape = draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim))
    dtype = draw(st.sampled_from([torch.float32, torch.bfloat16, torch.int32, torch.int64]))
    x = torch.arange(1, 1 + torch.Size(shape).numel()).view(shape).to(dtype)  # no 0 among the values
    return name, layout, x


@settings(max_examples=120, derandomize=True, database=None, deadline=None)
@given(_laid_out())
def test_a_layout_keeps_the_values_and_fills_every_gap_with_its_poison(drawn: tuple[str, str, torch.Tensor]) -> None:
    """Every argument, layout and rank drawn, floating and integer: the view has the values, the same shape,
    other strides or offset; every element of its storage outside the view holds NaN, or for integers 0 (an
    index in range: a kernel reading a gap of an index tensor computes a wrong answer, not a fault)."""
    name, layout, x = drawn
    y = lay_out(x, layout, name)
    assert torch.equal(y, x) and y.shape == x.shape and y.dtype == x.dtype
    flat = torch.empty(0, dtype=y.dtype).set_(y.untyped_storage())
    covered = torch.zeros(flat.numel(), dtype=torch.bool)
    covered[torch.arange(flat.numel()).as_strided(y.shape, y.stride(), y.storage_offset()).flatten()] = True
    gaps = flat[~covered]
    if layout.startswith("transposed"):
        assert gaps.numel() == 0  # a transposed copy: same storage size, no gap
    else:
        assert gaps.numel() > 0, layout  # offset: one element before; strided: every other; sliced: both ends
        assert bool((gaps.isnan() if x.is_floating_point() else gaps == 0).all()), (layout, gaps)


def test_every_argument_in_a_moved_layout_gives_the_contiguous_bits(full: Case) -> None:
    check_memory_layout(full.replace(memory={name: spread(name) for name in MEMORY_ARGS}))


def _reads_storage_as_contiguous(op: Any, name: str) -> Any:
    """``op`` with argument ``name`` read as if it were contiguous from its first element: what a
    kernel that assumes the strides does once the op no longer makes the argument contiguous."""

    def mutant(*args: Any, **kwargs: Any) -> Any:
        x = kwargs.get(name)
        if x is not None:
            kwargs[name] = x.as_strided(x.shape, torch.empty(x.shape).stride(), x.storage_offset())
        return op(*args, **kwargs)

    return mutant


@pytest.mark.parametrize("name", list(MEMORY_ARGS))
def test_memory_layout_fails_when_an_argument_is_read_ignoring_its_strides(name: str, monkeypatch, full: Case) -> None:
    for op in ("recompute_w_u_fwd", "prepare_wy_repr_bwd"):
        if name not in ("dw", "du") or op == "prepare_wy_repr_bwd":
            monkeypatch.setattr(ops, op, _reads_storage_as_contiguous(getattr(ops, op), name))
    # Wrong numbers (PropertyFailure), or indices that validation rejects (ValueError).
    with pytest.raises((PropertyFailure, ValueError)):
        check_memory_layout(full.replace(memory={name: spread(name)}))


def test_memory_layouts_are_drawn_for_every_argument() -> None:
    for ndim in (1, 2, 3, 4):
        drawn = set(draw_many(memory_layout(ndim), 60))
        dims = [(kind, d) for kind in ("strided", "sliced") for d in range(ndim)]
        assert {"offset", *(f"{k}:{d}" for k, d in dims), *(f"transposed:{d}" for d in range(ndim - 1))} == drawn
    drawn = draw_many(arguments(use_g=True, varlen=True, memory=True), 100)
    laid_out = Counter(name for a in drawn for name in a["memory"])
    assert all(a["memory"] for a in drawn) and all(laid_out[name] >= 10 for name in MEMORY_ARGS), laid_out
    assert all(set(a["memory"]) <= {"chunk_indices"} for a in draw_many(arguments(True, True, False), 50))
    assert all(c.memory for c in draw_many(cases(memory=True), 30))


# ----------------------------------------------------------------------------- optional arguments


def test_caller_chunk_indices_in_any_layout_are_checked_for_their_results(full: Case) -> None:
    for layout in ("transposed:0", "strided:0", "sliced:1", "offset"):
        case = full.replace(memory={"chunk_indices": layout})
        check_oracle(case)
        check_varlen_split(case)


def test_the_oracle_fails_when_caller_chunk_indices_reach_the_kernel_in_their_layout(monkeypatch, full: Case) -> None:
    monkeypatch.setattr(validation, "_check_chunk_indices", lambda ci, expected, BT, device: ci.to(torch.int64))
    with pytest.raises(PropertyFailure, match="float64 oracle"):
        check_oracle(full.replace(memory={"chunk_indices": "transposed:0"}))


def test_chunk_indices_are_drawn_for_varlen_cases() -> None:
    drawn = draw_many(cases(varlen=True), 100)
    passed = [c for c in drawn if c.chunk_indices]
    assert 20 <= len(passed) <= 80
    assert any("chunk_indices" in c.memory for c in passed) and any("chunk_indices" not in c.memory for c in passed)
    assert not any(c.chunk_indices for c in draw_many(cases(varlen=False), 50))


# ----------------------------------------------------------------------------- what is plannable


def test_strategies_do_not_ask_the_planner_and_a_wrong_refusal_fails(monkeypatch) -> None:
    def refuses_64(kernel: str, **kw: Any) -> Any:
        if kw["BT"] == 64:
            raise UnsupportedProblemError("planted: BT=64 refused")
        return real_plan(kernel, **kw)

    monkeypatch.setattr(plan_coverage, "plan", refuses_64)
    assert 64 in draw_many(chunk_sizes("cpu"), 50)  # still drawn
    with pytest.raises(PropertyFailure, match="refuses BT=64"):
        check_plan_coverage(Case(T=100, BT=64))


def test_a_planner_that_plans_what_does_not_fit_fails(monkeypatch) -> None:
    def ignores_ub(kernel: str, **kw: Any) -> Any:
        return real_plan(kernel, **{**kw, "spec": dataclasses.replace(kw["spec"], ub_bytes=None)})

    case = Case(T=300, BT=128, device="npu-910B2-A2")  # the backward's 4 BT x BT matrices alone need 256 KiB
    assert check_plan_coverage(case)["bwd"] == {"refused": True}
    monkeypatch.setattr(plan_coverage, "plan", ignores_ub)
    with pytest.raises(PropertyFailure, match="bwd: the planner planned BT=128"):
        check_plan_coverage(case)


@pytest.mark.parametrize(("edit", "expected"), [
    (lambda ls: ls + ls[:1], r"0 missing .*, 0 outside the grid .*, [1-9]\d* run twice"),  # a launch repeated
    (lambda ls: ls[:-1], r"[1-9]\d* missing .*, 0 outside the grid .*, 0 run twice"),  # the last launch dropped
], ids=["repeated", "dropped"])
def test_a_plan_that_runs_a_task_twice_or_never_fails(monkeypatch, edit, expected) -> None:
    """plan_coverage counts every task's runs: a repeated launch (each of its tasks twice) and a
    dropped one (its tasks never) both fail, each by its own count."""
    def edited(kernel: str, **kw: Any) -> Any:
        p = real_plan(kernel, **kw)
        return dataclasses.replace(p, launches=tuple(edit(list(p.launches))))

    case = Case(T=100, BT=16, HV=2, knobs={"max_tasks": 3})  # 7 chunks x 2 heads in launches of 3 tasks
    assert real_plan("fwd", NT=7, BH=2, BT=16, K=16, V=16, spec=properties.plan_spec(case)).num_launches > 1
    monkeypatch.setattr(plan_coverage, "plan", edited)
    with pytest.raises(PropertyFailure, match=expected):
        check_plan_coverage(case)


@pytest.mark.parametrize("edit", ["BK", "BV", "blocks", "empty", "tasks"])
@settings(max_examples=15, derandomize=True, database=None, deadline=None)
@given(cores=st.integers(1, 4), max_tasks=st.integers(1, 6), HV=st.integers(1, 3), T=st.integers(16, 100),
       kernel=st.sampled_from(["fwd", "bwd"]), wider=st.booleans(), excess=st.integers(1, 1000),
       at=st.integers(0, 10**6))
def test_a_plan_off_the_specs_limits_or_tiles_fails_by_its_own_rule(edit: str, cores: int, max_tasks: int, HV: int,
                                                                    T: int, kernel: str, wider: bool,
                                                                    excess: int, at: int) -> None:
    """plan_coverage holds each plan to the device spec: the real plan (launches at the limits: max_blocks is the
    core count) passes, and one launch or tile edited off them fails naming the rule: a tile not the widest the
    UB model fits, a launch of more blocks than max_blocks, a grid with an empty axis, a launch of more tasks
    than max_tasks (persistent mode). Each edit is its own test, so every rule runs whatever the draws."""
    case = Case(T=T, BT=16, HV=HV, knobs={"num_cores": cores, "max_blocks": cores, "max_tasks": max_tasks})
    check_plan_coverage(case)

    def edited(k: str, **kw: Any) -> Any:
        p = real_plan(k, **kw)
        if k != kernel:
            return p
        if edit in ("BK", "BV"):
            return dataclasses.replace(p, **{edit: getattr(p, edit) * 2 if wider else getattr(p, edit) // 2})
        i = at % len(p.launches)
        one = p.launches[i]
        one = (dataclasses.replace(one, grid=(cores + excess,)) if edit == "blocks" else
               dataclasses.replace(one, grid=(0,)) if edit == "empty" else
               dataclasses.replace(one, t_count=max_tasks + excess))
        return dataclasses.replace(p, launches=(*p.launches[:i], one, *p.launches[i + 1:]))

    expected = {"BK": f"^{kernel}: BK={32 if wider else 8} for K=16, but the widest tile the UB model fits is 16",
                "BV": f"^{kernel}: BV={32 if wider else 8} for V=16, but the widest tile the UB model fits is 16",
                "blocks": f"^{kernel}: a launch has {cores + excess} blocks > max_blocks {cores}$",
                "empty": rf"^{kernel}: launch grid \(0,\) has an empty axis$",
                "tasks": f"^{kernel}: a launch has [0-9]+ tasks > max_tasks {max_tasks}$"}[edit]
    with pytest.MonkeyPatch.context() as mp, pytest.raises(PropertyFailure, match=expected):
        mp.setattr(plan_coverage, "plan", edited)
        check_plan_coverage(case)


# ----------------------------------------------------------------------------- device specs


def test_device_specs_carry_each_devices_limits() -> None:
    specs = {name: device_spec(name, LaunchConfig()) for name in DEVICES}
    assert {specs[n].num_cores for n in ("npu-910B3-A2", "npu-910B2-A2", "npu-910_93-A3")} == {20, 24}
    assert all(specs[n].ub_bytes == 192 * 1024 and specs[n].max_blocks == 65535 for n in specs if n.startswith("npu-9"))
    assert specs["cuda-H200"].max_grid == CUDA_MAX_GRID == (2**31 - 1, 65535)
    cuda = specs["cuda-H200"]
    assert (cuda.mode, cuda.num_cores, cuda.max_blocks) == ("grid", 132, CUDA_MAX_BLOCKS)
    knobs = device_spec("npu-910_93-A3", LaunchConfig(num_cores=7, ub_bytes=48 * 1024))
    assert (knobs.num_cores, knobs.ub_bytes) == (7, 48 * 1024)  # the user's knobs over the device's own


@settings(max_examples=40, derandomize=True, database=None, deadline=None)
@given(calls=st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 7)), st.integers(0, 7)), min_size=1, max_size=6),
       sms=st.lists(st.integers(1, 200), min_size=8, max_size=8))
def test_a_cuda_device_s_core_grid_is_the_sm_count_of_that_device(calls: list[tuple[int | None, int]],
                                                                   sms: list[int]) -> None:
    """The cuda backend's persistent core grid (Backend.num_cores, read where no num_cores knob is given) is
    the SM count of the tensors' device, of the current device for an unindexed ``cuda`` as torch places
    tensors there, over drawn sequences of (index, current device) calls, on hosts of unlike GPUs: the
    per-device memo never answers for another device (stand-in properties: no GPU here)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.cuda, "get_device_properties", lambda i: SimpleNamespace(multi_processor_count=sms[i]))
        backends._device_cores.cache_clear()
        try:
            for index, current in calls:
                mp.setattr(torch.cuda, "current_device", lambda current=current: current)
                assert BACKENDS["cuda"].num_cores(torch.device("cuda", index)) == sms[current if index is None else index]
        finally:
            backends._device_cores.cache_clear()


@settings(max_examples=40, derandomize=True, database=None, deadline=None)
@given(calls=st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 7)), st.integers(0, 7)), min_size=1, max_size=6),
       cores=st.lists(st.integers(1, 64), min_size=8, max_size=8, unique=True))
def test_an_npu_device_s_core_grid_is_the_aicore_count_of_that_device(calls: list[tuple[int | None, int]],
                                                                      cores: list[int]) -> None:
    """The npu backend's core grid is the ``num_aicore`` Triton's Ascend driver reports for the tensors' device,
    for an unindexed ``npu`` the one torch_npu calls current, over drawn (index, current device) call sequences
    on hosts of unlike NPUs (stand-ins for torch.npu, the driver and the device: torch.device("npu") needs torch_npu)."""
    import triton.runtime

    def npu(index: int | None) -> Any:
        return SimpleNamespace(type="npu", index=index)

    utils = SimpleNamespace(get_device_properties=lambda i: {"num_aicore": cores[i]})
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(triton.runtime.driver, "active", SimpleNamespace(utils=utils))
        backends._device_cores.cache_clear()
        try:
            for index, current in calls:
                mp.setattr(torch, "npu", SimpleNamespace(current_device=lambda current=current: current), raising=False)
                assert BACKENDS["npu"].num_cores(npu(index)) == cores[current if index is None else index]
        finally:
            backends._device_cores.cache_clear()


KNOB = st.sampled_from([None, False, True])


@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(name=st.sampled_from(sorted(BACKENDS)), emulate=KNOB, dot_guard=KNOB, gate_head_major=KNOB,
       emulation_default=st.booleans())
def test_a_launch_variant_is_the_backend_s_own_but_for_the_knobs_and_never_unguarded_under_emulation(
        name: str, emulate: bool | None, dot_guard: bool | None, gate_head_major: bool | None,
        emulation_default: bool) -> None:
    """Backend.variant over every backend, variant knob and emulation default: emulation is asked of the
    interpreter only (ValueError naming the backend elsewhere), an unguarded variant under Ascend emulation
    is refused (a dot may clobber its reused operand there), and otherwise each knob overrides the backend."""
    backend = BACKENDS[name]
    config = LaunchConfig(emulate=emulate, dot_guard=dot_guard, gate_head_major=gate_head_major)
    guard = backend.dot_guard if dot_guard is None else dot_guard
    emulated = backend.interpret and (emulation_default if emulate is None else emulate)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(backends, "_emulation_default", lambda: emulation_default)
        if emulate and not backend.interpret:
            with pytest.raises(ValueError, match=f"config.emulate=True needs the cpu backend .*not '{name}'"):
                backend.variant(config)
        elif emulated and not guard:
            with pytest.raises(ValueError, match="config.dot_guard=False .* pass emulate=False"):
                backend.variant(config)
        else:
            head_major = backend.gate_head_major if gate_head_major is None else gate_head_major
            assert backend.variant(config) == (guard, head_major, emulated)


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(name=st.sampled_from(sorted(BACKENDS)), dk_sum_kernel=KNOB)
def test_the_dk_sum_kernel_knob_is_the_interpreter_s_alone(name: str, dk_sum_kernel: bool | None) -> None:
    """Backend.sums_dk_in_kernel: the knob, given, decides on the interpreter and is a ValueError naming the
    backend on the compiling ones (which keep their own way); unset, each backend's own way."""
    backend = BACKENDS[name]
    config = LaunchConfig(dk_sum_kernel=dk_sum_kernel)
    if dk_sum_kernel is not None and not backend.interpret:
        with pytest.raises(ValueError, match=f"config.dk_sum_kernel is for the cpu backend .*not '{name}'"):
            backend.sums_dk_in_kernel(config)
    else:
        assert backend.sums_dk_in_kernel(config) is (backend.dk_sum_kernel if dk_sum_kernel is None else dk_sum_kernel)


@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(case=plan_cases(), backend=st.sampled_from(["cpu", "npu", "cuda"]))
def test_a_case_without_a_device_plans_with_the_interpreter_s_cores(case: Case, backend: str) -> None:
    """plan_spec of a case without a device (drawn cases and knobs): a cpu case's is the spec its run plans
    with (the cpu backend's on the interpreter's nominal cores), and an npu or cuda case plans on as many
    cores (its num_cores knob where drawn), so plan_coverage checks the launches a cpu run makes."""
    case = case.replace(device=None, backend=backend)
    cpu = BACKENDS["cpu"].spec(torch.device("cpu"), case.config())
    spec = properties.plan_spec(case)
    assert spec.num_cores == cpu.num_cores == case.knobs.get("num_cores", DEVICES["cpu"][1])
    if backend == "cpu":
        assert spec == cpu


def test_plan_cases_cover_every_device_and_cases_it_cannot_plan() -> None:
    drawn = draw_many(plan_cases(), 300)
    assert set(DEVICES) <= {c.device for c in drawn}
    refused = [c for c in drawn if not properties.supported(c)]
    # refusals come from a smaller npu UB or from a drawn capacity outside UB_CHOICES (tile boundaries)
    assert any((c.device or "").startswith("npu") for c in refused)
    assert all((c.device or "").startswith("npu") or c.knobs.get("ub_bytes") not in UB_CHOICES for c in refused)
    assert any(c.knobs.get("ub_bytes", UB_CHOICES[0]) not in UB_CHOICES for c in drawn)
    for c in refused[:3]:
        assert "refused" in str(check_plan_coverage(c))


def test_cuda_plans_split_the_batch_head_axis_at_65535(monkeypatch) -> None:
    case = Case(T=1, H=1, HV=65536 + 5, device="cuda-H200")
    assert check_plan_coverage(case)["fwd"]["launches"] == 2
    # A planner blind to the y limit passes every other device (their block limit or core grid
    # bounds the same launch), so only the cuda spec catches it.
    real_split = planning.split_rectangle
    monkeypatch.setattr(planning, "split_rectangle",
                        lambda NT, BH, max_t, max_bh, max_area: real_split(NT, BH, max_t, 2**31 - 1, max_area))
    real_plan.cache_clear()
    try:
        with pytest.raises(PropertyFailure, match="exceeds the per-axis limit"):
            check_plan_coverage(case)
        for device in set(DEVICES) - {"cuda-H200", "cuda-A100"}:
            check_plan_coverage(case.replace(device=device))
    finally:
        real_plan.cache_clear()


def test_cuda_plans_keep_a_long_chunk_axis_in_one_launch_on_x() -> None:
    """CUDA's x axis holds 2**31-1 programs, y 65535: 70,000 chunks of one head are one launch of 70,000 x 1
    programs, which plan_coverage must pass (each axis against its own limit; a check of x against y's limit
    fails this plan)."""
    case = Case(B=1, T=16 * 70000, H=1, HV=1, BT=16, device="cuda-H200")
    metrics = check_plan_coverage(case)
    assert metrics["fwd"]["launches"] == metrics["bwd"]["launches"] == 1
    spec = device_spec("cuda-H200", LaunchConfig())
    assert spec.max_grid == CUDA_MAX_GRID and 70000 > spec.max_grid[1]


@settings(max_examples=80, derandomize=True, database=None, deadline=None)
@given(NT=st.integers(1, 12), BH=st.integers(1, 6), limit=st.tuples(st.integers(1, 12), st.integers(1, 6)))
def test_plan_coverage_fails_a_grid_past_either_axis_limit(NT: int, BH: int, limit: tuple[int, int]) -> None:
    """plan_coverage holds each axis of a grid launch to its own limit: over drawn task rectangles and
    per-axis limits, a planner blind to the limits (one NT x BH launch) fails exactly where NT or BH
    exceeds its axis's limit, and passes otherwise."""
    case = Case(B=1, T=16 * NT, H=BH, HV=BH, BT=16, device="cuda-H200")
    limited = dataclasses.replace(properties.plan_spec(case), max_grid=limit)

    def blind(kernel: str, **kw: Any) -> Any:
        return real_plan(kernel, **{**kw, "spec": dataclasses.replace(kw["spec"], max_grid=CUDA_MAX_GRID)})

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plan_coverage, "plan_spec", lambda c: limited)
        mp.setattr(plan_coverage, "plan", blind)
        assert blind("fwd", NT=NT, BH=BH, BT=16, K=16, V=16, spec=limited).launches[0].grid == (NT, BH)
        if NT > limit[0] or BH > limit[1]:
            with pytest.raises(PropertyFailure, match=rf"grid \({NT}, {BH}\) exceeds the per-axis limit"):
                check_plan_coverage(case)
        else:
            check_plan_coverage(case)


# ----------------------------------------------------------------------------- corruption positions


def test_the_decreasing_pair_lands_anywhere_in_cu_seqlens(backend: str) -> None:
    x = Case(cu_seqlens=(0, 3, 3, 9, 20)).build_inputs()
    for at in range(4):
        cu = CORRUPTIONS["cu_decreasing"](x, at)[0]["cu_seqlens"].tolist()
        assert [i for i in range(4) if cu[i + 1] < cu[i]] == [at], cu
    assert CORRUPTIONS["cu_decreasing"](x, 0)[0]["cu_seqlens"].tolist()[1] < 0  # a negative first length
    starts = {CORRUPTIONS["cu_not_starting_at_0"](x, at)[0]["cu_seqlens"][0].item() for at in range(6)}
    assert starts == {1, -1, 2, -2, 3, -3}
    for name in ("cu_decreasing", "cu_not_starting_at_0", "chunk_indices_wrong"):
        for at in range(6):
            check_bad_input(Case(cu_seqlens=(0, 3, 3, 9, 20), corruption=name, corrupt_at=at, backend=backend))


def test_bad_input_cases_draw_the_position() -> None:
    drawn = draw_many(bad_input_cases(), 300)
    assert len({c.corrupt_at for c in drawn}) >= 50
    # which pair of cu_seqlens varies, among batches of three or more sequences (drawn on their own: how many of
    # 300 derandomized draws are such batches depends on what the process imported before, which moves the draws)
    packed = draw_many(bad_input_cases().filter(lambda c: c.cu_seqlens is not None and len(c.cu_seqlens) >= 4), 60)
    pairs = Counter(c.corrupt_at % (len(c.cu_seqlens) - 1) for c in packed)
    assert len(pairs) >= 3, pairs


@pytest.mark.cpu_backend  # bit for bit there; a compiled backend's two programs may differ by a compile's rounding
def test_varlen_split_holds_a_fixed_batch_to_its_rows_packed(monkeypatch) -> None:
    """varlen_split draws fixed batches too: B rows of T tokens must give the bits of the same tokens
    packed as B sequences. The fixed and the packed index math share nothing but the chunk body, so a
    row offset wrong by a little (here: the packed run's last token of the last row nudged one unit)
    fails it even where it stays within the oracle's bound."""
    case = Case(B=3, T=20, H=1, HV=2, K=16, V=16, BT=16, use_g=True, backend="cpu")
    assert {"w", "u", "dk", "dv", "dbeta", "dg"} <= set(properties.check_varlen_split(case))
    real = properties.run_ops

    def nudged(c: Case, inputs: Any, **knobs: Any) -> Any:
        out = real(c, inputs, **knobs)
        if c.cu_seqlens is not None:
            out["dg"][0, -1, 0] = torch.nextafter(out["dg"][0, -1, 0], torch.tensor(float("inf")))
        return out

    monkeypatch.setattr(invariance, "run_ops", nudged)
    with pytest.raises(properties.PropertyFailure,
                       match="a fixed batch differs from its rows packed as sequences: dg: 1 elements differ"):
        properties.check_varlen_split(case)


@pytest.mark.cpu_backend
@pytest.mark.parametrize("check", ["varlen_split", "widened_gates"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_where_two_compiles_run_an_output_is_held_to_their_rounding_and_no_further(monkeypatch, check: str,
                                                                                   dtype: str) -> None:
    """The compiled branch of varlen_split (fixed batch against its rows packed) and of widened_gates, run here
    with the interpreter standing in for two compiles (``_two_programs`` / ``_compiles`` made true): every output
    carries the tolerance ``_compile_tolerances`` gives it for its dtype; a one-unit nudge passes within it and a
    swapped pair of tokens (a wrong row, O(1)) fails it by its rel_rms."""
    case = Case(B=2, T=20, H=1, HV=2, K=16, V=16, BT=16, use_g=True, dtype=dtype, backend="cpu")
    if check == "widened_gates" and dtype == "float32":
        case = case.replace(beta_dtype="bfloat16", g_dtype="bfloat16")  # gates narrower than k, to widen
    monkeypatch.setattr(invariance, "_two_programs" if check == "varlen_split" else "_compiles", lambda c: True)
    run = properties.check_varlen_split if check == "varlen_split" else properties.check_widened_gates
    metrics = run(case)
    got = properties.run_ops(case, invariance.build_inputs(case))
    want = invariance._compile_tolerances(got, invariance.FWD_NAMES + invariance.BWD_NAMES, case.BT)
    assert {name: row["tol"] for name, row in metrics.items()} == want and set(want) == set(got)
    real = invariance.run_ops
    for how in ("nudged", "swapped"):
        def changed(c: Case, inputs: Any, how: str = how, **knobs: Any) -> Any:
            out = real(c, inputs, **knobs)
            if c.cu_seqlens is not None or (check == "widened_gates" and inputs.beta.dtype == torch.float32):
                dk = out["dk"]
                if how == "nudged":
                    dk[0, -1, 0, 0] = torch.nextafter(dk[0, -1, 0, 0], torch.tensor(float("inf"), dtype=dk.dtype))
                else:
                    dk[:, :2] = dk[:, :2].flip(1).clone()
            return out

        monkeypatch.setattr(invariance, "run_ops", changed)
        if how == "nudged":
            run(case)
        else:
            with pytest.raises(properties.PropertyFailure, match=r"dk: rel_rms [0-9.e+-]+ > "):
                run(case)


@pytest.mark.parametrize(("subject", "backend", "two"), [
    ("wy_ascend", "cpu", False), ("wy_ascend", "cuda", True), ("wy_ascend", "npu", True),
    ("wy_ascend", "npu-cuda", True), ("fla-ascend", "cpu", True), ("fla-ascend", "npu", True),
    ("fla", "cpu", True), ("fla", "cuda", True)])
def test_a_fixed_and_a_packed_batch_are_two_programs_where_compiled_or_foreign(subject, backend, two) -> None:
    """varlen_split holds a fixed batch to its rows packed bit for bit only where one program runs both (this
    project's ops on the interpreter); a compiled backend compiles two, and a foreign subject takes two host
    paths (fla-ascend exponentiates a fixed batch's gates in torch, a packed one's in the kernel): there the
    two are held to the rounding of two compiles. Each subject on each backend it runs on."""
    case = Case(B=2, T=20, backend=backend, subject=subject)
    assert invariance._two_programs(case) is two
