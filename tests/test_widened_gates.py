"""The widened_gates property (properties.check_widened_gates): beta and g passed in float32 give
the same bits as in their own dtype, on every kernel variant the cpu backend runs."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from wy_ascend import ops
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import PropertyFailure, check_widened_gates, widened

# The cpu backend's kernel variants, chosen by its interpreter-only knobs (lowp_dot, emulate); a device
# holds the property to its own rule, which the fuzz suite checks there.
CPU_VARIANTS = pytest.mark.cpu_backend

BASE = Case(cu_seqlens=(0, 7, 40, 71), H=1, HV=2, K=40, V=24, BT=16, dtype="bfloat16", use_g=True, seed=5,
            backend="cpu")
UNGUARDED = {"dot_guard": False, "emulate": False}


@CPU_VARIANTS
@pytest.mark.parametrize("changes", [
    {},  # bf16 everything
    {"dtype": "float16", "beta_dtype": "bfloat16"},
    {"dtype": "float32", "g_dtype": "bfloat16"},
    {"use_g": False, "knobs": {"lowp_dot": True, **UNGUARDED}},  # the cuda variant's bf16 operands
    {"dist": "long_gates", "knobs": {"lowp_dot": True, **UNGUARDED}},
    {"knobs": {"gate_head_major": True}, "memory": {"beta": "strided:1"}},
], ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()) or "bf16")
def test_the_property_holds(changes: dict[str, Any]) -> None:
    metrics = check_widened_gates(BASE.replace(**changes))
    assert all(m["mismatched_elements"] == 0 for m in metrics.values())


def test_widened_names_float32_gates() -> None:
    assert widened(BASE).dtype_of("beta") == widened(BASE).dtype_of("g") == torch.float32
    assert widened(BASE.replace(use_g=False)).g_dtype is None
    assert widened(BASE.replace(knobs={"mode": "grid", "max_tasks": 3})).knobs == {"max_tasks": 3}  # default shape
    f32 = BASE.replace(dtype="float32")
    assert widened(f32) == f32
    with pytest.raises(PropertyFailure, match="needs a case whose beta or g is below float32"):
        check_widened_gates(f32)


@CPU_VARIANTS
def test_a_result_that_depends_on_the_gates_dtype_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """One bit of w moved only where beta comes in float32: named, with the count."""
    real = ops.recompute_w_u_fwd

    def fwd(*args: Any, **kwargs: Any) -> Any:
        w, u = real(*args, **kwargs)
        if kwargs["beta"].dtype == torch.float32:
            w.view(torch.int16).view(-1)[0] ^= 1
        return w, u

    monkeypatch.setattr(ops, "recompute_w_u_fwd", fwd)
    with pytest.raises(PropertyFailure, match=r"beta and g widened to float32 change the results: w: 1 elements differ"):
        check_widened_gates(BASE)
