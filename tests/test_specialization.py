"""Specializations: what a launch compiles, as ops.py, cases and the lowering gate name it."""

from __future__ import annotations

import inspect
from collections import OrderedDict
from typing import Any

import pytest
import torch
from triton.runtime.jit import JITFunction

from fuzz.strategies import cases
from tests.drawing import draw_many
from wy_ascend import kernels, lowering, ops
from wy_ascend.specialization import int_class

# The entry kernels' compile-time parameters: exactly what a Specialization keys on besides dtypes.
COMPILE_TIME = {"H", "HV", "BT", "BK", "BV", "NK", "NV", "K_CONST", "V_CONST", "USE_G", "IS_VARLEN", "GATE_HEAD_MAJOR",
                "LOWP_DOT", "DOT_GUARD", "PERSISTENT"}
COMPILE_TIME_OF = {"fwd": COMPILE_TIME, "bwd": COMPILE_TIME | {"GROUP_DK"}}  # the backward's grouped-dk flag


class _Recorder:
    """Stands in for an entry kernel: records each launch's keyword arguments."""

    def __init__(self) -> None:
        self.launches: list[dict[str, Any]] = []

    def __getitem__(self, grid: Any) -> Any:
        return lambda **kw: self.launches.append(kw)


def test_entry_kernels_take_dims_at_run_time() -> None:
    for name, fn in kernels.KERNELS.items():
        params = inspect.signature(fn.fn).parameters.values()
        assert {p.name for p in params if "constexpr" in str(p.annotation)} == COMPILE_TIME_OF[name]
        assert {"K", "V"} <= {p.name for p in params}
    assert not {"K", "V"} & set(kernels.RUNTIME_ARGS) and set(kernels.CLASSED_ARGS) == {"K", "V"}


@pytest.mark.parametrize("x", [1, 2, 15, 16, 17, 32, 100, 128, 4096])
def test_int_class_is_tritons_own(x: int) -> None:
    """int_class is what the JIT's own key function gives (triton-ascend 3.2's; upstream 3.6 names
    no such function, so there the launch test below is the check)."""
    jit = pytest.importorskip("triton.runtime.jit")
    compute_spec_key = getattr(jit, "compute_spec_key", None)
    if compute_spec_key is None:
        pytest.skip("this triton has no triton.runtime.jit.compute_spec_key (triton-ascend 3.2's)")

    assert int_class(x) == compute_spec_key(x, align=True)


@pytest.mark.cpu_backend
@pytest.mark.parametrize("kernel", ["fwd", "bwd"])
def test_ops_launch_the_cases_specialization(kernel, monkeypatch) -> None:
    """Every launch of a call carries the constexprs, K/V classes and dtypes its case's specialization
    names, and every pointer is 16-byte aligned (Triton specializes on it), over drawn cases (every
    layout, memory layout, knob and variant the cpu fuzz draws; no kernel runs)."""
    recorder = _Recorder()
    monkeypatch.setattr(ops, "kernel_for", lambda backend, name, warps=None: recorder)
    monkeypatch.setattr(ops, "_CALLS", OrderedDict())  # no memoized call holds the real kernel
    for case in draw_many(cases(backend="cpu"), 40) + draw_many(cases(backend="cpu", memory=True), 40):
        recorder.launches.clear()
        x = case.arguments(case.build_inputs())
        common = dict(g=x["g"], cu_seqlens=x["cu_seqlens"], chunk_indices=x.get("chunk_indices"), backend="cpu",
                      config=case.config())
        if kernel == "fwd":
            ops.recompute_w_u_fwd(x["k"], x["v"], x["beta"], x["A"], **common)
        else:
            ops.prepare_wy_repr_bwd(x["k"], x["v"], x["beta"], x["A"], x["dw"], x["du"], **common)
        spec = case.specializations()[kernel]
        assert recorder.launches or not case.chunk_bounds()  # an empty batch launches nothing
        for kw in recorder.launches:
            assert {n: kw[n] for n in COMPILE_TIME_OF[kernel]} == {n: getattr(spec, n) for n in COMPILE_TIME_OF[kernel]}
            assert (int_class(kw["K"]), int_class(kw["V"])) == (spec.K_class, spec.V_class)
            assert (kw["H"], kw["HV"], kw["K"], kw["V"]) == (case.H, case.HV, case.K, case.V)
            assert str(kw["k"].dtype).removeprefix("torch.") == spec.dtype
            assert str(kw["beta"].dtype).removeprefix("torch.") == spec.gate_dtype
            assert all(x.data_ptr() % 16 == 0 for x in kw.values() if isinstance(x, torch.Tensor))


