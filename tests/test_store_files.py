"""Every stored file is validated as input: the real files of regressions/, each mutated by Hypothesis
in one field (deleted, given a value of another type or out of its range, an unknown field added, the
schema version set to anything but the int 1), are either refused with a message naming the file and
the field, or, where the mutation leaves a valid file, read back as the same case and property; and
the same of each damaged in its bytes (cut short, a byte changed, added or lost), naming the file."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wy_ascend.errors import RegressionFileError, SubjectUnavailableError
from wy_ascend.testing.store import iter_store, load

ROOT = Path(__file__).resolve().parents[1]
FILES = iter_store(ROOT / "regressions")
ORIGINALS = {p.name: json.loads(p.read_text()) for p in FILES}
FREE_FORM = ("failure", "metrics")  # the property's measurements: any JSON object, not a schema


Path_ = tuple[str | int, ...]  # keys of objects and positions in lists of objects (a history case's calls)


def field_paths(obj: dict[str, Any], prefix: Path_ = ()) -> list[Path_]:
    """The path of every field of ``obj``, nested objects' fields included, and the objects of a list of
    objects with theirs (not inside free-form metrics)."""
    paths: list[Path_] = []
    for key, value in obj.items():
        path = (*prefix, key)
        paths.append(path)
        if isinstance(value, dict) and path != FREE_FORM:
            paths.extend(field_paths(value, path))
        if isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
            for i, item in enumerate(value):
                paths += [(*path, i), *field_paths(item, (*path, i))]
    return paths


def objects(obj: dict[str, Any], prefix: Path_ = ()) -> list[Path_]:
    """The path of ``obj`` and of every object in it (where an unknown field can be added)."""
    return [prefix] + [p for p in field_paths(obj, prefix) if isinstance(_at(obj, p[len(prefix):]), dict)
                       and p != FREE_FORM]


def _at(obj: Any, path: Path_) -> Any:
    for key in path:
        obj = obj[key]
    return obj


def _name(path: Path_) -> str:
    """A field's name as the store's messages give it: ``case.before[0].K``."""
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path).removeprefix(".")


def json_kind(value: Any) -> str:
    """The JSON type of a value, telling bools, ints and other numbers apart (a schema does)."""
    if isinstance(value, bool) or value is None:
        return repr(value) if value is None else "bool"
    return "int" if isinstance(value, int) else "number" if isinstance(value, float) else type(value).__name__


# The JSON types each field holds in the real files, and those the format documents beyond them
# (regressions/README.md: a version is null where the package is missing, a time limit any number): a
# field given a value of any other type must be refused, whatever else the mutation leaves valid.
KINDS: dict[Path_, set[str]] = {}
for _data in ORIGINALS.values():
    for _path in field_paths(_data):
        KINDS.setdefault(_path, set()).add(json_kind(_at(_data, _path)))
for _path in [p for p in KINDS if p[0] == "versions" and len(p) == 2] + [("subject", "version")]:
    KINDS[_path].add("None")
KINDS.get(("failure", "limit_s"), set()).add("int")


JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63), st.floats(allow_nan=False,
                         allow_infinity=False), st.text(max_size=8))
JSON_VALUES = st.one_of(JSON_SCALARS, st.lists(JSON_SCALARS, max_size=3),
                        st.dictionaries(st.text(max_size=4), JSON_SCALARS, max_size=2))
# Numbers out of range and the near misses of a valid value: the edges a lax check lets through.
NEAR = st.one_of(st.integers(-3, 3), st.integers(-2**40, 2**40), st.sampled_from([1.0, 0.5, -1.0, "1", "", True, False]))
NOT_VERSION_1 = st.one_of(JSON_VALUES, NEAR).filter(lambda v: not (type(v) is int and v == 1))


@st.composite
def mutations(draw: st.DrawFn) -> tuple[str, dict[str, Any], Path_, str]:
    """(file name, its content mutated in one field, that field's path, what was done to it)."""
    name = draw(st.sampled_from(sorted(ORIGINALS)))
    data = copy.deepcopy(ORIGINALS[name])
    kind = draw(st.sampled_from(["delete", "retype", "near", "unknown", "version"]))
    if kind == "version":
        data["schema_version"] = draw(NOT_VERSION_1)
        return name, data, ("schema_version",), kind
    if kind == "unknown":
        parent = draw(st.sampled_from(objects(data)))
        key = draw(st.text(min_size=1, max_size=6).filter(lambda k: k not in _at(data, parent)))
        _at(data, parent)[key] = draw(JSON_VALUES)
        return name, data, (*parent, key), kind
    path = draw(st.sampled_from(field_paths(data)))
    parent = _at(data, path[:-1])
    if kind == "delete":
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(JSON_VALUES if kind == "retype" else NEAR)
    return name, data, path, kind


@pytest.mark.skipif(not FILES, reason="no files in regressions/ to mutate")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutation=mutations())
def test_a_mutated_file_is_refused_naming_the_field_or_read_as_the_same_case(
        tmp_path: Path, mutation: tuple[str, dict[str, Any], Path_, str]) -> None:
    name, data, path, kind = mutation
    file = tmp_path / name  # under the original's name: the name is checked against the content too
    file.write_text(json.dumps(data))
    original = load(ROOT / "regressions" / name)
    try:
        stored = load(file)
    except RegressionFileError as e:
        message = str(e)
        assert message.startswith(f"{file}: "), message
        # the field itself, or the object holding it where the fault is between fields (a case's
        # fields against each other or the ops' contract, the content against the file's name)
        assert repr(_name(path)) in message or repr(path[0])[:-1] in message, (path, kind, message)
        return
    assert kind != "version", f"schema_version {data['schema_version']!r} accepted"
    if kind in ("retype", "near"):
        value = _at(data, path)
        assert json_kind(value) in KINDS[path], f"{_name(path)} = {value!r} accepted (a {json_kind(value)})"
    assert (stored.property, stored.case) == (original.property, original.case), (path, kind)
    assert stored.backend == original.backend or original.case.backend is None, (path, kind)


