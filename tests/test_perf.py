"""The performance property's arithmetic (wy_ascend/testing/perf.py) on the CPU: the bytes an op
must move, and the verdict on given times. The timing itself runs on a device (``nox -s fuzz --
--profile perf --backend cuda``)."""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from wy_ascend.testing import perf
from wy_ascend.testing.case import Case


def test_compulsory_bytes_count_every_input_once_and_every_output_once() -> None:
    inputs = Case(B=2, T=40, H=2, HV=4, K=24, V=20, BT=16, dtype="bfloat16", use_g=True).build_inputs()
    B, T, H, HV, K, V, BT = 2, 40, 2, 4, 24, 20, 16
    fwd_out = {"w": torch.empty(B, T, HV, K, dtype=torch.bfloat16), "u": torch.empty(B, T, HV, V, dtype=torch.bfloat16)}
    reads = 2 * B * T * (H * K + HV * V + HV + HV * BT + HV)  # k, v, beta, A, g in bf16
    assert perf.compulsory_bytes(inputs, fwd_out, "fwd") == reads + 2 * B * T * HV * (K + V)
    bwd_out = {"dk": torch.empty(B, T, H, K, dtype=torch.bfloat16), "dv": torch.empty(B, T, HV, V, dtype=torch.bfloat16),
               "dbeta": torch.empty(B, T, HV, dtype=torch.bfloat16), "dg": torch.empty(B, T, HV, dtype=torch.bfloat16)}
    bwd_reads = reads + 2 * B * T * HV * (K + V)  # + dw, du
    assert perf.compulsory_bytes(inputs, bwd_out, "bwd") == bwd_reads + 2 * B * T * (H * K + HV * V + 2 * HV)


def _row(device_ms: float, bound_ms: float, peer_ms: float | None = None, time_ms: float | None = None) -> dict[str, float]:
    """A measured row: the bound is judged on device_ms, the peer on time_ms (default: device_ms)."""
    row = {"time_ms": device_ms if time_ms is None else time_ms, "device_ms": device_ms, "bytes": 1e6, "bound_ms": bound_ms}
    return row if peer_ms is None else {**row, "peer_ms": peer_ms}


def test_times_within_the_factors_pass_with_their_ratios() -> None:
    metrics = perf.compare({"fwd": _row(3.9, 1.0, 3.0), "bwd": _row(7.9, 1.0)})
    assert metrics["fwd"]["ratio_to_bound"] == pytest.approx(3.9) and metrics["fwd"]["limit_to_bound"] == perf.C_FWD
    assert metrics["fwd"]["ratio_to_peer"] == pytest.approx(1.3)
    assert "ratio_to_peer" not in metrics["bwd"]


@pytest.mark.parametrize("rows, words", [
    ({"fwd": _row(4.1, 1.0), "bwd": _row(1.0, 1.0)}, ["fwd", "4.1x the bound"]),
    ({"fwd": _row(1.0, 1.0), "bwd": _row(8.5, 1.0)}, ["bwd", "8.5x the bound"]),
    ({"fwd": _row(1.0, 1.0, 0.5), "bwd": _row(1.0, 1.0, 1.0)}, ["fwd", "2.00x fla-core"]),
    ({"fwd": _row(100.0, 1.0, 1.0), "bwd": _row(230.0, 1.0, 1.0)}, ["fwd", "bwd", "100.0x", "230.0x"]),  # a cliff
    # host time past the peer's fails the peer ratio even where the device time is within the bound
    ({"fwd": _row(1.0, 1.0, 0.1, time_ms=0.2), "bwd": _row(1.0, 1.0)}, ["fwd", "2.00x fla-core"]),
])
def test_a_time_past_either_limit_fails_naming_the_op_and_the_limit(rows, words) -> None:
    with pytest.raises(perf.PerfFailure) as info:
        perf.compare(rows)
    for word in words:
        assert word in str(info.value)


def test_a_one_off_slow_measurement_passes_and_a_repeated_one_fails() -> None:
    """A case fails only when each of ATTEMPTS measurements is past a limit, with the last one's metrics."""
    def measurements(*device_ms: float):  # noqa: ANN202 - an iterator of fresh rows
        return iter([{"fwd": _row(ms, 1.0), "bwd": _row(1.0, 1.0)} for ms in device_ms])

    once = measurements(9.0, 1.5)
    assert perf.confirmed(lambda: next(once))["fwd"]["ratio_to_bound"] == pytest.approx(1.5)
    every = measurements(*[9.0 + i for i in range(perf.ATTEMPTS)])
    with pytest.raises(perf.PerfFailure, match=f"in each of {perf.ATTEMPTS} measurements") as info:
        perf.confirmed(lambda: next(every))
    assert info.value.args[1]["fwd"]["ratio_to_bound"] == pytest.approx(9.0 + perf.ATTEMPTS - 1)
    assert perf.ATTEMPTS >= 2


