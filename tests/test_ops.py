"""Public ops against the float64 oracle over the issue's grid, launch-knob invariance,
specialization stability across launches, and backend selection.

The grid (layouts x HV/H x K x V x BT x gate x dtype) has 9216 points; a full product
costs about an hour in the interpreter, so the test runs a pairwise covering array: every pair
of values of any two axes appears in at least one case (64 cases). The fuzz suite
covers the rest of the space at random.
"""

from __future__ import annotations

import inspect
import itertools
from collections import OrderedDict

import pytest
import torch

import wy_ascend
from wy_ascend import interpreter, reference
from wy_ascend.backends import compiled_kernels
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import (
    check_launch_invariance,
    check_oracle,
    rel_rms,
    run_ops,
)

LAYOUTS = {
    "fixed_T37": dict(B=2, T=37),  # T not a multiple of any BT
    "varlen_edges": dict(cu_seqlens=(0, 0, 1, 18, 18, 50, 83)),  # empty, length-1, tails
}
AXES = {
    "layout": list(LAYOUTS),
    "ratio": [(1, 1), (1, 2), (2, 6), (1, 4)],
    # 32: 32-wide tiles, where bf16 dot operands failed on cuda (lowp_dot); 192: cuda's forward in three 64-wide
    # tiles (Backend.halve_padded)
    "K": [16, 32, 48, 64, 80, 128, 192, 256],
    "V": [16, 32, 48, 64, 80, 128, 192, 256],
    "BT": [16, 32, 64],
    "use_g": [False, True],
    "dtype": ["float32", "bfloat16", "float16"],
}


def pairwise(axes: dict[str, list]) -> list[dict]:
    """A greedy covering array: rows until every value pair of every two axes is covered."""
    names = list(axes)
    uncovered = {
        (a, va, b, vb)
        for a, b in itertools.combinations(names, 2)
        for va in range(len(axes[a]))
        for vb in range(len(axes[b]))
    }
    rows = []
    while uncovered:
        best, best_gain = None, -1
        # Seed each candidate with an uncovered pair, then fill the other axes greedily.
        for a, va, b, vb in sorted(uncovered)[:40]:
            row = {a: va, b: vb}
            for n in names:
                if n in row:
                    continue
                row[n] = max(range(len(axes[n])), key=lambda v, n=n: sum(
                    (m, row[m], n, v) in uncovered or (n, v, m, row[m]) in uncovered for m in row))
            gain = sum((x, row[x], y, row[y]) in uncovered for x, y in itertools.combinations(names, 2))
            if gain > best_gain:
                best, best_gain = row, gain
        assert best is not None
        rows.append(best)
        uncovered -= {(x, best[x], y, best[y]) for x, y in itertools.combinations(names, 2)}
    return [{n: axes[n][i] for n, i in r.items()} for r in rows]


GRID = pairwise(AXES)


def grid_case(p: dict, backend: str) -> Case:
    H, HV = p["ratio"]
    return Case(H=H, HV=HV, K=p["K"], V=p["V"], BT=p["BT"], use_g=p["use_g"], dtype=p["dtype"],
                backend=backend, **LAYOUTS[p["layout"]])


def test_grid_covers_every_pair():
    for a, b in itertools.combinations(AXES, 2):
        seen = {(str(r[a]), str(r[b])) for r in GRID}
        assert len(seen) == len(AXES[a]) * len(AXES[b])


def grid_id(p: dict) -> str:
    return "-".join(f"{n}={p[n]}" for n in AXES).replace(" ", "")


@pytest.mark.parametrize("p", GRID, ids=grid_id)
def test_oracle_grid(p, backend):
    """Both ops match the oracle within properties.error_bounds (the bounds are justified there)."""
    check_oracle(grid_case(p, backend))


@pytest.mark.parametrize("dtypes", [
    dict(dtype="bfloat16", g_dtype="float32"),  # flash-linear-attention's call: a float32 g
    dict(dtype="bfloat16", beta_dtype="float32", g_dtype="float32", index_dtype="int32"),
    dict(dtype="float32", beta_dtype="bfloat16", g_dtype="float16"),
    dict(dtype="float16", beta_dtype="bfloat16", index_dtype="int32"),
], ids=lambda d: "-".join(f"{k}={v}" for k, v in d.items()))
def test_beta_g_and_cu_seqlens_in_their_own_dtypes(dtypes, backend):
    """beta, g and cu_seqlens in dtypes other than k's: the oracle holds (each output to the bound of
    the op's dtype and of its own, properties.precisions), and dbeta, dg come back in beta's and g's
    dtypes (run_ops checks every output's dtype)."""
    check_oracle(Case(cu_seqlens=(0, 5, 40, 101), H=1, HV=2, K=48, V=32, BT=32, use_g=True, backend=backend,
                      chunk_indices=True, **dtypes))


