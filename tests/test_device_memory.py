"""The device-memory ledger that keeps cases of several processes on one device within its memory."""

from __future__ import annotations

import json
import multiprocessing
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzz.strategies import HEAD_RATIOS, host_bytes_per_token
from wy_ascend.testing.case import DTYPES, Case
from wy_ascend.testing.device_memory import MIN_RESERVATION, Ledger, case_bytes, reserved_for
from wy_ascend.validation import MAX_DIM, SUPPORTED_BT

SIZES = ("B", "T", "H", "HV", "K", "V", "BT")  # every size an input's shape is made of


def _hold(path: str, nbytes: int, seconds: float, started) -> None:
    ledger = Ledger("test", 100, directory=Path(path))
    with ledger.reserved(nbytes):
        started.set()
        time.sleep(seconds)


def test_a_reservation_waits_for_room_and_a_lone_large_one_runs(tmp_path) -> None:
    """Reservations past the budget wait until the others release; one larger than the budget runs
    when nothing else is held (alone); a dead process's reservation is dropped."""
    ledger = Ledger("test", 100, directory=tmp_path)
    ctx = multiprocessing.get_context("fork")
    started = ctx.Event()
    other = ctx.Process(target=_hold, args=(str(tmp_path), 70, 1.0, started))
    other.start()
    assert started.wait(30)
    assert not ledger.try_reserve(40)  # 70 + 40 > 100
    assert ledger.try_reserve(30)  # 70 + 30 fits
    ledger.release()
    began = time.perf_counter()
    with ledger.reserved(40):
        assert time.perf_counter() - began > 0.5  # waited for the other to release
    other.join()
    assert ledger.try_reserve(1000)  # alone: a case larger than the budget still runs
    ledger.release()
    dead = {"held": {"999999999": 90}, "waiting": {"999999998": [0, 100]}, "next": 1}  # no such processes
    ledger.path.write_text(json.dumps(dead))
    assert ledger.try_reserve(50)
    ledger.release()
    assert json.loads(ledger.path.read_text()) == {"held": {}, "waiting": {}, "next": 1}  # the dead dropped
    ledger.path.write_text(json.dumps({"4242": 90}))  # another format (an older ledger): read as empty
    assert ledger.try_reserve(50)
    ledger.release()


def _try(path: str, nbytes: int, answer) -> None:
    ledger = Ledger("test", 100, directory=Path(path))
    answer.put(ledger.try_reserve(nbytes))
    ledger.release()
    ledger.withdraw()


def test_a_waiter_is_not_overtaken_by_later_requests_that_would_delay_it(tmp_path) -> None:
    """First come, first served: while a large reservation waits for room, a later small one that would
    fit beside the held ones but not beside the waiter's bytes waits too (an H200 nightly's replay waiting
    to run alone was, likely, overtaken for minutes by seven workers' small cases); the waiter, once in,
    holds its bytes; a wait given up leaves the queue."""
    ledger = Ledger("test", 100, directory=tmp_path)
    ctx = multiprocessing.get_context("fork")
    started, answer = ctx.Event(), ctx.Queue()
    holder = ctx.Process(target=_hold, args=(str(tmp_path), 50, 1.0, started))
    holder.start()
    assert started.wait(30)

    def later(nbytes: int) -> bool:
        child = ctx.Process(target=_try, args=(str(tmp_path), nbytes, answer))
        child.start()
        child.join(30)
        return answer.get(timeout=30)

    assert not ledger.try_reserve(100)  # 50 + 100 > 100: this process waits, first in the queue
    assert not later(10)  # 50 held + 100 ahead + 10 > 100, though 50 + 10 would fit
    holder.join()
    assert ledger.try_reserve(100)  # the holder gone: the waiter's turn
    assert not later(1)
    ledger.release()
    assert later(1)
    assert ledger.try_reserve(10**6)  # alone on an empty device: granted
    ledger.release()

    import pytest

    import wy_ascend.testing.device_memory as dm

    ledger.path.write_text(json.dumps({"held": {"1": 90}, "waiting": {}, "next": 5}))  # pid 1 is alive

    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dm.time, "sleep", interrupted)
        with pytest.raises(KeyboardInterrupt):
            ledger.reserve(20)
    assert json.loads(ledger.path.read_text())["waiting"] == {}  # the wait given up left the queue


