"""install.py refuses an environment its backend cannot live with before pip runs, pins torch to its CPU
build for cpu and forbids the other `triton` distribution; the error of a missing backend says what
runs here and gives install.py's command for the missing one. The installs themselves are not run here
(they download); the commands they would run are."""

from __future__ import annotations

import functools
import importlib.util
import sys
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import wy_ascend
from wy_ascend import backends
from wy_ascend import interpreter as wy_interpreter
from wy_ascend.backends import BACKEND_ENV, BACKENDS, NEEDS, resolve_backend, runnable

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("wy_install", ROOT / "install.py")
assert spec is not None and spec.loader is not None
install = importlib.util.module_from_spec(spec)
spec.loader.exec_module(install)


def environment(monkeypatch: pytest.MonkeyPatch, dists: dict[str, str], torch_requires: list[str] = ()) -> None:
    """Pretend the environment holds ``dists`` (name -> version) and torch requires ``torch_requires``."""
    monkeypatch.setattr(install, "version", dists.get)
    monkeypatch.setattr(install.metadata, "requires", lambda dist: list(torch_requires) if dist == "torch" else [])


@pytest.mark.parametrize("backend,dists,requires,refused", [
    ("cpu", {}, [], None),
    ("cpu", {"torch": "2.13.0+cpu", "triton-ascend": "3.2.0"}, [], None),
    ("cpu", {"torch": "2.13.0+cpu", "triton": "3.6.0"}, [], "triton 3.6.0 is installed here"),
    ("cpu", {"torch": "2.14.1"}, ["nvidia-cudnn-cu13==9.1", "triton==3.8.0"], "is a CUDA build"),
    ("cpu", {"torch": "2.11.0+cu130"}, [], "is a CUDA build"),
    ("cuda", {"torch": "2.14.1", "triton": "3.8.0"}, ["triton==3.8.0"], None),
    ("cuda", {"torch": "2.13.0+cpu", "triton-ascend": "3.2.0"}, [], "triton-ascend 3.2.0 is installed here"),
    ("npu", {"torch": "2.8.0"}, [], "needs torch and torch_npu installed first"),
    ("npu", {"torch": "2.8.0", "torch_npu": "2.8.0", "triton": "3.6.0"}, [], "triton 3.6.0 is installed here"),
    ("npu", {"torch": "2.8.0", "torch_npu": "2.8.0"}, [], None),
])
def test_refuses_what_the_backend_cannot_live_with(monkeypatch, capsys, backend, dists, requires, refused) -> None:
    environment(monkeypatch, dists, requires)
    why = install.refusal(backend)
    assert why is None if refused is None else refused in why
    status = install.main([backend, "--dry-run"])
    out, err = capsys.readouterr()
    if refused is None:
        assert status == 0 and "\n+ " in out
    else:  # refused before any pip command
        assert status == 2 and "refused, nothing changed" in err and "+ " not in out


def test_cpu_takes_torch_from_a_cpu_source_first_and_pins_it(monkeypatch, capsys, tmp_path) -> None:
    environment(monkeypatch, {})
    monkeypatch.setenv("WY_ASCEND_WHEELS", str(tmp_path))  # no wheel there: the CPU index
    assert install.main(["cpu", "--dry-run", "--dev", "--upstream"]) == 0
    commands = [line for line in capsys.readouterr().out.splitlines() if line.startswith("+ ")]
    assert len(commands) == 2
    assert "torch==2.13.0+cpu --extra-index-url https://download.pytorch.org/whl/cpu" in commands[0]
    assert " -e " in commands[1] and f"{ROOT}[cpu,test,upstream]" in commands[1] and "--constraint" in commands[1]
    wheel = tmp_path / f"torch-2.13.0+cpu-cp{sys.version_info.major}{sys.version_info.minor}-none-any.whl"
    wheel.touch()
    assert install.torch_command()[-3:] == ["torch==2.13.0+cpu", "--find-links", str(tmp_path)]