def test_the_lowering_gate_lowers_each_specialization_once() -> None:
    specs, _ = lowering.enumerate_specs()
    keys = [s.specialization for s in specs]
    assert len(keys) == len(set(keys))
    classes = {(s.backend, s.specialization.K_class) for s in specs}
    assert {("npu", "D"), ("npu", "N"), ("cuda", "D"), ("cuda", "N")} <= classes
    # JITFunction of the raw function: conftest.py may have made the kernels interpreter functions
    sig, constants = specs[0].signature(JITFunction(kernels.KERNELS[specs[0].kernel].fn))
    assert all(sig[n] == "i32" for n in ("K", "V")) and set(constants) >= COMPILE_TIME


def test_a_spec_and_a_case_of_its_dims_agree() -> None:
    """The lowering gate's name for a spec is what a case of the same dims launches."""
    from wy_ascend.testing.case import Case

    specs, _ = lowering.enumerate_specs()
    for s in [s for s in specs if s.backend == "cuda"][:200]:
        case = Case(H=s.H, HV=s.HV, K=s.K, V=s.V, BT=s.BT, dtype=s.dtype, use_g=s.USE_G, backend="cuda",
                    cu_seqlens=(0, s.BT) if s.IS_VARLEN else None, beta_dtype=s.gate_dtype, g_dtype=s.g_dtype,
                    index_dtype=s.index_dtype or "int64", knobs={"mode": "persistent" if s.PERSISTENT else "grid"})
        assert case.specializations()[s.kernel] == s.specialization


def test_the_cuda_backward_groups_heads_only_where_the_grouped_grid_fills_the_device() -> None:
    """Backend.groups_dk: grouped heads on cuda run grouped from GROUP_DK_PROGRAMS_PER_HEAD programs
    (chunks x B x H) per value head of a group up, per value head below; an explicit config decides;
    never without groups, never on the NPU's shape; and a case's specializations follow the same choice."""
    from wy_ascend.backends import BACKENDS, GROUP_DK_PROGRAMS_PER_HEAD, LaunchConfig, group_dk_min_programs
    from wy_ascend.testing.case import Case

    cuda, auto = BACKENDS["cuda"], LaunchConfig()
    for H, HV in ((1, 2), (1, 4), (8, 32), (2, 16)):
        least = group_dk_min_programs(H, HV)
        assert least == GROUP_DK_PROGRAMS_PER_HEAD * HV // H
        assert not cuda.groups_dk(auto, H, HV, least - 1) and cuda.groups_dk(auto, H, HV, least)
    # the perf profile's find (regressions/perf-d16759ef3d4b.json): 128 programs of 4 value heads each
    assert not cuda.groups_dk(auto, 8, 32, 128) and cuda.groups_dk(auto, 8, 16, 128)
    assert cuda.groups_dk(LaunchConfig(group_dk=True), 1, 4, 1)
    assert not cuda.groups_dk(LaunchConfig(group_dk=False), 1, 4, 10**6)
    assert not cuda.groups_dk(LaunchConfig(group_dk=True), 4, 4, 10**6)
    assert not any(BACKENDS[b].groups_dk(auto, 1, 4, 10**6) for b in ("npu", "npu-cuda", "cpu"))
    small = Case(B=1, T=1024, H=1, HV=4, K=16, V=16, BT=64, dtype="bfloat16", backend="cuda")  # 16 programs
    large = small.replace(T=64 * group_dk_min_programs(1, 4))
    assert not small.specializations()["bwd"].GROUP_DK and large.specializations()["bwd"].GROUP_DK


