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
from wy_ascend.testing.properties import check_oracle, run_ops
from wy_ascend.validation import SUPPORTED_BT

CASES = {
    "fixed_multitile": Case(B=2, T=37, H=1, HV=2, K=80, V=48, BT=16, use_g=True, dtype="float32"),
    "varlen_grouped": Case(cu_seqlens=(0, 1, 18, 18, 50), H=2, HV=6, K=32, V=64, BT=32, use_g=True, dtype="bfloat16"),
    "nogate_fp16": Case(B=1, T=70, H=2, HV=2, K=48, V=32, BT=64, use_g=False, dtype="float16"),
    # cuda's bf16 dot operands in 32-wide tiles: 3 K tiles, 2 V tiles, so the backward's two first loops
    "bf16_operands": Case(cu_seqlens=(0, 1, 18, 50), H=2, HV=4, K=80, V=40, BT=32, use_g=True, dtype="bfloat16",
                          knobs={"lowp_dot": True, "tile_cap": 32}),
    # as many K tiles as V tiles: the backward's fused first loop (kernels._bwd_task)
    "bf16_fused_loop": Case(cu_seqlens=(0, 5, 40), H=1, HV=3, K=64, V=40, BT=16, use_g=True, dtype="bfloat16",
                            knobs={"lowp_dot": True, "tile_cap": 32}),
}


@pytest.mark.parametrize("name", CASES)
def test_the_cuda_variant_is_bitwise_the_npu_variant(name, backend, device):
    """Held A (DOT_GUARD off, without the Ascend emulation, which it would fail by design) and
    token-major beta/g (GATE_HEAD_MAJOR off) give the npu variant's bits, and both the oracle's: the
    bf16-operand cases reach code of LOWP_DOT's alone (the backward's fused first loop), which two
    runs of one wrong code would pass bit for bit."""
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
    check_oracle(cuda)  # the two agree; both right (the bf16-operand cases run code only they reach)


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


def test_each_forward_register_cap_is_the_largest_that_holds_its_blocks() -> None:
    """FWD_REGISTER_CAPPED_CONFIGS' invariant (its comment), for every entry: the cap is one ptxas keeps
    (registers go by 8 a thread, at most 255) and spends an SM's 64K registers on whole blocks: 8 more
    would hold a block fewer, so a lower cap only spills where no further block fits."""
    granule, most, sm_registers = 8, 255, 64 * 1024

    def blocks(warps: int, cap: int) -> int:
        return sm_registers // (cap * 32 * warps)

    for warps, cap in backends.FWD_REGISTER_CAPPED_CONFIGS:
        assert cap % granule == 0 and cap <= most, (warps, cap)
        assert blocks(warps, cap + granule) < blocks(warps, cap), (warps, cap)


AUTOTUNED = """\
import itertools, json
from wy_ascend import backends
from wy_ascend.kernels import KERNELS
from wy_ascend.planning import MIN_TILE
from wy_ascend.validation import MAX_DIM, SUPPORTED_BT
tiles = [1 << n for n in range(MIN_TILE.bit_length() - 1, MAX_DIM.bit_length())]
warps = {None} | {backends.launch_warps(*a) for a in itertools.product(KERNELS, SUPPORTED_BT, tiles, tiles, (False, True))}
print(json.dumps([[c.num_stages, c.maxnreg] for k, w, on in itertools.product(KERNELS, warps, (False, True))
                  for c in backends._autotuned(k, w, on).configs]))
"""


def test_every_config_the_cuda_autotuner_builds_runs_one_stage() -> None:
    """Every cuda launch runs num_stages=1 (CUDA_CONFIGS' comment: the kernels' loops set their own, so
    another launch value only compiles and benchmarks the same kernel again): each config of ``_autotuned``,
    built in a process without the interpreter, for each entry kernel, with autotuning on and off, and
    every warps a launch asks for (``launch_warps`` over every chunk size, tile pair and dot type; None:
    the search, the register-capped forward configs included)."""
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", AUTOTUNED], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    configs = json.loads(done.stdout)
    assert any(maxnreg is not None for _, maxnreg in configs)  # the capped forward configs are among them
    assert {stages for stages, _ in configs} == {1}


WIRED = """\
from wy_ascend import backends
print([backends._autotuned(k).do_bench is backends.bench_config for k in ("fwd", "bwd")])
"""


def test_the_cuda_autotuner_times_configs_by_short_graph_replays(monkeypatch) -> None:
    """Each entry kernel's autotuner (built in a process without the interpreter) times a config with
    bench_config: device time by CUDA-graph replay (plain launches time the host on small shapes),
    AUTOTUNE_REP_MS a replay (Triton's use_cuda_graph=True replays 100 ms: 1 s a config, 3 s of a
    first call with every config compiled)."""
    import os
    import subprocess
    import sys

    import triton.testing

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", WIRED], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.split() == ["[True,", "True]"], done.stderr[-2000:]
    seen: list[tuple[object, dict]] = []
    monkeypatch.setattr(triton.testing, "do_bench_cudagraph", lambda fn, **kw: seen.append((fn, kw)) or 0.5)
    assert backends.bench_config(print, quantiles=(0.5, 0.2, 0.8)) == 0.5
    assert seen == [(print, dict(rep=backends.AUTOTUNE_REP_MS, quantiles=(0.5, 0.2, 0.8)))]
    assert 10 <= backends.AUTOTUNE_REP_MS <= 25