def test_the_constraints_forbid_the_other_triton_and_keep_torch(monkeypatch) -> None:
    environment(monkeypatch, {"torch": "2.13.0+cpu"})
    lines = [line.split("#")[0].strip() for line in install.constraints("cpu").splitlines()]
    assert lines == ["triton<0", "torch==2.13.0+cpu"]
    assert install.constraints("cuda").startswith("triton-ascend<0")


def test_a_missing_backend_names_what_runs_here_and_how_to_get_it() -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device: the cuda backend is not missing")
    with pytest.raises(wy_ascend.BackendUnavailableError) as missing:
        wy_ascend.recompute_w_u_fwd(*[torch.zeros(1, 16, 1, 16)] * 2, torch.zeros(1, 16, 1),
                                    torch.zeros(1, 16, 1, 16), None, backend="cuda")
    message = str(missing.value)
    assert f"Available here: {', '.join(runnable()) or 'none'}." in message and "cuda" not in runnable()
    assert "python install.py cuda" in message and missing.value.backend == "cuda"
    for advice in NEEDS.values():  # every command the advice gives is one install.py takes
        command = advice.split("(python install.py ")[1].split(")")[0].split(",")[0]
        assert command in install.EXTRA


def test_dev_takes_fla_core_the_stores_finds_need(monkeypatch, capsys) -> None:
    """``--dev`` (the README's install) includes the upstream extra: the store holds fla-core's finds and the
    differential property's peer is fla-core, so without it the README's replay of the store fails."""
    environment(monkeypatch, {"torch": "2.13.0+cpu"})
    assert install.main(["cpu", "--dry-run", "--dev"]) == 0
    (command,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("+ ")]
    assert f"{ROOT}[cpu,test,upstream]" in command
    assert install.extras("cuda", dev=False, upstream=False) == "cuda"


def noxfile() -> Any:
    """noxfile.py as a module, loaded once (nox registers its sessions as it loads); skips without nox."""
    pytest.importorskip("nox")
    return _noxfile()


