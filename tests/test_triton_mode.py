"""A process runs either the interpreter (cpu backend) or compiled kernels (npu, cuda, npu-cuda):
Triton fixes the mode when it is first imported (TRITON_INTERPRET). ``backends._kernels`` sets the
interpreter only for a cpu-first process, leaves a device-first one compiled, and refuses a mix
with an error that says how to start the process (each case in a fresh interpreter)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = """\
import os, sys
from wy_ascend import backends
from wy_ascend.errors import BackendUnavailableError
for step in sys.argv[1:]:
    if step == "import-triton":
        import triton  # noqa: F401  (the process's own import, before any wy_ascend kernel)
        continue
    try:
        kernels = backends._kernels(interpret=step == "cpu")
        print(type(kernels.wy_fwd_kernel).__name__, os.environ.get("TRITON_INTERPRET"))
    except BackendUnavailableError as e:
        print("refused:", e)
"""


def _run(*steps: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, *steps], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.splitlines()


@pytest.mark.parametrize("first_import", [False, True])
def test_a_device_first_process_keeps_compiled_kernels(first_import: bool) -> None:
    """npu and npu-cuda call ``_kernels(False)`` with triton not yet imported (cuda's autotuner imports it
    first): the kernels are compiled ones and TRITON_INTERPRET stays unset; the cpu backend is then refused."""
    lines = _run(*(["import-triton"] if first_import else []), "device", "cpu")
    assert lines[0] == "JITFunction None"
    assert lines[1].startswith("refused: backend cpu needs TRITON_INTERPRET=1 set before triton is first imported")


@pytest.mark.cpu_interpreter
def test_a_cpu_first_process_runs_the_interpreter() -> None:
    lines = _run("cpu", "device")
    assert lines[0] == "InterpretedFunction 1"
    assert lines[1].startswith("refused: backend npu/cuda needs TRITON_INTERPRET unset")


def test_the_interpreter_cannot_come_after_triton_was_imported_compiled() -> None:
    """Triton imported without TRITON_INTERPRET has built compiled functions: the cpu backend is refused,
    not run half in one mode (the device backends still work)."""
    lines = _run("import-triton", "cpu", "device")
    assert lines[0].startswith("refused: backend cpu needs TRITON_INTERPRET=1")
    assert lines[1] == "JITFunction None"