def test_case_bytes_grow_with_the_case_and_have_a_floor() -> None:
    small, large = Case(T=16), Case(B=4, T=2**20, H=4, HV=8, K=128, V=128, BT=64)
    assert case_bytes(small) == MIN_RESERVATION
    assert case_bytes(large) == 8 * case_bytes(large.replace(B=1, T=2**19)) > 8 * MIN_RESERVATION  # linear in tokens


def test_a_perf_run_reserves_the_timings_buffers_beside_its_case(tmp_path, monkeypatch) -> None:
    """perf's timing allocates its own device buffers beside a case's tensors (device_limits' copy source
    and destination, device_time's L2 flush): a perf run's reservation holds them too, other properties'
    do not (a small perf case once reserved the 512 MiB floor while the timing alone took 1.25 GiB)."""
    import wy_ascend.testing.device_memory as dm
    from wy_ascend.testing import perf

    ledger = Ledger("test", 1 << 40, directory=tmp_path)
    monkeypatch.setattr(dm, "ledger_for", lambda case: ledger)
    assert perf.SCRATCH_BYTES == perf.COPY_BYTES + perf.L2_FLUSH_BYTES
    for case in (Case(backend="cuda", T=16), Case(backend="cuda", B=2, T=2**16, H=2, HV=4, K=64, V=64)):
        for prop, extra in (("perf", perf.SCRATCH_BYTES), ("oracle", 0), (None, 0)):
            with reserved_for(case, prop):
                held = json.loads(ledger.path.read_text())["held"]
                assert list(held.values()) == [case_bytes(case) + extra], prop


def test_the_cpu_backend_reserves_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("WY_ASCEND_DEVICE_LEDGER_DIR", str(tmp_path))
    with reserved_for(Case(backend="cpu")):
        assert not list(tmp_path.iterdir())


def test_a_property_that_builds_no_tensor_reserves_nothing(tmp_path, monkeypatch) -> None:
    """plan_coverage builds no tensor: it neither waits for room nor takes any (no ledger is even read)."""
    import wy_ascend.testing.device_memory as dm

    monkeypatch.setattr(dm, "ledger_for", lambda case: (_ for _ in ()).throw(AssertionError("ledger read")))
    with reserved_for(Case(backend="cuda"), "plan_coverage"):
        pass


def test_out_of_memory_beside_others_runs_again_alone(tmp_path, monkeypatch) -> None:
    """An out-of-memory error while other processes hold reservations is no verdict: the case runs again
    holding the whole budget, after the others released theirs, the allocator's cache returned before each
    release; out of memory alone, or any other error, is the case's own and is raised."""
    import torch

    import wy_ascend.testing.device_memory as dm

    ledger = Ledger("test", 100, directory=tmp_path)
    returned: list[int] = []
    monkeypatch.setattr(dm, "ledger_for", lambda case: ledger)
    monkeypatch.setattr(dm, "case_bytes", lambda case, prop=None: 20)
    monkeypatch.setattr(dm, "_return_cached", lambda case: returned.append(1))
    ctx = multiprocessing.get_context("fork")
    started = ctx.Event()
    other = ctx.Process(target=_hold, args=(str(tmp_path), 50, 1.0, started))
    other.start()
    assert started.wait(30)
    calls: list[dict[str, int]] = []

    def run() -> str:
        calls.append(json.loads(ledger.path.read_text()))
        if len(calls) == 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 4.14 GiB")
        return "ok"

    assert dm.run_within_memory(Case(backend="cuda"), "oracle", run) == "ok"
    other.join()
    assert len(calls) == 2 and sorted(calls[0]["held"].values()) == [20, 50]
    assert list(calls[1]["held"].values()) == [100]  # alone: the whole budget, the other process gone
    assert returned == [1, 1]

    def never_fits() -> None:
        raise RuntimeError("Triton Error [CUDA]: out of memory")

    try:
        dm.run_within_memory(Case(backend="cuda"), "oracle", never_fits)
    except RuntimeError as e:
        assert "out of memory" in str(e)
    else:
        raise AssertionError("an out-of-memory error alone on the device was swallowed")
    seen: list[int] = []

    def wrong() -> None:
        seen.append(1)
        raise ValueError("a property failure")

    try:
        dm.run_within_memory(Case(backend="cuda"), "oracle", wrong)
    except ValueError:
        assert seen == [1]  # not run again
    else:
        raise AssertionError("a failure was swallowed")


