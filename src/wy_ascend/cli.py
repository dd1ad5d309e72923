"""``wy-ascend``: replay and list the regression store, list the subjects, run the fuzz suite.

    wy-ascend replay FILE... [--backend cpu|cuda|npu|npu-cuda] [--subject NAME] [--timeout S] [--log PATH]
                     [--in-process]
    wy-ascend list [DIR]
    wy-ascend subjects [NAME...]
    wy-ascend fuzz [--subject NAME] [--profile NAME] [--backend NAME] [--store DIR] [PYTEST ARGS...]
    wy-ascend --version

``subjects`` lists each subject (built in, entry points of group ``wy_ascend.subjects``, and any import path
named): its version, how it was found, the ops it implements, its target and which properties apply to it
(a skipped one with its reason). ``fuzz`` runs the fuzz suite (pytest on ``fuzz/``, this checkout's or the
one installed with wy_ascend) from any directory: findings go to ``--store`` (default ``./regressions``).

``replay`` prints each file's case, runs its property in a child process (``CaseRunner``, one
for all the files) and ends the file's block with its verdict, one word of ``VERDICTS`` (the
summary table and the README use the same words), with the metrics or the case's traceback; never
a traceback of the runner. A bound that changed since the file was recorded is named with the reason
(``store.bound_changes``). With several files a summary table follows, then the counts of each
verdict and the exit status they give: 1 when any file failed (``FAILED``), else 2 when any could
not be read or run here (``NOT_RUN``: what to install is in its detail), else 0. The other files
still run. Without ``--backend`` a case runs on ``$WY_ASCEND_BACKEND``, else the file's backend.

Replay runs the ``wy_ascend`` Python imports. Run from a checkout whose ``src/wy_ascend`` is not
that one (a non-editable install), it says so loudly, naming both, before and after the files:
the working tree's changes are then not what runs.
``--in-process`` runs the cases in this process (for a debugger; a crash then ends it).
``--subject`` runs each case against that subject (wy_ascend.subjects: a name or an import path) instead of
the file's. A file whose subject cannot be loaded here is MISSING, with how to install it. A file
marked known (a subject's own defect, store.py) is KNOWN while it fails as recorded, and FIXED, a
failure, once it does not: remove the mark.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .backends import BACKEND_ENV, BACKENDS, INTERPRET_ENV, resolve_backend
from .errors import BackendUnavailableError, RegressionFileError, SubjectUnavailableError
from .subjects import get as get_subject

EXIT_PASS, EXIT_FAIL, EXIT_BAD_INPUT = 0, 1, 2


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.3e}"
    if isinstance(x, (dict, list)):
        return json.dumps(x)
    return str(x)


def metrics_rows(metrics: dict[str, Any], prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
    """Flatten nested metrics to (row label, {column: value}) rows: a dict of scalars is one row."""
    rows: list[tuple[str, dict[str, Any]]] = []
    scalars = {k: v for k, v in metrics.items() if not isinstance(v, dict)}
    if scalars:
        rows.append((prefix or "-", scalars))
    for k, v in metrics.items():
        if isinstance(v, dict):
            rows.extend(metrics_rows(v, f"{prefix}.{k}" if prefix else str(k)))
    return rows


def format_metrics(metrics: dict[str, Any]) -> str:
    """The metrics as an aligned text table (one row per output, one column per metric)."""
    rows = metrics_rows(metrics)
    if not rows:
        return "  (no metrics)"
    columns: list[str] = []
    for _, cells in rows:
        columns.extend(c for c in cells if c not in columns)
    table = [["", *columns]] + [[label, *(_fmt(cells[c]) if c in cells else "" for c in columns)]
                                for label, cells in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    return "\n".join("  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in table)


def format_case(case: Any) -> str:
    """Every field of a case, one per line; a history case's earlier calls one per line too, each by the fields
    it sets (``Case.brief``)."""
    d = case.to_dict()
    d.pop("before", None)
    width = max(len(k) for k in d)
    lines = [f"  {k.ljust(width)}  {json.dumps(v)}" for k, v in d.items()]
    return "\n".join(lines + [f"  {f'before[{i}]'.ljust(width)}  {call.brief()}" for i, call in enumerate(case.before)])


# Every verdict of a replayed file: the exit status it gives and what it means (the README's table).
VERDICTS: dict[str, tuple[int, str]] = {
    "PASS": (0, "the property holds"),
    "KNOWN": (0, "a subject's own defect, marked known, still fails as recorded"),
    "UNAVAILABLE": (0, "cannot run on this backend or device by what it is (a perf file on the cpu, an index_width "
                       "case past the device's memory); not run"),
    "FAIL": (1, "the property fails"),
    "ERROR": (1, "the case raised an exception other than a property failure"),
    "CRASH": (1, "the case killed the process running it"),
    "TIMEOUT": (1, "the case ran past the time limit"),
    "FIXED": (1, "marked known, but passes: remove the mark"),
    "MALFORMED": (2, "the file cannot be read as a regression file"),
    "MISSING": (2, "what it needs is not installed here (the backend, fla-core): the detail says what to install"),
}
FAILED = tuple(name for name, (code, _) in VERDICTS.items() if code == EXIT_FAIL)
NOT_RUN = tuple(name for name, (code, _) in VERDICTS.items() if code == EXIT_BAD_INPUT)


@dataclass
class Verdict:
    """One replayed file's line in the summary table."""

    file: str
    property: str
    verdict: str  # one of VERDICTS
    detail: str = ""