@pytest.mark.parametrize("version", [0, -1, 2, "1", True, 1.0, None, [1], {"v": 1}])
def test_every_real_file_under_another_version_is_refused(tmp_path: Path, version: Any) -> None:
    """The version table's edges on every real file, whatever Hypothesis draws above."""
    for name, data in ORIGINALS.items():
        file = tmp_path / name
        file.write_text(json.dumps({**data, "schema_version": version}))
        with pytest.raises(RegressionFileError, match=f"^{file}: field 'schema_version' is .*cannot read"):
            load(file)


@pytest.mark.skipif(not FILES, reason="no files in regressions/ to mutate")
@pytest.mark.parametrize("cu_seqlens", [[], [5], [0, 5, 3], [0, -1], [0, 0.5]])
def test_degenerate_offsets_are_refused_naming_the_case(tmp_path: Path, cu_seqlens: list[Any]) -> None:
    """Offsets that are no packed batch (none, not from 0, decreasing, negative, not integers) in a
    file's case: refused naming the case, never an error from inside Case (an empty list once raised
    IndexError there)."""
    name = sorted(ORIGINALS)[0]
    data = copy.deepcopy(ORIGINALS[name])
    data["case"]["cu_seqlens"] = cu_seqlens
    file = tmp_path / name
    file.write_text(json.dumps(data))
    with pytest.raises(RegressionFileError, match=r"'case(\.cu_seqlens|\.T)?'"):
        load(file)


@pytest.mark.skipif(not FILES, reason="no files in regressions/ to mutate")
@pytest.mark.parametrize(("field", "value"), [("B", 28_823_037_615_171_175), ("T", 2**62)])
def test_sizes_past_what_a_tensor_holds_are_refused_naming_the_case(tmp_path: Path, field: str, value: int) -> None:
    """A case whose sizes multiply past 2**63 - 1 elements (the mutation test drew B = 28,823,037,615,171,175):
    refused naming the case and the tensor, never torch's own "integer multiplication overflow" from the
    loader's zero-stride expansion."""
    name = next(n for n, d in sorted(ORIGINALS.items()) if d["case"]["cu_seqlens"] is None and "before" not in d["case"])
    data = copy.deepcopy(ORIGINALS[name])
    data["case"][field] = value
    file = tmp_path / name
    file.write_text(json.dumps(data))
    with pytest.raises(RegressionFileError, match=r"field 'case' is outside the ops' contract: \w+ would be of shape"):
        load(file)


HISTORY = sorted(name for name, data in ORIGINALS.items() if data["case"].get("before"))


@pytest.mark.skipif(not HISTORY, reason="no history file in regressions/")
@pytest.mark.parametrize(("change", "field", "says"), [
    (lambda c: c["before"][0].update(x=1), "case.before[0].x", "is not a field of schema version 1"),
    (lambda c: c["before"][0].update(K=0), "case.before[0].K", "must be an int >= 1, got 0"),
    (lambda c: c["before"][0].pop("BT"), "case.before[0].BT", "is missing"),
    (lambda c: c["before"][0].update(before=[copy.deepcopy(c["before"][1])]), "case.before[0].before", "is not a field"),
    (lambda c: c.update(before=[]), "case.before", "non-empty list of cases"),
    (lambda c: c.update(before=[1]), "case.before", "non-empty list of cases"),
    (lambda c: c["before"][0].update(subject="wy_ascend"), "case.before[0].subject", "a writer leaves out"),
    (lambda c: c["before"][0].update(subject=next(n for n in ("fla", "fla-ascend") if n != c["subject"])), "case",
     "before must hold cases of the case's backend and subject"),
    (lambda c: c["before"][0].update(index_dtype="int64"), "case.before[0].index_dtype", "a writer leaves out"),
])
def test_a_history_files_earlier_calls_are_read_as_cases(tmp_path: Path, change: Any, field: str, says: str) -> None:
    """Each earlier call of a stored history case is a case by the same rules as the case (its fields, their
    ranges, the form a writer gives them), with no earlier calls of its own, of the case's subject."""
    name = HISTORY[0]
    data = copy.deepcopy(ORIGINALS[name])
    change(data["case"])
    file = tmp_path / name
    file.write_text(json.dumps(data))
    with pytest.raises(RegressionFileError) as e:
        load(file)
    assert str(e.value).startswith(f"{file}: field {field!r}") and says in str(e.value), str(e.value)


