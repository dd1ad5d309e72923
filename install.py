"""Install wy_ascend from this checkout into the running Python environment, or refuse before pip runs.

    python install.py cpu             # CPU only: torch for the CPU and triton-ascend's interpreter
    python install.py cuda            # NVIDIA GPUs: torch with CUDA and upstream triton 3.6-3.8
    python install.py npu             # Ascend NPUs: after torch and torch_npu for your CANN toolkit
    python install.py cpu --dev       # editable, with the test tools (pytest, Hypothesis, nox) and fla-core
    python install.py cpu --upstream  # with fla-core too: the fuzz suite's fla subjects, the benchmarks' peer
    python install.py cpu --dry-run   # the checks and the pip commands, nothing changed

Why a script and not one pip line: upstream ``triton`` and ``triton-ascend`` both install the
``triton`` module, and pip installs one over the other without a word. PyPI's torch for Linux is
a CUDA build that brings upstream triton, so ``pip install ".[cpu]"`` with the PyTorch CPU index
unreachable ends in an environment whose ``triton`` is the wrong one. This script

1. refuses, changing nothing, where the environment already holds what the backend cannot live
   with: upstream triton or a CUDA build of torch for cpu, triton-ascend for cuda, upstream
   triton or no torch_npu for npu;
2. for cpu without torch, installs torch alone first, pinned to its CPU build (``+cpu``): from a
   local wheel (``WY_ASCEND_WHEELS``, default /opt/wheels) or else the PyTorch CPU index
   (``WY_ASCEND_TORCH_INDEX``); where neither has it, pip fails and nothing has been installed;
3. installs the package under constraints that pin the torch now present and forbid the other
   ``triton`` (``triton<0`` or ``triton-ascend<0``): anything that would bring it makes pip
   fail before it installs;
4. checks that the backend's Triton loads (on a machine without the backend's device it says
   so and stops there);
5. records what it installed in the environment (``STAMP``): ``nox`` runs its sessions in the
   environment this script built (noxfile.py) and installs nothing more where the record matches.

``--dev`` takes fla-core too (the ``upstream`` extra): the regression store holds fla-core's finds,
and the differential property runs every case on fla-core's kernels as well.

Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent
TORCH_CPU = "2.13.0"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# Per backend: the package extra, and the distribution that must never be installed beside it.
EXTRA = {"cpu": "cpu", "cuda": "cuda", "npu": "npu"}
FORBIDDEN = {"cpu": "triton", "cuda": "triton-ascend", "npu": "triton"}
FRESH = "python -m venv .venv && . .venv/bin/activate && python install.py {backend}"
STAMP = "wy-ascend-installed"  # in the environment's prefix: one line per install this script made there


def extras(backend: str, dev: bool, upstream: bool) -> str:
    """The package's extras for an install: the backend's, and with ``dev`` the test tools and fla-core."""
    return ",".join([EXTRA[backend], *(["test", "upstream"] if dev else ["upstream"] if upstream else [])])


def install_key(backend: str, dev: bool, upstream: bool = False) -> str:
    """What an install puts into an environment: editable or not, the extras and pyproject.toml's hash
    (a changed pyproject.toml is another install). noxfile.py compares it with the environment's STAMP."""
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()[:16]
    return f"{'-e ' if dev else ''}.[{extras(backend, dev, upstream)}] pyproject:{digest}"


def installed(prefix: str | Path, key: str) -> bool:
    """Whether the environment at ``prefix`` records the install ``key`` (``install_key``) as done."""
    stamp = Path(prefix, STAMP)
    return stamp.is_file() and key in stamp.read_text().splitlines()


def version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def cuda_build(torch_version: str) -> bool:
    """Whether the installed torch is a CUDA build: it says so in its version (+cuXXX) or depends
    on NVIDIA's runtime wheels (PyPI's Linux builds carry no local version)."""
    if "+cu" in torch_version:
        return True
    return any(r.startswith(("nvidia-", "nvidia_")) for r in metadata.requires("torch") or [])


def refusal(backend: str) -> str | None:
    """Why this environment cannot take ``backend``'s install, with what to do instead; None if it can."""
    forbidden, torch = version(FORBIDDEN[backend]), version("torch")
    fresh = f"install into a fresh environment instead: {FRESH.format(backend=backend)}"
    if forbidden is not None:
        return (f"{FORBIDDEN[backend]} {forbidden} is installed here, and it owns the same `triton` module as "
                f"{'upstream triton' if backend == 'cuda' else 'triton-ascend'}, which the {backend} backend needs; "
                f"{fresh}")
    if backend == "cpu" and torch is not None and cuda_build(torch):
        return (f"torch {torch} here is a CUDA build, which depends on upstream triton; the cpu backend needs "
                f"triton-ascend's `triton` module; {fresh}")
    if backend == "npu" and (torch is None or version("torch_npu") is None):
        return ("the npu backend needs torch and torch_npu installed first, built for your CANN toolkit "
                "(Ascend's installation guide); then run this again")
    return None


