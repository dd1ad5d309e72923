"""The cuda backend's operand handling (A held in registers, DOT_GUARD cleared) run in the
interpreter, so a CPU-only run covers that code path too.

The cpu backend launches with the NPU's flags (DOT_GUARD set, head-major beta/g). Here it is
given the cuda backend's through the variant knobs instead: that must not change a single bit
(the fuzz suite draws these knobs too; this is a fixed check of the same). LOWP_DOT (bf16 dot
operands) runs here through the ``lowp_dot`` knob, which the fuzz suite draws (the interpreter's
bf16 dots are widened to float32 first: interpreter.py), and its numerics are measured by the
float64 emulation in test_lowp_dot_error.py and by the device runs.
"""

from __future__ import annotations

import pytest

from wy_ascend import backends
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import run_ops

CASES = {
    "fixed_multitile": Case(B=2, T=37, H=1, HV=2, K=80, V=48, BT=16, use_g=True, dtype="float32"),
    "varlen_grouped": Case(cu_seqlens=(0, 1, 18, 18, 50), H=2, HV=6, K=32, V=64, BT=32, use_g=True, dtype="bfloat16"),
    "nogate_fp16": Case(B=1, T=70, H=2, HV=2, K=48, V=32, BT=64, use_g=False, dtype="float16"),
    # cuda's bf16 dot operands in 32-wide tiles: the unguarded variant loads k^T on its own
    "bf16_operands": Case(cu_seqlens=(0, 1, 18, 50), H=2, HV=4, K=80, V=40, BT=32, use_g=True, dtype="bfloat16",
                          knobs={"lowp_dot": True, "tile_cap": 32}),
}


@pytest.mark.parametrize("name", CASES)
def test_the_cuda_variant_is_bitwise_the_npu_variant(name, backend, device):
    """Held A (DOT_GUARD off, without the Ascend emulation, which it would fail by design) and
    token-major beta/g (GATE_HEAD_MAJOR off) give the npu variant's bits."""
    if backend != "cpu":
        pytest.skip("runs the cuda variant in the interpreter; device runs compile it for real")
    case = CASES[name]
    inputs = case.build_inputs(device)
    guarded = run_ops(case, inputs)
    cuda = case.replace(knobs={**case.knobs, "dot_guard": backends.BACKENDS["cuda"].dot_guard, "emulate": False,
                               "gate_head_major": backends.BACKENDS["cuda"].gate_head_major})
    held = run_ops(cuda, inputs)
    for key, out in guarded.items():
        if out is not None:
            assert held[key] is not None and held[key].equal(out), key


def test_the_cuda_autotune_search_is_distinct_valid_configs():
    """Every (num_warps, num_stages) the cuda backend autotunes over is valid (warps a power of
    two in 2..8, as Triton requires) and compiles different code: every loop of the kernels sets
    its own num_stages=1, so configs that differ in stages alone would be the same kernel
    compiled and benchmarked again on every new shape. The first is the one
    WY_ASCEND_AUTOTUNE=0 keeps (the configuration of the device measurements in docs/)."""
    import inspect

    from wy_ascend import kernels

    configs = backends.CUDA_CONFIGS
    assert all(w in (2, 4, 8) and s == 1 for w, s in configs)
    assert len({w for w, _ in configs}) == len(configs)
    source = inspect.getsource(kernels)
    assert source.count("tl.range(") == source.count("num_stages=1)") and " in range(" not in source
    assert configs[0] == (4, 1)


@pytest.mark.parametrize(("env", "kernel", "BT", "lowp", "wide"), [
    ("1", "bwd", 128, False, True),  # the compile cliff: fp32 dots over BT=128
    ("1", "bwd", 128, True, False),  # bf16 tensor-core operands compile fast
    ("1", "bwd", 64, False, False),
    ("1", "fwd", 128, False, False),
    ("0", "bwd", 128, False, False),
    ("", "bwd", 128, False, False),  # off by default: not run on a GPU yet
])
def test_wide_fp32_launches_only_the_backwards_of_fp32_dots_at_bt_128(monkeypatch, env, kernel, BT, lowp, wide) -> None:
    monkeypatch.setenv(backends.WIDE_FP32_ENV, env)
    monkeypatch.delenv(backends.AUTOTUNE_ENV, raising=False)  # the device tests run with WY_ASCEND_AUTOTUNE=0
    assert backends.wide_fp32(kernel, BT, lowp) is wide
    assert backends.search_configs(wide) == ([(backends.WIDE_FP32_WARPS, 1)] if wide else backends.CUDA_CONFIGS)


def test_a_bad_wide_fp32_value_is_named(monkeypatch) -> None:
    monkeypatch.setenv(backends.WIDE_FP32_ENV, "yes")
    with pytest.raises(ValueError, match="WY_ASCEND_WIDE_FP32 must be 1 or 0, got 'yes'"):
        backends.wide_fp32("bwd", 128, False)
