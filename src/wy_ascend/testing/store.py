"""The regression store: failing cases as readable JSON files in ``regressions/``, and replay.

A file is named ``<property>-<hash>.json`` where the hash covers only the property and the
case, so the same failure found twice (by two runs, or two xdist workers) is one file. A
case that killed the process running it, or ran past the per-case time limit
(``runner.CaseCrashed``/``CaseTimeout``), is ``crash-<hash>.json`` or ``timeout-<hash>.json``
(libFuzzer's names), the property inside. Files are written atomically (a temp file in the
same directory, made 0644, then a hard link that fails if the name exists), are never
overwritten, and are read back by ``load`` with a ``RegressionFileError`` naming the file and
the field for anything malformed.
Hypothesis's own example database is a cache; this store is the record.

Foreign subjects (wy_ascend.subjects). A case of a subject other than wy_ascend holds
``case.subject`` (its name; absent at the default, so wy_ascend's files keep their names) and the
file a top-level ``"subject": {"name": <the case's subject>, "version": <its version or null>}``;
``versions`` then also names the subject's distribution (``"fla-core": "0.6.0"``). A defect that
is the subject's own (upstream's, not this project's to fix) is marked known by a top-level
``"known": {"reason": <why, a non-empty string>}``, added by hand after the suite stored the file
(neither field is in the name's hash). ``replay`` of a known file passes while the defect reproduces
(the same failure type as recorded) and raises ``KnownDefectFixed`` when it does not: the mark must
then go, and the file with it where the defect was fixed upstream.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import tempfile
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from .. import subjects
from ..backends import BACKEND_ENV, BACKENDS
from ..errors import RegressionFileError
from .case import Case
from .properties import PROPERTIES, Metrics, PropertyFailure, run_property
from .runner import CaseLost, CaseRunner

SCHEMA_VERSION = 1
SUPPORTED_SCHEMA_VERSIONS = (1,)
STORE_ENV = "WY_ASCEND_REGRESSIONS"
HASH_CHARS = 12  # 48 bits of sha256: collisions are out of reach for any realistic store
MAX_TRACEBACK_CHARS = 4000


def regressions_dir() -> Path:
    """The store: ``$WY_ASCEND_REGRESSIONS`` if set, else ``./regressions``."""
    return Path(os.environ.get(STORE_ENV) or "regressions")


def case_hash(property_name: str, case: Case | dict[str, Any]) -> str:
    """Short sha256 of the canonical JSON of (property, case): the file's identity. ``case``
    may be the case dict as stored (so a file's name can be checked against its content)."""
    case_dict = case.to_dict() if isinstance(case, Case) else case
    canonical = json.dumps({"property": property_name, "case": case_dict}, sort_keys=True,
                           separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:HASH_CHARS]


LOST_KINDS = {"CaseCrashed": "crash", "CaseTimeout": "timeout"}  # failure.type -> file name prefix
FILE_MODE = 0o644  # readable by everyone, like any file in the repository (mkstemp makes 0600)


def file_name(property_name: str, case: Case | dict[str, Any], failure_type: str | None = None) -> str:
    """``<property>-<hash>.json``; ``crash-<hash>.json``/``timeout-<hash>.json`` when the failure
    (its exception type name) is a crash or a timeout of the case runner."""
    prefix = LOST_KINDS.get(failure_type or "", property_name)
    return f"{prefix}-{case_hash(property_name, case)}.json"


def json_safe(x: Any) -> Any:
    """``x`` as strict JSON data: non-finite floats become "inf"/"-inf"/"nan", tensors and
    numpy values become numbers or lists, tuples lists, anything else its ``str``."""
    if x is None or isinstance(x, (bool, str)):
        return x
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return x if math.isfinite(x) else ("nan" if math.isnan(x) else ("inf" if x > 0 else "-inf"))
    if isinstance(x, Mapping):
        return {str(k): json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    if hasattr(x, "tolist"):  # torch tensors, numpy arrays and scalars
        return json_safe(x.tolist())
    return str(x)


def _version(dist: str, module: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        pass
    try:
        return str(__import__(module).__version__)
    except Exception:  # noqa: BLE001 - a missing or broken package has no version to record
        return None


def versions(subject: str = subjects.DEFAULT) -> dict[str, str | None]:
    """Versions of everything that decides whether a case fails (a foreign subject's distribution too)."""
    import torch

    return {
        **({subjects.FLA_DIST: subjects.get(subject).version} if subjects.get(subject).foreign else {}),
        "wy_ascend": _version("wy_ascend", "wy_ascend"),
        "torch": torch.__version__,
        "triton": _version("triton-ascend", "triton") or _version("triton", "triton"),
        "python": platform.python_version(),
        "hypothesis": _version("hypothesis", "hypothesis"),
    }


def failure_record(error: BaseException) -> dict[str, Any]:
    """What failed: exception type, message, metrics (PropertyFailure only) and, for an
    unexpected exception (not a property violation), where it was raised (the child's
    traceback included, for a case run by ``runner.CaseRunner``). A crash or a timeout of the
    case runner adds its ``detail``: ``signal``, ``exitcode`` / ``limit_s``, and ``log``."""
    if isinstance(error, CaseLost):
        return {"type": type(error).__name__, "message": str(error), "metrics": {}, "traceback": None,
                **json_safe(error.detail)}
    tb = None
    if not isinstance(error, PropertyFailure) and error.__traceback__ is not None:
        tb = "".join(traceback.format_exception(type(error), error, error.__traceback__))[-MAX_TRACEBACK_CHARS:]
    return {
        "type": type(error).__name__,
        "message": str(error),
        "metrics": json_safe(getattr(error, "metrics", None) or {}),
        "traceback": tb,
    }


def subject_record(case: Case) -> dict[str, Any]:
    """The top-level fields naming a foreign case's subject and version (none for wy_ascend's cases)."""
    subject = subjects.get(case.subject)
    if not subject.foreign:
        return {}
    return {"subject": {"name": subject.name, "version": subject.version}}


def record_failure(property_name: str, case: Case, error: BaseException, directory: Path | None = None) -> Path:
    """Write the failure of ``property_name`` on ``case`` to the store; return the file's path.

    The name depends on (property, case) only, and on whether ``error`` is a crash or a
    timeout of the case runner (``file_name``). An existing file is never overwritten: its
    path is returned as is, so concurrent writers of one failure produce one file.
    """
    if property_name not in PROPERTIES:
        raise ValueError(f"property must be one of {sorted(PROPERTIES)}, got {property_name!r}")
    directory = Path(directory) if directory is not None else regressions_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / file_name(property_name, case, type(error).__name__)
    if path.exists():
        return path
    record = {
        "schema_version": SCHEMA_VERSION,
        "property": property_name,
        "case": case.to_dict(),
        "failure": failure_record(error),
        "backend": case.backend or os.environ.get(BACKEND_ENV) or "cpu",
        "versions": versions(case.subject),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **subject_record(case),
    }
    text = dumps(json_safe(record)) + "\n"
    _write_new(path, text)
    return path


def dumps(x: Any, indent: int = 0) -> str:
    """Pretty JSON with sorted keys, two-space indents and lists of scalars kept on one line."""
    pad = "  " * (indent + 1)
    if isinstance(x, dict) and x:
        items = [f"{pad}{json.dumps(k)}: {dumps(v, indent + 1)}" for k, v in sorted(x.items())]
        return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
    if isinstance(x, list) and any(isinstance(v, (dict, list)) for v in x):
        return "[\n" + ",\n".join(pad + dumps(v, indent + 1) for v in x) + "\n" + "  " * indent + "]"
    return json.dumps(x, allow_nan=False)


def _write_new(path: Path, text: str) -> None:
    """Create ``path`` with ``text`` atomically; leave an existing file untouched.

    The text goes to a temp file in the same directory, then ``os.link`` publishes it
    under its name (failing if the name exists), so no reader sees a partial file and
    no writer replaces another's. Filesystems without hard links fall back to an
    exclusive create (still never overwrites, but a reader may see a partial file).
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return
        except OSError:
            try:
                excl = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
            except FileExistsError:
                return
            with os.fdopen(excl, "w", encoding="utf-8") as f:
                f.write(text)
    finally:
        os.unlink(tmp)


@dataclass(frozen=True)
class StoredCase:
    """One regression file read back: what was checked, on what, and how it failed."""

    path: Path
    schema_version: int
    property: str
    case: Case
    failure: dict[str, Any]
    backend: str
    versions: dict[str, Any]
    date: str
    # <property>-<hash of the stored property and case>.json (crash-/timeout- for a crash or a
    # timeout): differs from path.name when the file's case was edited after it was recorded.
    expected_name: str = ""
    # The known mark of a subject's own defect ({"reason": ...}; module doc), None where unmarked.
    known: dict[str, Any] | None = None


# Top-level fields: name -> (allowed types, description for messages).
_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    "property": ((str,), "a string"),
    "case": ((dict,), "an object"),
    "failure": ((dict,), "an object"),
    "backend": ((str,), "a string"),
    "versions": ((dict,), "an object"),
    "date": ((str,), "a string"),
}
_FAILURE_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    "type": ((str,), "a string"),
    "message": ((str,), "a string"),
    "metrics": ((dict,), "an object"),
}
# Case fields every file must hold, with their types (Case.from_dict checks the types of the others, the
# later fields among them, which a file holds only where they differ from their defaults).
_CASE_FIELD_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "dtype": ((str,), "a string"),
    "use_g": ((bool,), "true or false"),
    "dist": ((str,), "a string"),
    "backend": ((str, type(None)), "a string or null"),
    "corruption": ((str, type(None)), "a string or null"),
}


def _bad(path: Path, field: str, problem: str) -> RegressionFileError:
    return RegressionFileError(f"{path}: field {field!r} {problem}")


def _check_fields(path: Path, obj: dict[str, Any], fields: dict[str, tuple[tuple[type, ...], str]],
                  prefix: str = "") -> None:
    for name, (types, what) in fields.items():
        if name not in obj:
            raise _bad(path, prefix + name, "is missing")
        value = obj[name]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise _bad(path, prefix + name, f"must be {what}, got {json.dumps(value)[:80]}")


def load(path: Path | str) -> StoredCase:
    """Read a regression file back; anything malformed raises RegressionFileError naming
    the file and the field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise RegressionFileError(f"{path}: cannot read the file: {e}") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise RegressionFileError(f"{path}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from e
    if not isinstance(data, dict):
        raise RegressionFileError(f"{path}: expected a JSON object at the top level, got {type(data).__name__}")
    if "schema_version" not in data:
        raise _bad(path, "schema_version", "is missing")
    version = data["schema_version"]
    if not isinstance(version, int) or isinstance(version, bool) or version not in SUPPORTED_SCHEMA_VERSIONS:
        raise _bad(path, "schema_version", f"is {json.dumps(version)[:80]}, which this wy_ascend cannot read; "
                   f"supported versions: {list(SUPPORTED_SCHEMA_VERSIONS)}")
    _check_fields(path, data, _FIELDS)
    if data["property"] not in PROPERTIES:
        raise _bad(path, "property", f"is {data['property']!r}, not a known property; known: {sorted(PROPERTIES)}")
    if data["backend"] not in BACKENDS:
        raise _bad(path, "backend", f"is {data['backend']!r}, not a known backend; known: {sorted(BACKENDS)}")
    _check_fields(path, data["failure"], _FAILURE_FIELDS, "failure.")
    case_dict = data["case"]
    for name, (types, what) in _CASE_FIELD_TYPES.items():
        if name in case_dict and not isinstance(case_dict[name], types):
            raise _bad(path, f"case.{name}", f"must be {what}, got {json.dumps(case_dict[name])[:80]}")
    try:
        case = Case.from_dict(case_dict)
    except (TypeError, ValueError, IndexError, KeyError) as e:
        raise _bad(path, "case", f"is not a valid case: {e}") from e
    expected = file_name(data["property"], case_dict, data["failure"]["type"])
    known = data.get("known")
    if known is not None and not (isinstance(known, dict) and isinstance(known.get("reason"), str) and known["reason"]):
        raise _bad(path, "known", f"must be an object with a non-empty string 'reason', got {json.dumps(known)[:80]}")
    return StoredCase(path, version, data["property"], case, data["failure"], data["backend"], data["versions"],
                      data["date"], expected, known)


def iter_store(directory: Path | str | None = None) -> list[Path]:
    """The store's regression files (``*.json``, no hidden temp files), sorted by name."""
    directory = Path(directory) if directory is not None else regressions_dir()
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("*.json") if not p.name.startswith("."))


class KnownDefectFixed(Exception):
    """A file marked known no longer fails as recorded: its defect is gone (module doc)."""


def replay(stored: StoredCase, backend: str | None = None, runner: CaseRunner | None = None,
           subject: str | None = None) -> Metrics:
    """Run the stored property on the stored case; ``backend`` and ``subject`` (if given) replace
    the case's own. Raises PropertyFailure (or the exception the case raised) if it still fails.
    With ``runner`` the case runs in its child process (``runner.CaseRunner``), so a case
    that crashes or hangs raises CaseCrashed/CaseTimeout instead of taking this process down.

    A file marked known, replayed on its own subject, inverts that: it returns ``{"known": {reason,
    still_fails}}`` while it fails as recorded (the same failure type) and raises KnownDefectFixed
    when it passes."""
    case = stored.case.on(backend) if backend else stored.case
    case = case.replace(subject=subject) if subject else case

    def run() -> Metrics:
        if runner is not None:
            return runner.run(stored.property, case).metrics
        return run_property(stored.property, case)

    if stored.known is None or case.subject != stored.case.subject:
        return run()
    try:
        metrics = run()
    except Exception as e:  # noqa: BLE001 - the known failure, or another one (re-raised)
        if type(e).__name__ != stored.failure["type"]:
            raise
        return {"known": {"reason": stored.known["reason"], "still_fails": f"{type(e).__name__}: {e}"[:500]}}
    raise KnownDefectFixed(
        f"{stored.path} is marked known ({stored.known['reason']}) but no longer fails on subject {case.subject} "
        f"{subjects.get(case.subject).version}: the defect is gone; remove the file's 'known' mark (and the file "
        f"once the fix is released) and its entry in fuzz/strategies.py KNOWN. Metrics now: "
        f"{json.dumps(json_safe(metrics))[:300]}")


def _bounds(metrics: Any, prefix: str = "") -> dict[str, dict[str, Any]]:
    """The entries of (nested) metrics that carry a bound ``tol``, by dotted label."""
    out: dict[str, dict[str, Any]] = {}
    if isinstance(metrics, Mapping):
        if isinstance(metrics.get("tol"), (int, float)) and not isinstance(metrics.get("tol"), bool):
            out[prefix or "-"] = dict(metrics)
        for key, value in metrics.items():
            out.update(_bounds(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def bound_changes(stored: StoredCase, metrics: Metrics) -> list[str]:
    """One line per output whose bound (``tol`` in the metrics) differs between the file's
    recorded failure and ``metrics`` of a replay today, saying why: for the oracle property,
    which term of ``properties.error_bounds`` sets the bound now; else the versions it changed
    between; for a perf file, each op's time bound that moved past PERF_BOUND_DRIFT. Empty when no
    bound changed (or the file recorded none)."""
    from .properties import FP32_RTOL

    recorded, now = _bounds(stored.failure.get("metrics")), _bounds(metrics)
    was, today = stored.versions.get("wy_ascend"), versions().get("wy_ascend")
    since = f" (recorded with wy_ascend {was}, now {today})" if was != today else ""
    dtype = stored.case.dtype
    lines = []
    for label, rec in recorded.items():
        cur = now.get(label)
        if cur is None or math.isclose(rec["tol"], cur["tol"], rel_tol=1e-9, abs_tol=0.0):
            continue
        s_rec, s_now = rec.get("sensitivity"), cur.get("sensitivity")
        was_sensitivity = isinstance(s_rec, (int, float)) and rec["tol"] <= s_rec
        if stored.property != "oracle":
            why = f"the {stored.property} property's bound changed{since}"
        elif dtype == "float32":
            why = f"the float32 bound is properties.FP32_RTOL, now {FP32_RTOL:.3e}{since}"
        elif isinstance(s_now, (int, float)) and cur["tol"] <= s_now:
            why = (f"the {dtype} bound now admits the rounding sensitivity {s_now:.3e} (properties.error_bounds)"
                   if not was_sensitivity else
                   f"the {dtype} bound is the rounding sensitivity, {s_now:.3e} now and {s_rec:.3e} when recorded "
                   "(properties.error_bounds)")
            why += since
        else:
            why = (f"the {dtype} bound is the rounding term LOW_PRECISION_FACTOR x max(round_err, u/2) "
                   f"(properties.error_bounds){' and no longer the rounding sensitivity' if was_sensitivity else ''}"
                   f"{since}")
        lines.append(f"{label}: recorded tol {rec['tol']:.3e}, now {cur['tol']:.3e}: {why}")
    if stored.property == "perf":
        lines += _perf_bound_changes(stored.failure.get("metrics"), metrics)
    return lines


# A perf bound is measured on each run (copy bandwidth, launch floor): it moves a few percent between
# runs of one device. Past this relative change the device or the bound's formula changed.
PERF_BOUND_DRIFT = 0.1


def _perf_bound_changes(recorded: Any, now: Metrics) -> list[str]:
    """Per op, a perf file's recorded ``bound_ms`` against a replay's where they differ by more than
    PERF_BOUND_DRIFT, with the formula the bound has now (testing/perf.py)."""
    lines = []
    for op, row in (recorded or {}).items():
        rec, cur = row.get("bound_ms") if isinstance(row, Mapping) else None, now.get(op, {}).get("bound_ms")
        if not isinstance(rec, (int, float)) or not isinstance(cur, (int, float)):
            continue
        if abs(cur - rec) > PERF_BOUND_DRIFT * rec:
            lines.append(f"{op}: recorded bound {rec:.4f} ms, now {cur:.4f} ms: the bound is the launch floor plus "
                         "the compulsory bytes at the copy bandwidth, both measured on this device by this run "
                         "(testing/perf.py; before session 16 the larger of the two)")
    return lines


def describe_case(case: Case) -> str:
    """A one-line summary of a case: layout, heads, dims, dtype, gate, data, knobs."""
    layout = f"cu_seqlens={list(case.cu_seqlens)}" if case.cu_seqlens is not None else f"B={case.B} T={case.T}"
    parts = [layout, f"H={case.H} HV={case.HV} K={case.K} V={case.V} BT={case.BT}", case.dtype,
             "gate" if case.use_g else "no gate", f"dist={case.dist} seed={case.seed}"]
    if case.knobs:
        parts.append("knobs=" + ",".join(f"{k}={v}" for k, v in sorted(case.knobs.items())))
    if case.corruption:
        parts.append(f"corruption={case.corruption}")
    if case.backend:
        parts.append(f"backend={case.backend}")
    if subjects.get(case.subject).foreign:
        parts.append(f"subject={case.subject}")
    return " ".join(parts)
