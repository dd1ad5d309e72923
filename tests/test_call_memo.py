"""How the ops reach their kernels across calls: the memo of planned calls (ops._call) keeps the most
recently used ones, and a fresh process picks the interpreter for the cpu backend by itself."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import wy_ascend
from wy_ascend import ops
from wy_ascend.testing.case import Case
from wy_ascend.validation import validate

ROOT = Path(__file__).resolve().parents[1]


def _problem(T: int):  # noqa: ANN202 - a validated Problem of T tokens
    k, v = torch.zeros(1, T, 1, 16), torch.zeros(1, T, 1, 16)
    beta, A = torch.zeros(1, T, 1), torch.zeros(1, T, 1, 16)
    return validate(k, v, beta, A, None, None, None), beta


@pytest.mark.cpu_backend
def test_the_memo_evicts_the_least_recently_used_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """With room for two calls, using A again after B keeps A when C arrives, and B goes: a hot call is
    never rebuilt (rebuilding cost more host time than a small problem's kernels, ops._Call)."""
    monkeypatch.setattr(ops, "_CALLS", OrderedDict())
    monkeypatch.setattr(ops, "_CALLS_SIZE", 2)
    (a, beta), (b, _), (c, _) = _problem(16), _problem(32), _problem(48)
    first_a = ops._call("fwd", a, "cpu", None, beta, None, None)
    ops._call("fwd", b, "cpu", None, beta, None, None)
    assert ops._call("fwd", a, "cpu", None, beta, None, None) is first_a
    ops._call("fwd", c, "cpu", None, beta, None, None)
    assert ops._call("fwd", a, "cpu", None, beta, None, None) is first_a
    assert [key[1] for key in ops._CALLS] == [c, a]


@pytest.mark.cpu_backend
def test_a_fresh_process_runs_the_cpu_backend_without_triton_interpret() -> None:
    """The first use of the cpu backend sets TRITON_INTERPRET itself where triton is not imported yet
    (backends._kernels): a user's script needs no environment variable."""
    script = ("import torch, wy_ascend\n"
              "k = torch.randn(1, 20, 1, 16); A = torch.eye(16).repeat(2, 1)[:20].view(1, 20, 1, 16)\n"
              "w, u = wy_ascend.recompute_w_u_fwd(k, k, torch.ones(1, 20, 1), A, backend='cpu')\n"
              "assert torch.allclose(w, k) and torch.allclose(u, k), (w - k).abs().max()\n"
              "import os; print('interpret', os.environ.get('TRITON_INTERPRET'))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "WY_ASCEND_BACKEND")}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "interpret 1" in done.stdout


class _Compiled:
    """A stand-in for a compiled kernel Triton's run returned: records each direct launch through it."""

    def __init__(self, log: list) -> None:
        self.log = log

    def __getitem__(self, grid: tuple[int, ...]):  # noqa: ANN204 - the launcher
        return lambda *args: self.log.append(("direct", self, grid, args))


class _Kernel:
    """A stand-in for a cuda entry kernel: Triton's run (``kernel[grid](**kwargs)``) records its launch and
    returns a fresh compiled handle, as upstream Triton's run returns the CompiledKernel it launched."""

    def __init__(self, arg_names: list[str], log: list) -> None:
        self.arg_names, self.log = arg_names, log

    def __getitem__(self, grid: tuple[int, ...]):  # noqa: ANN204 - the launcher
        def run(**kwargs: object) -> _Compiled:
            compiled = _Compiled(self.log)
            self.log.append(("run", compiled, grid, kwargs))
            return compiled
        return run


SIGNATURES = [(op, T, max_blocks) for op in ("fwd", "bwd") for T in (16, 50) for max_blocks in (None, 1)]


@pytest.mark.cpu_backend
@given(st.lists(st.sampled_from(SIGNATURES), min_size=1, max_size=8))
@settings(max_examples=30, deadline=None, derandomize=True, database=None)
def test_a_cuda_call_after_the_first_of_its_signature_launches_its_compiled_kernels_directly(calls) -> None:
    """On the cuda backend (lookup and kernels stubbed, no device needed), over drawn sequences of calls of
    either op, two sizes and split (max_blocks=1) or whole grids: the first call of a signature launches each
    launch of its plan through Triton's run; every later one launches launch i through the compiled kernel
    launch i's run returned, on its grid, with the launch's arguments in the kernel's parameter order (the
    direct path ops._Call keeps for cuda: Triton's argument binding cost more host time than small kernels)."""
    from wy_ascend.backends import BACKENDS, LaunchConfig

    log: list = []
    seen: list[dict] = []  # each launch's grid and arguments (ops.observed), in plan order
    # the real kernels' parameters (the interpreter's kernel wraps the Python function as ``fn``)
    names = {op: list(inspect.signature(ops.kernel_for(BACKENDS["cpu"], op).fn).parameters) for op in ("fwd", "bwd")}
    first: dict[tuple, list[_Compiled]] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ops, "_CALLS", OrderedDict())
        mp.setattr(ops, "resolve_backend", lambda name, device: BACKENDS["cuda"])
        mp.setattr(ops, "dk_sum_kernel", lambda backend: None)
        kernels: dict[str, _Kernel] = {}
        mp.setattr(ops, "kernel_for", lambda backend, name, warps=None: kernels.setdefault(name, _Kernel(names[name], log)))
        for op, T, max_blocks in calls:
            x = Case(B=1, T=T, H=1, HV=2, K=16, V=16, BT=16).build_inputs()
            log.clear()
            seen.clear()
            with ops.observed(lambda call, grid, kwargs: seen.append(dict(grid=grid, kwargs=kwargs))):
                config = LaunchConfig(max_blocks=max_blocks, num_cores=4)  # no device to count
                if op == "fwd":
                    wy_ascend.recompute_w_u_fwd(x.k, x.v, x.beta, x.A, backend="cuda", config=config)
                else:
                    wy_ascend.prepare_wy_repr_bwd(x.k, x.v, x.beta, x.A, x.dw, x.du, backend="cuda", config=config)
            assert len(log) == len(seen) and len(seen) > (max_blocks == 1)
            signature = (op, T, max_blocks)
            if signature not in first:
                assert all(how == "run" for how, *_ in log), log
                first[signature] = [compiled for _, compiled, _, _ in log]
                continue
            for i, ((how, compiled, grid, args), launch) in enumerate(zip(log, seen)):
                assert how == "direct" and compiled is first[signature][i], (signature, i, how)
                assert grid == (*launch["grid"], 1, 1)[:3]
                assert args == tuple(launch["kwargs"][n] for n in names[op])