@pytest.mark.cpu_backend
def test_the_property_refuses_the_cpu_backend() -> None:
    from wy_ascend.testing.properties import PropertyFailure, run_property

    with pytest.raises(PropertyFailure, match="device backend"):
        run_property("perf", Case(T=16, dtype="bfloat16", backend="cpu"))


def test_perf_cases_cover_the_grid_and_shrink_to_the_smallest_shape() -> None:

    from hypothesis import Phase, find, settings

    from fuzz.strategies import PERF_DIMS, PERF_MAX_ROWS, perf_cases

    # Derandomized, generation only: the same examples whatever earlier tests did to Hypothesis
    # (a random search of 500 missed one of the ~1-in-55 combinations in a generated-mutant run).
    quiet = settings(database=None, derandomize=True, max_examples=2000)
    smallest = find(perf_cases("cuda"), lambda c: True, settings=quiet)
    assert (smallest.K, smallest.V, smallest.H, smallest.HV, smallest.B, smallest.T) == (16, 16, 1, 1, 1, 1024)
    for dim in PERF_DIMS:
        wide = find(perf_cases("cuda"), lambda c, d=dim: c.K == d and c.V != d and c.HV == 4 * c.H and c.cu_seqlens,
                    settings=settings(quiet, phases=[Phase.generate]))
        assert wide.B * wide.T * wide.HV <= PERF_MAX_ROWS and wide.dtype == "bfloat16" and wide.use_g


@pytest.mark.cpu_backend
def test_the_timed_calls_are_the_ops_own_calls_and_the_floor_is_one_program(monkeypatch) -> None:
    """What gets timed (on the cpu backend here, with a timer that runs its function once): the
    copy, a one-program launch, and the forward and backward with the case's own arguments."""
    from wy_ascend.ops import prepare_wy_repr_bwd, recompute_w_u_fwd

    ran: list[object] = []

    def once(fn):
        ran.append(fn())
        return 0.5

    monkeypatch.setattr(perf, "do_bench", once)
    monkeypatch.setattr(perf, "device_time", once)
    monkeypatch.setattr(perf, "COPY_BYTES", 1 << 12)
    assert perf.device_limits.__wrapped__("cpu") == ((1 << 12) / 0.5, 0.5)
    case = Case(B=1, T=40, H=1, HV=2, K=24, V=20, BT=16, use_g=True, cu_seqlens=(0, 17, 40), backend="cpu")
    k, v, beta, A, g, dw, du, cu = inputs = case.build_inputs()
    monkeypatch.setattr(perf, "device_limits", lambda device: (1e6, 1e-3))
    monkeypatch.setattr(perf, "peer_ops", lambda: None)
    poisoned: list[bool] = []  # what the timed calls pay: the op only, no NaN fill of its outputs first

    def spy(op):
        def call(*args, **kwargs):
            poisoned.append(kwargs["config"].poison_outputs)
            return op(*args, **kwargs)
        return call

    monkeypatch.setattr(perf, "recompute_w_u_fwd", spy(recompute_w_u_fwd))
    monkeypatch.setattr(perf, "prepare_wy_repr_bwd", spy(prepare_wy_repr_bwd))
    ran.clear()
    metrics = perf.measure(case, inputs, timer=once, device_timer=once)
    assert metrics["fwd"]["time_ms"] == metrics["bwd"]["time_ms"] == metrics["bwd"]["device_ms"] == 0.5
    for row in metrics.values():  # one launch, then the compulsory bytes at the copy's bandwidth
        assert row["bound_ms"] == pytest.approx(1e-3 + row["bytes"] / 1e6)
    assert len(ran) == 2 * (perf.ROUNDS + 1)  # each op: ROUNDS do_bench medians, then its device time
    fwd, bwd = ran[0], ran[perf.ROUNDS + 1]
    assert poisoned and not any(poisoned)
    want_fwd = recompute_w_u_fwd(k, v, beta, A, g, cu, backend="cpu")
    want_bwd = prepare_wy_repr_bwd(k, v, beta, A, dw, du, g, cu, backend="cpu")
    for got, want in ((fwd, want_fwd), (bwd, want_bwd)):
        assert len(got) == len(want) and all(torch.equal(a, b) for a, b in zip(got, want))
    for op, want, names in (("fwd", want_fwd, ("w", "u")), ("bwd", want_bwd, ("dk", "dv", "dbeta", "dg"))):
        assert metrics[op]["bytes"] == perf.compulsory_bytes(inputs, dict(zip(names, want, strict=True)), op)