def test_ops_groups_a_cuda_backward_by_its_whole_grouped_grid(monkeypatch) -> None:
    """ops.py's grouped-dk choice on cuda, made without a device (backend lookup and kernel stubbed): a
    backward runs grouped exactly where its grouped grid, chunks x B x H programs over every batch and key
    head, reaches group_dk_min_programs, and it agrees with the case's own model (Case.specializations)."""
    from types import SimpleNamespace

    from wy_ascend.backends import BACKENDS, LaunchConfig, group_dk_min_programs
    from wy_ascend.testing.case import Case
    from wy_ascend.validation import Problem

    monkeypatch.setattr(ops, "resolve_backend", lambda name, device: BACKENDS["cuda"])
    monkeypatch.setattr(ops, "kernel_for", lambda backend, name, warps=None: SimpleNamespace(arg_names=[]))
    monkeypatch.setattr(ops, "dk_sum_kernel", lambda backend: None)
    config = LaunchConfig(num_cores=132)
    for B, H, HV in ((1, 1, 4), (2, 2, 8), (4, 8, 32), (3, 2, 4)):
        least = group_dk_min_programs(H, HV)
        reach = -(-least // (B * H))  # the fewest chunks whose grouped grid reaches the rule
        for NT in (reach - 1, reach):
            programs = NT * B * H
            problem = Problem(B=B, T=NT * 64, H=H, HV=HV, K=64, V=64, BT=64, NT=NT, varlen=False, use_g=True,
                              dtype=torch.bfloat16, device=torch.device("cpu"))
            call = ops._Call("bwd", problem, "cuda", config, None, torch.bfloat16, torch.bfloat16)
            assert call.group_dk == (programs >= least), (B, H, HV, programs)
            case = Case(B=B, T=NT * 64, H=H, HV=HV, K=64, V=64, BT=64, dtype="bfloat16", use_g=True, backend="cuda")
            assert case.specializations()["bwd"].GROUP_DK == call.group_dk


@pytest.mark.parametrize("mode", ["multi-tile", "one-tile", "all"])
def test_a_cuda_specialization_takes_bf16_dots_by_the_rule_of_its_own_tiles(mode: str, monkeypatch) -> None:
    """LOWP_DOT of every bfloat16 cuda specialization, from its own tile fields and WY_ASCEND_LOWP alone:
    ``all`` everywhere; tiles at least LOWP_MIN_TILE wide (in ``one-tile`` only where one tile covers each
    of K and V); else one shared narrow tile covering both. K and V each against its own tile, over pairs of
    unequal dims in both orders (a K/V mix-up in the wiring shows on K=64, V=128)."""
    from wy_ascend.backends import BACKENDS, LOWP_ENV, LOWP_MIN_TILE
    from wy_ascend.testing.case import Case

    monkeypatch.setenv(LOWP_ENV, mode)
    narrow = BACKENDS["cuda"].narrow_tiles()
    dims = (16, 32, 48, 64, 100, 128, 256)
    for K in dims:
        for V in dims:
            for kernel, s in Case(K=K, V=V, BT=64, T=64, dtype="bfloat16", backend="cuda").specializations().items():
                whole = s.NK == 1 and s.NV == 1
                wide = min(s.BK, s.BV) >= LOWP_MIN_TILE and (mode == "multi-tile" or whole)
                shared = s.BK == s.BV and whole and narrow
                assert s.LOWP_DOT == (mode == "all" or wide or shared), (kernel, K, V, s.label())