def test_a_dead_device_context_does_not_hide_the_error(tmp_path, monkeypatch) -> None:
    """After a device fault, returning the allocator's cache raises the fault again: the block's own error is
    what leaves the reservation (and its release still happens); without an error the return's is raised."""
    import pytest

    import wy_ascend.testing.device_memory as dm

    ledger = Ledger("test", 100, directory=tmp_path)
    monkeypatch.setattr(dm, "ledger_for", lambda case: ledger)

    def dead(case: Case) -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered (from empty_cache)")

    monkeypatch.setattr(dm, "_return_cached", dead)
    with pytest.raises(ValueError, match="the kernel's own error"):
        with reserved_for(Case(backend="cuda"), "oracle"):
            raise ValueError("the kernel's own error")
    assert json.loads(ledger.path.read_text())["held"] == {}  # released
    with pytest.raises(RuntimeError, match="from empty_cache"):
        with reserved_for(Case(backend="cuda"), "oracle"):
            pass


def test_a_failed_block_frees_its_locals_before_the_cache_goes_back(tmp_path, monkeypatch) -> None:
    """A block that raises leaves its tensors in its traceback's frames: they are freed before the
    allocator's cache is returned, or the process keeps their memory outside the ledger after its
    reservation ends (an H100 nightly ran a case out of memory alone beside processes holding 2-18 GiB).
    The error itself, its type, message and traceback text, reaches the caller unchanged."""
    import gc
    import traceback
    import weakref

    import pytest

    import wy_ascend.testing.device_memory as dm

    class Block:  # stands for a device tensor: the memory a case's frames hold
        pass

    ledger = Ledger("test", 100, directory=tmp_path)
    monkeypatch.setattr(dm, "ledger_for", lambda case: ledger)
    alive_at_return: list[bool] = []
    refs: list[weakref.ref] = []

    def returned(case: Case) -> None:
        gc.collect()
        alive_at_return.append(refs[0]() is not None)

    monkeypatch.setattr(dm, "_return_cached", returned)

    def kernel_call() -> None:
        inputs = Block()
        refs.append(weakref.ref(inputs))
        raise ValueError("kernel differs from the float64 oracle")

    with pytest.raises(ValueError, match="kernel differs") as caught:
        with reserved_for(Case(backend="cuda"), "oracle"):
            kernel_call()
    assert alive_at_return == [False]
    assert "kernel_call" in "".join(traceback.format_exception(caught.value))


def test_memory_still_held_after_a_case_is_said(monkeypatch, capsys) -> None:
    """What a process still holds after returning its cache (live tensors, outside the ledger once its
    reservation goes) is said in the case log, above the floor a case's modules take; below it, nothing."""
    import torch

    import wy_ascend.testing.device_memory as dm

    held = [3 * 2**30]
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda *a: held[0])
    dm._return_cached(Case(backend="cuda"))
    assert "3.00 GiB still held by this process" in capsys.readouterr().err
    held[0] = MIN_RESERVATION
    dm._return_cached(Case(backend="cuda"))
    assert capsys.readouterr().err == ""


