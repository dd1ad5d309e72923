"""Where the cuda backend gives dots bf16 operands (Backend.lowp_dot) and how WY_ASCEND_LOWP widens it."""

from __future__ import annotations

import pytest
import torch

from wy_ascend.backends import BACKENDS, LOWP_ENV

CUDA = BACKENDS["cuda"]
BF16, FP16 = torch.bfloat16, torch.float16


def test_default_is_one_tile_loops_of_64_or_wider(monkeypatch):
    monkeypatch.delenv(LOWP_ENV, raising=False)
    assert CUDA.lowp_dot(BF16, 128, 128, 128, 128)
    assert CUDA.lowp_dot(BF16, 64, 100, 64, 128)
    assert not CUDA.lowp_dot(BF16, 256, 256, 128, 128)  # two-tile loops
    assert not CUDA.lowp_dot(BF16, 64, 32, 64, 32)  # a 32-wide tile
    assert not CUDA.lowp_dot(FP16, 64, 64, 64, 64)
    assert not BACKENDS["npu-cuda"].lowp_dot(BF16, 64, 64, 64, 64)


def test_multi_tile_and_all(monkeypatch):
    monkeypatch.setenv(LOWP_ENV, "multi-tile")
    assert CUDA.lowp_dot(BF16, 256, 256, 128, 128) and CUDA.lowp_dot(BF16, 256, 256, 64, 64)
    assert not CUDA.lowp_dot(BF16, 64, 32, 64, 32)
    monkeypatch.setenv(LOWP_ENV, "all")
    assert CUDA.lowp_dot(BF16, 64, 32, 64, 32) and CUDA.lowp_dot(BF16, 80, 16, 64, 16)
    assert not CUDA.lowp_dot(FP16, 64, 32, 64, 32)


def test_unknown_mode_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(LOWP_ENV, "everywhere")
    with pytest.raises(ValueError, match="WY_ASCEND_LOWP must be one of"):
        CUDA.lowp_dot(BF16, 64, 64, 64, 64)
