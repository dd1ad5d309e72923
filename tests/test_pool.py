"""The device fuzz pool (fuzz/pool.py): entries, rotation, pooled cases, warm-up."""

from __future__ import annotations

import io

import pytest

from fuzz import pool
from fuzz.strategies import cases, large_cases
from tests.drawing import draw_many
from wy_ascend import lowering


@pytest.mark.parametrize("backend", ["cuda", "npu"])
def test_entries_hold_every_specialization_the_lowering_gate_lowers(backend) -> None:
    """Every lowered spec whose case plans has its compile in some entry (gate dtype and
    cu_seqlens dtype aside: cases use the I/O dtype and int64), and entries never overlap."""
    entries = pool.entries(backend)
    labels = [label for e in entries for label in e.labels]
    assert len(labels) == len(set(labels))
    held = {label.rsplit(" ", 1)[0] for label in labels}  # without the dtype triple
    specs, _ = lowering.backend_specs(backend, lowering.LaunchConfig(num_cores=1))
    bwd_plans = {(s.BT, s.K, s.V) for s in specs if s.kernel == "bwd"}
    for s in specs:
        if (s.BT, s.K, s.V) in bwd_plans:  # both kernels plan: a case can launch it
            assert s.specialization.label.rsplit(" ", 1)[0] in held, s.label


def test_consecutive_nights_cover_every_entry() -> None:
    entries = pool.entries("cuda")
    for size in (1, 7, 24, len(entries) - 1, len(entries) + 5):
        nights = pool.nights_to_cover(len(entries), size)
        for first in (0, 20422, 31):
            seen = {e.name for d in range(first, first + nights) for e in pool.select(entries, size, d)}
            assert seen == {e.name for e in entries}
            assert len(pool.select(entries, size, first)) == min(size, len(entries))
        assert pool.select(entries, size, 5) == pool.select(entries, size, 5)


@pytest.mark.parametrize("flags", [{}, {"varlen": True}, {"varlen": False}, {"grouped": True},
                                   {"partition_knobs": True, "memory": True}])
@pytest.mark.parametrize("backend", ["cuda", "npu"])
def test_pooled_cases_launch_only_their_pools_specializations(backend, flags, monkeypatch) -> None:
    monkeypatch.setenv("WY_ASCEND_RUNTIME_DIMS", "1")  # K and V vary within an entry
    chosen = pool.select(pool.entries(backend), 24, 20422)
    drawn = draw_many(cases(backend=backend, pool=chosen, **flags), 60)
    drawn += draw_many(large_cases(backend=backend, pool=chosen, **flags), 10)
    for case in drawn:
        assert any(e.accepts(case) for e in chosen), case
        assert case.specializations()["fwd"].label in {label for e in chosen for label in e.labels}
    assert len({c.K for c in drawn}) > 3 and len({c.V for c in drawn}) > 3  # runtime dims vary
    assert len({c.BT for c in drawn}) > 1 and len({c.dtype for c in drawn}) > 1  # a night's pool is varied
    if flags.get("grouped"):
        assert all(c.HV > c.H for c in drawn)
        if backend == "cuda":  # both grouped-dk variants, by size or by knob, from the pool's compiles
            assert {c.specializations()["bwd"].GROUP_DK for c in drawn} == {False, True}
    if "varlen" in flags:
        assert all((c.cu_seqlens is not None) == flags["varlen"] for c in drawn)