def test_out_of_memory_is_told_by_type_or_by_the_drivers_words() -> None:
    """torch's allocator raises OutOfMemoryError, a Triton launch a RuntimeError saying "out of memory"
    (the driver's words, any case): either is out of memory, and so reruns alone; nothing else is."""
    import torch

    from wy_ascend.testing.device_memory import out_of_memory

    assert out_of_memory(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 16.01 GiB"))
    assert out_of_memory(torch.OutOfMemoryError("allocator: no room"))
    assert out_of_memory(RuntimeError("Triton Error [CUDA]: out of memory"))
    assert out_of_memory(RuntimeError("NPU OUT OF MEMORY"))
    assert not out_of_memory(RuntimeError("CUDA error: an illegal memory access was encountered"))
    assert not out_of_memory(ValueError("memory_layout: w differs"))


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(backend=st.sampled_from(["cuda", "npu", "npu-cuda"]), current=st.integers(0, 7),
       totals=st.lists(st.integers(1, 1 << 40), min_size=8, max_size=8, unique=True))
def test_a_device_backends_ledger_is_its_current_devices_at_the_budget_fraction(backend: str, current: int,
                                                                              totals: list[int]) -> None:
    """ledger_for: a case of a device backend reserves in the ledger of the process's current device of that
    backend's kind (torch_npu's for npu, torch.cuda's for cuda and npu-cuda), with BUDGET_FRACTION of that
    device's memory, over drawn current devices and memory sizes (stand-in devices, torch_npu and torch.npu:
    no GPU or NPU on this machine)."""
    import sys
    import types

    import torch

    import wy_ascend.backends as backends
    import wy_ascend.testing.device_memory as dm

    def props(i: int) -> types.SimpleNamespace:
        return types.SimpleNamespace(total_memory=totals[i])

    other = (current + 1) % 8  # the other kind's current device: never read
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(backends, "check_available", lambda backend: None)
        mp.setattr(torch.cuda, "current_device", lambda: other if backend == "npu" else current)
        mp.setattr(torch.cuda, "get_device_properties", props)
        mp.setitem(sys.modules, "torch_npu", types.ModuleType("torch_npu"))
        mp.setattr(torch, "npu", types.SimpleNamespace(current_device=lambda: current if backend == "npu" else other,
                                                      get_device_properties=props), raising=False)
        ledger = dm.ledger_for(Case(backend=backend))
    kind = "npu" if backend == "npu" else "cuda"
    assert ledger is not None and ledger.path.name == f"wy-ascend-memory-{kind}{current}.json"
    assert ledger.budget == int(totals[current] * dm.BUDGET_FRACTION) and 0 < dm.BUDGET_FRACTION < 1


@settings(max_examples=20, derandomize=True, database=None, deadline=None)
@given(pid=st.integers(1, 1 << 22), answer=st.sampled_from([None, ProcessLookupError, PermissionError]))
def test_a_holder_is_alive_unless_no_process_has_its_pid(pid: int, answer: type[Exception] | None) -> None:
    """_alive (whose held and waiting entries a ledger keeps): a pid is dead only where signal 0 finds no such
    process; one that exists, signalable or owned by another user (PermissionError), is alive (stand-in kill)."""
    import wy_ascend.testing.device_memory as dm

    def kill(p: int, sig: int) -> None:
        assert (p, sig) == (pid, 0)
        if answer is not None:
            raise answer()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dm.os, "kill", kill)
        assert dm._alive(pid) is (answer is not ProcessLookupError)


