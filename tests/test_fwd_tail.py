"""The WY_ASCEND_FWD_TAIL switch (kernels.FWD_TAIL): read when the kernels are imported, through env.switch, and
value-preserving: with it the unguarded forward runs min(NK, NV) fused tile pairs and the longer side's other
tiles alone, and every output bit is the one of max(NK, NV) pairs with the shorter side's tiles masked out.

The switch is off by default until a GPU fuzz run has checked it (kernels.py); its bits are checked here on the
interpreter, on shapes where K and V take different numbers of tiles, through the cuda variant's unguarded bf16
path (the lowp_dot and dot_guard knobs) and the guarded default, which it must leave alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from wy_ascend.kernels import FWD_TAIL_ENV

ROOT = Path(__file__).resolve().parents[1]

# Each case: B, T, H, HV, K, V, cu_seqlens. NK != NV on the cpu backend's tiles (K=256: two 128-wide tiles
# against one for V=64; V=200 two against one for K=48), a partial last chunk, a varlen batch.
SCRIPT = r"""
import sys, torch
import wy_ascend.kernels as kernels
from wy_ascend import ops
from wy_ascend.backends import LaunchConfig
out = {"FWD_TAIL": bool(kernels.FWD_TAIL)}
configs = {"unguarded": LaunchConfig(lowp_dot=True, dot_guard=False, emulate=False), "default": None}
for name, cfg in configs.items():
    torch.manual_seed(0)
    for B, T, H, HV, K, V, cu in [(1, 128, 2, 4, 256, 64, None), (2, 100, 1, 1, 48, 200, None),
                                  (1, 200, 2, 2, 192, 32, [0, 64, 77, 200])]:
        k = torch.randn(B, T, H, K, dtype=torch.bfloat16)
        v = torch.randn(B, T, HV, V, dtype=torch.bfloat16)
        beta = torch.rand(B, T, HV, dtype=torch.bfloat16)
        g = -torch.rand(B, T, HV).cumsum(1) * 0.05
        A = (torch.randn(B, T, HV, 64) * 0.1).to(torch.bfloat16)
        cu_seqlens = None if cu is None else torch.tensor(cu)
        out[(name, K, V)] = ops.recompute_w_u_fwd(k, v, beta, A, g, cu_seqlens, backend="cpu", config=cfg)
torch.save(out, sys.argv[1])
"""


def _env(value: str | None) -> dict[str, str]:
    """This process's environment with the switch set to ``value`` (None: unset)."""
    return {k: v for k, v in os.environ.items() if k != FWD_TAIL_ENV} | ({} if value is None else {FWD_TAIL_ENV: value})


def _run(tmp_path: Path, value: str | None) -> dict:
    import torch

    env = _env(value) | {"TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT / "src")}
    target = tmp_path / f"out-{value}.pt"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(target)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(target)


def test_the_forward_tail_keeps_every_bit(tmp_path: Path) -> None:
    off, on = _run(tmp_path, None), _run(tmp_path, "1")
    assert off.pop("FWD_TAIL") is False and on.pop("FWD_TAIL") is True  # off unless set; read at import
    assert off.keys() == on.keys() and len(off) == 6
    import torch

    for key, (w, u) in off.items():
        w_on, u_on = on[key]
        assert torch.equal(w, w_on) and torch.equal(u, u_on), key


def test_a_bad_value_is_refused_by_name() -> None:
    done = subprocess.run([sys.executable, "-c", "import wy_ascend.kernels"], env=_env("yes"), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode != 0 and f"{FWD_TAIL_ENV} must be 1 or 0, got 'yes'" in done.stderr


@pytest.mark.parametrize("value", ["0", ""])
def test_off_and_unset_are_the_default(value: str) -> None:
    out = subprocess.run([sys.executable, "-c", "import wy_ascend.kernels as k; print(bool(k.FWD_TAIL))"],
                         env=_env(value), capture_output=True, text=True, check=True, timeout=300).stdout.strip()
    assert out == "False"
