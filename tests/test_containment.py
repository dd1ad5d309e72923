"""The containment property's choice of the poisoned block and its refusal of a case without one
(the property itself runs in the fuzz suite; the catalog's mask and offset mutants are what it catches)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import PropertyFailure, check_containment, poisoned_block

pytestmark = pytest.mark.cpu_backend


def test_a_case_without_chunks_is_refused_by_name() -> None:
    with pytest.raises(PropertyFailure, match="containment needs a case with at least one chunk"):
        check_containment(Case(cu_seqlens=(0, 0), backend="cpu"))


@pytest.mark.parametrize(("seed", "block"), [(0, (0, 0, 16, 0)), (1, (0, 16, 20, 0)), (2, (1, 0, 16, 0)),
                                             (4, (0, 0, 16, 1)), (7, (1, 16, 20, 1))])
def test_the_block_is_the_seeds_chunk_and_key_head(seed: int, block: tuple[int, int, int, int]) -> None:
    """B2 T20 BT16: chunks (batch 0: 0-16, 16-20; batch 1: 0-16, 16-20), tokens per batch row; H2."""
    assert poisoned_block(Case(B=2, T=20, BT=16, H=2, HV=2, seed=seed)) == block


def test_the_property_passes_on_a_grouped_varlen_case() -> None:
    metrics = check_containment(Case(cu_seqlens=(0, 5, 37), H=2, HV=4, BT=16, use_g=True, seed=3, backend="cpu"))
    assert metrics["block"] == {"batch": 0, "tokens": [0, 5], "key_head": 1}  # chunk 3 mod 3, head 3 // 3 mod 2


# Stand-in ops whose every output element reads only its own token and head (as the WY step's chunks and
# head groups do, at a finer grain): the property's verdict on a planted leak, without the kernels' time.
def _local_ops(case: Case, inputs) -> dict:  # noqa: ANN001 - the case's Inputs
    G = case.HV // case.H
    k = inputs.k.repeat_interleave(G, dim=2)
    row = inputs.A[..., 0] * inputs.beta + (inputs.g if inputs.g is not None else 0)  # column 0: in every chunk
    return {"w": k * row[..., None], "u": inputs.v * row[..., None], "dk": inputs.k + inputs.dw[:, :, ::G].sum(-1, True),
            "dv": inputs.du * row[..., None], "dbeta": row, "dg": row if inputs.g is not None else None}


@st.composite
def _outside(draw: st.DrawFn) -> tuple[Case, str, int, int, int]:
    """A case (B2 T40 BT16 H2 HV4: its seed picks the poisoned chunk and key head), an output and a (batch,
    token, head) of it outside the poisoned block, the block's edges first."""
    case = Case(B=2, T=40, BT=16, H=2, HV=4, K=8, V=8, use_g=True, seed=draw(st.integers(0, 11)), backend="cpu")
    b, t0, t1, hk = poisoned_block(case)
    name = draw(st.sampled_from(["w", "u", "dk", "dv", "dbeta", "dg"]))
    heads = case.H if name == "dk" else case.HV
    inside = range(hk, hk + 1) if name == "dk" else range(hk * 2, hk * 2 + 2)
    batch = draw(st.sampled_from([b, 1 - b]))
    token = draw(st.sampled_from([t1, t0 - 1]) | st.integers(0, case.T - 1))
    head = draw(st.integers(0, heads - 1))
    assume(not (batch == b and t0 <= token < t1 and head in inside) and 0 <= token < case.T)
    return case, name, batch, token, head


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=_outside())
def test_a_nan_leaking_to_any_element_outside_the_block_is_caught(where, monkeypatch) -> None:
    """containment fails whenever the poisoned run differs from the clean one at any single element outside
    the block (the row just past or before the chunk, a neighbouring head, the other batch row), and passes
    on ops that keep every element to its own token and head."""
    import wy_ascend.testing.properties.containment as containment

    case, name, batch, token, head = where

    def leaky(case: Case, inputs) -> dict:  # noqa: ANN001
        out = _local_ops(case, inputs)
        if bool(torch.isnan(inputs.k).any()):  # the poisoned run
            out[name] = out[name].clone()
            out[name][batch, token, head] = float("nan")
        return out

    monkeypatch.setattr(containment, "run_ops", _local_ops)
    assert check_containment(case)["block"]["tokens"] == list(poisoned_block(case)[1:3])
    monkeypatch.setattr(containment, "run_ops", leaky)
    with pytest.raises(PropertyFailure, match="reached other outputs"):
        check_containment(case)


@settings(max_examples=30, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 11), data=st.data())
def test_a_poisoned_block_whose_u_is_not_all_nan_is_refused(seed: int, data: st.DataObject, monkeypatch) -> None:
    """The property's self-check: ops whose poisoned run leaves any one element of the block's u clean (the
    NaN never reached it there: an input ignored, a NaN zeroed) fail it by name, though nothing leaks out."""
    import wy_ascend.testing.properties.containment as containment

    case = Case(B=2, T=40, BT=16, H=2, HV=4, K=8, V=8, use_g=True, seed=seed, backend="cpu")
    b, t0, t1, hk = poisoned_block(case)
    token = data.draw(st.integers(t0, t1 - 1))
    head = data.draw(st.integers(2 * hk, 2 * hk + 1))  # the key head's HV/H = 2 value heads
    column = data.draw(st.integers(0, case.V - 1))

    def sealed(case: Case, inputs) -> dict:  # noqa: ANN001
        out = _local_ops(case, inputs)
        out["u"] = out["u"].clone()
        out["u"][b, token, head, column] = 0.0
        return out

    monkeypatch.setattr(containment, "run_ops", sealed)
    with pytest.raises(PropertyFailure, match=r"the poisoned block's u is not all NaN"):
        check_containment(case)
