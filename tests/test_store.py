"""The regression store: atomic, deduplicated, never-overwriting writes; strict reads; the CLI."""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.queues
import multiprocessing.synchronize
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz.strategies import cases
from wy_ascend.cli import main
from wy_ascend.errors import RegressionFileError
from wy_ascend.testing import store
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import PROPERTIES, PropertyFailure
from wy_ascend.testing.store import file_name, iter_store, load, record_failure

CASE = Case(T=20, cu_seqlens=(0, 5, 20), H=1, HV=2, use_g=True, knobs={"max_tasks": 3})
FAILURE = PropertyFailure("kernel differs from the float64 oracle: w: rel_rms inf > tol 1.000e-05",
                          {"w": {"rel_rms": float("inf"), "tol": 1e-5}, "u": {"rel_rms": float("nan")},
                           "dk": {"rel_rms": torch.tensor(0.5)}, "n": 3})


def _strict_json(text: str) -> object:
    def reject(name: str) -> None:
        raise AssertionError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=reject)


def test_record_writes_readable_file(tmp_path: Path, backend: str) -> None:
    path = record_failure("oracle", CASE, FAILURE, tmp_path)
    assert path.parent == tmp_path and path.name == file_name("oracle", CASE)
    assert path.name.startswith("oracle-") and len(path.stem) == len("oracle-") + store.HASH_CHARS
    text = path.read_text()
    data = _strict_json(text)
    assert isinstance(data, dict)
    assert list(data) == sorted(data) and "\n  " in text  # sorted keys, indented
    assert data["schema_version"] == 1 and data["property"] == "oracle" and data["backend"] == backend  # the run's
    assert data["case"] == CASE.to_dict()
    assert data["failure"]["type"] == "PropertyFailure" and data["failure"]["message"] == str(FAILURE)
    assert data["failure"]["metrics"] == {"w": {"rel_rms": "inf", "tol": 1e-5}, "u": {"rel_rms": "nan"},
                                          "dk": {"rel_rms": 0.5}, "n": 3}
    assert set(data["versions"]) == {"wy_ascend", "torch", "triton", "python", "hypothesis"}
    assert data["date"].endswith("+00:00")
    stored = load(path)
    assert stored.case == CASE and stored.property == "oracle" and stored.path == path


def test_crash_records_traceback(tmp_path: Path) -> None:
    try:
        raise IndexError("index 99 is out of bounds")
    except IndexError as e:
        path = record_failure("oracle", CASE, e, tmp_path)
    failure = load(path).failure
    assert failure["type"] == "IndexError" and "out of bounds" in failure["message"]
    assert "Traceback" in failure["traceback"] and failure["metrics"] == {}


def test_a_raised_property_failure_records_no_traceback(tmp_path: Path) -> None:
    """A property failure is raised by the property's check, so it has a traceback; the file keeps its
    message and metrics, which say what failed, and no traceback (that is for crashes: above)."""
    try:
        raise PropertyFailure("w differs", {"w": {"rel_rms": 0.5}})
    except PropertyFailure as e:
        assert e.__traceback__ is not None
        path = record_failure("oracle", CASE, e, tmp_path)
    failure = load(path).failure
    assert failure["traceback"] is None and failure["metrics"] == {"w": {"rel_rms": 0.5}}


def test_hash_covers_property_and_case_only(tmp_path: Path) -> None:
    a = record_failure("oracle", CASE, FAILURE, tmp_path)
    b = record_failure("oracle", CASE, PropertyFailure("another message", {"x": 1.0}), tmp_path)
    assert a == b and iter_store(tmp_path) == [a]
    assert "kernel differs" in load(a).failure["message"]  # the first record stays
    c = record_failure("launch_invariance", CASE, FAILURE, tmp_path)
    d = record_failure("oracle", CASE.replace(seed=1), FAILURE, tmp_path)
    assert len({a, c, d}) == 3 and iter_store(tmp_path) == sorted([a, c, d])


def test_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / file_name("oracle", CASE)
    path.write_text("hand-written, different content")
    assert record_failure("oracle", CASE, FAILURE, tmp_path) == path
    assert path.read_text() == "hand-written, different content"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp file left behind