def exit_status(verdicts: Sequence[Verdict]) -> int:
    """1 when any file failed, else 2 when any was not run (malformed, or missing here), else 0."""
    codes = {VERDICTS[v.verdict][0] for v in verdicts}
    return next((code for code in (EXIT_FAIL, EXIT_BAD_INPUT) if code in codes), EXIT_PASS)


def summary(verdicts: Sequence[Verdict]) -> str:
    """The counts of every verdict given, in VERDICTS' order, and the exit status they make."""
    counts = [(name, sum(v.verdict == name for v in verdicts)) for name in VERDICTS]
    status = exit_status(verdicts)
    why = {EXIT_PASS: "none failed", EXIT_FAIL: f"{' or '.join(FAILED)} above",
           EXIT_BAD_INPUT: f"none failed; {' or '.join(NOT_RUN)} above"}[status]
    return (f"summary: {len(verdicts)} files: " + ", ".join(f"{n} {name}" for name, n in counts if n)
            + f"; exit {status} ({why})")


def checkout_package(start: Path) -> Path | None:
    """``src/wy_ascend`` of the wy_ascend checkout holding ``start`` (a directory with pyproject.toml and
    src/wy_ascend/__init__.py, ``start`` or a parent), None outside one."""
    for directory in (start, *start.parents):
        package = directory / "src" / "wy_ascend"
        if (package / "__init__.py").is_file() and (directory / "pyproject.toml").is_file():
            return package
    return None


def stale_install_warning(start: Path) -> str | None:
    """A loud warning where ``start`` is in a checkout whose package is not the ``wy_ascend`` imported
    (replay would run the installed copy, not the working tree), None where they are one."""
    import wy_ascend

    package = checkout_package(start.resolve())
    running = Path(wy_ascend.__file__).resolve().parent
    if package is None or package.resolve() == running:
        return None
    return (f"WARNING: replay runs the wy_ascend installed at {running}, NOT this checkout's {package}: "
            "changes in the working tree do not run. Install the checkout editable (pip install -e .) "
            "or use `nox -s replay`.")