@pytest.mark.parametrize("use_g", [False, True])
def test_autograd_oracle_realistic_fp32(use_g, backend, device):
    """The backward also matches the autograd oracle (A differentiated as M^-1(k, beta, g)),
    not only the analytic given-A formulas."""
    case = Case(cu_seqlens=(0, 5, 40, 101), H=1, HV=2, K=48, V=32, BT=32, use_g=use_g, backend=backend)
    x = case.build_inputs(device)
    got = run_ops(case, x)
    f64 = [t.cpu().double() if t is not None else None for t in (x.k, x.v, x.beta, x.dw, x.du, x.g)]
    dk, dv, dbeta, dg = reference.wy_bwd(*f64[:5], g=f64[5], cu_seqlens=x.cu_seqlens.cpu(), chunk_size=case.BT)
    for name, ref in (("dk", dk), ("dv", dv), ("dbeta", dbeta), ("dg", dg)):
        if ref is not None:
            assert rel_rms(got[name], ref) <= 1e-5, name


@pytest.mark.parametrize("knobs", [
    dict(max_blocks=1), dict(num_cores=1), dict(num_cores=7, max_tasks=3), dict(mode="grid", max_blocks=1),
    dict(mode="grid", max_blocks=5), dict(mode="persistent", max_blocks=2, max_tasks=1),
])
def test_results_bitwise_identical_across_launch_knobs(knobs, backend):
    case = Case(cu_seqlens=(0, 1, 17, 17, 60), H=2, HV=4, K=32, V=48, BT=16, use_g=True, dtype="bfloat16",
                knobs=knobs, backend=backend)
    check_launch_invariance(case)


def test_every_launch_of_a_call_shares_one_specialization(monkeypatch, backend, device):
    """Launch chunking must not recompile: the compile-time arguments (constexprs, dtypes,
    and Triton's value specialization of non-listed ints) are identical across launches."""
    from wy_ascend import kernels, ops

    seen: list[tuple] = []

    class Recorder:
        def __init__(self, real):
            self.real = real
            self.fn = getattr(real, "fn", real)  # ops reads the entry's parameter order from it (cuda's direct launch)

        def __getitem__(self, grid):
            def run(**kw):
                key = tuple(sorted(
                    (n, (v.dtype, v.shape[1:] if v.ndim > 1 else ()) if isinstance(v, torch.Tensor) else
                     v if n not in kernels.RUNTIME_ARGS else "runtime")
                    for n, v in kw.items()))
                seen.append(key)
                return self.real[grid](**kw)
            return run

    real_kernel_for = ops.kernel_for
    monkeypatch.setattr(ops, "kernel_for", lambda b, name, warps=None: Recorder(real_kernel_for(b, name, warps)))
    monkeypatch.setattr(ops, "_CALLS", OrderedDict())  # no memoized call holds the real kernel
    case = Case(cu_seqlens=(0, 3, 40, 90), H=1, HV=2, K=16, V=16, BT=16, use_g=True, backend=backend)
    for knobs in (dict(mode="grid", max_blocks=1), dict(mode="persistent", max_tasks=1)):
        seen.clear()
        run_ops(case.replace(knobs=knobs), case.build_inputs(device))
        assert len(seen) > 10  # many launches per op
        fwd = [s for s in seen if any(n == "w" for n, _ in s)]
        bwd = [s for s in seen if any(n == "dk" for n, _ in s)]
        assert len(set(fwd)) == 1 and len(set(bwd)) == 1
    # ...and the arguments that vary are exactly the ones both entry kernels exempt from specialization.
    assert inspect.getsource(kernels).count("@triton.jit(do_not_specialize=RUNTIME_ARGS)") == 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="counts real compilations: needs a CUDA device")
@pytest.mark.parametrize("name", ["npu-cuda", "cuda"])
def test_launch_chunking_compiles_nothing_new(name):
    """On a device, a call split into many launches compiles exactly what one launch does."""
    case = Case(cu_seqlens=(0, 3, 40, 90), H=1, HV=2, K=16, V=16, BT=16, use_g=True, backend=name)
    x = case.build_inputs("cuda")
    # One unsplit call per launch shape compiles its variant (unless an earlier test of this
    # worker already did: the count is taken after these, so the order of tests cannot matter).
    for mode in ("grid", "persistent"):
        run_ops(case.replace(knobs=dict(mode=mode)), x)
    before = compiled_kernels()
    assert before >= 4  # fwd and bwd, both launch shapes
    run_ops(case.replace(knobs=dict(mode="grid", max_blocks=1)), x)  # one launch per task
    run_ops(case.replace(knobs=dict(mode="persistent", max_tasks=1, num_cores=3)), x)
    assert compiled_kernels() == before


