"""The grouped backward's dk sum kernel (kernels.wy_dk_group_sum_kernel, the cuda backend's sum of the
per-value-head dk) against the sum it replaces: the G fp32 slices added in head order, rounded once;
and the grouped_heads property's use of that order. Here on the interpreter (the ``dk_sum_kernel`` knob);
on cuda the device tests run it inside every grouped backward (test_ops.py)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from wy_ascend import ops
from wy_ascend.backends import BACKENDS, dk_sum_kernel
from wy_ascend.ops import DK_SUM_ROWS
from wy_ascend.planning import next_power_of_2
from wy_ascend.specialization import cdiv
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import PropertyFailure, check_grouped_heads

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


# Eight value heads per key head in float32: torch's sum of their dk takes another order than the heads'
# on the CPU (78 of its dk elements differ in the last bit from the in-order sum), so every comparison
# below is of the order itself.
G8 = Case(cu_seqlens=(0, 5, 70, 130), H=1, HV=8, K=33, V=24, BT=32, use_g=True, dtype="float32", dist="long_gates",
          seed=3)


@pytest.mark.parametrize("knobs", [{"group_dk": True}, {"group_dk": False, "dk_sum_kernel": True},
                                   {"group_dk": False}])
def test_both_in_order_ways_give_the_grouped_heads_property_its_bits(knobs: dict[str, bool]) -> None:
    """GROUP_DK's running sum and the sum kernel each equal the expanded problem's dk added in head order,
    bit for bit in float32, and each other (the property runs the other way too); torch's sum is held to
    its own order."""
    metrics = check_grouped_heads(G8.replace(knobs=knobs))
    assert metrics["dk"]["rel_rms"] == 0.0
    assert ("dk.other_dk_way" in metrics) == (knobs != {"group_dk": False})


def test_a_sum_in_another_order_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """The per-value-head way summing its heads in reverse (a bug the oracle's bound would pass): the property
    fails it against the in-order sum."""
    def reversed_sum(self: ops._Call, dk_heads: torch.Tensor) -> torch.Tensor:
        p = self.problem
        heads = dk_heads.view(p.B, p.T, p.H, p.HV // p.H, p.K)
        total = heads[:, :, :, -1].clone()
        for j in range(heads.shape[3] - 2, -1, -1):
            total += heads[:, :, :, j]
        return total.to(p.dtype)

    monkeypatch.setattr(ops._Call, "sum_value_heads", reversed_sum)
    with pytest.raises(PropertyFailure, match="grouped dk differs from the summed expanded dk"):
        check_grouped_heads(G8.replace(knobs={"group_dk": False, "dk_sum_kernel": True}))


def test_two_compiles_may_round_apart_but_not_swap_heads() -> None:
    """The other grouped-dk way on a compiled backend (``_compile_tolerances``): one bf16 unit in one element of
    65,536 (what the H200 showed in dg) passes; the same outputs with two value heads swapped fail."""
    from wy_ascend.testing.properties.invariance import _bitwise, _compile_tolerances

    g = torch.Generator().manual_seed(0)
    dg = torch.randn(1, 1024, 64, generator=g).to(torch.bfloat16)
    nudged = dg.clone()
    nudged.view(torch.int16)[0, 646, 23] += 1  # one bf16 unit further from zero
    assert (dg != nudged).sum() == 1
    within = _compile_tolerances({"dg": dg}, ("dg",), 64)
    assert _bitwise("x", {"dg": dg}, {"dg": nudged}, ("dg",), within)["dg"]["rel_rms"] > 0
    swapped = dg.clone()
    swapped[:, :, [3, 4]] = dg[:, :, [4, 3]]
    with pytest.raises(PropertyFailure, match="dg: rel_rms"):
        _bitwise("x", {"dg": dg}, {"dg": swapped}, ("dg",), within)


@pytest.mark.parametrize("compiled", [False, True])
def test_grouped_heads_holds_compiled_backends_to_two_compiles_rounding(monkeypatch: pytest.MonkeyPatch,
                                                                        compiled: bool) -> None:
    """The property's wiring of ``_compile_tolerances``: the expanded run's dg one bf16 unit off in one element
    fails it on the interpreter (bit for bit) and passes on a compiled backend (the cpu backend marked
    compiled here); two value heads of its dv swapped fail it on both."""
    import dataclasses

    from wy_ascend.testing.properties import invariance

    if compiled:
        monkeypatch.setattr(invariance, "BACKENDS",
                            {**BACKENDS, "cpu": dataclasses.replace(BACKENDS["cpu"], interpret=False)})
    run_ops = invariance.run_ops
    case = Case(B=1, T=40, H=1, HV=2, K=16, V=16, BT=16, dtype="bfloat16", use_g=True, backend="cpu")

    def expanded_changed(change):
        def run(c: Case, inputs, **knobs):
            out = run_ops(c, inputs, **knobs)
            if c.H == c.HV:  # the expanded problem's run
                change(out)
            return out
        return run

    def nudge(out):
        out["dg"].view(torch.int16)[0, 7, 1] += 1

    def swap(out):
        out["dv"][:, :, [0, 1]] = out["dv"][:, :, [1, 0]].clone()

    monkeypatch.setattr(invariance, "run_ops", expanded_changed(nudge))
    if compiled:
        assert check_grouped_heads(case)["dg"]["rel_rms"] > 0
    else:
        with pytest.raises(PropertyFailure, match="dg: 1 elements differ"):
            check_grouped_heads(case)
    monkeypatch.setattr(invariance, "run_ops", expanded_changed(swap))
    with pytest.raises(PropertyFailure, match="grouped heads differ from repeated keys: dv"):
        check_grouped_heads(case)


@settings(max_examples=40, derandomize=True, database=None, deadline=None)
@given(backend=st.sampled_from(["cuda", "npu-cuda"]), group_dk=st.sampled_from([None, True, False]),
       H=st.integers(1, 4), G=st.integers(2, 8), T=st.integers(1, 4096))
def test_a_compiled_grouped_backward_is_compared_with_the_per_head_sum_kernel_where_its_backend_has_one(
        backend: str, group_dk: bool | None, H: int, G: int, T: int) -> None:
    """_dk_ways on the compiled gpu backends over drawn head groups, lengths and group_dk knobs: a backward run
    grouped adds dk in head order and is compared with the per-value-head run (group_dk False) exactly where
    that run sums dk in the kernel (cuda), with none where torch's sum would (npu-cuda); run per value head, it
    is in order only where the sum kernel runs, compared with the grouped run."""
    from wy_ascend.testing.properties.common import _groups_dk
    from wy_ascend.testing.properties.invariance import _dk_ways

    case = Case(T=T, H=H, HV=H * G, BT=64, backend=backend, knobs={} if group_dk is None else {"group_dk": group_dk})
    b = BACKENDS[backend]
    grouped = _groups_dk(b, case)
    if grouped:
        assert _dk_ways(case) == (True, {"group_dk": False} if b.dk_sum_kernel else None)
    else:
        assert _dk_ways(case) == ((True, {"group_dk": True}) if b.dk_sum_kernel else (False, None))


@pytest.mark.parametrize("G", [2, 4])
def test_a_forward_only_subject_s_grouped_heads_are_its_w_and_u_alone(G: int) -> None:
    """check_grouped_heads of a forward-only subject (a stand-in taking wy_ascend's forward, no backward): w and u
    are compared with the repeated-keys run and no dk is asked for; a forward that reads another key head than
    its group's fails."""
    from types import SimpleNamespace

    from wy_ascend.testing.properties import common

    case = Case(T=20, H=2, HV=2 * G, K=16, V=16, BT=16, backend="cpu")

    def subject(shifted: bool) -> SimpleNamespace:
        def forward(k: torch.Tensor, **kw: object) -> object:
            return ops.recompute_w_u_fwd(k.roll(1, 2) if shifted and k.shape[2] > 1 else k, **kw, backend="cpu")
        return SimpleNamespace(ops=lambda backend: (forward, None), foreign=True)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(common, "subject_of", lambda case: subject(False))
        metrics = check_grouped_heads(case)
        assert not {"dk", "dv", "dbeta", "dg"} & set(metrics) and {"w", "u"} <= set(metrics)
        mp.setattr(common, "subject_of", lambda case: subject(True))
        with pytest.raises(PropertyFailure, match="grouped heads differ from repeated keys"):
            check_grouped_heads(case)