@pytest.mark.parametrize(("H", "HV", "K", "V"), [(32, 32, 16, 256), (32, 32, 256, 16), (4, 32, 64, 128), (16, 16, 200, 200)])
def test_a_reservation_holds_six_float64_copies_of_every_input(H: int, HV: int, K: int, V: int) -> None:
    """case_bytes covers what its docstring says, for every term of the estimate: six float64 copies of each
    float input the case builds (k, v, beta, A, g, dw, du), counted from the tensors themselves, on cases large
    enough to pass the floor; narrow K beside wide V and the other way round, grouped heads, odd dims."""
    case = Case(B=1, T=1024, H=H, HV=HV, K=K, V=V, BT=64, use_g=True, dtype="bfloat16")
    elements = sum(x.numel() for x in case.build_inputs() if x is not None and x.is_floating_point())
    assert 6 * 8 * elements > MIN_RESERVATION
    assert case_bytes(case) >= 6 * 8 * elements


@st.composite
def sized_cases(draw: st.DrawFn) -> Case:
    """Cases over the sizes' whole domains (HV a multiple of H by a fuzzed ratio, K and V up to MAX_DIM, any
    chunk size), from one token to 2**26, with or without g, in any dtypes: far past what the CPU fuzz
    draws, for no tensor of them is built; about three in four reserve more than the floor."""
    H, dtype = draw(st.integers(1, 32)), draw(st.sampled_from(sorted(DTYPES)))
    beta_dtype, g_dtype = (draw(st.sampled_from([None, *sorted(DTYPES)])) for _ in range(2))
    return Case(B=draw(st.integers(1, 64)), T=draw(st.integers(1, 2**20)), H=H, HV=H * draw(st.sampled_from(HEAD_RATIOS)),
                K=draw(st.integers(1, MAX_DIM)), V=draw(st.integers(1, MAX_DIM)), BT=draw(st.sampled_from(SUPPORTED_BT)),
                use_g=draw(st.booleans()), dtype=dtype, beta_dtype=beta_dtype, g_dtype=g_dtype)


def _input_elements(case: Case) -> int:
    """Elements of the float inputs ``case`` builds, counted from the tensors of one token of it (every input
    is [B, T, ...], so B*T times that): the case's own would take seconds and GiB at its sizes. A's values
    are stood in by zeros of its shape: its triangular solves, BT x BT per value head, took seconds a token."""
    import wy_ascend.testing.case as case_module

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(case_module, "build_A", lambda k, beta, g, cu, chunk_size, dtype: beta.new_zeros(*beta.shape, chunk_size))
        token = case.replace(B=1, T=1).build_inputs()
    return case.B * case.T * sum(x.numel() for x in token if x is not None and x.is_floating_point())


@settings(max_examples=100, derandomize=True, deadline=None)
@given(case=sized_cases())
def test_every_reservation_holds_six_float64_copies_of_every_input(case: Case) -> None:
    """The rule of test_a_reservation_holds_six_float64_copies_of_every_input over every size, dtype and gate:
    case_bytes is at least six float64 copies of the elements of every float input the case builds."""
    assert case_bytes(case) >= 6 * 8 * _input_elements(case)


