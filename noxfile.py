"""nox sessions of wy_ascend: tests, fuzzing, regression replay, benchmarks, lint, lowering, mutants.

    nox                                  # the default sessions: tests, fuzz, regress, lint (CPU)
    nox -s fuzz                          # fuzz suite, dev profile, cpu backend (Triton interpreter)
    nox -s fuzz -- --profile ci -n 2     # what CI runs: derandomized, a fixed budget (docs/ci.md)
    nox -s fuzz -- --profile nightly --backend npu -n 8    # one xdist worker per NPU
    nox -s regress -- --backend cuda     # replay every case in regressions/
    nox -s bench -- --backend cuda
    nox -s lower_cuda                    # the cuda specializations through upstream Triton (own environment)
    nox --no-venv -s fuzz -- --backend npu   # use the current environment (preinstalled torch_npu/CANN)

The backend (``--backend NAME`` in the posargs, else ``WY_ASCEND_BACKEND``, else cpu) picks the
extra to install: ``.[cpu,test]`` (triton-ascend's interpreter), ``.[cuda,test]`` (cuda and
npu-cuda) or ``.[npu,test]``. On the CPU torch's CPU build, ``torch==2.13.0+cpu``, is installed
first, from a local wheel (``WY_ASCEND_WHEELS``, default /opt/wheels) or else PyTorch's CPU index,
then the package under constraints that keep it and forbid upstream triton (install.py does the
same for an environment of one's own).

One environment per backend extra, shared by every session: ``.nox/cpu`` (``.[cpu,test]``),
``.nox/cuda`` or ``.nox/npu``, built once with uv when it is on the PATH (else virtualenv, without
a word) and reused while pyproject.toml and the packages asked for stay the same. ``nox -s tests``
then ``nox -s fuzz`` build one environment and install into it once. ``--no-venv`` runs in the
current environment as before; ``--no-reuse-existing-virtualenvs`` rebuilds the shared one.
"""

from __future__ import annotations

import hashlib
import logging
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import nox
import nox.virtualenv

nox.options.reuse_existing_virtualenvs = True
nox.options.default_venv_backend = "uv|virtualenv"  # the shared environments: uv when present, else virtualenv

BACKENDS = ("cpu", "cuda", "npu", "npu-cuda")
EXTRA = {"cpu": "cpu", "cuda": "cuda", "npu-cuda": "cuda", "npu": "npu"}
TORCH_CPU = "torch==2.13.0+cpu"  # the local version pins the CPU build: PyPI's 2.13.0 is a CUDA one
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
UPSTREAM_TRITON = "triton==3.6.0"  # what the lent H200s run (nox -s lower_cuda)
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
    """Install the package with the backend's extra, ``test``, ``upstream`` (fla-core: the fuzz suite's
    foreign subjects, pure Python) and ``extras`` into the backend's shared environment
    (``use_shared_env``), the same for every session so that it installs once; print versions;
    return the backend."""
    backend = backend_of(session)
    env = use_shared_env(session, EXTRA[backend])
    if env == "current":
        session.log("no virtualenv (--no-venv): using the current environment as it is")
    elif env == "install":
        spec = f".[{','.join(dict.fromkeys((EXTRA[backend], 'test', 'upstream', *extras)))}]"

        def steps() -> None:
            pins: tuple[str, ...] = ()
            if EXTRA[backend] == "cpu":
                install_torch_cpu(session)
                pins = ("--constraint", str(constraints(session, ["triton<0", TORCH_CPU])))
            session.install("-e", spec, *packages, *pins)

        if not install_once(session, _install_key(spec, packages), steps):
            session.log(f"{' '.join((spec, *packages))} already installed (pyproject.toml unchanged)")
    session.run("python", "-c", VERSIONS, backend, log=False)
    return backend


def install_once(session: nox.Session, key: str, steps: Callable[[], None]) -> bool:
    """Run the install ``steps`` unless the session's environment records ``key`` (what they install,
    ``_install_key``) as done; record it after. Returns whether they ran."""
    stamp = Path(session.virtualenv.location, "wy-ascend-installed")  # type: ignore[attr-defined]
    if stamp.is_file() and key in stamp.read_text().splitlines():
        return False
    steps()
    with stamp.open("a") as f:
        f.write(key + "\n")
    return True


