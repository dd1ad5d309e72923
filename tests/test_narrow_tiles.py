"""Shared narrow tiles on cuda (Backend.narrow_tiles; ``WY_ASCEND_NARROW_TILES=0`` turns them off): where K and V
both pad to the 64-wide ``min_tile``, they share one tile of next_power_of_2(max(K, V)) instead, with
bf16 dot operands for bfloat16 I/O and 4 warps alone. The rule on the CPU (planning, dot operands,
warps), and on a CUDA device every output against the float64 oracle."""

from __future__ import annotations

import pytest
import torch

from wy_ascend.backends import (
    BACKENDS,
    LOWP_MIN_TILE,
    NARROW_TILES_ENV,
    NARROW_WARPS,
    LaunchConfig,
    fp32_dot_warps,
    launch_warps,
)
from wy_ascend.planning import plan
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import check_oracle

CUDA = BACKENDS["cuda"]
CPU = torch.device("cpu")
BF16, FP16 = torch.bfloat16, torch.float16
# (K, V) -> the shared tile; None: both K and V keep their own (padded) tiles
SHARED = {(16, 16): 16, (8, 16): 16, (16, 32): 32, (32, 16): 32, (20, 30): 32, (32, 32): 32,
          (32, 48): None, (16, 64): None, (64, 32): None, (48, 80): None, (128, 128): None}


def _tiles(backend: str, K: int, V: int, kernel: str = "bwd", **knobs: int) -> tuple[int, int]:
    p = plan(kernel, NT=1, BH=1, BT=64, K=K, V=V, spec=BACKENDS[backend].spec(CPU, LaunchConfig(num_cores=1, **knobs)))
    return p.BK, p.BV


@pytest.mark.parametrize(("K", "V"), SHARED)
@pytest.mark.parametrize("kernel", ["fwd", "bwd"])
def test_narrow_dims_share_one_tile_with_bf16_dots_and_fixed_warps(monkeypatch, kernel, K, V) -> None:
    monkeypatch.setenv(NARROW_TILES_ENV, "1")
    BK, BV = _tiles("cuda", K, V, kernel)
    shared = SHARED[K, V]
    if shared is None:
        assert min(BK, BV) >= LOWP_MIN_TILE  # padded as without the switch: bf16 dots, the autotuner's search
        assert CUDA.lowp_dot(BF16, K, V, BK, BV) and launch_warps(kernel, 64, BK, BV, True) is None
        return
    assert (BK, BV) == (shared, shared)
    assert CUDA.lowp_dot(BF16, K, V, BK, BV) and not CUDA.lowp_dot(FP16, K, V, BK, BV)
    assert launch_warps(kernel, 64, BK, BV, True) == NARROW_WARPS
    # fp32 dots (fp32, fp16 I/O) keep their own warps rule, now on the narrower tile
    assert launch_warps(kernel, 64, BK, BV, False) == fp32_dot_warps(kernel, 64, shared, False)


def test_on_by_default_and_only_where_tiles_are_padded(monkeypatch) -> None:
    monkeypatch.delenv(NARROW_TILES_ENV, raising=False)
    assert _tiles("cuda", 16, 16) == (16, 16) and CUDA.lowp_dot(BF16, 16, 16, 16, 16)
    monkeypatch.setenv(NARROW_TILES_ENV, "0")  # off: both padded to 64, fp32 dots in any narrower tile
    assert _tiles("cuda", 16, 32) == (64, 64) and not CUDA.lowp_dot(BF16, 16, 16, 16, 16)
    monkeypatch.setenv(NARROW_TILES_ENV, "1")
    # the npu backends have narrow tiles of their own width already (min_tile 16): unchanged
    assert _tiles("npu-cuda", 16, 32) == (16, 32) and _tiles("cpu", 16, 32) == (16, 32)
    assert _tiles("cuda", 16, 16, tile_cap=32) == (16, 16)
    # several narrow tile iterations (a tile_cap below the dims) keep fp32 dots: the miscompiles were there
    assert _tiles("cuda", 64, 32, tile_cap=32) == (32, 32) and not CUDA.lowp_dot(BF16, 64, 32, 32, 32)


def test_a_bad_value_is_named(monkeypatch) -> None:
    monkeypatch.setenv(NARROW_TILES_ENV, "yes")
    with pytest.raises(ValueError, match="WY_ASCEND_NARROW_TILES must be 1 or 0, got 'yes'"):
        _tiles("cuda", 16, 16)


# On the device: shared narrow tiles of 16 and 32, alone and grouped (the grouped backward both ways),
# fixed and varlen, each I/O dtype, against the float64 oracle (check_oracle: the launch check included).
DEVICE_CASES = {
    "K16_V16_grouped": dict(B=1, T=4096, H=4, HV=16, K=16, V=16, dtype="bfloat16", use_g=True),
    "K16_V16_grouped_per_head": dict(B=1, T=300, H=2, HV=8, K=16, V=16, dtype="bfloat16", use_g=True),
    "K16_V32_varlen": dict(B=1, T=700, H=2, HV=2, K=16, V=32, dtype="bfloat16", use_g=True,
                           cu_seqlens=(0, 1, 65, 200, 200, 513, 700)),
    "K32_V20": dict(B=2, T=333, H=3, HV=6, K=32, V=20, dtype="bfloat16", use_g=False),
    "K32_V32_fp32": dict(B=2, T=257, H=2, HV=4, K=32, V=32, dtype="float32", use_g=True),
    "K16_V24_fp16": dict(B=1, T=200, H=1, HV=3, K=16, V=24, dtype="float16", use_g=True),
}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", DEVICE_CASES)
def test_shared_narrow_tiles_match_the_oracle_on_cuda(monkeypatch, name) -> None:
    monkeypatch.setenv(NARROW_TILES_ENV, "1")
    case = Case(backend="cuda", BT=64, **DEVICE_CASES[name])  # type: ignore[arg-type]
    BK, BV = _tiles("cuda", case.K, case.V)
    assert BK == BV < LOWP_MIN_TILE
    check_oracle(case)


def test_every_cuda_launch_option_is_one_triton_takes() -> None:
    """Whatever shape a cuda launch has, its warps are a power of two in [1, 32] and its stages >= 1
    (upstream Triton refuses other warp counts at launch, on a device only: a CPU run never launches one,
    so a mutant setting NARROW_WARPS = 5 passed every CPU test)."""
    from wy_ascend.backends import CUDA_CONFIGS, search_configs

    options = set(CUDA_CONFIGS)
    for kernel in ("fwd", "bwd"):
        for BT in (16, 32, 64, 128):
            for BK in (16, 32, 64, 128):
                for BV in (16, 32, 64, 128):
                    for lowp in (False, True):
                        options.update(search_configs(launch_warps(kernel, BT, BK, BV, lowp), autotune=True))
    bad = {(w, s) for w, s in options if not (1 <= w <= 32 and w & (w - 1) == 0 and s >= 1)}
    assert not bad, f"cuda launch options Triton refuses: {sorted(bad)}"