def _replay_one(path: Path, backend_arg: str | None, runner: Any, subject: str | None = None) -> Verdict:
    from .testing.device_memory import DeviceTooSmall
    from .testing.properties import PropertyFailure, device_of
    from .testing.runner import CaseCrashed, CaseTimeout, RemoteTraceback
    from .testing.store import KnownDefectFixed, bound_changes, load, missing, replay, unavailable

    try:
        stored = load(path)
    except RegressionFileError as e:
        print(f"file      {path}")
        print(f"MALFORMED: {e}")
        return Verdict(str(path), "-", "MALFORMED", str(e).removeprefix(f"{path}: "))
    except SubjectUnavailableError as e:
        print(f"file      {path}\nMISSING: {e}")
        return Verdict(str(path), "-", "MISSING", str(e).removeprefix(f"{path}: "))
    backend = backend_arg or os.environ.get(BACKEND_ENV) or stored.backend
    print(f"file      {stored.path}")
    print(f"property  {stored.property}")
    print(f"recorded  {stored.date} on backend {stored.backend}; versions {json.dumps(stored.versions)}")
    print(f"failure   {stored.failure['type']}: {stored.failure['message']}")
    print(f"backend   {backend} (this run)")
    if subject or stored.case.subject != "wy_ascend":
        print(f"subject   {subject or stored.case.subject} (this run; recorded: {stored.case.subject})")
    if stored.known is not None:
        print(f"known     {stored.known['reason']}")
    print("case")
    print(format_case(stored.case))
    verdict = Verdict(str(path), stored.property, "PASS")
    why = unavailable(stored, backend, subject)
    if why is not None:
        print(f"UNAVAILABLE: {why}")
        return Verdict(str(path), stored.property, "UNAVAILABLE", why)
    try:
        resolve_backend(backend, device_of(stored.case.replace(backend=backend)))
        get_subject(subject or stored.case.subject).check(backend)
    except (BackendUnavailableError, ValueError) as e:
        print(f"MISSING: backend {backend} cannot run here: {e}")
        return Verdict(str(path), stored.property, "MISSING", f"backend {backend}: {e}")
    needs = missing(stored, backend, subject)
    if needs is not None:
        print(f"MISSING: {needs}")
        return Verdict(str(path), stored.property, "MISSING", needs)
    metrics = None
    try:
        metrics = replay(stored, backend=backend, runner=runner, **({"subject": subject} if subject else {}))
        if "known" in metrics and stored.known is not None:
            print(f"KNOWN: still fails as recorded: {metrics['known']['still_fails']}")
            verdict = Verdict(str(path), stored.property, "KNOWN", stored.known["reason"])
    except DeviceTooSmall as e:  # the case's reservation: the property never started
        print(f"UNAVAILABLE: {e}")
        return Verdict(str(path), stored.property, "UNAVAILABLE", str(e))
    except KnownDefectFixed as e:
        print(f"FIXED: {e}")
        verdict = Verdict(str(path), stored.property, "FIXED", "marked known but passes: remove the mark")
    except PropertyFailure as e:
        print(f"FAIL: {e}")
        metrics = e.metrics
        verdict = Verdict(str(path), stored.property, "FAIL", str(e).splitlines()[0] if str(e) else "")
    except CaseCrashed as e:
        print(f"CRASH: {e}")
        verdict = Verdict(str(path), stored.property, "CRASH", _crash_detail(e.detail))
    except CaseTimeout as e:
        print(f"TIMEOUT: {e}")
        verdict = Verdict(str(path), stored.property, "TIMEOUT", f"past {e.detail['limit_s']:g} s")
    except Exception as e:  # noqa: BLE001 - any other exception the case raised is a failure, with its traceback
        print(f"ERROR: {type(e).__name__}: {e}")
        cause = e.__cause__
        if isinstance(cause, RemoteTraceback):
            print(str(cause).strip("\n"))
        else:
            import traceback

            traceback.print_exception(type(e), e, e.__traceback__, file=sys.stdout)
        verdict = Verdict(str(path), stored.property, "ERROR", f"{type(e).__name__}: {e}".splitlines()[0])
    if verdict.verdict == "PASS":
        print("PASS")
    if metrics is not None:
        print(format_metrics(metrics))
        changes = bound_changes(stored, metrics)
        if changes:
            print("bound changed since the file was recorded:")
            for line in changes:
                print(f"  {line}")
    return verdict


def _crash_detail(detail: dict[str, Any]) -> str:
    if detail.get("signal"):
        return f"killed by {detail['signal']}"
    return f"exit status {detail.get('exitcode')}"