def local_torch_wheel() -> Path | None:
    """A CPU wheel of torch TORCH_CPU for this Python in WY_ASCEND_WHEELS (default /opt/wheels)."""
    wheels = Path(os.environ.get("WY_ASCEND_WHEELS", "/opt/wheels"))
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    found = sorted(wheels.glob(f"torch-{TORCH_CPU}+cpu-{tag}-*.whl")) if wheels.is_dir() else []
    return found[0] if found else None


def pip(*args: str) -> list[str]:
    return [sys.executable, "-m", "pip", "install", *args]


def torch_command() -> list[str]:
    """pip's command for torch TORCH_CPU's CPU build: from the local wheel, else from the PyTorch CPU index;
    its other requirements from the configured indexes."""
    wheel = local_torch_wheel()  # the +cpu pin: PyPI's torch of the same number is a CUDA build
    source = ["--find-links", str(wheel.parent)] if wheel else ["--extra-index-url", os.environ.get(
        "WY_ASCEND_TORCH_INDEX", TORCH_CPU_INDEX)]
    return pip(f"torch=={TORCH_CPU}+cpu", *source)


def constraints(backend: str) -> str:
    """The constraints file's text: the torch now installed stays, the other triton cannot come."""
    lines = [f"{FORBIDDEN[backend]}<0  # owns the `triton` module the {backend} backend takes from "
             f"{'upstream triton' if backend == 'cuda' else 'triton-ascend'}"]
    torch = version("torch")
    if torch is not None:
        lines.append(f"torch=={torch}  # the torch installed before, kept")
    return "\n".join(lines) + "\n"


CHECK = """
from wy_ascend.backends import BACKENDS, check_available
from wy_ascend.errors import BackendUnavailableError
try:
    check_available(BACKENDS[{backend!r}])
except BackendUnavailableError as e:
    raise SystemExit(str(e))
print("backend {backend}: ready")
"""


def check_command(backend: str) -> list[str]:
    """Load the backend's Triton through the package's own availability check."""
    return [sys.executable, "-c", CHECK.format(backend=backend)]


def run(command: list[str], dry_run: bool) -> None:
    print("+", shlex.join(command), flush=True)
    if not dry_run:
        subprocess.run(command, check=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python install.py", description=__doc__.split("\n\n")[0])
    p.add_argument("backend", choices=sorted(EXTRA), help="what the kernels will run on")
    p.add_argument("--dev", action="store_true",
                   help="editable install with the test tools and fla-core (the `test` and `upstream` extras)")
    p.add_argument("--upstream", action="store_true", help="also fla-core (the `upstream` extra): the fla subjects")
    p.add_argument("--dry-run", action="store_true", help="print the checks and the pip commands, change nothing")
    args = p.parse_args(argv)
    why = refusal(args.backend)
    if why is not None:
        print(f"install.py: refused, nothing changed: {why}", file=sys.stderr)
        return 2
    print(f"environment {sys.prefix}: torch {version('torch') or 'not installed'}, "
          f"{FORBIDDEN[args.backend]} not installed", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        pinned = Path(tmp, "constraints.txt")
        try:
            if args.backend == "cpu" and version("torch") is None:
                try:
                    run(torch_command(), args.dry_run)
                except subprocess.CalledProcessError:
                    print(f"install.py: no CPU build of torch {TORCH_CPU} found: where the PyTorch CPU index cannot be "
                          f"reached, put torch-{TORCH_CPU}+cpu-cp{sys.version_info.major}{sys.version_info.minor}-*.whl "
                          "(from that index, on another machine) in a folder and set WY_ASCEND_WHEELS to it",
                          file=sys.stderr)
                    raise
            pinned.write_text(constraints(args.backend))
            print("constraints:\n  " + pinned.read_text().rstrip().replace("\n", "\n  "))
            requirement = f"{ROOT}[{extras(args.backend, args.dev, args.upstream)}]"
            run(pip(*(["-e"] if args.dev else []), requirement, "--constraint", str(pinned)), args.dry_run)
        except subprocess.CalledProcessError as e:
            print(f"install.py: pip failed (exit {e.returncode}), its reason above; a failure to resolve or build "
                  "installs nothing, and the commands before it (above) stand", file=sys.stderr)
            return 1
    if args.dry_run:
        return 0
    if not installed(sys.prefix, key := install_key(args.backend, args.dev, args.upstream)):
        with Path(sys.prefix, STAMP).open("a") as f:
            f.write(key + "\n")
    result = subprocess.run(check_command(args.backend))
    if result.returncode != 0 and args.backend != "cpu":
        print(f"installed; the {args.backend} backend cannot run on this machine (above): it needs its device")
        return 0
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
