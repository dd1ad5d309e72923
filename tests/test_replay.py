"""``wy-ascend replay`` of several files, its summary table and exit status, the explanation of a
changed bound; ``wy-ascend --version``; ``wy-ascend list`` columns; regression files are 0644.

Cases replayed here are plan_coverage ones (plans only) or in-process ones, so each test runs
in about a second (the crash and timeout verdicts are in tests/test_crash.py), on the backend
under test (WY_ASCEND_BACKEND: the ``backend`` fixture).
"""

from __future__ import annotations

import json
import os
import stat
from collections import Counter
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wy_ascend.cli import VERDICTS, Verdict, exit_status, format_case, main, summary
from wy_ascend.testing import store
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import PropertyFailure
from wy_ascend.testing.runner import CaseCrashed, CaseTimeout
from wy_ascend.testing.store import bound_changes, load, record_failure

PLAN = Case(T=40, HV=2)


def _file(tmp_path: Path, prop: str, case: Case, error: BaseException | None = None) -> Path:
    return record_failure(prop, case, error or PropertyFailure("recorded", {}), tmp_path)


def _table(out: str) -> dict[str, list[str]]:
    """The summary table's rows by file name: [property, verdict, detail words...]."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:4] == ["file", "property", "verdict", "detail"])
    rows = lines[start + 1:next(i for i, line in enumerate(lines) if line.startswith("summary: "))]
    return {Path(line.split()[0]).name: line.split()[1:] for line in rows}


def test_several_files_pass_fail_and_malformed(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               backend: str) -> None:
    passing = _file(tmp_path, "plan_coverage", PLAN)
    failing = _file(tmp_path, "memory_layout", Case(T=16))  # a genuine PropertyFailure: nothing laid out
    malformed = tmp_path / "oracle-bad.json"
    malformed.write_text("{")
    assert main(["replay", str(passing), str(malformed), str(failing), "--backend", backend]) == 1
    out = capsys.readouterr().out
    rows = _table(out)
    assert rows[passing.name][:2] == ["plan_coverage", "PASS"]
    assert rows[failing.name][:2] == ["memory_layout", "FAIL"] and "layouts" in " ".join(rows[failing.name])
    assert rows["oracle-bad.json"][:2] == ["-", "MALFORMED"]
    assert out.splitlines()[-1] == "summary: 3 files: 1 PASS, 1 FAIL, 1 MALFORMED; exit 1 (FAIL or ERROR or CRASH or " \
        "TIMEOUT or FIXED above)"  # the counts, and the exit status they make, are the last word
    assert list(rows) == [passing.name, malformed.name, failing.name]  # every file ran, in the order given


def test_exit_status_malformed_without_failures_is_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     backend: str) -> None:
    passing = _file(tmp_path, "plan_coverage", PLAN)
    malformed = tmp_path / "oracle-bad.json"
    malformed.write_text("[]")
    assert main(["replay", str(passing), str(malformed), "--backend", backend]) == 2
    assert _table(capsys.readouterr().out)[passing.name][1] == "PASS"
    assert main(["replay", str(passing), str(_file(tmp_path, "plan_coverage", PLAN.replace(T=20))),
                 "--backend", backend]) == 0
    assert "summary: 2 files: 2 PASS; exit 0 (none failed)" in capsys.readouterr().out
    assert main(["replay", str(malformed)]) == 2  # one file: no table
    assert "summary" not in capsys.readouterr().out


def test_crash_and_timeout_verdicts_in_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """What the table says for a crash and a timeout (the runner's raising them: tests/test_crash.py)."""
    crash, late = _file(tmp_path, "oracle", Case(T=17)), _file(tmp_path, "oracle", Case(T=18))

    def replay(stored: store.StoredCase, backend: str | None = None, runner: object = None) -> dict:
        if stored.case.T == 17:
            raise CaseCrashed("case crashed the runner: killed by SIGSEGV (log: x.log)",
                              {"signal": "SIGSEGV", "exitcode": -11, "log": "x.log"})
        raise CaseTimeout("case ran past the time limit of 5 s and was killed", {"limit_s": 5.0, "log": "x.log"})

    monkeypatch.setattr(store, "replay", replay)
    assert main(["replay", str(crash), str(late), "--in-process"]) == 1
    out = capsys.readouterr().out
    assert "CRASH: case crashed the runner: killed by SIGSEGV" in out and "TIMEOUT: case ran past" in out
    rows = _table(out)
    assert rows[crash.name] == ["oracle", "CRASH", "killed", "by", "SIGSEGV"]
    assert rows[late.name] == ["oracle", "TIMEOUT", "past", "5", "s"]
    assert "summary: 2 files: 1 CRASH, 1 TIMEOUT; exit 1" in out


def test_crash_and_timeout_files_are_named_and_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    crash = _file(tmp_path, "oracle", PLAN, CaseCrashed("m", {"signal": "SIGABRT", "exitcode": -6, "log": "l"}))
    late = _file(tmp_path, "grouped_heads", PLAN, CaseTimeout("m", {"limit_s": 120.0, "log": "l"}))
    plain = _file(tmp_path, "oracle", PLAN)
    assert crash.name == f"crash-{store.case_hash('oracle', PLAN)}.json"
    assert late.name == f"timeout-{store.case_hash('grouped_heads', PLAN)}.json"
    assert plain.name == f"oracle-{store.case_hash('oracle', PLAN)}.json"  # a crash does not take its name
    for path in (crash, late, plain):
        assert load(path).path == path  # read back: named after its content
    assert load(crash).failure["signal"] == "SIGABRT" and load(late).failure["limit_s"] == 120.0
    assert main(["list", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["file", "property", "failure", "backend", "date", "case"]
    starts = {lines[0].index(c) for c in ("property", "failure", "backend", "date", "case")}
    rows = {line.split()[0]: line for line in lines[1:]}
    for line in lines[1:]:  # aligned: every column starts where its header does
        assert all(line[i - 2:i] == "  " and line[i] != " " for i in starts), line
    assert "crash SIGABRT" in rows[crash.name] and "timeout 120s" in rows[late.name]
    assert "PropertyFailure" in rows[plain.name]


def test_new_files_are_0644(tmp_path: Path) -> None:
    old = os.umask(0o077)  # even under a strict umask: the store's files are for everyone to read
    try:
        path = _file(tmp_path, "oracle", PLAN)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    try:
        expected = version("wy_ascend")
    except PackageNotFoundError:  # run from a checkout on PYTHONPATH, not installed
        expected = "unknown (not installed)"
    assert capsys.readouterr().out.strip() == f"wy-ascend {expected}"


def _bf16_case_file(tmp_path: Path, metrics: dict) -> Path:
    path = _file(tmp_path, "oracle", Case(T=16, dtype="bfloat16"), PropertyFailure("recorded", metrics))
    data = json.loads(path.read_text())
    data["versions"]["wy_ascend"] = "0.0.9"
    path.write_text(json.dumps(data))
    return path


def test_bound_change_explained_by_the_term_that_sets_it(tmp_path: Path) -> None:
    stored = load(_bf16_case_file(tmp_path, {"w": {"rel_rms": 5e-3, "tol": 3.90625e-3},
                                             "u": {"rel_rms": 1e-3, "tol": 3.90625e-3, "sensitivity": 1e-4},
                                             "dk": {"rel_rms": 1e-3, "tol": 3.90625e-3}}))
    now = {"w": {"rel_rms": 5e-3, "tol": 7.8125e-3, "sensitivity": 7.8125e-3},
           "u": {"rel_rms": 1e-3, "tol": 5e-3, "sensitivity": 1e-4},
           "dk": {"rel_rms": 1e-3, "tol": 3.90625e-3, "sensitivity": 1e-4}}
    lines = {line.split(":")[0]: line for line in bound_changes(stored, now)}
    assert sorted(lines) == ["u", "w"]  # dk's bound did not change
    w, u = lines["w"], lines["u"]
    assert w.startswith("w: recorded tol 3.906e-03, now 7.812e-03: the bfloat16 bound now admits the rounding "
                        "sensitivity 7.812e-03 (properties.error_bounds)")
    assert "(recorded with wy_ascend 0.0.9, now" in w
    assert u.startswith("u: recorded tol 3.906e-03, now 5.000e-03: the bfloat16 bound is the rounding term "
                        "LOW_PRECISION_FACTOR x max(round_err, u/2) (properties.error_bounds) (recorded")


def test_a_perf_files_bound_change_is_named_past_the_measurement_drift(tmp_path: Path) -> None:
    """regressions/perf-ec54d047b990.json's backward bound (the larger of floor and bytes / bandwidth when
    recorded) against a replay's: named; its forward's within the drift: not."""
    stored = load(Path(__file__).resolve().parents[1] / "regressions" / "perf-ec54d047b990.json")
    rec = stored.failure["metrics"]
    now = {"fwd": {**rec["fwd"], "bound_ms": rec["fwd"]["bound_ms"] * 1.05},
           "bwd": {**rec["bwd"], "bound_ms": 0.00798}}
    (line,) = bound_changes(stored, now)
    assert line.startswith("bwd: recorded bound 0.0044 ms, now 0.0080 ms: the bound is the launch floor plus")


def test_replay_prints_a_changed_bound(tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: str) -> None:
    path = _bf16_case_file(tmp_path, {"w": {"rel_rms": 0.5, "tol": 1e-9}})  # a bound no run today has
    assert main(["replay", str(path), "--backend", backend]) == 0
    out = capsys.readouterr().out
    assert "PASS" in out and "bound changed since the file was recorded:" in out
    assert "  w: recorded tol 1.000e-09, now " in out


def test_nightly_summary_counts_crashes_and_timeouts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("nightly_summary", Path(__file__).parents[1] / ".ci" /
                                                  "nightly_summary.py")
    assert spec is not None and spec.loader is not None
    summary = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(summary)
    failures = [
        {"property": "oracle", "regression": "regressions/crash-0123456789ab.json",
         "message": "case crashed the runner: killed by SIGABRT (log: fuzz-report.json.logs/gw3.log)"},
        {"property": "oracle", "regression": None, "message": "case ran past the time limit of 900 s and was killed"},
        {"property": "oracle", "regression": "regressions/oracle-0123456789ab.json", "message": "dk differs"},
    ]
    report = {"profile": "nightly", "backend": "npu", "total_cases": 10, "elapsed_seconds": 5.0,
              "properties": {"oracle": {"cases": 10, "failures": 3, "seconds": 5.0}}, "failures": failures}
    (tmp_path / "fuzz-report.json").write_text(json.dumps(report))
    summary.main(["--outcome", "fuzz=failure", "--fuzz-report", str(tmp_path / "fuzz-report.json"),
                  "--regressions-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert "Crashes: **1**, timeouts: **1**" in out and "Stack dumps: `fuzz-report.json.logs/`" in out
    assert "- **CRASH** `oracle` `regressions/crash-0123456789ab.json`: case crashed the runner" in out
    assert "- **TIMEOUT** `oracle` (no regression file): case ran past" in out
    assert "- `oracle` `regressions/oracle-0123456789ab.json`: dk differs" in out
    # A run killed while it shrank a failure: the progress files' pending failure is listed (no file yet).
    parts = tmp_path / "killed.json.parts"
    parts.mkdir()
    pending = {"property": "differential", "regression": None, "pending": True, "case": {"B": 10927},
               "message": "(first failing case, not shrunk: the test ended before its minimal case) RuntimeError: x"}
    (parts / "gw4.json").write_text(json.dumps({"worker": "gw4", "cases": {"differential": 3}, "failures": [],
                                                "pending": [pending]}))
    summary.main(["--outcome", "fuzz=failure", "--fuzz-report", str(tmp_path / "killed.json"),
                  "--regressions-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert "`differential` (no regression file): (first failing case, not shrunk" in out


def test_replay_keeps_a_named_log_and_its_own_log_only_when_a_case_was_lost(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    """``--log`` names a log the caller keeps: it stays after a clean replay. Without it the replay writes its
    own log in the temp directory and removes it when every file passed or failed, and keeps it where a case
    crashed, timed out or errored (its stack dumps say why)."""
    import tempfile

    passing = _file(tmp_path, "plan_coverage", PLAN)
    named = tmp_path / "mine.log"
    assert main(["replay", str(passing), "--backend", backend, "--log", str(named)]) == 0
    assert named.exists()
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(temp))
    assert main(["replay", str(passing), "--backend", backend]) == 0
    assert list(temp.iterdir()) == []  # its own log, written by the case child, is gone
    own = temp / f"wy-ascend-replay-{os.getpid()}.log"
    own.write_text("the child's stack dump\n")  # as the runner leaves it before a crash

    def crashed(stored: store.StoredCase, backend: str | None = None, runner: object = None) -> dict:
        raise CaseCrashed("case crashed the runner: killed by SIGSEGV", {"signal": "SIGSEGV", "exitcode": -11})

    monkeypatch.setattr(store, "replay", crashed)
    assert main(["replay", str(passing)]) == 1
    assert own.read_text() == "the child's stack dump\n"
    capsys.readouterr()


def test_a_failure_already_stored_says_so_and_leaves_the_file(tmp_path: Path) -> None:
    """A new failure whose minimal case has a file already: the file is untouched, and the note names it,
    what it recorded then, what fails now and the replay command (a new file: its path and the command)."""
    first = store.store_failure("oracle", PLAN, PropertyFailure("w differs: the first bug"), tmp_path)
    assert first.new and first.note(PropertyFailure("x")) == (f"minimal case recorded in {first.path}\n"
                                                               f"replay: wy-ascend replay {first.path}")
    text = first.path.read_text()
    again = store.store_failure("oracle", PLAN, PropertyFailure("dk differs: another bug"), tmp_path)
    assert again.path == first.path and not again.new and first.path.read_text() == text
    assert again.earlier is not None and again.earlier["message"] == "w differs: the first bug"
    note = again.note(PropertyFailure("dk differs: another bug"))
    assert note.splitlines() == [
        f"minimal case ALREADY STORED in {first.path} (nothing new written; files are never overwritten)",
        "  recorded then: PropertyFailure: w differs: the first bug",
        "  fails now:     PropertyFailure: dk differs: another bug",
        f"replay: wy-ascend replay {first.path}"]
    first.path.write_text("{")  # a file there that cannot be read: still never overwritten
    broken = store.store_failure("oracle", PLAN, PropertyFailure("m"), tmp_path)
    assert not broken.new and broken.earlier is None and "recorded then: unreadable" in broken.note(PropertyFailure("m"))
    assert first.path.read_text() == "{" and [p.name for p in tmp_path.iterdir()] == [first.path.name]


@pytest.mark.cpu_interpreter  # the cpu backend's verdict on them, in the replay's child
def test_device_only_files_on_the_cpu_are_unavailable_not_failures(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The store's perf files (they time a device) replayed on the cpu: UNAVAILABLE, and the replay exits 0
    when every file that can run passed; a malformed file still exits 2."""
    perf = sorted((Path(__file__).resolve().parents[1] / "regressions").glob("perf-*.json"))
    assert perf, "the store holds perf files"
    passing = _file(tmp_path, "plan_coverage", PLAN)
    assert main(["replay", *map(str, perf), str(passing), "--backend", "cpu"]) == 0
    out = capsys.readouterr().out
    rows = _table(out)
    assert all(rows[p.name][:2] == ["perf", "UNAVAILABLE"] and "times a device" in " ".join(rows[p.name])
               for p in perf)
    assert rows[passing.name][:2] == ["plan_coverage", "PASS"]
    assert f"summary: {len(perf) + 1} files: 1 PASS, {len(perf)} UNAVAILABLE; exit 0 (none failed)" in out
    malformed = tmp_path / "oracle-bad.json"
    malformed.write_text("[]")
    assert main(["replay", str(perf[0]), str(malformed), "--backend", "cpu"]) == 2


def test_replay_from_a_checkout_that_is_not_the_imported_package_warns_loudly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], backend: str) -> None:
    """Run from a checkout whose src/wy_ascend is not the wy_ascend imported (a non-editable install), replay
    names both before and after the files; from the checkout it runs, nothing."""
    import wy_ascend
    from wy_ascend.cli import stale_install_warning

    passing = _file(tmp_path, "plan_coverage", PLAN)
    checkout = tmp_path / "clone"
    (checkout / "src" / "wy_ascend").mkdir(parents=True)
    (checkout / "src" / "wy_ascend" / "__init__.py").write_text("")
    (checkout / "pyproject.toml").write_text("[project]\nname = 'wy_ascend'\n")
    (checkout / "tests").mkdir()
    monkeypatch.chdir(checkout / "tests")  # anywhere inside the checkout
    assert main(["replay", str(passing), "--backend", backend]) == 0
    err = capsys.readouterr().err
    running = Path(wy_ascend.__file__).resolve().parent
    warning = (f"WARNING: replay runs the wy_ascend installed at {running}, NOT this checkout's "
               f"{checkout / 'src' / 'wy_ascend'}")
    assert err.count(warning) == 2  # before the files and after them (their output can be long)
    assert stale_install_warning(running.parents[1]) is None  # the checkout whose package runs
    assert stale_install_warning(tmp_path) is None  # outside any checkout


def test_a_failure_from_the_case_runner_hides_the_raise_frame_from_pytest() -> None:
    """The runner re-raises a child's failure from a module-level frame at the child's line (Hypothesis tells
    failures apart by it); pytest hides that frame, else it prints the whole module above the line as its
    source (a property module: some 200 lines a failure)."""
    from _pytest._code import ExceptionInfo

    from wy_ascend.testing import runner
    from wy_ascend.testing.properties import invariance

    with pytest.raises(PropertyFailure) as info:
        runner._raise_at(PropertyFailure("w differs"), (invariance.__file__, 200))
    assert info.traceback[-1].frame.code.raw.co_name == "<module>"  # raised where the child raised it
    shown = info.traceback.filter(info)
    assert all(entry.frame.code.raw.co_name != "<module>" for entry in shown)
    info.traceback = shown
    assert len(str(ExceptionInfo.getrepr(info, style="long")).splitlines()) < 40


def test_a_history_cases_earlier_calls_print_one_a_line() -> None:
    """Each earlier call of a history case on its own line, by the fields it sets; the list says how many."""
    first = Case(cu_seqlens=(0, 5, 70), backend="cpu")
    case = first.replace(cu_seqlens=(0, 40, 70), before=(first, first.replace(BT=32)))
    lines = format_case(case).splitlines()
    assert lines[-2:] == ["  before[0]   T=70, cu_seqlens=(0, 5, 70), backend='cpu'",
                          "  before[1]   T=70, BT=32, cu_seqlens=(0, 5, 70), backend='cpu'"]
    assert not any(line.strip().startswith("before ") for line in lines)
    assert store.describe_case(case).endswith("after 2 calls") and "after" not in store.describe_case(first)


def _block_verdicts(out: str) -> list[str]:
    """The verdict line of each file's block, in order (a table row starts with the file, not a verdict)."""
    return [line.split(":")[0] for line in out.splitlines() if line.split(":")[0] in VERDICTS]


def test_one_vocabulary_in_the_blocks_the_table_and_the_exit_status(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Each file's block ends with the verdict its table row gives (an exception is ERROR in both), and the
    summary's counts name the exit status the command returns."""
    raised, failed, passed = (_file(tmp_path, "oracle", Case(T=t)) for t in (17, 18, 19))

    def replay(stored: store.StoredCase, backend: str | None = None, runner: object = None) -> dict:
        if stored.case.T == 17:
            raise RuntimeError("the kernel raised")
        if stored.case.T == 18:
            raise PropertyFailure("w differs", {})
        return {}

    monkeypatch.setattr(store, "replay", replay)
    malformed = tmp_path / "oracle-bad.json"
    malformed.write_text("{")
    files = [raised, failed, passed, malformed]
    assert main(["replay", *map(str, files), "--in-process"]) == 1
    out = capsys.readouterr().out
    rows = _table(out)
    assert [rows[f.name][1] for f in files] == ["ERROR", "FAIL", "PASS", "MALFORMED"] == _block_verdicts(out)
    assert "ERROR: RuntimeError: the kernel raised" in out and "FAIL (exception)" not in out
    assert out.splitlines()[-1].startswith("summary: 4 files: 1 PASS, 1 FAIL, 1 ERROR, 1 MALFORMED; exit 1")
    assert set(VERDICTS) >= {row[1] for row in rows.values()}
    assert main(["replay", str(passed), str(malformed), "--in-process"]) == 2
    assert capsys.readouterr().out.splitlines()[-1] == "summary: 2 files: 1 PASS, 1 MALFORMED; exit 2 (none " \
        "failed; MALFORMED or MISSING above)"


def test_a_file_whose_fla_core_is_not_installed_is_missing_and_says_what_to_install(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A foreign subject's file and a differential file (its peer is fla-core's) where fla-core is not
    installed: MISSING, naming the install, exit 2 (not an ERROR from deep in the case, exit 1)."""
    from wy_ascend import subjects

    foreign = _file(tmp_path, "oracle", Case(T=20, subject="fla-ascend"))
    differential = _file(tmp_path, "differential", Case(T=20))
    installed = subjects.metadata.version

    def version(dist: str) -> str:  # fla-core's declarations find no installed fla-core
        if dist == "fla-core":
            raise subjects.metadata.PackageNotFoundError(dist)
        return installed(dist)
    monkeypatch.setattr(subjects.metadata, "version", version)
    assert main(["replay", str(foreign), str(differential), "--backend", "cpu", "--in-process"]) == 2
    out = capsys.readouterr().out
    rows = _table(out)
    assert [rows[f.name][1] for f in (foreign, differential)] == ["MISSING", "MISSING"]
    assert out.count("MISSING: fla-core is not installed") == 2 and "python install.py cpu --upstream" in out


def test_a_case_is_described_with_its_dtypes_and_memory_layout() -> None:
    """The one-line case of ``wy-ascend list`` and of the fuzz suite's live FAILED line names every dtype and
    the arguments laid out other than contiguously: a widened-gates or memory_layout failure says which."""
    case = Case(T=16, dtype="bfloat16", beta_dtype="float32", g_dtype="float16", use_g=True,
                memory={"k": "strided:1", "beta": "transposed:0"})
    text = store.describe_case(case)
    assert "B=1 T=16 H=1 HV=1" in text and "bfloat16 beta=float32 g=float16 gate" in text
    assert "memory=beta:transposed:0,k:strided:1" in text
    assert "beta=" not in store.describe_case(Case(T=16)) and "memory" not in store.describe_case(Case(T=16))


# The verdicts of a replay as drawn multisets: every verdict, repeated and in any order (the rule has no
# other input). File names repeat too, as a replay of one file given twice does.
DRAWN_VERDICTS = st.lists(st.tuples(st.sampled_from(sorted(VERDICTS)), st.sampled_from(["a.json", "b.json"])),
                          min_size=1, max_size=12)


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(drawn=DRAWN_VERDICTS)
def test_the_exit_status_and_the_summary_s_counts_follow_the_readme_s_rule(drawn: list[tuple[str, str]]) -> None:
    """README: "The exit status is 1 where any file gives 1, else 2 where any gives 2, else 0" (each verdict's
    code: cli.VERDICTS), over any multiset of verdicts, whatever their order; and the summary line counts each
    verdict given, in VERDICTS' order, with the status the command returns. The fixed files of the tests above
    reach a few of these multisets only."""
    verdicts = [Verdict(file, "oracle", name) for name, file in drawn]
    codes = {VERDICTS[name][0] for name, _ in drawn}
    expected = 1 if 1 in codes else 2 if 2 in codes else 0
    assert exit_status(verdicts) == expected
    line = summary(verdicts)
    head, _, tail = line.partition("; exit ")
    assert head.startswith(f"summary: {len(drawn)} files: ") and tail.startswith(f"{expected} ("), line
    counts = Counter(name for name, _ in drawn)
    listed = [item.split(" ") for item in head.removeprefix(f"summary: {len(drawn)} files: ").split(", ")]
    assert [(name, int(n)) for n, name in listed] == [(name, counts[name]) for name in VERDICTS if counts[name]], line


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(signal=st.sampled_from([None, "", "SIGSEGV", "SIGKILL"]), exitcode=st.one_of(st.none(), st.integers(-15, 255)))
def test_a_crash_is_detailed_by_its_signal_else_its_exit_status(signal: str | None, exitcode: int | None) -> None:
    """A crash's table detail: the signal that killed the child where there is one, else its exit status."""
    from wy_ascend.cli import _crash_detail

    detail = _crash_detail({"signal": signal, "exitcode": exitcode})
    assert detail == (f"killed by {signal}" if signal else f"exit status {exitcode}")


@pytest.mark.parametrize("remote", [True, False])
def test_an_error_shows_the_child_s_traceback_else_its_own(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch, remote: bool) -> None:
    """An exception a replayed case raised is an ERROR showing where it came from: the child's traceback as it
    sent it (its text alone) where the exception carries one, else this process's traceback."""
    from wy_ascend.testing.runner import RemoteTraceback

    path = _file(tmp_path, "oracle", Case(T=17))

    def replay(stored: store.StoredCase, backend: str | None = None, runner: object = None) -> dict:
        cause = RemoteTraceback('Traceback (most recent call last):\n  File "child.py", line 7\nKeyError: 7\n')
        raise KeyError(7) from (cause if remote else None)

    monkeypatch.setattr(store, "replay", replay)
    assert main(["replay", str(path), "--in-process"]) == 1
    out = capsys.readouterr().out
    assert "ERROR: KeyError: 7\nTraceback (most recent call last):\n" in out
    assert ('ERROR: KeyError: 7\nTraceback (most recent call last):\n  File "child.py", line 7\nKeyError: 7\n' in out) \
        == remote
    assert ("in replay\n" in out) != remote  # this process's frames: the stand-in replay raised it


@settings(max_examples=40, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.lists(st.sampled_from(["cpu", "cuda", "npu", "not json", "a list", "absent"]), min_size=1, max_size=3),
       arg=st.sampled_from([None, "cpu", "cuda"]))
def test_the_interpreter_is_chosen_first_exactly_where_every_file_replays_on_it(tmp_path: Path, files: list[str],
                                                                             arg: str | None) -> None:
    """_interpreter_first sets TRITON_INTERPRET=1 (before any subject imports triton) exactly where the
    backend each file replays on (--backend, else $WY_ASCEND_BACKEND, else the file's own) is an interpreting
    one; a malformed or missing file counts as none, so it never turns the mode on."""
    import sys

    from wy_ascend.backends import BACKEND_ENV, BACKENDS
    from wy_ascend.cli import INTERPRET_ENV, _interpreter_first

    text = {"not json": "{", "a list": "[1]"}
    paths = []
    for i, kind in enumerate(files):
        path = tmp_path / f"{i}-{kind.replace(' ', '_')}.json"
        if kind != "absent":
            path.write_text(text.get(kind) or json.dumps({"backend": kind}))
        paths.append(path)
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(BACKEND_ENV, raising=False)
        mp.delenv(INTERPRET_ENV, raising=False)
        mp.delitem(sys.modules, "triton", raising=False)
        _interpreter_first(arg, paths)
        chosen = {arg} if arg else {kind if kind in BACKENDS else None for kind in files}
        assert (os.environ.get(INTERPRET_ENV) == "1") == all(b is not None and BACKENDS[b].interpret for b in chosen)


@pytest.mark.parametrize("name", ["wy_ascend", "fla-ascend", "fla"])
def test_each_property_line_of_a_subject_says_runs_skipped_or_known(name: str, capsys: pytest.CaptureFixture[str]
                                                                    ) -> None:
    """`wy-ascend subjects NAME`: per property, "runs"; "skipped:" with applies_to's reason; or, where it applies
    but a known defect of the installed version covers every case of it, skipped naming that defect's file."""
    from wy_ascend import subjects
    from wy_ascend.testing.properties import PROPERTIES, applies_to

    s = subjects.get(name)
    assert main(["subjects", name]) == 0
    lines = {line.split()[0]: line.split(None, 1)[1] for line in capsys.readouterr().out.splitlines()
             if line.startswith("  ") and line.split()[0] in PROPERTIES}
    for prop in PROPERTIES:
        why, known = applies_to(prop, s), s.known_everywhere(prop)
        expected = ("skipped: " + why if why is not None else "runs" if known is None else
                    f"skipped: every case fails its known defect {known.file} (replayed from the store)")
        assert lines[prop] == expected, prop


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(command=st.sampled_from([["list"], ["subjects"], ["replay", "x.json"]]),
       extra=st.lists(st.sampled_from(["--bogus", "-z", "--n=3", "--backendx"]), min_size=1, max_size=2))
def test_an_unknown_option_of_any_command_but_fuzz_is_a_usage_error(command: list[str], extra: list[str]) -> None:
    """Only `fuzz` passes options it does not know on (to pytest): any other command exits with argparse's
    usage error (status 2) naming every unrecognized one, before running anything."""
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as info:
        main([*command, *extra])
    assert info.value.code == 2
    assert f"error: unrecognized arguments: {' '.join(extra)}" in err.getvalue()


@pytest.mark.cpu_interpreter
def test_replay_leaves_no_process_of_its_runner_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every process a replay's case runner started (its children, and the fork server that forked them) has
    ended when ``wy-ascend replay`` returns, on a pass and on a failure: a child left waiting for its next case
    holds the replaying process's memory (a device's, on a device backend) for as long as that process lives."""
    from tests.test_crash import _alive
    from wy_ascend.testing import runner as runner_module

    started: list[int] = []
    start = runner_module.CaseRunner.start

    def recording(self: runner_module.CaseRunner) -> None:
        start(self)
        assert self.child is not None
        started.append(self.child.pid)
        if self._zygote is not None:
            started.append(self._zygote.popen.pid)

    monkeypatch.setattr(runner_module.CaseRunner, "start", recording)
    passing = _file(tmp_path, "plan_coverage", PLAN)
    failing = _file(tmp_path, "memory_layout", Case(T=16))
    assert main(["replay", str(passing), str(failing), "--backend", "cpu"]) == 1
    assert started and not [pid for pid in started if _alive(pid)]


def test_a_case_past_its_device_s_memory_replays_unavailable(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A stored case whose reservation the device refuses (DeviceTooSmall: an index_width case past its memory)
    never ran: UNAVAILABLE with the reservation's reason, exit 0, as the fuzz suite rejects it; any other error
    of the case stays an ERROR."""
    from wy_ascend.testing.device_memory import DeviceTooSmall

    path = _file(tmp_path, "plan_coverage", PLAN)

    def refused(stored: store.StoredCase, backend: str | None = None, runner: object = None) -> dict:
        raise DeviceTooSmall("index_width on this case holds 9 bytes, past this device's budget of 8 bytes")

    monkeypatch.setattr(store, "replay", refused)
    assert main(["replay", str(path)]) == 0
    out = capsys.readouterr().out
    assert "UNAVAILABLE: index_width on this case holds 9 bytes" in out and "ERROR" not in out

    def other(stored: store.StoredCase, backend: str | None = None, runner: object = None) -> dict:
        raise RuntimeError("something else")

    monkeypatch.setattr(store, "replay", other)
    assert main(["replay", str(path)]) == 1
    assert "ERROR: RuntimeError: something else" in capsys.readouterr().out
