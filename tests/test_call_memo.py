"""How the ops reach their kernels across calls: the memo of planned calls (ops._call) keeps the most
recently used ones, and a fresh process picks the interpreter for the cpu backend by itself."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

import pytest
import torch

from wy_ascend import ops
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