def test_empty_problem_returns_empty_outputs(backend, device):
    case = Case(cu_seqlens=(0, 0, 0), H=1, HV=2, K=16, V=16, BT=16, use_g=True, backend=backend)
    out = run_ops(case, case.build_inputs(device))
    assert out["w"].shape == (1, 0, 2, 16) and out["dk"].shape == (1, 0, 1, 16) and out["dg"].shape == (1, 0, 2)


def test_dg_is_none_without_gate(backend, device):
    out = run_ops(Case(T=20, backend=backend), Case(T=20).build_inputs(device))
    assert out["dg"] is None


def test_context_overrides_and_call_overrides(backend, device):
    case = Case(T=40, H=1, HV=2, K=16, V=16, BT=16, backend=backend)
    x = case.build_inputs(device)
    base = wy_ascend.recompute_w_u_fwd(x.k, x.v, x.beta, x.A, backend=backend)
    with wy_ascend.launch_config(max_blocks=1, num_cores=1):
        ctx = wy_ascend.recompute_w_u_fwd(x.k, x.v, x.beta, x.A, backend=backend)
        call = wy_ascend.recompute_w_u_fwd(x.k, x.v, x.beta, x.A, backend=backend,
                                           config=wy_ascend.LaunchConfig(mode="grid"))
    for a, b, c in zip(base, ctx, call):
        assert torch.equal(a, b) and torch.equal(a, c)


def test_unknown_backend_names_the_valid_ones():
    x = Case(T=16).build_inputs()
    with pytest.raises(ValueError, match=r"backend must be one of \['cpu', 'cuda', 'npu', 'npu-cuda'\], got 'tpu'"):
        wy_ascend.recompute_w_u_fwd(x.k, x.v, x.beta, x.A, backend="tpu")


def test_env_backend_is_used(monkeypatch):
    x = Case(T=16).build_inputs()
    monkeypatch.setenv("WY_ASCEND_BACKEND", "bogus")
    with pytest.raises(ValueError, match="WY_ASCEND_BACKEND must be one of"):
        wy_ascend.recompute_w_u_fwd(x.k, x.v, x.beta, x.A)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_requested_backend_unavailable_is_loud():
    x = Case(T=16).build_inputs()
    with pytest.raises(wy_ascend.BackendUnavailableError, match="backend 'cuda' is unavailable: torch sees no CUDA"):
        wy_ascend.recompute_w_u_fwd(x.k, x.v, x.beta, x.A, backend="cuda")


@pytest.mark.parametrize("device", ["meta", "cuda"])
@pytest.mark.parametrize("op", ["fwd", "bwd"])
def test_backend_device_mismatch(op: str, device: str):
    """A backend named for tensors on another device is refused, naming both, before any launch: meta
    tensors (no backend runs on them) on every machine, cuda tensors where there is a GPU."""
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA device to hold cuda tensors for the cpu backend")
    try:
        interpreter.check_interpreter()
    except wy_ascend.BackendUnavailableError:
        pytest.skip("the cpu backend is unavailable here (upstream triton): its refusal comes first")
    x = Case(T=16).build_inputs()
    k, v, beta, A, dw, du = (t.to(device) for t in (x.k, x.v, x.beta, x.A, x.dw, x.du))
    with pytest.raises(ValueError, match=f"backend 'cpu' runs on 'cpu' tensors, but the inputs are on {device}"):
        if op == "fwd":
            wy_ascend.recompute_w_u_fwd(k, v, beta, A, backend="cpu")
        else:
            wy_ascend.prepare_wy_repr_bwd(k, v, beta, A, dw, du, backend="cpu")


def test_bt_too_large_for_the_ub_is_a_clear_error(backend, device):
    case = Case(T=130, BT=128, K=64, V=64, backend=backend, knobs=dict(ub_bytes=192 * 1024))
    x = case.build_inputs(device)
    with pytest.raises(wy_ascend.UnsupportedProblemError, match="BT=128 does not fit the bwd kernel"):
        wy_ascend.prepare_wy_repr_bwd(x.k, x.v, x.beta, x.A, x.dw, x.du, backend=backend, config=case.config())