def _table(rows: list[list[str]]) -> list[str]:
    """Rows of cells as aligned text lines (the last column is not padded)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(r, widths)), r[-1]]).rstrip() for r in rows]


def _interpreter_first(backend_arg: str | None, files: list[Path]) -> None:
    """TRITON_INTERPRET=1 before any subject is loaded where every file replays on an interpreter backend (the
    cpu): a subject's package that imports its Triton kernels with its declaration (its ``__init__``) would
    import triton in compiled mode first, and the cpu backend cannot run in such a process."""
    def recorded(path: Path) -> Any:
        try:
            return json.loads(Path(path).read_text()).get("backend")
        except (OSError, ValueError, AttributeError):
            return None  # a malformed file: its replay says so
    chosen = {backend_arg or os.environ.get(BACKEND_ENV) or recorded(path) for path in files}
    if chosen and all(b in BACKENDS and BACKENDS[b].interpret for b in chosen) and "triton" not in sys.modules:
        os.environ[INTERPRET_ENV] = "1"


def _replay(args: argparse.Namespace) -> int:
    from .testing.runner import CaseRunner, case_timeout

    timeout = args.timeout if args.timeout is not None else case_timeout()
    log = args.log or Path(tempfile.gettempdir()) / f"wy-ascend-replay-{os.getpid()}.log"
    stale = stale_install_warning(Path.cwd())
    if stale:
        print(stale, file=sys.stderr)
    _interpreter_first(args.backend, args.files)
    subject = get_subject(args.subject).name if args.subject else None  # an import path: the name it declares
    runner = None if args.in_process else CaseRunner(log, timeout_s=timeout)
    verdicts = []
    try:
        for i, path in enumerate(args.files):
            if i:
                print()
            verdicts.append(_replay_one(path, args.backend, runner, subject))
    finally:
        if runner is not None:
            runner.close()
            if args.log is None and not any(v.verdict in ("CRASH", "TIMEOUT", "ERROR") for v in verdicts):
                log.unlink(missing_ok=True)  # nothing in it worth keeping
    if len(verdicts) > 1:
        print()
        print("\n".join(_table([["file", "property", "verdict", "detail"],
                                *([v.file, v.property, v.verdict, v.detail] for v in verdicts)])))
        print(summary(verdicts))
    if stale:
        print(stale, file=sys.stderr)
    return exit_status(verdicts)


def _failure_kind(failure: dict[str, Any]) -> str:
    """The failure column of ``list``: the exception type, with the signal or the limit of a crash or timeout."""
    kind = str(failure.get("type", "?"))
    if kind == "CaseCrashed":
        return f"crash {failure.get('signal') or 'exit ' + str(failure.get('exitcode'))}"
    if kind == "CaseTimeout":
        limit = failure.get("limit_s")
        return f"timeout {limit:g}s" if isinstance(limit, (int, float)) else "timeout"
    return kind


def _list(args: argparse.Namespace) -> int:
    from .testing.store import describe_case, iter_store, load, regressions_dir

    directory = Path(args.dir) if args.dir else regressions_dir()
    paths = iter_store(directory)
    if not paths:
        print(f"no regression files in {directory}")
        return EXIT_PASS
    status = EXIT_PASS
    rows = [["file", "property", "failure", "backend", "date", "case"]]
    for path in paths:
        try:
            s = load(path)
        except RegressionFileError as e:
            rows.append([path.name, "MALFORMED", "-", "-", "-", str(e).removeprefix(f"{path}: ")])
            status = EXIT_BAD_INPUT
            continue
        rows.append([path.name, s.property, _failure_kind(s.failure), s.backend, s.date, describe_case(s.case)])
    print("\n".join(_table(rows)))
    return status


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("wy_ascend")
    except PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wy-ascend", description="Replay and list wy_ascend regression files.")
    parser.add_argument("--version", action="version", version=f"wy-ascend {package_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("replay", help="run stored cases; exit 1 when any FAIL, ERROR, CRASH, TIMEOUT or FIXED, else "
                       "2 when any MALFORMED or MISSING, else 0 (PASS, KNOWN, UNAVAILABLE)")
    p.add_argument("files", nargs="+", type=Path, metavar="FILE", help="regressions/<name>-<hash>.json files")
    p.add_argument("--backend", choices=sorted(BACKENDS),
                   help=f"backend to run on (default: ${BACKEND_ENV}, else the file's backend)")
    p.add_argument("--subject", help="subject whose ops run the cases: a name or an import path package.module:name "
                   "(default: each file's own)")
    p.add_argument("--timeout", type=float, metavar="S",
                   help="seconds a case may run before it is killed and reported TIMEOUT "
                        "(default: $WY_ASCEND_CASE_TIMEOUT, else 600)")
    p.add_argument("--log", type=Path, help="where the child's stderr (warnings, stack dumps) goes "
                   "(default: a temp file, kept and named only when a case crashed, timed out or raised)")
    p.add_argument("--in-process", action="store_true",
                   help="run the cases in this process (a debugger works; a crashing case ends it)")
    p.set_defaults(func=_replay)
    p = sub.add_parser("list", help="list stored cases (file, property, failure, backend, date, case)")
    p.add_argument("dir", nargs="?", help="store directory (default: $WY_ASCEND_REGRESSIONS, else ./regressions)")
    p.set_defaults(func=_list)
    p = sub.add_parser("subjects", help="list the subjects: version, how found, ops, target, the properties that apply")
    p.add_argument("names", nargs="*", metavar="NAME", help="names or import paths (default: every one found)")
    p.set_defaults(func=_subjects)
    p = sub.add_parser("fuzz", help="run the fuzz suite from any directory (pytest on wy_ascend's fuzz/); other "
                       "arguments go to pytest", add_help=False)
    p.set_defaults(func=_fuzz)
    return parser


def _subjects(args: argparse.Namespace) -> int:
    from . import subjects
    from .testing.properties import PROPERTIES, applies_to

    status = EXIT_PASS
    for i, name in enumerate(args.names or sorted(subjects.available())):
        if i:
            print()
        try:
            s = subjects.get(name)
        except (ValueError, ImportError) as e:
            print(f"{name}: MISSING: {e}")
            status = EXIT_BAD_INPUT
            continue
        target = s.target.device + (f" (rules: {', '.join(sorted(s.target.rules))})" if s.target.rules else "") + (
            "" if s.target.applied else ", set by its own launches")
        print(f"{s.name} {s.installed_version or '(not installed)'}: {s.about or '-'}")
        print(f"  found       {s.loaded}")
        print(f"  ops         {', '.join(s.ops_implemented)}; backends {', '.join(s.backends)}; target {target}")
        print(f"  known       {len(s.known)} defects ({', '.join(k.file for k in s.known) or 'none'})")
        for prop in PROPERTIES:
            why, known = applies_to(prop, s), s.known_everywhere(prop)
            if why is None and known is not None:
                why = f"every case fails its known defect {known.file} (replayed from the store)"
            print(f"  {prop:<18}{'runs' if why is None else 'skipped: ' + why}")
    return status


def fuzz_suite() -> Path:
    """The fuzz suite's directory: this checkout's ``fuzz/`` (wy_ascend installed editable from it), else the
    ``fuzz`` package installed beside wy_ascend; FileNotFoundError saying how to get it."""
    import importlib.util

    import wy_ascend

    checkout = Path(wy_ascend.__file__).resolve().parents[2] / "fuzz"
    spec = importlib.util.find_spec("fuzz")
    for place in (checkout, Path(spec.origin).parent if spec and spec.origin else None):
        if place is not None and (place / "test_fuzz.py").is_file() and (place / "strategies.py").is_file():
            return place
    raise FileNotFoundError("wy_ascend's fuzz suite is not installed here: install wy_ascend from its repository "
                            "(pip install 'wy_ascend[cpu,test]'), which ships it as the package 'fuzz'")


def _fuzz(args: argparse.Namespace) -> int:
    import subprocess

    suite = fuzz_suite()
    command = [sys.executable, "-m", "pytest", str(suite / "test_fuzz.py"), "-p", "no:cacheprovider",
               f"--rootdir={Path.cwd()}", *args.rest]
    print(" ".join(command), file=sys.stderr)
    return subprocess.call(command)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``wy-ascend`` console script; returns the exit status."""
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest and args.command != "fuzz":
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    args.rest = rest
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