def test_atomic_publish(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file appears under its name only once complete (link of a fully written temp file)."""
    seen = []
    real_link = os.link

    def link(src: str, dst: str) -> None:
        assert not Path(dst).exists()
        seen.append(_strict_json(Path(src).read_text()))
        real_link(src, dst)

    monkeypatch.setattr(store.os, "link", link)
    path = record_failure("oracle", CASE, FAILURE, tmp_path)
    assert seen and seen[0] == _strict_json(path.read_text())
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_no_hard_links_falls_back_to_exclusive_create(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_link(src: str, dst: str) -> None:
        raise PermissionError("hard links not supported")

    monkeypatch.setattr(store.os, "link", no_link)
    path = record_failure("oracle", CASE, FAILURE, tmp_path)
    assert load(path).case == CASE
    path.write_text("changed")
    assert record_failure("oracle", CASE, FAILURE, tmp_path) == path and path.read_text() == "changed"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def _writer(directory: str, seed: int, barrier: multiprocessing.synchronize.Barrier,
            results: multiprocessing.queues.Queue) -> None:
    barrier.wait()  # start together, so the writes of the shared failure race
    out = []
    for _ in range(5):
        out.append(str(record_failure("oracle", CASE, FAILURE, Path(directory))))  # the same failure
        out.append(str(record_failure("oracle", CASE.replace(seed=seed), FAILURE, Path(directory))))  # its own
    results.put(out)


@pytest.mark.parametrize("workers", [2, 4])
def test_parallel_writers(tmp_path: Path, workers: int) -> None:
    ctx = multiprocessing.get_context("fork")
    barrier, queue = ctx.Barrier(workers), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(tmp_path / "store"), 100 + i, barrier, queue))
             for i in range(workers)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    files = iter_store(tmp_path / "store")
    expected = {file_name("oracle", CASE)} | {file_name("oracle", CASE.replace(seed=100 + i)) for i in range(workers)}
    assert {p.name for p in files} == expected
    assert {Path(p).name for r in results for p in r} == expected
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == sorted(expected)  # no temp files
    for p in files:
        assert load(p).failure["message"] == str(FAILURE)


def test_iter_store(tmp_path: Path) -> None:
    assert iter_store(tmp_path / "missing") == []
    for name in ("b.json", "a.json", ".a.json.x.tmp", "README.md", ".hidden.json"):
        (tmp_path / name).write_text("{}")
    assert [p.name for p in iter_store(tmp_path)] == ["a.json", "b.json"]
    assert iter_store(str(tmp_path)) == iter_store(tmp_path)  # a path given as text


def test_iter_store_defaults_to_the_store_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(store.STORE_ENV, str(tmp_path))
    (tmp_path / "a.json").write_text("{}")
    assert iter_store() == [tmp_path / "a.json"]
    monkeypatch.delenv(store.STORE_ENV)
    monkeypatch.chdir(tmp_path)
    assert iter_store() == []  # ./regressions, absent here


def test_default_directory_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(store.STORE_ENV, str(tmp_path / "env-store"))
    path = record_failure("oracle", CASE, FAILURE)
    assert path.parent == tmp_path / "env-store"
    monkeypatch.delenv(store.STORE_ENV)
    monkeypatch.chdir(tmp_path)
    assert store.regressions_dir() == Path("regressions")


def _valid() -> dict:
    return {"schema_version": 1, "property": "oracle", "case": CASE.to_dict(), "backend": "cpu",
            "failure": {"type": "PropertyFailure", "message": "m", "metrics": {}, "traceback": None},
            "versions": {"torch": "2", "triton": "3", "python": "3.11", "hypothesis": "6", "wy_ascend": None},
            "date": "2025-01-01T00:00:00+00:00"}


def _edit(**changes: object) -> dict:
    d = _valid()
    for key, value in changes.items():
        target = d
        *parents, leaf = key.split("__")
        for p in parents:
            target = target[p]
        if value is KeyError:
            del target[leaf]
        else:
            target[leaf] = value
    return d


MALFORMED = {
    "invalid_json": ('{"schema_version": 1,', "invalid JSON at line 1"),
    "non_finite_constant": ('{"schema_version": NaN}', "NaN is not a JSON number"),
    "not_an_object": (json.dumps([1, 2]), "expected a JSON object"),
    "missing_schema_version": (_edit(schema_version=KeyError), "'schema_version' is missing"),
    "unknown_schema_version": (_edit(schema_version=2), "'schema_version' is 2, which this wy_ascend cannot read; "
                               "supported versions: [1]"),
    "schema_version_0": (_edit(schema_version=0), "'schema_version' is 0, which"),
    "schema_version_negative": (_edit(schema_version=-1), "'schema_version' is -1, which"),
    "schema_version_string": (_edit(schema_version="1"), "'schema_version' is \"1\", which"),
    "schema_version_bool": (_edit(schema_version=True), "'schema_version' is true, which"),
    "schema_version_float": (_edit(schema_version=1.0), "'schema_version' is 1.0, which"),
    "schema_version_null": (_edit(schema_version=None), "'schema_version' is null, which"),
    "schema_version_first": ({"schema_version": 0, "other": 1}, "'schema_version' is 0"),  # before anything else
    "unknown_top_level_field": (_edit(extra=1), "'extra' is not a field of schema version 1"),
    "missing_property": (_edit(property=KeyError), "'property' is missing"),
    "missing_case": (_edit(case=KeyError), "'case' is missing"),
    "missing_failure": (_edit(failure=KeyError), "'failure' is missing"),
    "missing_backend": (_edit(backend=KeyError), "'backend' is missing"),
    "missing_versions": (_edit(versions=KeyError), "'versions' is missing"),
    "missing_date": (_edit(date=KeyError), "'date' is missing"),
    "property_wrong_type": (_edit(property=3), "'property' is 3, not a known property"),
    "case_wrong_type": (_edit(case=[1]), "'case' must be an object"),
    "date_wrong_type": (_edit(date=None), "'date' must be a string, got null"),
    "date_nonsense": (_edit(date="yesterday"), "'date' must be an ISO-8601 time with its UTC offset"),
    "date_without_offset": (_edit(date="2025-01-01T00:00:00"), "'date' must be an ISO-8601 time"),
    "unknown_property": (_edit(property="oracel"), "'property' is \"oracel\", not a known property"),
    "unknown_backend": (_edit(backend="tpu"), "'backend' is \"tpu\", not a known backend"),
    "versions_number": (_edit(versions__torch=2), "'versions.torch' must be a string, got 2"),
    "versions_missing_key": (_edit(versions__python=KeyError), "'versions.python' is missing"),
    "versions_unknown_key": (_edit(versions__numpy="2"), "'versions.numpy' is not a field"),
    "failure_missing_message": (_edit(failure__message=KeyError), "'failure.message' is missing"),
    "failure_metrics_wrong_type": (_edit(failure__metrics=[]), "'failure.metrics' must be an object"),
    "failure_unknown_field": (_edit(failure__hint="x"), "'failure.hint' is not a field"),
    "failure_limit_negative": (_edit(failure__limit_s=-5), "'failure.limit_s' must be a number > 0"),
    "case_int_as_string": (_edit(case__K="16"), "'case.K' must be an int, got \"16\""),
    "case_int_as_bool": (_edit(case__seed=True), "'case.seed' must be an int, got true"),
    "case_negative_seed": (_edit(case__seed=-1), "'case.seed' must be an int >= 0, got -1"),
    "case_dim_out_of_range": (_edit(case__K=300), "'case.K' the value must be in [1, 256], got 300"),
    "case_bad_chunk": (_edit(case__BT=24), "'case.BT' the value must be one of (16, 32, 64, 128), got 24"),
    "case_missing_field": (_edit(case__dist=KeyError), "'case.dist' is missing"),
    "case_unknown_field": (_edit(case__KK=16), "'case.KK' is not a field of schema version 1"),
    "case_bad_dtype": (_edit(case__dtype="float64"), "'case.dtype' is \"float64\", not a dtype"),
    "case_dtype_null": (_edit(case__dtype=None), "'case.dtype' is null, not a dtype"),
    "case_beta_dtype_int": (_edit(case__beta_dtype=5), "'case.beta_dtype' is 5, not a dtype"),
    "case_bad_g_dtype": (_edit(case__g_dtype="float64"), "'case.g_dtype' is \"float64\""),
    "case_bad_index_dtype": (_edit(case__index_dtype="int16"), "'case.index_dtype' is \"int16\""),
    "case_use_g_string": (_edit(case__use_g="yes"), "'case.use_g' must be true or false"),
    "case_bad_knob": (_edit(case__knobs={"warps": 4}), "'case.knobs.warps' is not a field"),
    "case_knob_wrong_type": (_edit(case__knobs={"max_tasks": "3"}), "'case.knobs.max_tasks' must be an int"),
    "case_knob_mode": (_edit(case__knobs={"mode": "fast"}), "'case.knobs.mode' is \"fast\", not a launch mode"),
    "case_knob_tile_cap": (_edit(case__knobs={"tile_cap": 24}), "'case' is outside the ops' contract: tile_cap must "
                           "be a power of two"),
    "case_cu_seqlens_floats": (_edit(case__cu_seqlens=[0, 1.5]), "'case.cu_seqlens' must be a list of ints"),
    "case_cu_seqlens_decreasing": (_edit(case__cu_seqlens=[0, 5, 3], case__T=3),
                                   "'case' is outside the ops' contract: cu_seqlens must be non-decreasing"),
    "case_T_against_cu_seqlens": (_edit(case__T=21), "'case.T' is 21, but the case's other fields make it 20"),
    "case_later_field_at_default": (_edit(case__corrupt_at=0), "'case.corrupt_at' is at its default 0"),
    "case_heads": (_edit(case__H=3), "'case' is outside the ops' contract: the value heads HV=2"),
    "case_backend_unknown": (_edit(case__backend="tpu"), "'case.backend' is \"tpu\", not a backend"),
    "known_empty_reason": (_edit(known={"reason": " "}), "'known.reason' must be a non-empty string"),
    "known_wrong_type": (_edit(known="yes"), "'known' must be an object"),
    "subject_without_foreign_case": (_edit(subject={"name": "fla-ascend", "version": None}),
                                     "'case.subject' is 'wy_ascend', but field 'subject' names 'fla-ascend'"),
    "subject_record_of_wy_ascend": (_edit(subject={"name": "wy_ascend", "version": None}),
                                    "'subject' is {\"name\": \"wy_ascend\""),
    "backend_against_case": (_edit(case__backend="cpu", backend="cuda"), "'backend' is 'cuda', but field 'case.backend'"),
    "name_does_not_match": (_edit(case__seed=5), "fields 'property' and 'case' do not match the file's name"),
}


def _named(tmp_path: Path, content: object) -> Path:
    """The file as the store names the valid template (so a field's error is not a name's)."""
    path = tmp_path / file_name("oracle", CASE)
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_malformed_files(tmp_path: Path, kind: str) -> None:
    content, fragment = MALFORMED[kind]
    path = _named(tmp_path, content)
    with pytest.raises(RegressionFileError) as info:
        load(path)
    message = str(info.value)
    assert str(path) in message and fragment in message, message
    assert isinstance(info.value, ValueError)


def test_a_renamed_file_is_refused(tmp_path: Path) -> None:
    """The name is the hash of the content: a valid file under another name (copied, or its case
    edited) is refused, naming what its content makes."""
    path = record_failure("oracle", CASE, FAILURE, tmp_path)
    renamed = path.rename(tmp_path / "oracle-000000000000.json")
    with pytest.raises(RegressionFileError,
                       match=f"fields 'property' and 'case' do not match the file's name: .* make {path.name}"):
        load(renamed)
    crash = renamed.rename(tmp_path / path.name.replace("oracle-", "crash-"))
    with pytest.raises(RegressionFileError, match="field 'failure.type' does not match"):  # it did not crash
        load(crash)
    other = crash.rename(tmp_path / path.name.replace("oracle-", "linearity-"))
    with pytest.raises(RegressionFileError, match="field 'property' does not match"):
        load(other)


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(RegressionFileError, match="missing.json: cannot read"):
        load(tmp_path / "missing.json")


def test_valid_template_loads(tmp_path: Path) -> None:
    assert load(_named(tmp_path, _valid())).case == CASE


def test_the_schema_lists_every_case_field() -> None:
    """A field Case gains is a table entry of the store's schema, or a file holding it is refused."""
    import dataclasses

    assert set(store.CASE_FIELDS) == {f.name for f in dataclasses.fields(Case)}


# --- CLI: plan_coverage is a real property that launches nothing, so these run in well under a second.

def _stored(tmp_path: Path, prop: str, case: Case) -> Path:
    return record_failure(prop, case, PropertyFailure("recorded failure", {"w": {"rel_rms": 1.0}}), tmp_path)


def test_cli_replay_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: str) -> None:
    path = _stored(tmp_path, "plan_coverage", Case(T=48, HV=2, knobs={"max_tasks": 1}))
    assert main(["replay", str(path), "--backend", backend]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "plan_coverage" in out and "max_tasks" in out and "launches" in out


def test_cli_replay_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: str) -> None:
    # memory_layout on a case with nothing laid out is a genuine PropertyFailure.
    path = _stored(tmp_path, "memory_layout", Case(T=16))
    assert main(["replay", str(path), "--backend", backend]) == 1
    out = capsys.readouterr().out
    assert "FAIL: memory_layout needs a case with memory layouts or chunk_indices" in out