def test_garbage_left_before_the_measurement_is_collected_before_the_first_timed_call(monkeypatch) -> None:
    """A compile leaves cyclic garbage behind, which only a full collection frees: collected before the
    first timed call, not during one (where a full collection would be timed as the op's)."""
    import gc
    import weakref

    class Node:
        pass

    case = Case(B=1, T=16, H=1, HV=1, K=16, V=16, BT=16, backend="cpu")
    inputs = case.build_inputs()
    results = {op: fn() for op, fn in ((op, by["ours"]) for op, by in perf.op_calls(case, inputs).items())}
    monkeypatch.setattr(perf, "op_calls", lambda case, inputs: {op: {"ours": lambda r=r: r} for op, r in results.items()})
    monkeypatch.setattr(perf, "device_limits", lambda device: (1e6, 1e-3))
    node = Node()
    node.cycle = node
    alive = weakref.ref(node)
    gc.collect()  # the cycle is now in the oldest generation, which only a full collection visits
    del node
    seen: list[bool] = []

    def timer(fn):
        seen.append(alive() is not None)
        fn()
        return 0.5

    perf.measure(case, inputs, timer=timer, device_timer=timer)
    assert seen and not seen[0], "the garbage was still there at the first timed call"


def test_providers_take_turns_and_the_least_median_counts() -> None:
    """A warm-up transient stretches one round of each provider, not every round of the first."""
    order: list[str] = []
    times = {"ours": iter([9.0, 1.0, 2.0]), "peer": iter([3.0, 4.0, 0.5])}

    def timer(fn):
        order.append(fn())
        return next(times[order[-1]])

    assert perf.least_medians([lambda: "ours", lambda: "peer"], timer) == [1.0, 0.5]
    assert order == ["ours", "peer"] * perf.ROUNDS


def test_without_cuda_the_device_time_is_do_bench_s(monkeypatch) -> None:
    """An NPU has no spin kernel to hide the host behind: there the device time is the least of
    do_bench's medians, host work included (the only path an NPU takes; not run on one)."""
    medians = iter([2.0, 1.5, 3.0])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(perf, "do_bench", lambda fn: next(medians))
    assert perf.device_time(lambda: None) == 1.5


def test_a_launch_floor_whose_kernel_did_not_run_once_is_refused(monkeypatch) -> None:
    """device_limits times the launch floor on a one-program kernel that writes its grid size; a timing in
    which that kernel did not run as one program (here the timer never calls it) is an error, never a floor."""
    monkeypatch.setattr(perf, "least_medians", lambda fns: [1.0 for _ in fns])
    monkeypatch.setattr(perf, "device_time", lambda fn: 0.001)
    with pytest.raises(RuntimeError, match="the launch floor's kernel ran 0 programs, not 1"):
        perf.device_limits("cpu")