@settings(max_examples=150, derandomize=True, deadline=None)
@given(case=sized_cases(), size=st.sampled_from(SIZES), data=st.data())
def test_case_bytes_grow_with_every_size(case: Case, size: str, data: st.DataObject) -> None:
    """A case larger in one size (B, T, H, HV, K, V or BT; HV kept a multiple of H) never reserves less, and
    above the floor reserves more: each size multiplies the elements of some input (k's H, A's BT), so a
    case that grows in one holds more, and reserving less for it would let a larger case in beside others
    where a smaller one waited."""
    if size == "BT":
        grown = case.replace(BT=data.draw(st.sampled_from([bt for bt in SUPPORTED_BT if bt > case.BT] or [case.BT])))
    elif size == "H":  # more key heads for the same value heads (a smaller group), or H and HV both grown
        larger = [h for h in range(case.H + 1, case.HV + 1) if case.HV % h == 0]
        if len(larger) > 0 and data.draw(st.booleans()):
            grown = case.replace(H=data.draw(st.sampled_from(larger)))
        else:
            factor = data.draw(st.integers(2, 4))
            grown = case.replace(H=case.H * factor, HV=case.HV * factor)
    elif size == "HV":  # by whole groups
        grown = case.replace(HV=case.H * data.draw(st.integers(case.HV // case.H, 2 * case.HV // case.H)))
    else:
        top = MAX_DIM if size in ("K", "V") else 2 * getattr(case, size)
        grown = case.replace(**{size: data.draw(st.integers(getattr(case, size), max(top, getattr(case, size))))})
    before, after = case_bytes(case), case_bytes(grown)
    assert after >= before, (size, getattr(grown, size), after, before)
    if before > MIN_RESERVATION and grown != case:
        assert after > before, (size, getattr(grown, size))


@settings(max_examples=100, derandomize=True, deadline=None)
@given(case=sized_cases())
def test_case_bytes_have_a_floor_and_only_the_floor_below_it(case: Case) -> None:
    """Every case reserves at least MIN_RESERVATION (its launches' modules and the allocator's first blocks,
    whatever its tensors), and a case whose six float64 copies of its inputs are under half the floor
    reserves the floor alone: the estimate is those copies (the oracle's) within a factor two, and a small
    case reserving more than the floor would keep several workers' small cases from running side by side."""
    nbytes = case_bytes(case)
    assert nbytes >= MIN_RESERVATION
    if 2 * 6 * 8 * _input_elements(case) <= MIN_RESERVATION:
        assert nbytes == MIN_RESERVATION


@settings(max_examples=100, derandomize=True, deadline=None)
@given(case=sized_cases())
def test_a_reservation_is_the_host_bytes_the_fuzz_strategies_bound_a_case_by(case: Case) -> None:
    """Above the floor a case reserves exactly the bytes fuzz/strategies.py bounds a large case's host memory
    by (host_bytes_per_token per token: the same six float64 copies of the same tensors); the package cannot
    import fuzz/, so the two restate one estimate, and a case the strategies sized to fit would otherwise
    reserve another amount on the device than the one it was drawn for."""
    per_token = host_bytes_per_token(case.H, case.HV, case.K, case.V, case.BT)
    assert case_bytes(case) == max(MIN_RESERVATION, case.B * case.T * per_token)


def test_index_width_past_the_budget_is_refused_before_it_reserves(tmp_path, monkeypatch) -> None:
    """index_width counts what it holds exactly (real_size_bytes): a case whose count passes the device's budget
    raises DeviceTooSmall, reserving nothing and waiting for no one, where an estimate's case would run alone;
    at the budget it reserves its count. Other properties keep the estimate and the lone run."""
    import wy_ascend.testing.device_memory as dm

    case = Case(backend="cuda", B=2, T=2**16, H=2, HV=4, K=64, V=64, BT=64)
    need = dm.real_size_bytes(case)
    assert dm.case_bytes(case, "index_width") == need > MIN_RESERVATION
    assert dm.case_bytes(case.replace(T=16), "index_width") == MIN_RESERVATION
    for budget in (need - 1, need):
        ledger = Ledger("test", budget, directory=tmp_path)
        monkeypatch.setattr(dm, "ledger_for", lambda c, ledger=ledger: ledger)
        if budget < need:
            refusal = rf"index_width on this case holds {need:,} bytes .*budget of {need - 1:,} bytes: no verdict"
            with pytest.raises(dm.DeviceTooSmall, match=refusal):
                with reserved_for(case, "index_width"):
                    raise AssertionError("ran past the budget")
            assert not ledger.path.exists() or json.loads(ledger.path.read_text())["held"] == {}
        else:
            with reserved_for(case, "index_width"):
                assert list(json.loads(ledger.path.read_text())["held"].values()) == [need]
    large = case.replace(T=2**20)
    assert dm.case_bytes(large, "oracle") > need
    with reserved_for(large, "oracle"):  # past the budget too: the estimate's, which runs alone
        assert list(json.loads(ledger.path.read_text())["held"].values()) == [dm.case_bytes(large, "oracle")]