def install_torch_cpu(session: nox.Session) -> None:
    """torch's CPU build (the local wheel, else PyTorch's CPU index), installed first: a package's
    plain ``torch`` requirement alone would let pip pick a multi-GB CUDA build that brings upstream
    triton. Where neither source has it, the install fails before anything else is installed."""
    local = WHEELS.is_dir() and any(WHEELS.glob("torch-2.13.0+cpu-*.whl"))
    session.install(TORCH_CPU, *(["--find-links", str(WHEELS)] if local else ["--extra-index-url", TORCH_CPU_INDEX]))


def constraints(session: nox.Session, lines: list[str]) -> Path:
    """A pip constraints file of ``lines`` in the session's environment (``triton<0``: anything that
    would bring upstream triton over triton-ascend's ``triton`` module makes the install fail)."""
    path = Path(session.virtualenv.location, "constraints.txt")  # type: ignore[attr-defined]
    path.write_text("\n".join(lines) + "\n")
    return path


def use_shared_env(session: nox.Session, name: str) -> str:
    """Point ``session`` at ``.nox/<name>``, the environment of every session that installs the
    same packages (one per backend extra), creating it on first use (nox's backends in order:
    uv when present, else virtualenv). Returns "install", or "keep" (``--no-install`` and the
    environment existed: nox skips installs), or "current" (``--no-venv``: no environment made).

    The sessions are declared without an environment of their own (``venv_backend="none"``), so
    nox builds none per session; this attaches the shared one as the session's environment.
    Installed nox (2026.10) has no per-session environment location (wntrblm/nox#167), so this
    is the one place the noxfile uses nox's internals (``session._runner``).
    """
    runner = session._runner
    config = runner.global_config
    if config.force_venv_backend == "none":
        return "current"
    backends = (config.force_venv_backend or config.default_venv_backend or "virtualenv").split("|")
    venv = nox.virtualenv.get_virtualenv(*backends, download_python="never",
                                         envdir=os.path.join(config.envdir, name),
                                         reuse_existing=runner.reuse_existing_venv(), interpreter=runner.func.python)
    existed = not venv.create()
    runner.venv = venv
    session.env["NOX_CURRENT_SESSION"] = session.name
    return "keep" if config.no_install and existed else "install"


def _install_key(spec: str, packages: tuple[str, ...]) -> str:
    """What an install put into the environment: the requirement, the packages and pyproject.toml's hash."""
    digest = hashlib.sha256(Path("pyproject.toml").read_bytes()).hexdigest()[:16]
    return " ".join((spec, *sorted(packages), f"pyproject:{digest}"))


class _QuietUvProbe(logging.Filter):
    """nox logs "uv binary not found." whenever it probes for uv; here virtualenv is the fallback."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "uv binary not found."


logging.getLogger("nox").addFilter(_QuietUvProbe())


def _env(backend: str) -> dict[str, str]:
    return {"WY_ASCEND_BACKEND": backend}


@nox.session(venv_backend="none")
def tests(session: nox.Session) -> None:
    """Unit and integration tests (pytest tests/, or the files given); cpu: one worker per core; skip reasons shown."""
    backend = install(session)
    args = _workers(backend, _without_backend(list(session.posargs)))
    named = any(Path(a.split("::")[0]).exists() for a in args if not a.startswith("-"))
    session.run("python", "-m", "pytest", *([] if named else ["tests/"]), "-rs", *args, env=_env(backend))


@nox.session(venv_backend="none")
def fuzz(session: nox.Session) -> None:
    """Fuzz suite and regression replay (pytest fuzz/); posargs: --profile, --backend, --subject, -n N (cpu: -n auto)."""
    backend = install(session)
    args = _workers(backend, list(session.posargs))
    with _sigterm_as_interrupt():
        # nox passes an interrupt on as SIGINT, then waits this long before it terminates pytest:
        # time to stop the xdist workers and write fuzz-report.json (fuzz/conftest.py).
        session.run("python", "-m", "pytest", "fuzz/", "--hypothesis-show-statistics", *args, env=_env(backend),
                    interrupt_timeout=FUZZ_REPORT_GRACE_S)


FUZZ_REPORT_GRACE_S = 120.0


def _workers(backend: str, args: list[str]) -> list[str]:
    """pytest ``args`` with ``-n auto`` (one xdist worker per core) on the cpu backend where they
    choose no workers; device runs choose their own ``-n`` (one worker per device)."""
    chosen = any(a.startswith(("-n", "--numprocesses", "--dist")) or a == "no:xdist" for a in args)
    return args if backend != "cpu" or chosen else ["-n", "auto", *args]


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


EXAMPLE = "examples/natural_gate_wy"


@nox.session(default=False, venv_backend="none")
def example(session: nox.Session) -> None:
    """The example outside subject (examples/natural_gate_wy) installed as its developer would, and fuzzed from
    its own directory by its entry point (docs/subjects.md); posargs go to ``wy-ascend fuzz`` (default: the ci
    profile on 2 workers)."""
    backend = install(session)
    install_once(session, f"example {EXAMPLE}", lambda: session.install("--no-deps", "-e", EXAMPLE))
    session.chdir(EXAMPLE)
    args = list(session.posargs) or ["--profile", "ci", "-n", "2"]
    with _sigterm_as_interrupt():
        session.run("wy-ascend", "fuzz", "--subject", "natural-gate-wy", *args, env=_env(backend),
                    interrupt_timeout=FUZZ_REPORT_GRACE_S)


@nox.session(venv_backend="none")
def regress(session: nox.Session) -> None:
    """Replay every stored minimal case in regressions/, every subject's (pytest fuzz/test_regressions.py)."""
    backend = install(session)
    session.run("python", "-m", "pytest", "fuzz/test_regressions.py", *session.posargs, env=_env(backend))