@pytest.mark.parametrize("warmed", [None, "summary of the warm-up"])
def test_the_property_compiles_first_then_measures_and_a_slow_result_fails(monkeypatch, capsys, warmed) -> None:
    """check_perf on a device (stand-ins for the device, the warm-up and the timing: no GPU here): the kernels
    are compiled first by the warm-up, whose summary goes to stderr where there is one; then the measurement,
    confirmed, is the metrics; a PerfFailure is a PropertyFailure naming the bound."""
    import types

    from wy_ascend.testing import warm
    from wy_ascend.testing.failure import PropertyFailure
    from wy_ascend.testing.properties import perf as perf_property

    case = Case(T=20, backend="cuda")
    calls: list[str] = []
    monkeypatch.setattr(perf_property, "device_of", lambda c: torch.device("cuda"))
    monkeypatch.setattr(perf_property, "build_inputs", lambda c: calls.append("inputs") or "inputs")
    result = None if warmed is None else types.SimpleNamespace(summary=lambda: warmed)
    monkeypatch.setattr(warm, "warm", lambda c: calls.append("warm") or result)
    monkeypatch.setattr(perf, "measure", lambda c, inputs: calls.append(f"measure {inputs}") or {"fwd": {"ms": 1.0}})
    monkeypatch.setattr(perf, "confirmed", lambda measured: measured())
    assert perf_property.check_perf(case) == {"fwd": {"ms": 1.0}}
    assert calls == ["warm", "inputs", "measure inputs"]
    assert capsys.readouterr().err == ("" if warmed is None else f"{warmed}\n")

    def slow(measured):  # noqa: ANN001, ANN202
        raise perf.PerfFailure("fwd: 9 ms > bound 2 ms", {"fwd": {"ms": 9.0}})
    monkeypatch.setattr(perf, "confirmed", slow)
    with pytest.raises(PropertyFailure, match="slower than the bound: fwd: 9 ms > bound 2 ms"):
        perf_property.check_perf(case)


@settings(max_examples=20, derandomize=True, database=None, deadline=None)
@given(median=st.one_of(st.integers(0, 10**6), st.floats(0, 1e6)))
def test_do_bench_is_one_triton_median_over_the_set_warmup_and_repetition(median: float) -> None:
    """perf.do_bench asks triton.testing.do_bench (a stand-in recording its call) for the median of ``fn`` with
    WARMUP_MS and REP_MS, and returns it as a float, over drawn medians (ints too: float(...) of any)."""
    import triton.testing

    asked: list[tuple[Any, dict[str, Any]]] = []

    def bench(fn: Any, **kw: Any) -> float:
        asked.append((fn, kw))
        return median

    def fn() -> None:
        return None

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(triton.testing, "do_bench", bench)
        got = perf.do_bench(fn)
    assert type(got) is float and got == float(median)
    assert asked == [(fn, {"warmup": perf.WARMUP_MS, "rep": perf.REP_MS, "return_mode": "median"})]


class _FakeCuda:
    """A stand-in torch.cuda whose events time what the test draws: the log is the order of the device work."""

    def __init__(self, durations: list[float]) -> None:
        self.log: list[str] = []
        self.durations = iter(durations)
        outer = self

        class Event:
            def __init__(self, enable_timing: bool) -> None:
                assert enable_timing

            def record(self) -> None:
                outer.log.append("record")

            def elapsed_time(self, end: Any) -> float:
                return next(outer.durations)

        self.Event = Event

    def is_available(self) -> bool:
        return True

    def synchronize(self) -> None:
        self.log.append("sync")

    def _sleep(self, cycles: int) -> None:
        self.log.append(f"sleep {cycles}")


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(durations=st.lists(st.floats(0.001, 100), min_size=1, max_size=9))
def test_cuda_device_time_is_the_median_event_time_of_flushed_spun_calls(durations: list[float]) -> None:
    """device_time on cuda (stand-in torch.cuda, events timing drawn durations): one warm call, then per rep an
    L2 flush of L2_FLUSH_BYTES, a spin of SLEEP_CYCLES, and the call between its start and end events, one
    synchronize after all; the time is the median of the reps' event times (torch's lower median)."""
    cuda = _FakeCuda(durations)

    class Flush:
        def zero_(self) -> None:
            cuda.log.append("flush")

    made: list[tuple[Any, ...]] = []

    def empty(n: int, dtype: Any, device: str) -> Flush:
        made.append((n, dtype, device))
        return Flush()

    fake = SimpleNamespace(cuda=cuda, empty=empty, uint8=torch.uint8, tensor=torch.tensor)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(perf, "torch", fake)
        got = perf.device_time.__wrapped__(lambda: cuda.log.append("call"), reps=len(durations))
    assert got == float(torch.tensor(durations).median())
    rep = ["flush", f"sleep {perf.SLEEP_CYCLES}", "record", "call", "record"]
    assert cuda.log == ["call", "sync", *rep * len(durations), "sync"]
    assert made == [(perf.L2_FLUSH_BYTES, torch.uint8, "cuda")]