CUTS = ("truncate", "replace", "insert", "delete")


def damaged(raw: bytes, kind: str, at: int, byte: int) -> bytes:
    """``raw`` cut at byte ``at``, or that byte replaced by ``byte``, ``byte`` inserted before it, or it deleted."""
    return {"truncate": raw[:at], "replace": raw[:at] + bytes([byte]) + raw[at + 1:],
            "insert": raw[:at] + bytes([byte]) + raw[at:], "delete": raw[:at] + raw[at + 1:]}[kind]


@st.composite
def byte_corruptions(draw: st.DrawFn) -> tuple[str, str, int, int]:
    """(file name, one of CUTS, the byte where, a byte value): damage below the JSON, a write torn short or a
    byte of any value changed, added or lost (a disk's, a copy's or an editor's; invalid UTF-8 among them).
    The field-level mutations are ``mutations``' above."""
    name = draw(st.sampled_from(sorted(ORIGINALS)))
    size = (ROOT / "regressions" / name).stat().st_size
    return name, draw(st.sampled_from(CUTS)), draw(st.integers(0, size - 1)), draw(st.integers(0, 255))


@pytest.mark.skipif(not FILES, reason="no files in regressions/ to corrupt")
@settings(max_examples=1000, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corruption=byte_corruptions())
def test_a_file_corrupted_in_its_bytes_is_refused_naming_it_or_read_as_the_same_case(
        tmp_path: Path, corruption: tuple[str, str, int, int]) -> None:
    """A stored file damaged below the JSON (torn, a byte changed, added or lost, invalid UTF-8) is either
    refused, by RegressionFileError (or SubjectUnavailableError, a replay's MISSING, where the file still names
    one subject consistently that is not here) naming the file, or read as the original's property and case:
    never another exception, which would end a replay of many files as an ERROR in the runner instead of one MALFORMED file."""
    name, kind, at, byte = corruption
    file = tmp_path / name
    file.write_bytes(damaged((ROOT / "regressions" / name).read_bytes(), kind, at, byte))
    try:
        stored = load(file)
    except (RegressionFileError, SubjectUnavailableError) as e:
        assert str(e).startswith(f"{file}: "), str(e)
        return
    original = load(ROOT / "regressions" / name)
    assert (stored.property, stored.case) == (original.property, original.case)


SUBJECT_NAMES = st.one_of(st.sampled_from(["wy_ascend", "fla", "fla-ascend", "0", "natural-gate-wy"]),
                          st.from_regex(r"[a-z][a-z0-9_-]{0,8}", fullmatch=True))


@pytest.mark.skipif(not FILES, reason="no files in regressions/ to mutate")
@settings(max_examples=200, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(sorted(ORIGINALS)), case_subject=SUBJECT_NAMES,
       record_subject=st.one_of(st.none(), SUBJECT_NAMES))
def test_a_file_whose_two_names_of_its_subject_disagree_is_refused_naming_them(
        tmp_path: Path, name: str, case_subject: str, record_subject: str | None) -> None:
    """Any stored file with its case's subject and its 'subject' record (absent: wy_ascend's files) set to drawn
    names: where they disagree it is malformed, refused naming 'case.subject' before any subject is loaded (never
    "not available here, install it", which no install would mend); where they agree it reads, or names the subject
    missing (SubjectUnavailableError), or is refused by another field's rule, never another exception."""
    data = copy.deepcopy(ORIGINALS[name])
    data["case"]["subject"] = case_subject
    data.pop("subject", None)
    if record_subject is not None:
        data["subject"] = {"name": record_subject, "version": "0.1.0"}
    file = tmp_path / name
    file.write_text(json.dumps(data))
    if (record_subject or "wy_ascend") != case_subject:
        with pytest.raises(RegressionFileError, match=f"^{file}: field 'case.subject' is {case_subject!r}, but "):
            load(file)
        return
    try:
        load(file)
    except (RegressionFileError, SubjectUnavailableError) as e:
        assert str(e).startswith(f"{file}: "), str(e)
