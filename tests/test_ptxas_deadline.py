"""The ptxas deadline of autotuned first launches (backends.ptxas_deadline): a runaway compile of
one config fails fast, so Triton's autotuner takes the next config instead of hanging the call."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from wy_ascend import backends

ROOT = Path(__file__).resolve().parents[1]


def _fake_ptxas(tmp_path: Path, body: str) -> str:
    path = tmp_path / "fake_ptxas"
    path.write_text(f"#!{sys.executable}\nimport sys, time\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return str(path)


def test_the_wrapper_passes_arguments_output_and_exit_code_through(tmp_path: Path) -> None:
    real = _fake_ptxas(tmp_path, "print('args', sys.argv[1:]); sys.exit(3)\n")
    done = subprocess.run([backends.ptxas_wrapper(real, 30.0), "--version", "-o", "x"], capture_output=True, text=True)
    assert done.returncode == 3 and "args ['--version', '-o', 'x']" in done.stdout


def test_the_wrapper_stops_a_runaway_ptxas_at_its_deadline(tmp_path: Path) -> None:
    real = _fake_ptxas(tmp_path, "time.sleep(60)\n")
    start = time.monotonic()
    done = subprocess.run([backends.ptxas_wrapper(real, 1.0), "in.ptx"], capture_output=True, text=True)
    assert time.monotonic() - start < 15  # the deadline (1 s) and interpreter start-up, not the 60 s
    assert done.returncode == 124 and "ptxas ran past 1.0 s" in done.stderr and backends.PTXAS_TIMEOUT_ENV in done.stderr


@pytest.mark.parametrize(("raw", "value"), [("", backends.PTXAS_TIMEOUT_S), ("0", 0.0), ("2.5", 2.5)])
def test_the_deadline_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, raw: str, value: float) -> None:
    monkeypatch.setenv(backends.PTXAS_TIMEOUT_ENV, raw)
    assert backends.ptxas_timeout() == value


@pytest.mark.parametrize("raw", ["-1", "soon", "nan"])
def test_a_bad_deadline_is_refused_by_name(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv(backends.PTXAS_TIMEOUT_ENV, raw)
    with pytest.raises(ValueError, match=backends.PTXAS_TIMEOUT_ENV):
        backends.ptxas_timeout()


def test_a_kernel_with_one_config_compiles_as_before() -> None:
    """No autotuning, no next config: the deadline is not applied (nothing of Triton is touched)."""

    class OneConfig:
        configs = [object()]

    env = dict(os.environ)
    with backends.ptxas_deadline(OneConfig()):
        assert dict(os.environ) == env


# On a GPU: a fake ptxas hangs on every 2-warp build (PTX ".reqntid 64" or ".maxntid 64": LLVM prints
# one to three dims) and runs the real one otherwise; it logs the thread-count line of every PTX it
# gets. A first autotuned call on a fresh Triton cache must finish with another config and right
# results, well before the hang would end.
HANG_ON_TWO_WARPS = """\
import os, re, subprocess
ptx = next((a for a in sys.argv[1:] if a.endswith('.ptx')), None)
text = open(ptx).read() if ptx else ''
ntid = re.findall(r'\\.(?:reqntid|maxntid)[^\\n]*', text)
log = open(os.environ['MARK'], 'a')
log.write(f"ptxas {ptx} {ntid}\\n")
if any(re.fullmatch(r'\\.(?:reqntid|maxntid)\\s+64\\b.*', line) for line in ntid):
    log.write('hung\\n')
    log.close()
    time.sleep(600)
log.close()
sys.exit(subprocess.run([os.environ['REAL_PTXAS'], *sys.argv[1:]]).returncode)
"""
CALL = """\
import torch, wy_ascend
from wy_ascend import backends
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import check_oracle
case = Case(B=1, T=200, H=2, HV=4, K=48, V=80, BT=64, dtype="bfloat16", use_g=True, backend="cuda")
print("oracle", check_oracle(case))
print("configs", [str(c) for c in backends._autotuned("bwd").cache.values()])
"""


@pytest.mark.device
def test_a_runaway_config_is_skipped_on_cuda(tmp_path: Path) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    from triton import knobs

    mark = tmp_path / "mark"
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "cache"), MARK=str(mark),
               REAL_PTXAS=knobs.nvidia.ptxas.path, TRITON_PTXAS_PATH=_fake_ptxas(tmp_path, HANG_ON_TWO_WARPS),
               WY_ASCEND_PTXAS_TIMEOUT="10", WY_ASCEND_AUTOTUNE="1", WY_ASCEND_BACKEND="cuda",
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    env.pop("TRITON_INTERPRET", None)  # the cpu backend's conftest may have set it in this process
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", CALL], env=env, capture_output=True, text=True, timeout=400)
    took = time.monotonic() - start
    assert done.returncode == 0, done.stderr[-4000:]
    seen = mark.read_text() if mark.exists() else "(the fake ptxas never ran)"
    assert "hung" in seen, seen  # a 2-warp build was tried and hung
    assert "num_warps: 2" not in done.stdout.split("configs", 1)[1]  # ... and not chosen
    assert took < 300, took  # each hang cut at 10 s, not 600


def test_an_autotuned_kernel_compiles_through_the_wrapper_of_its_own_ptxas(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path) -> None:
    """Several configs: inside the block Triton's ptxas knob is the wrapper of the ptxas it had, under this
    process's deadline, and the knob is Triton's own again after it (on the CPU through a stand-in for
    upstream Triton's ``knobs.nvidia``, which triton-ascend lacks; the cuda runs use the real one)."""
    import contextlib
    import types

    import triton

    real = tmp_path / "ptxas"
    real.write_text(f"#!{sys.executable}\nimport sys\nprint('real', *sys.argv[1:])\n")
    real.chmod(0o755)
    nvidia = types.SimpleNamespace(ptxas=types.SimpleNamespace(path=str(real)))

    @contextlib.contextmanager
    def scope():
        saved = nvidia.ptxas
        try:
            yield
        finally:
            nvidia.ptxas = saved

    nvidia.scope = scope
    monkeypatch.setattr(triton, "knobs", types.SimpleNamespace(nvidia=nvidia), raising=False)
    monkeypatch.setenv(backends.PTXAS_TIMEOUT_ENV, "7")

    class Configs:
        configs = [object(), object()]

    with backends.ptxas_deadline(Configs()):
        wrapper = nvidia.ptxas
        assert wrapper == backends.ptxas_wrapper(str(real), 7.0)
        done = subprocess.run([wrapper, "in.ptx"], capture_output=True, text=True)
        assert done.returncode == 0 and done.stdout.strip() == "real in.ptx"
    assert nvidia.ptxas.path == str(real)