@pytest.mark.parametrize("runtime", ["1", "0"])
def test_k_choices_share_the_entrys_compiles(runtime, monkeypatch) -> None:
    monkeypatch.setenv("WY_ASCEND_RUNTIME_DIMS", runtime)
    e = next(e for e in pool.entries("cuda") if e.template.K == 100)  # a partial, unaligned last tile
    assert (len(e.K_choices) > 1) == (runtime == "1")  # compile-time dims: K is the entry's own
    assert e.template.K in e.K_choices and e.template.V in e.V_choices
    for K in e.K_choices[:: max(1, len(e.K_choices) // 8)]:
        assert e.accepts(e.template.replace(K=K))
    outside = [K for K in range(16, 257) if K not in e.K_choices]
    assert outside and not any(e.accepts(e.template.replace(K=K)) for K in outside[:: max(1, len(outside) // 8)])


def test_pool_size_and_date_come_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv(pool.POOL_ENV, "0")
    assert pool.pool_size(24) is None
    monkeypatch.setenv(pool.POOL_ENV, "7")
    assert pool.pool_size(24) == 7
    monkeypatch.setenv(pool.POOL_ENV, "many")
    with pytest.raises(ValueError, match=pool.POOL_ENV):
        pool.pool_size(24)
    monkeypatch.delenv(pool.POOL_ENV)
    assert pool.pool_size(24) == 24 and pool.run_pool("cpu", 24) is None  # the interpreter compiles nothing
    monkeypatch.setenv(pool.DATE_ENV, "1970-01-03")
    assert pool.rotation_day() == 2
    monkeypatch.setenv(pool.DATE_ENV, "yesterday")
    with pytest.raises(ValueError, match=pool.DATE_ENV):
        pool.rotation_day()


@pytest.mark.cpu_interpreter  # the workers compile the cpu backend's entries: the interpreter's, in seconds
def test_warm_up_compiles_each_entry_in_workers_and_reports_progress() -> None:
    entries = [e for e in pool.entries("cpu") if e.template.BT == 16][:2]
    out = io.StringIO()
    warm = pool.warm_up(tuple(entries), jobs=2, out=out)
    assert sorted(e.name for e in warm.compiled) == sorted(e.name for e in entries)  # in finishing order
    assert not warm.failed and not warm.slow
    assert warm.seconds > 0 and "2/2 entries" in out.getvalue()


def _compile_slowly_when_bt_is_32(case) -> float:
    """A stand-in for pool._compile (module level: spawned processes import it): BT=32 never ends."""
    import time

    time.sleep(3600 if case.BT == 32 else 0.0)
    return 0.0


def _fail(case) -> float:
    raise RuntimeError("the compiler broke")


def test_warm_up_cuts_an_entry_at_its_deadline_and_reports_failures() -> None:
    entries = pool.entries("cpu")
    fast, slow = next(e for e in entries if e.template.BT == 16), next(e for e in entries if e.template.BT == 32)
    out = io.StringIO()
    # 20 s: the fast entry's cases, each in a spawned process that imports torch first (a few seconds on a
    # loaded 2-core machine), end well within it; the slow one sleeps an hour.
    warm = pool.warm_up((slow, fast), jobs=2, deadline=20.0, out=out, target=_compile_slowly_when_bt_is_32)
    assert (warm.compiled, warm.slow, warm.failed) == ([fast], [slow], [])
    assert 20.0 <= warm.seconds < 80 and "still compiling after 20 s" in out.getvalue() and "2/2 entries" in out.getvalue()
    warm = pool.warm_up((fast,), jobs=1, out=out, target=_fail)
    assert warm.failed == [fast] and "failed (RuntimeError: the compiler broke)" in out.getvalue()
    warm = pool.warm_up((fast,), jobs=1, out=out, target=_die)
    assert warm.failed == [fast] and "its process exited with code 3" in out.getvalue()


def _die(case) -> float:
    import os

    os._exit(3)


def _note_pid(case) -> float:
    """Leaves a file named after this process's pid in WY_TEST_PID_DIR."""
    import os
    from pathlib import Path

    (Path(os.environ["WY_TEST_PID_DIR"]) / str(os.getpid())).touch()
    return 0.0


def test_warm_up_processes_serve_many_cases(tmp_path, monkeypatch) -> None:
    """Torch and the device start once per warm-up process, not once per case: with nothing cut,
    no more processes than jobs serve every case of the entries."""
    monkeypatch.setenv("WY_TEST_PID_DIR", str(tmp_path))
    entries = tuple(e for e in pool.entries("cpu") if e.template.BT == 16)[:3]
    cases = sum(len(pool._instances(e.template)) for e in entries)
    warm = pool.warm_up(entries, jobs=2, out=io.StringIO(), target=_note_pid)
    assert len(warm.compiled) == 3 and cases > 2 and 1 <= len(list(tmp_path.iterdir())) <= 2


def test_entries_the_warm_up_cut_leave_every_workers_pool(monkeypatch) -> None:
    monkeypatch.setenv(pool.DATE_ENV, "2026-11-30")
    full = pool.run_pool("cuda", 5)
    monkeypatch.setenv(pool.SKIP_ENV, "1,3")
    assert pool.run_pool("cuda", 5) == (full[0], full[2], full[4])
