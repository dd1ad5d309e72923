"""A Case refuses, by the field's name, every value outside its field's domain: the strategies, the store and
the replay all build cases, and a value Case lets through reaches a kernel as something else (a dtype name
torch does not know, a distribution the input builder falls through)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wy_ascend.backends import DEVICES
from wy_ascend.subjects import SUBJECTS
from wy_ascend.testing.case import DISTRIBUTIONS, DTYPES, INDEX_DTYPES, LAUNCH_KNOBS, Case

# Each field with a named domain, and whether None is in it (k's dtype for the gates; the backend's device).
DOMAINS: dict[str, tuple[Any, bool]] = {
    "dtype": (DTYPES, False), "beta_dtype": (DTYPES, True), "g_dtype": (DTYPES, True),
    "index_dtype": (INDEX_DTYPES, False), "dist": (DISTRIBUTIONS, False), "subject": (SUBJECTS, False),
    "device": (DEVICES, True),
}
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=False), st.text(max_size=12),
                   st.sampled_from(["Float32", "float64", "int8", "bf16", "fla_ascend", " float32", "cpu"]))


@settings(max_examples=300, deadline=None)
@given(name=st.sampled_from(sorted(DOMAINS)), value=VALUES)
def test_a_case_refuses_a_value_outside_each_fields_domain(name: str, value: Any) -> None:
    domain, nullable = DOMAINS[name]
    inside = (value is None and nullable) or (isinstance(value, str) and value in domain)
    if inside:
        assert getattr(Case(**{name: value}), name) == value
        return
    with pytest.raises(ValueError, match=f"^{name} must be one of"):
        Case(**{name: value})


@pytest.mark.parametrize("offset", [-1, True, 1.0, "1", None])
def test_the_offset_is_a_whole_number_of_tokens(offset: Any) -> None:
    with pytest.raises(ValueError, match="^offset must be an int >= 0"):
        Case(offset=offset)


def test_knobs_memory_and_chunk_indices_are_refused_by_name() -> None:
    assert set(Case(knobs=dict.fromkeys(["max_blocks"], 2)).knobs) <= set(LAUNCH_KNOBS)
    with pytest.raises(ValueError, match="^knobs must be among"):
        Case(knobs={"warps": 4})
    with pytest.raises(ValueError, match="^chunk_indices=True needs cu_seqlens"):
        Case(chunk_indices=True)
    with pytest.raises(ValueError, match="memory lays out an argument the case does not pass"):
        Case(memory={"g": "offset"})
