"""The fuzz strategies draw valid, plannable cases, cover every layout feature, stay within
their cost budgets, and shrink to tiny cases."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import pytest
import torch
from drawing import QUIET, draw_many
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st

from fuzz import profiles
from fuzz.strategies import (
    BLOCK_LIMIT,
    CPU_SIZES,
    MIXED_LARGE_ONE_IN,
    SMALL_DIMS,
    VARLEN_KINDS,
    bad_input_cases,
    beyond_limit_plan_cases,
    case_host_bytes,
    cases,
    corruptions_adding_cu_seqlens,
    fit_lengths,
    index_width_cases,
    large_cases,
    layout_features,
    mixed_cases,
    num_chunks,
    plan_cases,
    plannable_chunk_sizes,
    tiles_per_task,
    varlen_lengths,
)
from wy_ascend import subjects
from wy_ascend.backends import BACKENDS
from wy_ascend.planning import plan
from wy_ascend.testing.case import LATER_FIELDS, LAUNCH_KNOBS, Case
from wy_ascend.testing.properties import CORRUPTIONS, PARTITION_KNOBS, supported
from wy_ascend.validation import validate


@pytest.fixture(scope="module")
def drawn() -> list[Case]:
    return draw_many(cases(), 400)


def tasks(case: Case) -> int:
    return len(case.chunk_bounds()) * case.HV


def test_cases_are_valid_and_plannable(drawn: list[Case]) -> None:
    for case in drawn:
        assert case.backend == "cpu" and case.corruption is None
        assert case.HV % case.H == 0 and 16 <= case.K <= 256 and 16 <= case.V <= 256
        assert supported(case), case
        if case.cu_seqlens is not None:
            assert case.B == 1 and case.cu_seqlens[0] == 0 and case.T == case.cu_seqlens[-1]
            assert all(a <= b for a, b in zip(case.cu_seqlens, case.cu_seqlens[1:]))
        assert case.B * case.T <= CPU_SIZES.max_tokens
        # The planner accepts every knob combination (DeviceSpec validates them).
        spec = BACKENDS["cpu"].spec(torch.device("cpu"), case.config(num_cores=case.knobs.get("num_cores")))
        plan("bwd", NT=max(1, len(case.chunk_bounds())), BH=case.B * case.HV, BT=case.BT, K=case.K, V=case.V,
             spec=spec)


def test_inputs_pass_validation(drawn: list[Case]) -> None:
    for case in drawn[:120]:
        x = case.build_inputs()
        p = validate(x.k, x.v, x.beta, x.A, x.g, x.cu_seqlens, dw=x.dw, du=x.du)
        assert (p.B, p.T, p.H, p.HV, p.K, p.V, p.BT) == (case.B, case.T, case.H, case.HV, case.K, case.V, case.BT)
        assert p.NT * p.B == len(case.chunk_bounds())


def test_cost_budget(drawn: list[Case]) -> None:
    """Tasks x tiles stay within max_tasks (the interpreter's cost unit), so CPU runs stay short."""
    for case in drawn:
        factor = max(1, tiles_per_task("cpu", case.BT, case.K, case.V, case.knobs) // 2)
        assert tasks(case) * factor <= max(CPU_SIZES.max_tasks, case.HV * factor), case


def test_every_field_varies(drawn: list[Case]) -> None:
    seen = {name: Counter(getattr(c, name) for c in drawn) for name in ("H", "BT", "dtype", "use_g", "dist")}
    assert set(seen["BT"]) == {16, 32, 64, 128}
    assert set(seen["dtype"]) == {"float32", "bfloat16", "float16"}
    assert set(seen["use_g"]) == {True, False}
    assert len(seen["dist"]) == 5 and 1 in seen["H"]
    ratios = Counter(c.HV // c.H for c in drawn)
    assert {1, 2, 3, 4, 6, 8} <= set(ratios)
    dims = {c.K for c in drawn} | {c.V for c in drawn}
    assert {16, 17, 24, 100, 256} <= dims and any(d & (d - 1) and d not in CPU_SIZES.dims for d in dims)
    knobs = Counter(k for c in drawn for k in c.knobs)
    assert set(knobs) == {"max_blocks", "num_cores", "ub_bytes", "mode", "tile_cap", "max_tasks", "dot_guard", "group_dk",
                          "gate_head_major", "emulate", "lowp_dot", "dk_sum_kernel"}
    # the cuda variant's bf16 dot operands, on their own and with the unguarded (cuda) variant
    lowp = [c for c in drawn if c.knobs.get("lowp_dot") and c.dtype == "bfloat16"]
    assert lowp and any(c.knobs.get("dot_guard") is False for c in lowp)
    # every kernel variant on the cpu backend, and the unguarded one never under the Ascend emulation
    assert {(c.knobs.get("dot_guard"), c.knobs.get("emulate")) for c in drawn} >= {(True, None), (False, False)}
    assert {c.knobs.get("gate_head_major") for c in drawn} >= {True, False}
    assert all(c.knobs.get("emulate") is False for c in drawn if c.knobs.get("dot_guard") is False)
    assert any(c.knobs.get("max_blocks") == 1 for c in drawn)
    assert any(c.knobs.get("mode") == "grid" for c in drawn)
    assert any(c.knobs.get("ub_bytes") == 48 * 1024 for c in drawn)
    assert sum(not c.knobs for c in drawn) >= 20  # default knobs are common


def test_layout_features_of_cases(drawn: list[Case]) -> None:
    features = Counter(f for c in drawn for f in layout_features(c))
    for name in ("fixed", "varlen", "one_sequence", "many_sequences", "empty_sequence", "length_1", "length_BT-1",
                 "length_BT", "length_BT+1", "T_not_multiple_of_BT", "batch"):
        assert features[name] >= 3, (name, features)
    # rare in this mix (a small case's chunk budget cuts the multiples family to one sequence: 0-2 in
    # 400 draws), so reached by a search instead; test_varlen_layout_features draws it at least 5 times
    # under a generous budget
    found = find(cases(), lambda c: "multiples_of_BT" in layout_features(c), settings=settings(QUIET, max_examples=2000))
    assert "multiples_of_BT" in layout_features(found)


def test_varlen_layout_features() -> None:
    """Every varlen layout family and feature appears, under a generous chunk budget."""
    features: Counter[str] = Counter()
    for BT in (16, 64):
        for lengths in draw_many(varlen_lengths(BT, CPU_SIZES, max_chunks=20), 300):
            cu = [0]
            for n in lengths:
                cu.append(cu[-1] + n)
            case = Case(cu_seqlens=tuple(cu), BT=BT)
            features.update(layout_features(case))
            assert num_chunks(lengths, BT) <= 20 and case.T <= CPU_SIZES.max_tokens
    for name in ("one_sequence", "many_sequences", "empty_sequence", "length_1", "length_BT-1", "length_BT",
                 "length_BT+1", "multiples_of_BT", "long_among_short", "no_tokens"):
        assert features[name] >= 5, (name, features)
    assert len(VARLEN_KINDS) == 6


def test_fit_lengths() -> None:
    assert fit_lengths([10, 20, 30], BT=16, max_chunks=10, max_tokens=35) == [10, 20, 5]
    assert fit_lengths([40, 5], BT=16, max_chunks=2, max_tokens=100) == [32]
    assert fit_lengths([0, 0, 3], BT=16, max_chunks=0, max_tokens=100) == [0, 0]
    assert fit_lengths([5], BT=16, max_chunks=0, max_tokens=0) == [0]


def test_flags() -> None:
    for case in draw_many(cases(varlen=True), 60):
        assert case.cu_seqlens is not None
    for case in draw_many(cases(varlen=False), 60):
        assert case.cu_seqlens is None
    for case in draw_many(cases(grouped=True), 60):
        assert case.HV > case.H
    for case in draw_many(cases(partition_knobs=True), 60):
        assert any(k in case.knobs for k in PARTITION_KNOBS)


def test_bad_input_cases() -> None:
    drawn = draw_many(bad_input_cases(), 1000)
    # most corruptions are drawn (1000 draws over 57 reach 54); tests/test_bad_input.py runs each explicitly too
    assert len({c.corruption for c in drawn}) >= len(CORRUPTIONS) - 5
    adds_cu = corruptions_adding_cu_seqlens()
    assert "cu_not_starting_at_0" in adds_cu and "k_wrong_ndim" not in adds_cu
    for c in drawn:
        assert c.T >= 1 and (c.corruption not in adds_cu or c.B == 1)


def test_every_drawn_case_survives_its_stored_form() -> None:
    """A regression file stores ``Case.to_dict`` as JSON and replays ``Case.from_dict`` of it: every
    case any strategy draws comes back equal, the fields ``to_dict`` leaves out at their default
    (LATER_FIELDS) included, which holds only while those defaults are the dataclass's own."""
    defaults = {f.name: f.default_factory() if f.default is dataclasses.MISSING else f.default
                for f in dataclasses.fields(Case) if f.name in LATER_FIELDS}
    assert defaults == LATER_FIELDS
    drawn = [*draw_many(cases(), 60), *draw_many(bad_input_cases(), 90), *draw_many(plan_cases(), 60),
             *draw_many(cases(memory=True, varlen=True), 60)]
    assert {c.corrupt_at for c in drawn if c.corruption} >= {0, 1}
    for case in drawn:
        assert Case.from_dict(json.loads(json.dumps(case.to_dict()))) == case


def test_plan_cases_cross_the_block_limit() -> None:
    drawn = draw_many(plan_cases(), 300)
    assert any(tasks(c) > BLOCK_LIMIT for c in drawn)
    assert max(len(c.chunk_bounds()) * c.B * c.HV for c in drawn) <= 4 * 2 * BLOCK_LIMIT + 10**5
    beyond = draw_many(beyond_limit_plan_cases(), 40)
    assert any(c.HV > BLOCK_LIMIT for c in beyond) and any(len(c.chunk_bounds()) * c.HV > BLOCK_LIMIT for c in beyond)
    assert all(c.B == 1 for c in beyond)


def test_large_cases() -> None:
    """Accelerator-sized cases: past the block limit on the task grid or the batch-head axis, and
    packed batches of hundreds of sequences and up to millions of tokens, within the byte budget."""
    sizes = profiles.LARGE_SIZES.scaled(large_bytes=64 * 2**30)
    drawn = draw_many(large_cases(sizes, "cpu"), 40)
    features = Counter(f for c in drawn for f in layout_features(c))
    assert features["tasks_beyond_block_limit"] >= 5
    assert features["batch_heads_beyond_block_limit"] >= 3
    assert features["hundreds_of_sequences"] >= 3
    # up to millions of tokens: searched for, not read off 40 draws (their stream depends on what
    # earlier tests of the session did to Hypothesis' global state)
    find(large_cases(sizes, "cpu", varlen=True), lambda c: c.T >= 10**6, settings=settings(QUIET, max_examples=500))
    assert all(case_host_bytes(c) <= sizes.large_bytes for c in drawn)
    for c in draw_many(large_cases(sizes, "npu", varlen=False), 10):
        assert c.BT in (16, 32, 64) and c.cu_seqlens is None  # BT=128 does not fit the 910B's UB


def test_shrinks_to_the_simplest_case() -> None:
    simplest = find(cases(), lambda c: True, settings=QUIET)
    assert simplest == Case(B=1, T=1, H=1, HV=1, K=16, V=16, BT=16, dtype="float32", use_g=False,
                            dist="realistic", seed=0, knobs={}, backend="cpu")
    # A condition on several fields shrinks everything else away.
    case = find(cases(varlen=True), lambda c: len(c.seq_lens) >= 3 and c.use_g and c.dtype == "bfloat16",
                settings=settings(QUIET, phases=list(Phase), max_examples=2000))
    assert case.cu_seqlens is not None and len(case.seq_lens) == 3 and case.T <= 3
    assert (case.H, case.HV, case.K, case.V, case.BT, case.seed, case.knobs, case.dist) == (
        1, 1, 16, 16, 16, 0, {}, "realistic")
    big = find(cases(), lambda c: tasks(c) >= 8, settings=settings(QUIET, phases=list(Phase), max_examples=2000))
    assert 8 <= tasks(big) <= 12 and big.knobs == {} and big.seed == 0 and big.dtype == "float32"


def test_profiles() -> None:
    correctness = set(profiles.PROPERTY_NAMES) - {profiles.PERF}
    # the nightly leaves index_width's real-size device runs (tens of GiB a case) to the large profile; history
    # runs on the cpu backend only (its server forks), which no accelerator profile runs
    left_out = {"nightly": {"index_width", "history"}, "large": {"history"}}
    for profile in profiles.PROFILES.values():
        expected = {profiles.PERF} if profile.name == "perf" else correctness - left_out.get(profile.name, set())
        assert set(profile.examples) == expected
        assert profile.hypothesis_settings().deadline is None
        # a device profile's failure shrinks, but is not explained (each rerun is a compile); the others
        # keep the default phases (all of them, unless a plugin changed the default: the mutant runner's)
        explains = Phase.explain in profile.hypothesis_settings().phases
        assert explains == (Phase.explain in settings.default.phases and not profile.accelerator)
    assert profiles.PROFILES["ci"].hypothesis_settings().derandomize
    assert profiles.PROFILES["ci"].hypothesis_settings().database is None
    assert profiles.PROFILES["dev"].hypothesis_settings().database is not None
    with pytest.raises(ValueError, match="profile must be one of"):
        profiles.select("nope")
    with pytest.raises(ValueError, match="times device kernels"):
        profiles.select("perf", "cpu")


def test_mixed_cases_draw_one_large_case_in_several() -> None:
    """The nightly profile's mix: large cases are drawn, but about one in MIXED_LARGE_ONE_IN."""
    drawn: list[bool] = []

    @settings(max_examples=800, database=None, derandomize=True)
    @given(mixed_cases(st.integers(0, 10**6), st.integers(2 * 10**6, 3 * 10**6)))
    def draw(x: int) -> None:
        drawn.append(x >= 2 * 10**6)

    draw()
    share = sum(drawn) / len(drawn)
    assert 0.4 / MIXED_LARGE_ONE_IN <= share <= 2.0 / MIXED_LARGE_ONE_IN, share


@pytest.mark.parametrize("name", sorted(subjects.SUBJECTS))
def test_each_subjects_draws_reach_everything_its_claims_take(name: str) -> None:
    """A subject's draws (``cases`` with its name) cover its claims (``subjects.Claims``), not only stay within
    them: every dtype and chunk size it takes, fixed and packed batches with and without chunk_indices, both
    index dtypes, gates of another dtype, grouped heads, dims below 16 and not powers of two where it takes
    them, every knob it takes (none it does not) and views where it takes them. A strategy that silently
    narrows (a claim read backwards, a branch that stops drawing) shows as a value never drawn."""
    claims = subjects.get(name).claims
    foreign = subjects.get(name).foreign
    sizes = CPU_SIZES.scaled(small_dims=SMALL_DIMS) if foreign else CPU_SIZES
    drawn = draw_many(st.booleans().flatmap(lambda memory: cases(sizes, "cpu", memory=memory, subject=name)), 400)
    assert {c.subject for c in drawn} == {name}
    assert {c.dtype for c in drawn} == set(claims.dtypes)
    assert {c.BT for c in drawn} == set(claims.chunk_sizes) & set(plannable_chunk_sizes("cpu") if not foreign
                                                                   else claims.chunk_sizes)
    assert {(c.cu_seqlens is not None, c.chunk_indices) for c in drawn} == (
        {(False, False), (True, False), (True, True)} if claims.varlen else {(False, False)})
    assert {c.index_dtype for c in drawn if c.cu_seqlens is not None} == ({"int32", "int64"} if claims.varlen else set())
    assert {c.use_g for c in drawn} == {True, False}
    other_gates = [c for c in drawn if c.beta_dtype not in (None, c.dtype) or c.g_dtype not in (None, c.dtype)]
    assert bool(other_gates) == claims.gate_dtypes
    ratios = {c.HV // c.H for c in drawn}
    assert any(r > 1 for r in ratios) and (claims.head_ratios is None or ratios <= set(claims.head_ratios))
    dims = {d for c in drawn for d in (c.K, c.V)}
    assert claims.dims[0] <= min(dims) and max(dims) <= claims.dims[1]
    assert any(d & (d - 1) for d in dims) == (not claims.pow2_dims)
    assert any(d < 16 for d in dims) == (foreign and claims.dims[0] < 16)
    assert {k for c in drawn for k in c.knobs} == {k for k in LAUNCH_KNOBS if claims.takes(k)}
    assert any(layout != "offset" for c in drawn for layout in c.memory.values()) == claims.strided


@pytest.mark.parametrize("backend", ["cpu", "cuda", "npu"])
def test_index_width_cases_draw_the_gates_class_only_where_the_run_is_virtual(backend: str) -> None:
    """Every index_width case reaches 2**31 elements (A's, or the gates'); the gates class (value heads x
    tokens past 2**31) only on the cpu backend, whose audit is virtual: at real size its A alone is 2**31 x
    BT elements, past any device's memory (a device run of one asked for 65 GiB for k alone on an H100)."""
    drawn = draw_many(index_width_cases(backend), 40)
    gates = [c for c in drawn if c.B * c.T * c.HV >= 2**31]
    assert all(c.B * c.T * c.HV * c.BT >= 2**31 for c in drawn)
    assert bool(gates) == (backend == "cpu") and len(gates) < len(drawn)
