"""Shared fixtures: the backend under test (``WY_ASCEND_BACKEND``, default cpu) and its device."""

from __future__ import annotations

import os
import sys
from pathlib import Path

# The cpu backend runs Triton's interpreter, which triton selects when it is first
# imported; set it before anything imports triton (device runs export the backend).
if os.environ.get("WY_ASCEND_BACKEND", "cpu") == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")

# The repository root, so tests import the fuzz/ and benchmarks/ packages however pytest is run.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pytest
import torch

from wy_ascend.testing.child import share_cores, xdist_workers
from wy_ascend.testing.properties import DEVICE_OF

RUN_BACKEND = os.environ.get("WY_ASCEND_BACKEND", "cpu")  # the run's, whatever a test sets later


@pytest.fixture(scope="session")
def backend() -> str:
    return RUN_BACKEND


@pytest.fixture(scope="session")
def device(backend: str) -> torch.device:
    return torch.device(DEVICE_OF[backend])


def _interpreter_refusal() -> str | None:
    """Why this environment has no cpu backend (None: it has): it needs triton-ascend's
    interpreter (a GPU machine with upstream triton has none)."""
    from wy_ascend import interpreter
    from wy_ascend.errors import BackendUnavailableError

    try:
        interpreter.check_interpreter()
    except BackendUnavailableError as e:
        return str(e)
    return None


def _cpu_backend_refusal() -> str | None:
    """Why this process cannot run the cpu backend (None: it can): the interpreter is chosen when
    triton is first imported (TRITON_INTERPRET, set above only for a cpu run), and it must be
    triton-ascend's."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return "this run compiles kernels (WY_ASCEND_BACKEND is not cpu): no interpreter in this process"
    return _interpreter_refusal()


def pytest_configure(config: pytest.Config) -> None:
    if RUN_BACKEND == "cpu" and not hasattr(config, "workerinput"):  # before the workers start (testing/child.py)
        share_cores(xdist_workers(config.getoption("numprocesses", None)))
    config.addinivalue_line("markers", "cpu_backend: runs the cpu backend (skipped where this process cannot)")
    config.addinivalue_line("markers", "cpu_interpreter: runs the cpu backend in a process of its own (a fuzz run, "
                            "a case runner's child, a replay; skipped where triton-ascend's interpreter is missing)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skips, with the reason, the tests of a backend that cannot run here: ``cpu_backend`` where this
    process cannot run the cpu backend, ``cpu_interpreter`` where no process of this environment can
    (its own processes set TRITON_INTERPRET, so the mode of this one does not matter)."""
    for marker, refusal, need in (("cpu_backend", _cpu_backend_refusal, "the cpu backend"),
                                  ("cpu_interpreter", _interpreter_refusal, "the cpu backend in a subprocess")):
        marked = [item for item in items if item.get_closest_marker(marker)]
        reason = refusal() if marked else None
        for item in marked if reason else ():
            item.add_marker(pytest.mark.skip(reason=f"needs {need}: {reason}"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    """A test that asks for the cpu backend where this process cannot run it (a device run: the
    process compiles kernels, or upstream triton is installed) is skipped with the reason, not an
    error: the unmarked twin of ``cpu_backend``, for tests that reach the cpu backend indirectly."""
    from wy_ascend.errors import BackendUnavailableError

    outcome = yield
    report = outcome.get_result()
    error = call.excinfo.value if call.excinfo is not None else None
    if (isinstance(error, BackendUnavailableError) and error.backend == "cpu" and report.failed
            and RUN_BACKEND != "cpu"):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: needs the cpu backend: {error}")
    return None