@pytest.mark.parametrize(("kernel", "BT", "tile", "warps"), [
    ("fwd", 64, 64, 4), ("fwd", 64, 128, 8), ("fwd", 128, 64, 16), ("fwd", 128, 128, 32),
    ("bwd", 32, 64, 4), ("bwd", 64, 64, 8), ("bwd", 128, 64, 32), ("bwd", 128, 128, 32),
    ("bwd", 64, 16, 8), ("bwd", 128, 16, 32),  # the backward's BT^3 dots, whatever its tiles
])
def test_fp32_dots_run_the_warps_that_compiled_in_seconds(monkeypatch, kernel, BT, tile, warps) -> None:
    """The warps of each fp32-dot launch the H200 runs (the offline compile table of FP32_DOT_WORK):
    one config alone, whatever WY_ASCEND_AUTOTUNE says; bf16 operands and WY_ASCEND_FP32_WARPS=0 keep the search."""
    monkeypatch.setenv(backends.FP32_WARPS_ENV, "1")
    monkeypatch.delenv(backends.AUTOTUNE_ENV, raising=False)  # the device tests run with WY_ASCEND_AUTOTUNE=0
    assert backends.fp32_dot_warps(kernel, BT, tile, False) == warps
    assert backends.search_configs(warps) == [(warps, 1)]
    assert backends.fp32_dot_warps(kernel, BT, tile, True) is None
    assert backends.search_configs(None) == backends.CUDA_CONFIGS
    monkeypatch.setenv(backends.FP32_WARPS_ENV, "0")
    assert backends.fp32_dot_warps(kernel, BT, tile, False) is None
    monkeypatch.delenv(backends.FP32_WARPS_ENV)  # on by default (ran on the H200, session 13)
    assert backends.fp32_dot_warps(kernel, BT, tile, False) == warps


@pytest.mark.parametrize("kernel", ["fwd", "bwd"])
def test_fp32_dot_warps_are_the_fewest_within_the_work_limit(monkeypatch, kernel) -> None:
    """For every chunk size and tile: the warps keep the widest dot's multiply-adds (BT x BT x tile; the
    backward's BT x BT x BT too) per thread within FP32_DOT_WORK (up to 32 warps, a program's most), and
    half as many (down to 4) would not."""
    monkeypatch.setenv(backends.FP32_WARPS_ENV, "1")
    for BT in SUPPORTED_BT:
        for tile in (16, 32, 64, 128):
            warps = backends.fp32_dot_warps(kernel, BT, tile, False)
            assert warps in (4, 8, 16, 32)
            widest = max(tile, BT) if kernel == "bwd" else tile
            per_thread, limit = BT * BT * widest / 32, backends.FP32_DOT_WORK[kernel]
            assert per_thread / warps <= limit or warps == 32
            assert warps == 4 or per_thread / (warps // 2) > limit


@pytest.mark.cpu_backend
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_call_asks_for_its_fp32_dot_warps(monkeypatch, dtype) -> None:
    """ops hands kernel_for the warps of its own launch: kernel, BT and widest tile of its plan, and
    none for bf16 operands (cuda's rule, Backend.lowp_dot, asked for through the lowp_dot knob)."""
    from collections import OrderedDict

    from wy_ascend import ops

    asked: list[object] = []
    real = ops.kernel_for
    monkeypatch.setenv(backends.FP32_WARPS_ENV, "1")
    monkeypatch.setattr(ops, "_CALLS", OrderedDict())
    monkeypatch.setattr(ops, "kernel_for", lambda b, name, warps=None: asked.append((name, warps)) or real(b, name, warps))
    lowp = dtype == "bfloat16"
    case = Case(B=1, T=130, H=1, HV=1, K=64, V=16, BT=128, use_g=True, dtype=dtype, knobs={"lowp_dot": lowp})
    run_ops(case, case.build_inputs())
    tiles = {name: max(spec.BK, spec.BV) for name, spec in case.specializations().items()}
    assert tiles == {"fwd": 64, "bwd": 64}
    assert sorted(asked) == ([("bwd", None), ("fwd", None)] if lowp else [("bwd", 32), ("fwd", 16)])


def test_a_bad_fp32_warps_value_is_named(monkeypatch) -> None:
    monkeypatch.setenv(backends.FP32_WARPS_ENV, "yes")
    with pytest.raises(ValueError, match="WY_ASCEND_FP32_WARPS must be 1 or 0, got 'yes'"):
        backends.fp32_dot_warps("bwd", 128, 64, False)
