"""nox sessions of wy_ascend: tests, fuzzing, regression replay, benchmarks, lint, lowering, mutants.

    nox                                  # the default sessions: tests, fuzz, regress, lint (CPU)
    nox -s fuzz                          # fuzz suite, dev profile, cpu backend (Triton interpreter)
    nox -s fuzz -- --profile ci -n 2     # what CI runs: derandomized, a fixed budget (docs/ci.md)
    nox -s fuzz -- --profile nightly --backend npu -n 8    # one xdist worker per NPU
    nox -s regress -- --backend cuda     # replay every case in regressions/ (the fuzz session does not)
    nox -s bench -- --backend cuda
    nox -s lower_cuda                    # the cuda specializations through upstream Triton (own environment)
    nox --no-venv -s fuzz -- --backend npu   # use the current environment (preinstalled torch_npu/CANN)

The backend (``--backend NAME`` in the posargs, else ``WY_ASCEND_BACKEND``, else cpu) picks the
environment, one per backend extra, shared by every session: ``.venv`` for cpu (the README's, where
``wy-ascend`` and the tests run too), ``.nox/cuda`` (cuda and npu-cuda) or ``.nox/npu``. Where it does
not hold the install yet, nox creates it (virtualenv, with pip) and runs ``python install.py <extra>
--dev`` in it, the README's install: torch's CPU build first on the cpu, the package editable with the
test tools and fla-core, upstream and triton-ascend kept apart. install.py records what it installed
(``install.STAMP``); a session installs nothing where the record matches, so the README's install
followed by ``nox -s tests`` installs once. ``--no-venv`` runs in the current environment as it is;
``--no-reuse-existing-virtualenvs`` rebuilds the environment.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import nox
import nox.virtualenv

nox.options.reuse_existing_virtualenvs = True
nox.options.default_venv_backend = "uv|virtualenv"  # lower_cuda's environment: uv when present, else virtualenv

BACKENDS = ("cpu", "cuda", "npu", "npu-cuda")
EXTRA = {"cpu": "cpu", "cuda": "cuda", "npu-cuda": "cuda", "npu": "npu"}
ROOT = Path(__file__).resolve().parent
ENVIRONMENT = {"cpu": ".venv", "cuda": ".nox/cuda", "npu": ".nox/npu"}  # per backend extra: where its sessions run
_spec = importlib.util.spec_from_file_location("wy_install", ROOT / "install.py")
assert _spec is not None and _spec.loader is not None
INSTALL = importlib.util.module_from_spec(_spec)  # install.py: the README's install, and its record
_spec.loader.exec_module(INSTALL)
UPSTREAM_TRITON = "triton==3.6.0"  # what the lent H200s run (nox -s lower_cuda)
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


def install(session: nox.Session, packages: tuple[str, ...] = ()) -> str:
    """Attach the backend's environment (``ENVIRONMENT``, ``use_shared_env``) and, unless it records the
    install already, run the README's install in it (``python install.py <extra> --dev``); then install
    ``packages`` (once); print versions; return the backend."""
    backend = backend_of(session)
    extra = EXTRA[backend]
    env = use_shared_env(session, ENVIRONMENT[extra], pip=True)
    if env == "current":
        session.log("no virtualenv (--no-venv): using the current environment as it is")
    elif env == "install":
        location = session.virtualenv.location  # type: ignore[attr-defined]
        if INSTALL.installed(location, INSTALL.install_key(extra, dev=True)):
            session.log(f"{location}: install.py {extra} --dev installed already (pyproject.toml unchanged)")
        else:
            session.run("python", "install.py", extra, "--dev")
        if packages:
            install_once(session, " ".join(sorted(packages)), lambda: session.install(*packages))
    session.run("python", "-c", VERSIONS, backend, log=False)
    return backend


def install_once(session: nox.Session, key: str, steps: Callable[[], None]) -> bool:
    """Run the install ``steps`` unless the session's environment records ``key`` (what they install)
    as done (install.py's record, ``INSTALL.STAMP``); record it after. Returns whether they ran."""
    location = session.virtualenv.location  # type: ignore[attr-defined]
    if INSTALL.installed(location, key):
        return False
    steps()
    with Path(location, INSTALL.STAMP).open("a") as f:
        f.write(key + "\n")
    return True


def use_shared_env(session: nox.Session, path: str, pip: bool = False) -> str:
    """Point ``session`` at ``path`` (relative to the repository), the environment of every session
    that installs the same packages, creating it on first use (nox's backends in order: uv when
    present, else virtualenv; with ``pip``, virtualenv or venv: install.py runs pip). Returns
    "install", or "keep" (``--no-install`` and the environment existed: nox skips installs), or
    "current" (``--no-venv``: no environment made).

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
    if pip:
        backends = [b for b in backends if b in ("virtualenv", "venv")] or ["virtualenv"]
    venv = nox.virtualenv.get_virtualenv(*backends, download_python="never",
                                         envdir=str(ROOT / path),
                                         reuse_existing=runner.reuse_existing_venv(), interpreter=runner.func.python)
    tag = Path(venv.location).parent / "CACHEDIR.TAG"  # nox marks an environment's parent as a cache
    tagged = tag.exists()
    existed = not venv.create()
    if not tagged and tag.parent == ROOT:
        tag.unlink(missing_ok=True)  # the checkout itself (.venv's parent) is no cache to skip in backups
    runner.venv = venv
    session.env["NOX_CURRENT_SESSION"] = session.name
    return "keep" if config.no_install and existed else "install"


def _install_key(spec: str, packages: tuple[str, ...]) -> str:
    """What lower_cuda's install put into its environment: the requirement, the packages and pyproject.toml's hash."""
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
    """Fuzz suite (pytest fuzz/, less the store's replay: nox -s regress); posargs: --profile, --backend,
    --subject, -n N (cpu: -n auto), -v (Hypothesis' statistics too)."""
    backend = install(session)
    args = _workers(backend, list(session.posargs))
    with _sigterm_as_interrupt():
        # nox passes an interrupt on as SIGINT, then waits this long before it terminates pytest:
        # time to stop the xdist workers and write fuzz-report.json (fuzz/conftest.py).
        session.run("python", "-m", "pytest", "fuzz/", f"--ignore={REPLAY_TESTS}", *args, env=_env(backend),
                    interrupt_timeout=FUZZ_REPORT_GRACE_S)


FUZZ_REPORT_GRACE_S = 120.0
REPLAY_TESTS = "fuzz/test_regressions.py"  # the store's replay, one item a file: the regress session


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
    backend = install(session, packages=("--no-deps", "-e", EXAMPLE))
    session.chdir(EXAMPLE)
    args = list(session.posargs) or ["--profile", "ci", "-n", "2"]
    with _sigterm_as_interrupt():
        session.run("wy-ascend", "fuzz", "--subject", "natural-gate-wy", *args, env=_env(backend),
                    interrupt_timeout=FUZZ_REPORT_GRACE_S)


@nox.session(venv_backend="none")
def regress(session: nox.Session) -> None:
    """Replay every stored minimal case in regressions/, every subject's (pytest fuzz/test_regressions.py)."""
    backend = install(session)
    session.run("python", "-m", "pytest", REPLAY_TESTS, *session.posargs, env=_env(backend))


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
    backend = install(session)  # fla-core, the peer, comes with install.py's --dev
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
        session.install(*INSTALL.torch_command()[4:])  # torch's CPU build, from where install.py takes it
        session.install(UPSTREAM_TRITON, "numpy<2.3")
        session.install("-e", ".", "--no-deps")

    if use_shared_env(session, ".nox/cuda-lower") == "install":
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
