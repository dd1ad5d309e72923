"""nox sessions of wy_ascend: tests, fuzzing, regression replay, benchmarks, lint, lowering, mutants.

    nox                                  # the default sessions: tests, fuzz, regress, lint (CPU)
    nox -s fuzz                          # fuzz suite, dev profile, cpu backend (Triton interpreter)
    nox -s fuzz -- --profile ci          # what CI runs: derandomized, ~4 min on 2 cores (cpu: -n auto)
    nox -s fuzz -- --profile nightly --backend npu -n 8    # one xdist worker per NPU
    nox -s regress -- --backend cuda     # replay every case in regressions/
    nox -s bench -- --backend cuda
    nox --no-venv -s fuzz -- --backend npu   # use the current environment (preinstalled torch_npu/CANN)

The backend (``--backend NAME`` in the posargs, else ``WY_ASCEND_BACKEND``, else cpu) picks the
extra to install: ``.[cpu,test]`` (triton-ascend's interpreter), ``.[cuda,test]`` (cuda and
npu-cuda) or ``.[npu,test]``. On the CPU torch is installed first as ``torch==2.13.0`` when a
local CPU wheel is at hand (``WY_ASCEND_WHEELS``, default /opt/wheels, which pip also searches),
else from PyTorch's CPU index, so that ``.[cpu]`` never pulls a multi-GB CUDA build of torch.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import nox

nox.options.reuse_existing_virtualenvs = True

BACKENDS = ("cpu", "cuda", "npu", "npu-cuda")
EXTRA = {"cpu": "cpu", "cuda": "cuda", "npu-cuda": "cuda", "npu": "npu"}
TORCH_CPU = "torch==2.13.0"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
WHEELS = Path(os.environ.get("WY_ASCEND_WHEELS", "/opt/wheels"))
VERSIONS = """
import platform, sys
from importlib.metadata import PackageNotFoundError, version
def v(name):
    try:
        return version(name)
    except PackageNotFoundError:
        return "-"
import torch
print(f"python {platform.python_version()} | torch {torch.__version__} | triton-ascend {v('triton-ascend')} "
      f"| triton {v('triton')} | torch_npu {v('torch_npu')} | hypothesis {v('hypothesis')} | backend {sys.argv[1]} "
      f"| cuda devices {torch.cuda.device_count() if torch.cuda.is_available() else 0}")
"""


def backend_of(session: nox.Session) -> str:
    """``--backend X`` / ``--backend=X`` from the posargs, else WY_ASCEND_BACKEND, else cpu."""
    args = list(session.posargs)
    for i, arg in enumerate(args):
        if arg == "--backend" and i + 1 < len(args):
            name = args[i + 1]
            break
        if arg.startswith("--backend="):
            name = arg.split("=", 1)[1]
            break
    else:
        name = os.environ.get("WY_ASCEND_BACKEND") or "cpu"
    if name not in BACKENDS:
        session.error(f"--backend must be one of {BACKENDS}, got {name!r}")
    return name


def install(session: nox.Session, *extras: str, packages: tuple[str, ...] = ()) -> str:
    """Install the package with the backend's extra plus ``extras``; print versions; return the backend."""
    backend = backend_of(session)
    if session.venv_backend == "none":
        session.log("no virtualenv (--no-venv): using the current environment as it is")
    else:
        if EXTRA[backend] == "cpu":
            # torch first, from a CPU-only source: ".[cpu]" alone would let pip pick a CUDA build.
            if sorted(WHEELS.glob("torch-2.13.0*cpu*.whl")) if WHEELS.is_dir() else []:
                session.install(TORCH_CPU, "--find-links", str(WHEELS))
            else:
                session.install("torch", "--index-url", TORCH_CPU_INDEX)
        session.install("-e", f".[{','.join((EXTRA[backend], *extras))}]", *packages)
    session.run("python", "-c", VERSIONS, backend, log=False)
    return backend


