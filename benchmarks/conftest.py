"""pytest wiring of the benchmarks: the ``--backend`` option and the run's versions in the JSON.

Backend: ``--backend NAME`` > ``WY_ASCEND_BACKEND`` > ``cpu``. The cpu backend is Triton's
interpreter, which triton picks when it is first imported, so TRITON_INTERPRET is set here,
at import, from the command line (``pytest_configure`` then checks that it matched).

Torch's CPU threads (the oracle's) are set to ``WY_ASCEND_BENCH_THREADS`` (default 1): on small
tensors intra-op threads only add synchronization, and on a loaded machine their spin-waits
made a 0.3 ms oracle call take 90 ms. The count and the load average go into the JSON.
"""

from __future__ import annotations

import os
import shlex
import sys
from importlib import metadata

BACKEND_ENV = "WY_ASCEND_BACKEND"
THREADS_ENV = "WY_ASCEND_BENCH_THREADS"


def _backend_from_argv() -> str:
    args = shlex.split(os.environ.get("PYTEST_ADDOPTS", "")) + sys.argv[1:]
    found = None
    for i, a in enumerate(args):
        if a == "--backend" and i + 1 < len(args):
            found = args[i + 1]
        elif a.startswith("--backend="):
            found = a.split("=", 1)[1]
    return found or os.environ.get(BACKEND_ENV) or "cpu"


if _backend_from_argv() == "cpu" and "triton" not in sys.modules:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402


def pytest_addoption(parser: pytest.Parser) -> None:
    try:  # fuzz/conftest.py defines the same option when both directories are collected
        parser.getgroup("wy_ascend").addoption(
            "--backend", default=None, help="backend: cpu, cuda, npu, npu-cuda (env WY_ASCEND_BACKEND, default cpu)")
    except ValueError:
        pass


def selected_backend(config: pytest.Config) -> str:
    return config.getoption("--backend") or os.environ.get(BACKEND_ENV) or "cpu"


def pytest_configure(config: pytest.Config) -> None:
    from wy_ascend.backends import BACKENDS

    name = selected_backend(config)
    if name not in BACKENDS:
        raise pytest.UsageError(f"--backend must be one of {sorted(BACKENDS)}, got {name!r}")
    if (name == "cpu") != (os.environ.get("TRITON_INTERPRET") == "1"):
        raise pytest.UsageError(
            f"backend {name!r} needs TRITON_INTERPRET {'=1' if name == 'cpu' else 'unset'} before triton is imported; "
            f"pass it as --backend {name} on the command line or set {BACKEND_ENV}={name}")
    import torch

    from wy_ascend.env import number

    torch.set_num_threads(number(THREADS_ENV, 1, int, "threads", positive=True))


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> str:
    return selected_backend(request.config)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _command() -> str:
    """The command line as typed, with the environment variables that steer a run."""
    env = [f"{k}={os.environ[k]}" for k in ("TRITON_INTERPRET", BACKEND_ENV, THREADS_ENV, "WY_ASCEND_AUTOTUNE")
           if k in os.environ]
    prog = ["python", "-m", "pytest"] if sys.argv[0].endswith("__main__.py") else ["pytest"]
    return " ".join(shlex.quote(a) for a in [*env, *prog, *sys.argv[1:]])


def pytest_benchmark_update_machine_info(config: pytest.Config, machine_info: dict) -> None:
    """Record what produced the numbers: backend, device, package versions, the command line."""
    import torch

    name = selected_backend(config)
    device = "cpu (Triton interpreter)" if name == "cpu" else None
    if name in ("cuda", "npu-cuda") and torch.cuda.is_available():
        device = torch.cuda.get_device_name()
    elif name == "npu":
        device = "Ascend NPU"
    machine_info["wy_ascend"] = dict(
        backend=name,
        device=device,
        command=_command(),
        versions={d: _version(d) for d in ("wy_ascend", "torch", "triton", "triton-ascend", "fla-core", "numpy",
                                           "pytest-benchmark")},
        triton_module=getattr(sys.modules.get("triton"), "__version__", None),
        cuda=torch.version.cuda,
        torch_threads=torch.get_num_threads(),
        load_average=list(os.getloadavg()),
    )
