"""The grouped backward's dk sum kernel (kernels.wy_dk_group_sum_kernel, the cuda backend's sum of the
per-value-head dk) against the sum it replaces: the G fp32 slices added in head order, rounded once.
Here on the interpreter; on cuda the device tests run it inside every grouped backward (test_ops.py)."""

from __future__ import annotations

import pytest
import torch

from wy_ascend.backends import BACKENDS, dk_sum_kernel
from wy_ascend.ops import DK_SUM_ROWS
from wy_ascend.planning import next_power_of_2
from wy_ascend.specialization import cdiv

pytestmark = pytest.mark.cpu_backend


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize(("rows", "G", "K"), [(1, 2, 16), (DK_SUM_ROWS + 3, 3, 17), (2 * DK_SUM_ROWS, 8, 100)])
def test_the_sum_adds_the_heads_in_order_and_rounds_once(rows: int, G: int, K: int, dtype: torch.dtype) -> None:
    heads = torch.randn(rows, G, K, dtype=torch.float64).mul(2.0 ** torch.randint(-20, 20, (rows, G, K))).float()
    expected = heads[:, 0].clone()
    for j in range(1, G):
        expected += heads[:, j]  # ((dk_0 + dk_1) + dk_2) + ...: GROUP_DK's running sum
    out = torch.full((rows, K), float("nan"), dtype=dtype)
    dk_sum_kernel(BACKENDS["cpu"])[(cdiv(rows, DK_SUM_ROWS),)](heads, out, rows, G, K, next_power_of_2(K), DK_SUM_ROWS)
    assert torch.equal(out, expected.to(dtype))


def test_only_cuda_takes_it() -> None:
    assert {name for name, b in BACKENDS.items() if b.dk_sum_kernel} == {"cuda"}