def test_the_l2_flush_is_at_least_what_each_installed_tritons_do_bench_zeroes(monkeypatch: pytest.MonkeyPatch) -> None:
    """device_time flushes the L2 as triton.testing.do_bench does, so its times and do_bench's see the same cold
    cache: L2_FLUSH_BYTES is at least the buffer each installed Triton backend's driver zeroes for do_bench
    (its ``get_empty_cache_for_benchmark``, asked here with the allocation recorded, not made)."""
    from triton.backends import backends

    sizes: list[int] = []

    def empty(n: int, dtype: torch.dtype, device: str) -> None:
        sizes.append(int(n) * dtype.itemsize)

    monkeypatch.setattr(torch, "empty", empty)
    for backend in backends.values():
        backend.driver.get_empty_cache_for_benchmark(None)
    assert sizes and all(perf.L2_FLUSH_BYTES >= size for size in sizes), (perf.L2_FLUSH_BYTES, sizes)


def _fake_fla(mp: pytest.MonkeyPatch, fwd: Any, bwd: Any) -> None:
    """Put a stand-in fla-core (fla.ops.gated_delta_rule.wy_fast with ``fwd`` and ``bwd``) in sys.modules."""
    wy_fast = types.ModuleType("fla.ops.gated_delta_rule.wy_fast")
    wy_fast.recompute_w_u_fwd, wy_fast.prepare_wy_repr_bwd = fwd, bwd
    gdr = types.ModuleType("fla.ops.gated_delta_rule")
    gdr.wy_fast = wy_fast
    for name, module in (("fla", types.ModuleType("fla")), ("fla.ops", types.ModuleType("fla.ops")),
                         ("fla.ops.gated_delta_rule", gdr), ("fla.ops.gated_delta_rule.wy_fast", wy_fast)):
        mp.setitem(sys.modules, name, module)


@settings(max_examples=10, derandomize=True, database=None, deadline=None)
@given(ours=st.floats(0.01, 10), peer=st.floats(0.01, 10))
def test_with_fla_core_installed_its_ops_are_timed_on_the_same_tensors_as_the_peer(ours: float, peer: float) -> None:
    """With fla-core importable (a stand-in module), peer_ops is its wy_fast forward and backward, op_calls adds
    "fla" calls passing the case's own tensors in fla's order, and measure reports their time as peer_ms
    (drawn times: ours and the peer's stay apart)."""
    case = Case(B=1, T=20, H=1, HV=1, K=16, V=16, BT=16, use_g=True, backend="cpu")
    inputs = case.build_inputs()
    k, v, beta, A, g, dw, du, cu = inputs
    got: list[tuple[str, tuple[Any, ...]]] = []
    with pytest.MonkeyPatch.context() as mp:
        def fla_fwd(*a: Any) -> str:
            got.append(("fwd", a))
            return "peer"

        def fla_bwd(*a: Any) -> str:
            got.append(("bwd", a))
            return "peer"

        _fake_fla(mp, fla_fwd, fla_bwd)
        assert perf.peer_ops() == (fla_fwd, fla_bwd)
        calls = perf.op_calls(case, inputs)
        assert set(calls["fwd"]) == set(calls["bwd"]) == {"ours", "fla"}
        calls["fwd"]["fla"](), calls["bwd"]["fla"]()
        assert [op for op, _ in got] == ["fwd", "bwd"]
        for (_, args), want in zip(got, ((k, v, beta, A, g, cu), (k, v, beta, A, dw, du, g, cu))):
            assert len(args) == len(want) and all(a is b for a, b in zip(args, want))
        results = {"fwd": (torch.zeros(1),) * 2, "bwd": (torch.zeros(1),) * 4}  # ours' outputs: their bytes only
        mp.setattr(perf, "op_calls", lambda case, inputs: {op: {"ours": lambda r=r: r, "fla": lambda: "peer"}
                                                           for op, r in results.items()})
        mp.setattr(perf, "device_limits", lambda device: (1e6, 1e-3))
        metrics = perf.measure(case, inputs, timer=lambda fn: peer if fn() == "peer" else ours,
                               device_timer=lambda fn: ours)
    assert all(row["time_ms"] == ours and row["peer_ms"] == peer for row in metrics.values())


def test_confirmed_without_attempts_raises_rather_than_passing(monkeypatch) -> None:
    """confirmed's fall-through after its attempts (reached only with ATTEMPTS 0, as ATTEMPTS is 2) raises
    instead of returning None, which would read as a pass: no measurement is taken."""
    monkeypatch.setattr(perf, "ATTEMPTS", 0)
    with pytest.raises(AssertionError, match="unreachable"):
        perf.confirmed(lambda: pytest.fail("measured with no attempts"))