@nox.session(default=False, venv_backend="none")
def replay(session: nox.Session) -> None:
    """Replay the regression files given as posargs: verdict per file and a summary table (wy-ascend replay)."""
    backend = install(session)
    args = _without_backend(list(session.posargs))
    if not any(not a.startswith("-") for a in args):
        session.error("usage: nox -s replay -- regressions/<file>.json [...] [--backend NAME] [--timeout S]")
    # One call for all the files: each runs (a crash or a hang fails that file only), then the table;
    # exit 1 if any failed, crashed or timed out, else 2 if any was malformed or could not run.
    session.run("wy-ascend", "replay", *args, "--backend", backend, env=_env(backend))


@nox.session(default=False, venv_backend="none")
def bench(session: nox.Session) -> None:
    """Benchmarks (pytest benchmarks/ with pytest-benchmark); the peer (fla-core) on CUDA backends."""
    backend = backend_of(session)
    install(session, *(("peer",) if EXTRA[backend] == "cuda" else ()))
    session.run("python", "-m", "pytest", "benchmarks/", "--benchmark-only", "--benchmark-sort=name",
                "--benchmark-columns=min,median,mean,stddev,rounds", *session.posargs, env=_env(backend))


@nox.session(venv_backend="none")
def lint(session: nox.Session) -> None:
    """ruff check (the repository) and mypy (src/wy_ascend)."""
    install(session, packages=("ruff", "mypy"))
    session.run("ruff", "check", ".")
    session.run("mypy", "src/wy_ascend")


@nox.session(default=False, venv_backend="none")
def lower(session: nox.Session) -> None:
    """Ahead-of-time lowering of every npu and cuda specialization, on the CPU (python -m wy_ascend.lowering)."""
    install(session)
    session.run("python", "-m", "wy_ascend.lowering", *_without_backend(list(session.posargs)))


@nox.session(name="lower_cuda", default=False, venv_backend="none")
def lower_cuda(session: nox.Session) -> None:
    """The cuda specializations lowered by upstream Triton (UPSTREAM_TRITON, the H200's) on the CPU:
    NVIDIA's frontend and passes to ttgir for sm_90 (python -m wy_ascend.lowering under upstream
    triton). Its frontend rejects code triton-ascend's accepts, which ``lower`` cannot see. Its own
    environment, ``.nox/cuda-lower``: torch for the CPU, upstream triton, the package without deps."""
    def steps() -> None:
        install_torch_cpu(session)
        session.install(UPSTREAM_TRITON, "numpy<2.3")
        session.install("-e", ".", "--no-deps")

    if use_shared_env(session, "cuda-lower") == "install":
        install_once(session, _install_key(".", (UPSTREAM_TRITON,)), steps)
    session.run("python", "-m", "wy_ascend.lowering", *_without_backend(list(session.posargs)))


@nox.session(default=False, venv_backend="none")
def mutants(session: nox.Session) -> None:
    """Mutation score: plant bugs one at a time and check the suite catches each (python -m mutation)."""
    backend = install(session)
    session.run("python", "-m", "mutation", *session.posargs, env=_env(backend))


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
