"""Every setting read from the environment goes through wy_ascend/env.py's two readers, so each takes
what its docs say and refuses anything else with an error naming it: a typo must not leave a switch at
its default silently (``WY_ASCEND_AUTOTUNE=false`` once meant autotuning on)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wy_ascend import backends, env, interpreter
from wy_ascend.testing import runner, warm

SRC = Path(__file__).resolve().parents[1]

# Each switch: its variable, its reader in use, the reader's value unset, on ("1") and off ("0").
SWITCHES: dict[str, tuple[Callable[[], object], object, object, object]] = {
    backends.AUTOTUNE_ENV: (lambda: backends.search_configs(None), backends.CUDA_CONFIGS, backends.CUDA_CONFIGS,
                            backends.CUDA_CONFIGS[:1]),
    backends.FP32_WARPS_ENV: (lambda: backends.fp32_dot_warps("fwd", 64, 64, False), 4, 4, None),
    backends.NARROW_TILES_ENV: (lambda: backends.BACKENDS["cuda"].narrow_tiles(), True, True, False),
    backends.RUNTIME_DIMS_ENV: (lambda: backends.BACKENDS["cuda"].runtime_dims(backends.LaunchConfig()), False, True,
                                False),
    interpreter.EMULATION_ENV: (interpreter.emulation_default, True, True, False),
}
NUMBERS: dict[str, tuple[Callable[[], object], object, str]] = {
    runner.TIMEOUT_ENV: (lambda: runner.case_timeout(7.0), 7.0, "must be a number of seconds > 0"),
    backends.PTXAS_TIMEOUT_ENV: (backends.ptxas_timeout, backends.PTXAS_TIMEOUT_S, "must be a number of seconds >= 0"),
    warm.JOBS_ENV: (lambda: warm.default_jobs("cpu"), 0, "must be a whole number of processes >= 0"),
}


@pytest.mark.parametrize("name", SWITCHES)
def test_each_switch_takes_1_or_0_and_refuses_the_rest(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    read, unset, on, off = SWITCHES[name]
    monkeypatch.delenv(name, raising=False)
    assert read() == unset
    for value, want in (("1", on), ("0", off), (" 0 ", off), ("", unset)):
        monkeypatch.setenv(name, value)
        assert read() == want, value
    for bad in ("false", "off", "yes", "true", "2", "of", "-1"):
        monkeypatch.setenv(name, bad)
        with pytest.raises(ValueError, match=f"^{name} must be 1 or 0, got '{bad}'$"):
            read()


@pytest.mark.parametrize("name", NUMBERS)
def test_each_number_names_itself_when_it_does_not_parse(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    read, unset, message = NUMBERS[name]
    monkeypatch.delenv(name, raising=False)
    assert read() == unset
    monkeypatch.setenv(name, "3")
    assert read() == 3
    for bad in ("soon", "-1", "nan", "1e", "0x3"):
        monkeypatch.setenv(name, bad)
        with pytest.raises(ValueError, match=f"^{name} {message}, got '{bad}'$"):
            read()


def test_the_number_reader_keeps_its_kind_and_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WY_TEST_N", "2.5")
    assert env.number("WY_TEST_N", 1.0, float, "seconds", positive=True) == 2.5
    with pytest.raises(ValueError, match="WY_TEST_N must be a whole number of threads > 0, got '2.5'"):
        env.number("WY_TEST_N", 1, int, "threads", positive=True)
    monkeypatch.setenv("WY_TEST_N", "0")
    assert env.number("WY_TEST_N", 5, int, "processes") == 0
    with pytest.raises(ValueError, match="> 0, got '0'"):
        env.number("WY_TEST_N", 5, int, "processes", positive=True)


# Read where they are compared, each with its own check: a mode read at the kernels' import, refused by
# backends.check_fp32_dot on every call.
OWN_CHECK = {"WY_ASCEND_FP32_DOT"}


def test_no_setting_is_read_around_the_readers() -> None:
    """Source rule: no WY_ASCEND_* value is compared or converted where it is read (``== "1"``,
    ``int(os.environ...)``): such a read takes a typo for the default. Free-form values (a backend
    name, a path, a date) are read as strings and checked by their users."""
    read = r"os\.environ\.get\(\s*(\"WY_ASCEND_\w+\"|\w+_ENV)"
    compared = re.compile(read + r"[^)]*\)\s*(==|!=|not in|in)\s")
    converted = re.compile(r"\b(int|float|bool)\(\s*" + read)
    offenders = []
    for path in [*SRC.glob("src/wy_ascend/**/*.py"), *SRC.glob("fuzz/*.py"), *SRC.glob("benchmarks/*.py"),
                 SRC / "noxfile.py"]:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if (compared.search(line) or converted.search(line)) and not any(v in line for v in OWN_CHECK):
                offenders.append(f"{path.relative_to(SRC)}:{n}: {line.strip()}")
    assert not offenders


def test_each_process_takes_its_share_of_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """share_cores: the cores over the xdist workers, at least one, or WY_ASCEND_THREADS (a whole number > 0,
    else an error naming it); torch's threads here, the pools' variables (where unset) for later processes."""
    import os

    import torch

    from wy_ascend.testing import child

    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items()
                                        if k not in (*child.THREAD_VARS, child.THREADS_ENV)})  # the caller's own, left out
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    before = torch.get_num_threads()
    try:
        assert child.share_cores(4) == 2 and torch.get_num_threads() == 2
        assert all(os.environ[var] == "2" for var in child.THREAD_VARS)
        os.environ["OMP_NUM_THREADS"] = "5"  # a user's own setting stays
        assert child.share_cores(16) == 1 and os.environ["OMP_NUM_THREADS"] == "5"
        os.environ[child.THREADS_ENV] = "3"
        assert child.share_cores(4) == 3
        os.environ[child.THREADS_ENV] = "0"
        with pytest.raises(ValueError, match=f"^{child.THREADS_ENV} must be a whole number of threads > 0"):
            child.share_cores(4)
    finally:
        torch.set_num_threads(before)
    assert child.xdist_workers(3) == 3 and child.xdist_workers(None) == 1 and child.xdist_workers(0) == 1
    for unresolved in ("auto", "logical", "3", 2.0, True):
        with pytest.raises(ValueError, match="^numprocesses must be xdist's resolved worker count"):
            child.xdist_workers(unresolved)


@settings(max_examples=60, deadline=None)
@given(cores=st.one_of(st.none(), st.integers(1, 256)), workers=st.integers(1, 300))
def test_the_share_of_the_cores_over_any_machine_and_worker_count(cores: int | None, workers: int) -> None:
    """share_cores over drawn machines: the cores (one where os.cpu_count cannot tell: None) over the workers,
    at least one thread, whatever the two (the example above fixes 8 cores)."""
    import os

    import torch

    from wy_ascend.testing import child

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(os, "environ", {k: v for k, v in os.environ.items()
                                   if k not in (*child.THREAD_VARS, child.THREADS_ENV)})
        mp.setattr(os, "cpu_count", lambda: cores)
        before = torch.get_num_threads()
        try:
            want = max(1, (cores or 1) // workers)
            assert child.share_cores(workers) == want == torch.get_num_threads()
            assert all(os.environ[var] == str(want) for var in child.THREAD_VARS)
        finally:
            torch.set_num_threads(before)


def test_xdist_resolves_auto_before_any_configure_hook_reads_it(tmp_path) -> None:
    """What xdist_workers takes for granted, checked on the installed pytest-xdist: under ``-n auto`` and
    ``-n logical`` a conftest's pytest_configure (the controller's, where share_cores runs) reads a count of
    workers, not the word."""
    import subprocess
    import sys

    (tmp_path / "conftest.py").write_text(
        "def pytest_configure(config):\n"
        "    if not hasattr(config, 'workerinput'):\n"
        "        print('numprocesses', repr(config.getoption('numprocesses')), flush=True)\n")
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    for word in ("auto", "logical"):
        run = subprocess.run([sys.executable, "-m", "pytest", "-n", word, "-p", "no:cacheprovider", "-q", "-s",
                              "test_one.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stdout + run.stderr
        seen = [line.split(" ", 1)[1] for line in run.stdout.splitlines() if line.startswith("numprocesses ")]
        assert len(seen) == 1 and seen[0].isdigit() and int(seen[0]) >= 1, run.stdout