def test_cli_replay_fail_shows_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(name: str, case: Case) -> dict:
        raise PropertyFailure("planted", {"w": {"rel_rms": float("inf"), "tol": 1e-5}, "dk": {"rel_rms": 0.25}})

    monkeypatch.setattr(store, "run_property", failing)
    path = _stored(tmp_path, "oracle", Case())
    assert main(["replay", str(path), "--in-process"]) == 1  # in-process: the monkeypatch applies
    out = capsys.readouterr().out
    assert "FAIL: planted" in out
    assert any(line.split()[:3] == ["w", "inf", "1.000e-05"] for line in out.splitlines()), out
    assert any(line.split()[:2] == ["dk", "2.500e-01"] for line in out.splitlines()), out


def test_cli_replay_crash_is_a_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def crashing(name: str, case: Case) -> dict:
        raise IndexError("out of bounds")

    monkeypatch.setattr(store, "run_property", crashing)
    assert main(["replay", str(_stored(tmp_path, "oracle", Case())), "--in-process"]) == 1
    assert "ERROR: IndexError: out of bounds" in capsys.readouterr().out


def test_cli_replay_malformed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "oracle-bad.json"
    path.write_text(json.dumps(_edit(schema_version=7)))
    assert main(["replay", str(path), "--backend", "cpu"]) == 2
    captured = capsys.readouterr()
    assert "MALFORMED: " in captured.out and "oracle-bad.json" in captured.out and "schema_version" in captured.out
    assert "Traceback" not in captured.err + captured.out


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cli_replay_unavailable_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _stored(tmp_path, "plan_coverage", Case())
    assert main(["replay", str(path), "--backend", "cuda"]) == 2
    assert "MISSING: backend cuda cannot run here" in capsys.readouterr().out


