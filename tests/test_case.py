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
from wy_ascend.testing.case import DISTRIBUTIONS, DTYPES, INDEX_DTYPES, LAUNCH_KNOBS, MEMORY_ARGS, Case, _parse_layout

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


# The stored form's shape rule per field (Case.from_dict): a JSON value of any other shape is refused by name.
STORED_SHAPE: dict[str, Any] = {
    "knobs": lambda x: isinstance(x, dict),
    "subject": lambda x: isinstance(x, str),
    "dtype": lambda x: isinstance(x, str), "index_dtype": lambda x: isinstance(x, str),
    "beta_dtype": lambda x: x is None or isinstance(x, str), "g_dtype": lambda x: x is None or isinstance(x, str),
    "memory": lambda x: isinstance(x, dict) and all(isinstance(v, str) for v in x.values()),
    "chunk_indices": lambda x: isinstance(x, bool),
    "cu_seqlens": lambda x: x is None or (isinstance(x, list) and all(isinstance(i, int) for i in x)),
    "before": lambda x: isinstance(x, list) and bool(x) and all(isinstance(c, dict) for c in x),
}
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2, 20), st.floats(allow_nan=False),
                     st.sampled_from(["float32", "bfloat16", "int32", "k", "offset", "reference", ""]))
JSON_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["k", "v", "T", "max_blocks"]), inner, max_size=2)),
    max_leaves=6)


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(name=st.sampled_from(sorted(STORED_SHAPE)), value=JSON_VALUES)
def test_a_stored_case_of_the_wrong_shape_is_refused_by_the_fields_name(name: str, value: Any) -> None:
    """Case.from_dict reads a JSON regression file: a field whose JSON value has the wrong shape raises TypeError
    naming the field, and a value of the right shape is never refused for its shape (Case may still refuse it
    for its domain, by another message)."""
    if not STORED_SHAPE[name](value):
        with pytest.raises(TypeError, match=f"^case field '{name}' must be"):
            Case.from_dict({name: value})
        return
    try:
        Case.from_dict({name: value})
    except (TypeError, ValueError) as e:
        assert not str(e).startswith("case field"), e


@settings(max_examples=50, deadline=None, derandomize=True, database=None)
@given(extra=st.sets(st.text(min_size=1, max_size=8).filter(lambda s: s not in Case.__dataclass_fields__),
                     min_size=1, max_size=3))
def test_a_stored_case_with_an_unknown_field_is_refused_naming_it(extra: set[str]) -> None:
    """A field Case does not have (a typo, a newer file) raises ValueError listing exactly the unknown ones."""
    d = {**Case().to_dict(), **dict.fromkeys(extra, 1)}
    with pytest.raises(ValueError, match="^unknown case fields") as e:
        Case.from_dict(d)
    assert str(e.value).startswith(f"unknown case fields {sorted(extra)}; known:")


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(name=st.text(max_size=12).filter(lambda s: s not in MEMORY_ARGS), layout=st.sampled_from(["offset", "strided:0"]))
def test_a_memory_layout_of_a_name_that_is_no_argument_is_refused_naming_it(name: str, layout: str) -> None:
    """Only the ops' tensor arguments have memory layouts: any other name is refused, naming it."""
    with pytest.raises(ValueError, match="^memory layouts are for the arguments") as e:
        _parse_layout(name, layout)
    assert str(e.value).endswith(f"got {name!r}")
    assert _parse_layout("k", layout)[0] == layout.partition(":")[0]