@functools.cache
def _noxfile() -> Any:
    spec = importlib.util.spec_from_file_location("wy_noxfile", ROOT / "noxfile.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_nox_runs_in_the_environment_the_readmes_install_builds() -> None:
    """One environment: the README installs into .venv, nox's cpu sessions run there and take install.py's
    record of that install as theirs (so they install nothing more), and CI makes it the README's way."""
    sessions = noxfile()
    readme = (ROOT / "README.md").read_text()
    install_block = readme.split("## Install", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    assert install_block.splitlines() == ["python3.11 -m venv .venv", ". .venv/bin/activate", "python install.py cpu --dev"]
    assert sessions.ENVIRONMENT[sessions.EXTRA["cpu"]] == ".venv" and "runs its sessions in `.venv`" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python3 -m venv .venv\n" in ci and ". .venv/bin/activate\npython install.py cpu --dev\n" in ci
    key = install.install_key("cpu", dev=True)
    assert "[cpu,test,upstream]" in key and sessions.INSTALL.install_key("cpu", dev=True) == key


def test_the_install_is_recorded_where_nox_looks(monkeypatch, tmp_path) -> None:
    """install.py records its install in the environment's prefix, once, in the form nox compares."""
    environment(monkeypatch, {"torch": "2.13.0+cpu"})
    monkeypatch.setattr(install.sys, "prefix", str(tmp_path))
    monkeypatch.setattr(install.subprocess, "run", lambda *a, **k: install.subprocess.CompletedProcess(a, 0))
    key = install.install_key("cpu", dev=True)
    assert not install.installed(tmp_path, key)
    assert install.main(["cpu", "--dev"]) == 0 and install.main(["cpu", "--dev"]) == 0
    assert install.installed(tmp_path, key) and (tmp_path / install.STAMP).read_text() == key + "\n"
    assert not install.installed(tmp_path, install.install_key("cpu", dev=False))


def test_the_fuzz_session_leaves_the_store_to_regress(monkeypatch) -> None:
    """`nox -s fuzz -- --profile ci -n 2` (CI's and the README's command) runs the properties, not the store's
    replay (the regress session's), and leaves Hypothesis' statistics to -v (fuzz/conftest.py)."""
    import types

    sessions = noxfile()
    ran: list[tuple[str, ...]] = []
    fake = types.SimpleNamespace(posargs=["--profile", "ci", "-n", "2"], run=lambda *args, **kw: ran.append(args))
    monkeypatch.setattr(sessions, "install", lambda session, packages=(): "cpu")
    sessions.fuzz(fake)
    sessions.regress(fake)
    fuzz, regress = ran
    assert fuzz[:4] == ("python", "-m", "pytest", "fuzz/") and "--ignore=fuzz/test_regressions.py" in fuzz
    assert "--hypothesis-show-statistics" not in fuzz and fuzz[-4:] == ("--profile", "ci", "-n", "2")
    assert regress[:4] == ("python", "-m", "pytest", "fuzz/test_regressions.py")


@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(name=st.sampled_from(sorted(BACKENDS)), triton=st.booleans(), torch_npu=st.booleans(), npu=st.booleans(),
       interpreter=st.booleans())
def test_why_a_backend_cannot_run_is_the_first_missing_piece(name: str, triton: bool, torch_npu: bool,
                                                            npu: bool, interpreter: bool) -> None:
    """backends._missing over every backend and drawn environments (stand-ins for find_spec, torch_npu,
    torch.npu and the interpreter's check): without triton every backend is missing it, and then no backend
    is runnable; an npu backend needs torch_npu installed and seeing an NPU; the reason is None only where
    every piece is there. runnable() lists the backend exactly where nothing is missing and, for one that
    runs the interpreter, check_interpreter passes."""
    installed = {"triton": triton, "torch_npu": torch_npu}
    find_spec = importlib.util.find_spec
    backend = BACKENDS[name]

    def check_interpreter() -> None:
        if not interpreter:
            raise wy_ascend.BackendUnavailableError("planted: no interpreter", backend="cpu")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(importlib.util, "find_spec",
                   lambda mod, *a: (object() if installed[mod] else None) if mod in installed else find_spec(mod, *a))
        mp.setitem(sys.modules, "torch_npu", types.ModuleType("torch_npu"))
        mp.setattr(torch, "npu", SimpleNamespace(is_available=lambda: npu), raising=False)
        mp.setattr(torch.cuda, "is_available", lambda: True)
        mp.setattr(wy_interpreter, "check_interpreter", check_interpreter)
        backends._missing.cache_clear()
        try:
            reason = backends._missing(backend)
            if not triton:
                assert reason == "the `triton` module is not installed" and runnable() == []
            elif backend.device_type == "npu" and not torch_npu:
                assert reason == "torch_npu is not installed"
            elif backend.device_type == "npu" and not npu:
                assert reason == "torch_npu sees no NPU"
            else:
                assert reason is None
            assert (name in runnable()) == (reason is None and (interpreter or not backend.interpret))
        finally:
            backends._missing.cache_clear()


@settings(max_examples=20, derandomize=True, database=None, deadline=None)
@given(device_type=st.sampled_from(["cpu", "meta", "mps", "xla", "hpu", "privateuseone"]))
def test_a_call_naming_no_backend_runs_on_its_tensors_device_type(device_type: str) -> None:
    """resolve_backend without a name or WY_ASCEND_BACKEND takes the backend of the tensors' device type, and
    for a device type no backend runs raises BackendUnavailableError naming that type (drawn device types)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(BACKEND_ENV, raising=False)
        if device_type == "cpu":
            assert resolve_backend(None, torch.device("cpu")) is BACKENDS["cpu"]
        else:
            with pytest.raises(wy_ascend.BackendUnavailableError,
                               match=f"no backend runs tensors on device type '{device_type}'"):
                resolve_backend(None, torch.device(device_type))