def test_cli_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _stored(tmp_path, "plan_coverage", Case(T=48, HV=2, knobs={"max_tasks": 1}))
    b = _stored(tmp_path, "oracle", CASE)
    assert main(["list", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["file", "property", "failure", "backend", "date", "case"]
    assert [line.split()[0] for line in lines[1:]] == sorted([a.name, b.name])
    assert any("cu_seqlens=[0, 5, 20] H=1 HV=2" in line and "max_tasks=3" in line for line in lines)
    (tmp_path / "oracle-zzz.json").write_text("[]")
    assert main(["list", str(tmp_path)]) == 2
    assert any(line.split()[:2] == ["oracle-zzz.json", "MALFORMED"] for line in capsys.readouterr().out.splitlines())
    assert main(["list", str(tmp_path / "empty")]) == 0


def test_dumps_nests_containers_one_per_line_and_keeps_scalar_lists_on_one() -> None:
    """A stored file stays readable at any depth: keys sorted, two-space indents, a list holding
    objects or lists broken one item a line, a list of scalars on one line; and it reads back equal."""
    data = {"b": [1, 2.5, None], "a": [{"y": [3], "x": "s"}, [4, [5]]], "c": {}}
    text = store.dumps(data)
    assert text == ('{\n  "a": [\n    {\n      "x": "s",\n      "y": [3]\n    },\n    [\n      4,\n      [5]\n    ]\n  ],\n'
                    '  "b": [1, 2.5, null],\n  "c": {}\n}')
    assert json.loads(text) == data


def test_a_case_too_large_for_the_interpreter_is_unavailable_there(tmp_path) -> None:
    """A stored case of more (chunk, value head) tasks than INTERPRETER_TASKS is UNAVAILABLE on the cpu
    (minutes a call: the H200 nightly's million-token find took 6 on the cpu) and runs on a device."""
    from wy_ascend.testing.properties import PropertyFailure
    from wy_ascend.testing.store import INTERPRETER_TASKS, load, record_failure, unavailable

    big = Case(B=1, T=16 * (INTERPRETER_TASKS + 1), BT=16, backend="cuda")
    path = record_failure("oracle", big, PropertyFailure("x"), directory=tmp_path)
    assert "past the interpreter" in unavailable(load(path), "cpu")
    assert unavailable(load(path), "cuda") is None
    small = record_failure("oracle", big.replace(T=16 * INTERPRETER_TASKS), PropertyFailure("x"), directory=tmp_path)
    assert unavailable(load(small), "cpu") is None


def test_the_interpreter_s_budget_counts_tiles_and_op_runs(tmp_path) -> None:
    """Wide K or V and properties that run the ops twice cost the interpreter more per task: the H200
    varlen_split find (4,320 tasks at K=256, packed and alone) took 4 min 16 s on the cpu, past the budget."""
    from wy_ascend.testing.properties import PropertyFailure
    from wy_ascend.testing.store import INTERPRETER_TASKS, interpreter_tasks, load, record_failure, unavailable

    case = Case(B=1, T=16 * (INTERPRETER_TASKS // 4), BT=16, K=256, V=16, backend="cuda")  # 2048 tasks
    assert interpreter_tasks("oracle", case) == 2048 * 2.5 and interpreter_tasks("varlen_split", case) == 2048 * 5
    assert unavailable(load(record_failure("oracle", case, PropertyFailure("x"), directory=tmp_path)), "cpu") is None
    twice = load(record_failure("varlen_split", case, PropertyFailure("x"), directory=tmp_path))
    assert "past the interpreter" in unavailable(twice, "cpu") and unavailable(twice, "cuda") is None


# Failures as the suite stores them: a property's own, and exceptions a case raised (never a crash or a
# timeout of the case runner: those are files of their own names, crash-/timeout-<hash>).
DRAWN_FAILURES = st.one_of(st.builds(PropertyFailure, st.text(max_size=12)),
                           st.builds(RuntimeError, st.text(max_size=12)), st.builds(IndexError, st.text(max_size=12)))


@st.composite
def store_writes(draw: st.DrawFn) -> list[tuple[str, Case, BaseException]]:
    """Writes of failures to one store, (property, case, failure) each, drawn from a few properties and
    cases (the fuzz suite's valid ones) so that keys repeat, each time with a failure of its own."""
    props = draw(st.lists(st.sampled_from(sorted(PROPERTIES)), min_size=1, max_size=3, unique=True))
    pool = draw(st.lists(cases(), min_size=1, max_size=3))
    return draw(st.lists(st.tuples(st.sampled_from(props), st.sampled_from(pool), DRAWN_FAILURES),
                         min_size=1, max_size=8))


@settings(max_examples=60, derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(writes=store_writes())
def test_any_writes_leave_one_file_per_key_holding_its_first_record(
        writes: list[tuple[str, Case, BaseException]]) -> None:
    """The store's rules over any sequence of writes (test_never_overwrites, test_atomic_publish and
    test_hash_covers_property_and_case_only show one each): each file is published complete under a name
    not there before, the first write of a (property, case) key makes its file and every later one leaves it
    as it is, whatever it fails with now; at the end there is one file per key, no temp file, and each
    file loads back as its key's property and case with the first failure written."""
    published: list[tuple[str, object]] = []
    real_link = os.link

    def link(src: str, dst: str) -> None:
        assert not Path(dst).exists(), f"{dst} published over an existing file"
        published.append((Path(dst).name, _strict_json(Path(src).read_text())))
        real_link(src, dst)

    with tempfile.TemporaryDirectory() as d, pytest.MonkeyPatch.context() as mp:
        mp.setattr(store.os, "link", link)
        directory, first = Path(d), {}
        for i, (prop, case, error) in enumerate(writes):
            key = (prop, file_name(prop, case))
            recorded = store.store_failure(prop, case, error, directory)
            assert recorded.path == directory / key[1], f"write {i} went to {recorded.path.name}, not {key[1]}"
            assert recorded.new == (key not in first), f"write {i}: {key[1]} {'new' if recorded.new else 'not new'}"
            if recorded.new:
                first[key] = (case, error, recorded.path.read_text())
        assert sorted(p.name for p in directory.iterdir()) == sorted(name for _, name in first)  # no temp file
        assert sorted(name for name, _ in published) == sorted(name for _, name in first)  # one publish a key
        for (prop, name), (case, error, text) in first.items():
            assert (directory / name).read_text() == text, f"{name} changed after its first write"
            stored = load(directory / name)
            assert (stored.property, stored.case) == (prop, case)
            assert (stored.failure["type"], stored.failure["message"]) == (type(error).__name__, str(error))
        assert all(content == _strict_json((directory / name).read_text()) for name, content in published)


def _read_back(prop: str, case: Case, metrics: Any = None, version: str | None = None) -> store.StoredCase:
    return store.StoredCase(path=Path("x.json"), schema_version=1, property=prop, case=case,
                            failure={"metrics": metrics}, backend="cpu",
                            versions={"wy_ascend": version or store.versions()["wy_ascend"]}, date="")


@settings(max_examples=80, derandomize=True, database=None, deadline=None)
@given(prop=st.sampled_from(sorted(PROPERTIES)), backend=st.sampled_from(sorted(store.BACKENDS)),
       subject=st.sampled_from([None, "wy_ascend", "fla", "fla-ascend"]))
def test_a_small_stored_case_is_unavailable_exactly_where_its_kind_cannot_run(prop: str, backend: str,
                                                                             subject: str | None) -> None:
    """unavailable() over every property, backend and subject for a case small enough for the interpreter: a
    perf file on an interpreting backend, a history file off the cpu, a subject on a backend it does not run
    on are each UNAVAILABLE with their own reason; any other runs (None)."""
    from wy_ascend import subjects
    from wy_ascend.testing import history

    why = store.unavailable(_read_back(prop, Case(T=20)), backend, subject)
    runs_on = subjects.get(subject or "wy_ascend").backends
    if prop == "perf" and store.BACKENDS[backend].interpret:
        assert why is not None and why.startswith("a perf case times a device")
    elif prop == "history" and backend != "cpu":
        assert why == history.refuses(backend)
    elif backend not in runs_on:
        assert why == f"subject {subject or 'wy_ascend'!r} runs on the backends {list(runs_on)}, not {backend!r}"
    else:
        assert why is None


@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(prop=st.sampled_from(sorted(set(PROPERTIES) - {"perf"})), dtype=st.sampled_from(["float32", "bfloat16"]),
       tols=st.tuples(st.floats(1e-8, 1.0), st.floats(1e-8, 1.0)), same=st.booleans(), old=st.booleans(),
       cancels=st.booleans())
def test_a_changed_bound_of_a_non_oracle_or_float32_file_says_which_bound(prop: str, dtype: str,
                                                                         tols: tuple[float, float], same: bool,
                                                                         old: bool, cancels: bool) -> None:
    """bound_changes names a changed bound: for any property but the oracle, that property's bound (and the
    versions it changed between, where they differ); for a float32 oracle file, FP32_RTOL, or where the bound
    today is past it, the sensitivity term that set it (an output that cancels); an unchanged bound no line."""
    from wy_ascend.testing.properties import FP32_RTOL, LOW_PRECISION_FACTOR

    rec, cur = tols[0], tols[0] if same else tols[1]
    stored = _read_back(prop, Case(T=20, dtype=dtype), {"w": {"tol": rec}}, "0.0.1" if old else None)
    # a float32 bound's metrics carry its sensitivity; it set the bound where 4x it is the bound
    now = {"tol": cur, "sensitivity": cur / LOW_PRECISION_FACTOR / (1 if cancels else 2)}
    lines = store.bound_changes(stored, {"w": now})
    if same or rec == cur:
        assert lines == []
        return
    if prop != "oracle":
        why = f"the {prop} property's bound changed"
    elif dtype == "float32" and cancels and cur > FP32_RTOL:
        why = (f"the float32 bound is LOW_PRECISION_FACTOR x the rounding sensitivity {cur / LOW_PRECISION_FACTOR:.3e} "
               "(properties.error_bounds: the output cancels)")
    elif dtype == "float32":
        why = f"the float32 bound is properties.FP32_RTOL, now {FP32_RTOL:.3e}"
    else:
        assert len(lines) == 1 and lines[0].startswith(f"w: recorded tol {rec:.3e}, now {cur:.3e}: the bfloat16 ")
        return
    since = f" (recorded with wy_ascend 0.0.1, now {store.versions()['wy_ascend']})" if old else ""
    assert lines == [f"w: recorded tol {rec:.3e}, now {cur:.3e}: {why}{since}"]


def test_a_float32_bound_at_fp32_rtol_is_said_to_be_it_whatever_its_sensitivity() -> None:
    """Where 4x the sensitivity equals FP32_RTOL, FP32_RTOL is the bound (the sensitivity term sets it only past
    it); past it, the sensitivity term is named."""
    from wy_ascend.testing.properties import FP32_RTOL, LOW_PRECISION_FACTOR

    stored = _read_back("oracle", Case(T=20, dtype="float32"), {"w": {"tol": 2 * FP32_RTOL}}, None)
    lines = store.bound_changes(stored, {"w": {"tol": FP32_RTOL, "sensitivity": FP32_RTOL / LOW_PRECISION_FACTOR}})
    assert lines == [f"w: recorded tol {2 * FP32_RTOL:.3e}, now {FP32_RTOL:.3e}: "
                     f"the float32 bound is properties.FP32_RTOL, now {FP32_RTOL:.3e}"]
    # past FP32_RTOL, where 4x the sensitivity is the bound, the sensitivity term is named
    lines = store.bound_changes(stored, {"w": {"tol": 4e-5, "sensitivity": 1e-5}})
    assert lines == [f"w: recorded tol {2 * FP32_RTOL:.3e}, now {4e-5:.3e}: the float32 bound is LOW_PRECISION_FACTOR x "
                     "the rounding sensitivity 1.000e-05 (properties.error_bounds: the output cancels)"]


NUMBER_OR_NOT = st.one_of(st.floats(1e-3, 10.0), st.none(), st.just("0.5"), st.just([0.5]))


@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(rec=NUMBER_OR_NOT, cur=NUMBER_OR_NOT, fwd=st.floats(1e-3, 10.0))
def test_a_perf_bound_is_compared_only_where_both_runs_recorded_a_number(rec: Any, cur: Any, fwd: float) -> None:
    """_perf_bound_changes skips an op whose recorded or current bound_ms is no number (absent, null, text),
    and still names another op's bound that moved past PERF_BOUND_DRIFT."""
    lines = store._perf_bound_changes({"bwd": {"bound_ms": rec}, "fwd": {"bound_ms": fwd}},
                                      {"bwd": {"bound_ms": cur}, "fwd": {"bound_ms": fwd * 2}})
    numbers = all(isinstance(x, float) for x in (rec, cur))
    named = numbers and abs(cur - rec) > store.PERF_BOUND_DRIFT * rec
    assert [line.split(":")[0] for line in lines] == [*(["bwd"] if named else []), "fwd"]


@settings(max_examples=40, derandomize=True, database=None, deadline=None)
@given(x=st.one_of(st.complex_numbers(allow_nan=False), st.sampled_from([torch.float32, torch.device("cpu"),
                                                                        Path("a/b"), frozenset({1}), object])))
def test_a_value_json_cannot_hold_is_stored_as_its_text(x: Any) -> None:
    """json_safe stores a value of no JSON type (a dtype, a device, a path, a complex number, a set) as its
    str, alone and inside a mapping or list, so the file can always be written."""
    assert store.json_safe(x) == str(x)
    assert store.json_safe({"k": [x, 1]}) == {"k": [str(x), 1]}
    assert json.loads(json.dumps(store.json_safe([x]))) == [str(x)]


@settings(max_examples=40, derandomize=True, database=None, deadline=None)
@given(name=st.one_of(st.text(max_size=12), st.sampled_from([p.upper() for p in PROPERTIES])))
def test_storing_a_failure_of_no_property_is_refused_naming_it(tmp_path_factory: pytest.TempPathFactory,
                                                               name: str) -> None:
    """store_failure writes files of the suite's properties only: any other name is a ValueError naming it,
    and nothing is written."""
    if name in PROPERTIES:
        return
    directory = tmp_path_factory.mktemp("store")
    with pytest.raises(ValueError, match=f"^property must be one of .*, got {re.escape(repr(name))}$"):
        store.store_failure(name, Case(), PropertyFailure("x"), directory)
    assert list(directory.iterdir()) == []


@pytest.mark.parametrize("there", [False, True])
def test_without_hard_links_a_new_file_is_created_exclusively_and_an_existing_one_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, there: bool) -> None:
    """On a filesystem without hard links (os.link raises OSError), _write_new falls back to an exclusive
    create: a new name gets the text (True), an existing file is never overwritten (False); no temp file stays."""
    path = tmp_path / "f.json"
    if there:
        path.write_text("first")

    def no_links(src: str, dst: str) -> None:
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_links)
    assert store._write_new(path, "second") is not there
    assert path.read_text() == ("first" if there else "second")
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]
