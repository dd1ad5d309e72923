"""Where the cuda backend gives dots bf16 operands (Backend.lowp_dot), how WY_ASCEND_LOWP narrows or widens
it, and the tiles (64 wide or wider, or one shared narrow tile) that give every bf16 problem its bf16 dots there."""

from __future__ import annotations

import pytest
import torch

from wy_ascend.backends import BACKENDS, LOWP_ENV

CUDA = BACKENDS["cuda"]
BF16, FP16 = torch.bfloat16, torch.float16


def test_default_is_tiles_of_64_or_wider_in_any_number_of_iterations(monkeypatch):
    monkeypatch.delenv(LOWP_ENV, raising=False)
    assert CUDA.lowp_dot(BF16, 128, 128, 128, 128)
    assert CUDA.lowp_dot(BF16, 64, 100, 64, 128)
    assert CUDA.lowp_dot(BF16, 256, 256, 128, 128) and CUDA.lowp_dot(BF16, 256, 256, 64, 64)  # multi-tile loops
    assert not CUDA.lowp_dot(BF16, 64, 32, 64, 32)  # a 32-wide tile (a tile_cap of 32 asks for one)
    assert not CUDA.lowp_dot(FP16, 64, 64, 64, 64)
    assert not BACKENDS["npu-cuda"].lowp_dot(BF16, 64, 64, 64, 64)


def test_one_tile_and_all(monkeypatch):
    monkeypatch.setenv(LOWP_ENV, "one-tile")
    assert CUDA.lowp_dot(BF16, 128, 128, 128, 128) and not CUDA.lowp_dot(BF16, 256, 256, 128, 128)
    assert not CUDA.lowp_dot(BF16, 64, 32, 64, 32)
    monkeypatch.setenv(LOWP_ENV, "all")
    assert CUDA.lowp_dot(BF16, 64, 32, 64, 32) and CUDA.lowp_dot(BF16, 80, 16, 64, 16)
    assert not CUDA.lowp_dot(FP16, 64, 32, 64, 32)


def test_cuda_gives_every_bf16_problem_its_bf16_dots(monkeypatch):
    """Every K and V on cuda plans tiles of at least LOWP_MIN_TILE or, where both are narrower, one
    shared narrow tile (tests/test_narrow_tiles.py), so every bf16 problem gets bf16 dot operands by
    default; the npu backends keep tiles as narrow as the dims."""
    from wy_ascend.backends import LOWP_MIN_TILE, NARROW_TILES_ENV, LaunchConfig
    from wy_ascend.planning import plan

    monkeypatch.delenv(LOWP_ENV, raising=False)
    monkeypatch.delenv(NARROW_TILES_ENV, raising=False)
    cpu = torch.device("cpu")
    for K, V in ((16, 16), (16, 32), (32, 48), (64, 32), (48, 80), (192, 16), (256, 256)):
        p = plan("bwd", NT=1, BH=1, BT=64, K=K, V=V, spec=CUDA.spec(cpu, LaunchConfig(num_cores=1)))
        one_shared = p.BK == p.BV and max(K, V) <= p.BK
        assert (min(p.BK, p.BV) >= LOWP_MIN_TILE or one_shared) and CUDA.lowp_dot(BF16, K, V, p.BK, p.BV), (K, V, p)
    npu = plan("bwd", NT=1, BH=1, BT=64, K=16, V=32, spec=BACKENDS["npu-cuda"].spec(cpu, LaunchConfig(num_cores=1)))
    assert (npu.BK, npu.BV) == (16, 32)


def test_unknown_mode_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(LOWP_ENV, "everywhere")
    with pytest.raises(ValueError, match="WY_ASCEND_LOWP must be one of"):
        CUDA.lowp_dot(BF16, 64, 64, 64, 64)


def test_the_interpreter_runs_the_bf16_operands_on_request_only() -> None:
    """config.lowp_dot: the cpu backend takes cuda's bf16 dot operands for bf16 I/O at any tile
    width (the fuzz suite's knob), never for other dtypes, and a compiling backend refuses it."""
    from wy_ascend.backends import LaunchConfig

    cpu = BACKENDS["cpu"]
    assert not cpu.lowp_dot(BF16, 64, 64, 64, 64)
    assert cpu.lowp_dot(BF16, 16, 24, 16, 32, LaunchConfig(lowp_dot=True))
    assert not cpu.lowp_dot(FP16, 64, 64, 64, 64, LaunchConfig(lowp_dot=True))
    assert not cpu.lowp_dot(BF16, 64, 64, 64, 64, LaunchConfig(lowp_dot=False))
    with pytest.raises(ValueError, match="config.lowp_dot is for the cpu backend"):
        CUDA.lowp_dot(BF16, 64, 64, 64, 64, LaunchConfig(lowp_dot=True))