def _env(backend: str) -> dict[str, str]:
    return {"WY_ASCEND_BACKEND": backend}


@nox.session
def tests(session: nox.Session) -> None:
    """Unit and integration tests (pytest tests/)."""
    backend = install(session, "test")
    session.run("python", "-m", "pytest", "tests/", *_without_backend(list(session.posargs)), env=_env(backend))


@nox.session
def fuzz(session: nox.Session) -> None:
    """Fuzz suite and regression replay (pytest fuzz/); posargs: --profile, --backend, -n N (cpu: -n auto)."""
    backend = install(session, "test")
    args = list(session.posargs)
    xdist_set = any(a.startswith(("-n", "--numprocesses", "--dist")) or a == "no:xdist" for a in args)
    if backend == "cpu" and not xdist_set:
        args = ["-n", "auto", *args]  # one worker per core; device runs choose -n (one worker per device)
    with _sigterm_as_interrupt():
        # nox passes an interrupt on as SIGINT, then waits this long before it terminates pytest:
        # time to stop the xdist workers and write fuzz-report.json (fuzz/conftest.py).
        session.run("python", "-m", "pytest", "fuzz/", "--hypothesis-show-statistics", *args, env=_env(backend),
                    interrupt_timeout=FUZZ_REPORT_GRACE_S)


FUZZ_REPORT_GRACE_S = 120.0


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM to nox (``timeout``, a CI job's time limit) acts as Ctrl-C: nox then interrupts
    pytest and waits for it, instead of dying at once and leaving pytest to be killed before it
    wrote its report."""

    def interrupt(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: timeout(1) also signals the process group
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@nox.session
def regress(session: nox.Session) -> None:
    """Replay every stored minimal case in regressions/ (pytest fuzz/test_regressions.py)."""
    backend = install(session, "test")
    session.run("python", "-m", "pytest", "fuzz/test_regressions.py", *session.posargs, env=_env(backend))


@nox.session(default=False)
def replay(session: nox.Session) -> None:
    """Replay the regression files given as posargs and print case, verdict and metrics (wy-ascend replay)."""
    backend = install(session, "test")
    files = _without_backend(list(session.posargs))
    if not files:
        session.error("usage: nox -s replay -- regressions/<file>.json [...] [--backend NAME]")
    for path in files:
        session.run("wy-ascend", "replay", path, "--backend", backend, env=_env(backend))


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Benchmarks (pytest benchmarks/ with pytest-benchmark); the peer (fla-core) on CUDA backends."""
    backend = backend_of(session)
    install(session, "test", *(("peer",) if EXTRA[backend] == "cuda" else ()))
    session.run("python", "-m", "pytest", "benchmarks/", "--benchmark-only", "--benchmark-sort=name",
                "--benchmark-columns=min,median,mean,stddev,rounds", *session.posargs, env=_env(backend))


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check (the repository) and mypy (src/wy_ascend)."""
    install(session, "test", packages=("ruff", "mypy"))
    session.run("ruff", "check", ".")
    session.run("mypy", "src/wy_ascend")


@nox.session(default=False)
def lower(session: nox.Session) -> None:
    """Ahead-of-time lowering of every npu and cuda specialization, on the CPU (python -m wy_ascend.lowering)."""
    install(session)
    session.run("python", "-m", "wy_ascend.lowering", *_without_backend(list(session.posargs)))


@nox.session(default=False)
def mutants(session: nox.Session) -> None:
    """Mutation score: plant known bugs one at a time and check the fuzz suite catches each (fuzz/mutants.py)."""
    backend = install(session, "test")
    session.run("python", "fuzz/mutants.py", *session.posargs, env=_env(backend))


def _without_backend(args: list[str]) -> list[str]:
    """The posargs less ``--backend X`` (for commands that take the backend from WY_ASCEND_BACKEND)."""
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--backend":
            skip = True
        elif not arg.startswith("--backend="):
            out.append(arg)
    return out
