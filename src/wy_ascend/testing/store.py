"""The regression store: failing cases as readable JSON files in ``regressions/``, and replay.

A file is named ``<property>-<hash>.json`` where the hash covers only the property and the
case, so the same failure found twice (by two runs, or two xdist workers) is one file. A
case that killed the process running it, or ran past the per-case time limit
(``runner.CaseCrashed``/``CaseTimeout``), is ``crash-<hash>.json`` or ``timeout-<hash>.json``
(libFuzzer's names), the property inside. Files are written atomically (a temp file in the
same directory, made 0644, then a hard link that fails if the name exists) and are never
overwritten: a failure whose file exists already is told so (``store_failure``: the file, what it
recorded then). ``load`` validates a file as input, every field of schema version 1 by the tables
below (no other version, no unknown field, the case by Case's and the ops' own rules, the name by
the content's hash), with a ``RegressionFileError`` naming the file and the field for anything else.
Hypothesis's own example database is a cache; this store is the record.

Foreign subjects (wy_ascend.subjects). A case of a subject other than wy_ascend holds
``case.subject`` (its name; absent at the default, so wy_ascend's files keep their names) and the
file a top-level ``"subject": {"name": <the case's subject>, "version": <its version or null>, "loaded":
<how it was found: "entry point ...", "import path pkg.module:name" or "builtin ...">, "distribution": <its
package or null>}`` (files of fla-core 0.6.0 also hold ``versions["fla-core"]``). ``load`` resolves the
subject by name, else the way the file loaded it, else raises ``SubjectUnavailableError`` saying how to
install it (a replay reports MISSING). A defect that
is the subject's own (upstream's, not this project's to fix) is marked known by a top-level
``"known": {"reason": <why, a non-empty string>}``, added by hand after the suite stored the file
(neither field is in the name's hash). ``replay`` of a known file passes while the defect reproduces
(the failure recorded: ``fails_as_recorded``) and raises ``KnownDefectFixed`` when it does not: the mark must
then go, and the file with it where the defect was fixed upstream.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import platform
import tempfile
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, get_args

import torch

from .. import subjects
from ..backends import BACKEND_ENV, BACKENDS, DEVICES, LaunchConfig
from ..errors import RegressionFileError, SubjectUnavailableError
from ..planning import LaunchMode
from ..validation import check_chunk_size, check_dim, validate
from . import history
from .case import DISTRIBUTIONS, DTYPES, INDEX_DTYPES, LATER_FIELDS, LAUNCH_KNOBS, Case
from .device_memory import NO_TENSORS
from .properties import CORRUPTIONS, OPS_TWICE, PROPERTIES, Metrics, PropertyFailure, run_property
from .runner import CaseLost, CaseRunner, device_fault, names_device_fault

SCHEMA_VERSION = 1
SUPPORTED_SCHEMA_VERSIONS = (1,)
STORE_ENV = "WY_ASCEND_REGRESSIONS"
HASH_CHARS = 12  # 48 bits of sha256: collisions are out of reach for any realistic store
TENSOR_ELEMENTS = torch.iinfo(torch.int64).max  # the most elements a tensor's shape may multiply to
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
    """Versions of everything that decides whether a case fails (a foreign subject's own: ``subject_record``)."""
    import torch

    return {
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
    """The top-level fields naming a foreign case's subject, its version and how it was loaded (none for
    wy_ascend's cases)."""
    subject = subjects.get(case.subject)
    if not subject.foreign:
        return {}
    return {"subject": {"name": subject.name, "version": subject.installed_version, "loaded": subject.loaded,
                        "distribution": subject.distribution}}


@dataclass(frozen=True)
class Recorded:
    """Where a failure went: its file, whether this call wrote it, and, where the file was there
    already (the same minimal case found before: a committed file, another worker, an earlier
    run), the failure that file recorded then (None where it cannot be read)."""

    path: Path
    new: bool
    earlier: dict[str, Any] | None = None

    @property
    def then(self) -> str:
        """The failure the file recorded (an existing file's)."""
        return "unreadable" if self.earlier is None else f"{self.earlier.get('type')}: {self.earlier.get('message')}"

    def note(self, error: BaseException, what: str = "minimal case") -> str:
        """What to tell the user: the file and how to replay it; for a file already there, that
        nothing was written, what it recorded then and what fails now."""
        replay = f"replay: wy-ascend replay {self.path}"
        if self.new:
            return f"{what} recorded in {self.path}\n{replay}"
        return (f"{what} ALREADY STORED in {self.path} (nothing new written; files are never overwritten)\n"
                f"  recorded then: {self.then}\n  fails now:     {type(error).__name__}: {error}\n{replay}")


def store_failure(property_name: str, case: Case, error: BaseException, directory: Path | None = None) -> Recorded:
    """Write the failure of ``property_name`` on ``case`` to the store (``record_failure``), saying
    whether the file is new or was there already, with what it recorded."""
    if property_name not in PROPERTIES:
        raise ValueError(f"property must be one of {sorted(PROPERTIES)}, got {property_name!r}")
    directory = Path(directory) if directory is not None else regressions_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / file_name(property_name, case, type(error).__name__)
    if not path.exists():
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
        if _write_new(path, dumps(json_safe(record)) + "\n"):
            return Recorded(path, True)
    try:
        earlier = json.loads(path.read_text(encoding="utf-8")).get("failure")
    except (OSError, ValueError, AttributeError):
        earlier = None
    return Recorded(path, False, earlier if isinstance(earlier, dict) else None)


def record_failure(property_name: str, case: Case, error: BaseException, directory: Path | None = None) -> Path:
    """Write the failure of ``property_name`` on ``case`` to the store; return the file's path.

    The name depends on (property, case) only, and on whether ``error`` is a crash or a
    timeout of the case runner (``file_name``). An existing file is never overwritten: its
    path is returned as is, so concurrent writers of one failure produce one file
    (``store_failure`` says which happened).
    """
    return store_failure(property_name, case, error, directory).path


def dumps(x: Any, indent: int = 0) -> str:
    """Pretty JSON with sorted keys, two-space indents and lists of scalars kept on one line."""
    pad = "  " * (indent + 1)
    if isinstance(x, dict) and x:
        items = [f"{pad}{json.dumps(k)}: {dumps(v, indent + 1)}" for k, v in sorted(x.items())]
        return "{\n" + ",\n".join(items) + "\n" + "  " * indent + "}"
    if isinstance(x, list) and any(isinstance(v, (dict, list)) for v in x):
        return "[\n" + ",\n".join(pad + dumps(v, indent + 1) for v in x) + "\n" + "  " * indent + "]"
    return json.dumps(x, allow_nan=False)


def _write_new(path: Path, text: str) -> bool:
    """Create ``path`` with ``text`` atomically; leave an existing file untouched. True where
    this call created it.

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
            return False
        except OSError:
            try:
                excl = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
            except FileExistsError:
                return False
            with os.fdopen(excl, "w", encoding="utf-8") as f:
                f.write(text)
        return True
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
    # The known mark of a subject's own defect ({"reason": ...}; module doc), None where unmarked.
    known: dict[str, Any] | None = None


# ------------------------------------------------------------------ the schema of version 1, read back
#
# Every field of a file is an entry of a table below: its check and whether a file must hold it.
# ``load`` refuses a missing required field, a field no table lists, and a value its check refuses,
# naming the file and the field; adding a field is one entry.

Check = Callable[[Any], None]  # raises ValueError saying what is wrong with the value ("must be ...")


@dataclass(frozen=True)
class Field:
    """One field of a stored object: the check of its value, whether it must be present, and, for an
    object, the table of its own fields (checked the same way, one level down)."""

    check: Check
    required: bool = True
    fields: dict[str, Field] | None = None


def _show(value: Any) -> str:
    return json.dumps(value, default=str)[:80]


def _typed(types: tuple[type, ...], what: str) -> Check:
    def check(value: Any) -> None:
        # bool is an int in Python, not in the schema: true is no version number, count or size
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise ValueError(f"must be {what}, got {_show(value)}")
    return check


_string, _object, _bool = _typed((str,), "a string"), _typed((dict,), "an object"), _typed((bool,), "true or false")


def _int(low: int) -> Check:
    def check(value: Any) -> None:
        _typed((int,), "an int")(value)
        if value < low:
            raise ValueError(f"must be an int >= {low}, got {value}")
    return check


def _positive_number(value: Any) -> None:
    _typed((int, float), "a number")(value)
    if not value > 0:
        raise ValueError(f"must be a number > 0, got {_show(value)}")


def _non_empty(value: Any) -> None:
    _string(value)
    if not value.strip():
        raise ValueError("must be a non-empty string")


def _one_of(choices: Any, what: str) -> Check:
    def check(value: Any) -> None:
        if not isinstance(value, str) or value not in choices:
            raise ValueError(f"is {_show(value)}, not {what}; known: {sorted(choices)}")
    return check


def _nullable(check: Check) -> Check:
    def nullable(value: Any) -> None:
        if value is not None:
            check(value)
    return nullable


def _via(rule: Callable[[str, Any], None], check: Check) -> Check:
    """``check`` (the value's type), then one of the ops' own rules (validation.py), which names what it checks."""
    def via(value: Any) -> None:
        check(value)
        rule("the value", value)
    return via


def _int_list(value: Any) -> None:
    if not isinstance(value, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        raise ValueError(f"must be a list of ints or null, got {_show(value)}")


def _version_1(value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value not in SUPPORTED_SCHEMA_VERSIONS:
        raise ValueError(f"is {_show(value)}, which this wy_ascend cannot read; supported versions: "
                         f"{list(SUPPORTED_SCHEMA_VERSIONS)} (the int, not a string, a float or true)")


def _date(value: Any) -> None:
    _string(value)
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise ValueError(f"must be an ISO-8601 time with its UTC offset, got {_show(value)}")


def _calls(value: Any) -> None:
    if not (isinstance(value, list) and value and all(isinstance(x, dict) for x in value)):
        raise ValueError(f"must be a non-empty list of cases (the calls before the case), got {_show(value)}")


def _knob_check(name: str) -> Check:
    """A launch knob's check, from its LaunchConfig type: bool, a mode, or a positive int (the planner's
    rules on the value, e.g. a power-of-two tile cap, are checked with the case)."""
    kind = next(f.type for f in dataclasses.fields(LaunchConfig) if f.name == name)
    kind = kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))
    if kind.startswith("bool"):
        return _bool
    if kind.startswith("LaunchMode"):
        return _one_of(get_args(LaunchMode), "a launch mode")
    return _int(1)


# The case: Case's fields (its own types and ranges, each checked by the rule the ops or Case apply);
# those of case.LATER_FIELDS are written only where they differ from their defaults.
_CASE_CHECKS: dict[str, Check] = {
    "B": _int(1), "T": _int(0), "H": _int(1), "HV": _int(1),
    "K": _via(check_dim, _int(1)), "V": _via(check_dim, _int(1)), "BT": _via(check_chunk_size, _int(1)),
    "cu_seqlens": _nullable(_int_list), "dtype": _one_of(DTYPES, "a dtype"), "use_g": _bool,
    "dist": _one_of(DISTRIBUTIONS, "an input distribution"), "seed": _int(0), "knobs": _object,
    "backend": _nullable(_one_of(BACKENDS, "a backend")), "corruption": _nullable(_one_of(CORRUPTIONS, "a corruption")),
    "corrupt_at": _int(0), "chunk_indices": _bool, "memory": _object, "device": _nullable(_one_of(DEVICES, "a device")),
    "beta_dtype": _nullable(_one_of(DTYPES, "a dtype")), "g_dtype": _nullable(_one_of(DTYPES, "a dtype")),
    "index_dtype": _one_of(INDEX_DTYPES, "an index dtype"), "offset": _int(0),
    "subject": _non_empty,  # a subject's name, resolved by _subject_of
    "before": _calls,  # each call checked as a case itself (_check_case)
}
CASE_FIELDS: dict[str, Field] = {
    name: Field(check, required=name not in LATER_FIELDS,
                fields={knob: Field(_knob_check(knob), required=False) for knob in LAUNCH_KNOBS}
                if name == "knobs" else None)
    for name, check in _CASE_CHECKS.items()
}
CALL_FIELDS = {name: f for name, f in CASE_FIELDS.items() if name != "before"}  # an earlier call has none of its own
FAILURE_FIELDS: dict[str, Field] = {
    "type": Field(_non_empty),  # the exception's class name
    "message": Field(_string),
    "metrics": Field(_object),
    "traceback": Field(_nullable(_string)),
    # crash and timeout files (runner.CaseLost's detail)
    "signal": Field(_nullable(_string), required=False),
    "exitcode": Field(_typed((int,), "an int"), required=False),
    "limit_s": Field(_positive_number, required=False),
    "log": Field(_string, required=False),
}
VERSIONS_FIELDS: dict[str, Field] = {
    **{name: Field(_nullable(_string)) for name in ("wy_ascend", "torch", "triton", "python", "hypothesis")},
    "fla-core": Field(_nullable(_string), required=False),  # fla-core's files of before subject records held it
}
FILE_FIELDS: dict[str, Field] = {
    "schema_version": Field(_version_1),
    "property": Field(_one_of(PROPERTIES, "a known property")),
    "case": Field(_object, fields=CASE_FIELDS),
    "failure": Field(_object, fields=FAILURE_FIELDS),
    "backend": Field(_one_of(BACKENDS, "a known backend")),
    "versions": Field(_object, fields=VERSIONS_FIELDS),
    "date": Field(_date),
    # a foreign subject's name and version (module doc): present exactly when case.subject is foreign
    "subject": Field(_object, required=False, fields={"name": Field(_non_empty), "version": Field(_nullable(_string)),
                                                       "loaded": Field(_string, required=False),
                                                       "distribution": Field(_nullable(_string), required=False)}),
    # the mark of a subject's own defect (module doc)
    "known": Field(_object, required=False, fields={"reason": Field(_non_empty)}),
}


def _bad(path: Path, field: str, problem: str) -> RegressionFileError:
    return RegressionFileError(f"{path}: field {field!r} {problem}")


def _check_object(path: Path, obj: dict[str, Any], fields: dict[str, Field], prefix: str = "") -> None:
    """Every field of ``obj`` against its table: required ones present, no other, each value checked."""
    unknown = sorted(set(obj) - set(fields))
    if unknown:
        raise _bad(path, prefix + unknown[0], f"is not a field of schema version {SCHEMA_VERSION} here; "
                   f"known: {sorted(fields)}")
    for name, spec in fields.items():
        if name not in obj:
            if spec.required:
                raise _bad(path, prefix + name, "is missing")
            continue
        try:
            spec.check(obj[name])
        except (TypeError, ValueError) as e:
            raise _bad(path, prefix + name, str(e)) from e
        if spec.fields is not None:
            _check_object(path, obj[name], spec.fields, f"{prefix}{name}.")


def _contract(case: Case) -> None:
    """The ops' own validation (validation.validate) on tensors of the case's shapes and dtypes (zero-stride
    expansions of one element: nothing allocated), and the launch planner's rules on its knobs."""
    def arg(name: str, shape: tuple[int, ...]) -> torch.Tensor:
        elements = math.prod(shape)
        if elements > TENSOR_ELEMENTS:  # torch's expand raises a RuntimeError of its own past it
            raise ValueError(f"{name} would be of shape {shape}: {elements:,} elements, more than a tensor holds "
                             f"({TENSOR_ELEMENTS:,})")
        return torch.zeros((), dtype=case.dtype_of(name)).expand(shape)

    B, T, H, HV, K, V = case.B, case.T, case.H, case.HV, case.K, case.V
    cu = None if case.cu_seqlens is None else torch.tensor(case.cu_seqlens, dtype=case.dtype_of("cu_seqlens"))
    validate(arg("k", (B, T, H, K)), arg("v", (B, T, HV, V)), arg("beta", (B, T, HV)), arg("A", (B, T, HV, case.BT)),
             arg("g", (B, T, HV)) if case.use_g else None, cu, None, arg("dw", (B, T, HV, K)), arg("du", (B, T, HV, V)))
    backend = BACKENDS[case.backend or "cpu"]
    config = case.config(**{"num_cores": 1, **case.knobs})  # the planner's view needs a core count
    backend.spec(torch.device("cpu"), config)


def _normal_case(path: Path, stored: dict[str, Any], where: str) -> Case:
    """The stored case (at ``where`` in the file) as Case reads it, refused where Case would store it otherwise,
    where it breaks Case's own rules or where it is outside the ops' contract."""
    try:
        case = Case.from_dict(stored)
    except (TypeError, ValueError) as e:
        raise _bad(path, where, f"is not a valid case: {e}") from e
    normal = case.to_dict()
    for name in sorted(set(stored) | set(normal)):
        if stored.get(name, LATER_FIELDS.get(name)) != normal.get(name, LATER_FIELDS.get(name)):
            raise _bad(path, f"{where}.{name}", f"is {_show(stored.get(name))}, but the case's other fields make it "
                       f"{_show(normal.get(name))}: a writer never stores it so")
        if name in stored and name not in normal:
            raise _bad(path, f"{where}.{name}", f"is at its default {_show(stored[name])}, which a writer leaves out")
    try:
        _contract(case)
    except (TypeError, ValueError) as e:
        raise _bad(path, where, f"is outside the ops' contract: {e}") from e
    return case


def _check_case(path: Path, data: dict[str, Any]) -> Case:
    """The stored case as Case reads it, refused where Case would store it otherwise (a field Case
    normalizes, e.g. T against cu_seqlens, or a later field written at its default), where it breaks
    Case's own rules or the ops' contract, or where its subject disagrees with the file's."""
    stored = data["case"]
    _subject_of(path, data)
    for i, call in enumerate(stored.get("before", [])):  # each earlier call of a history case, as a case
        _check_object(path, call, CALL_FIELDS, f"case.before[{i}].")
        _normal_case(path, call, f"case.before[{i}]")
    case = _normal_case(path, stored, "case")
    # the two names agree by now (_subject_of): what is left is whether a record belongs here at all
    if subjects.get(case.subject).foreign != ("subject" in data):
        raise _bad(path, "subject", f"is {_show(data.get('subject'))}, but field 'case.subject' is {case.subject!r} "
                   "(a foreign subject's file names it, wy_ascend's does not)")
    if case.backend is not None and data["backend"] != case.backend:
        raise _bad(path, "backend", f"is {data['backend']!r}, but field 'case.backend' is {case.backend!r} "
                   "(the backend a case asks for is the one it was found on)")
    return case


def _subject_of(path: Path, data: dict[str, Any]) -> None:
    """Load the file's subject: by its name, else the way the file says it was loaded (an import path);
    SubjectUnavailableError saying how to get it where neither works. A file whose two names of its subject
    disagree (field 'subject' names another, or is missing for a subject other than wy_ascend) is malformed,
    refused naming 'case.subject' before any load is tried: no install would make it replay."""
    name = data["case"].get("subject", subjects.DEFAULT)
    record: dict[str, Any] = data["subject"] if isinstance(data.get("subject"), dict) else {}
    if record.get("name", subjects.DEFAULT) != name:
        where = f"field 'subject' names {record['name']!r}" if record else "the file has no field 'subject'"
        raise _bad(path, "case.subject", f"is {name!r}, but {where} (a foreign subject's file names its subject "
                   "in both, wy_ascend's in neither)")
    how = str(record.get("loaded") or "")
    try:
        subjects.get(name)
        return
    except (ValueError, ImportError) as e:
        error: Exception = e
    if how.startswith("import path "):
        try:
            subjects.load(how.removeprefix("import path "))
            if name in subjects.SUBJECTS:
                return
        except (ValueError, ImportError) as e:
            error = e
    dist, version = record.get("distribution"), record.get("version")
    install = f"pip install '{dist}=={version}'" if dist and version else f"pip install {dist}" if dist else \
        "install the package that declares it"
    where = how or "no record of how it was loaded"
    raise SubjectUnavailableError(f"{path}: subject {name!r} is not available here ({where}): {error}; {install} (it "
                                  f"declares the entry point in group {subjects.ENTRY_POINT_GROUP})")


def load(path: Path | str) -> StoredCase:
    """Read a regression file back, validated as input: every field of schema version 1 by its table
    (types, ranges, no unknown field), the case by Case's and the ops' own rules, and the name by the
    hash of the content. Anything else raises RegressionFileError naming the file and the field."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise RegressionFileError(f"{path}: cannot read the file: {e}") from e
    try:
        data = json.loads(text, parse_constant=lambda name: _reject_constant(path, name))
    except json.JSONDecodeError as e:
        raise RegressionFileError(f"{path}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from e
    if not isinstance(data, dict):
        raise RegressionFileError(f"{path}: expected a JSON object at the top level, got {type(data).__name__}")
    if "schema_version" not in data:  # first: a file of another version is refused as such, whatever else it holds
        raise _bad(path, "schema_version", "is missing")
    _check_object(path, {"schema_version": data["schema_version"]}, {"schema_version": FILE_FIELDS["schema_version"]})
    _check_object(path, data, FILE_FIELDS)
    case = _check_case(path, data)
    expected = file_name(data["property"], data["case"], data["failure"]["type"])
    if path.name != expected:
        prefix, named = expected.split("-")[0], path.name.split("-")[0]
        lost = data["failure"]["type"] in LOST_KINDS or named in LOST_KINDS.values()
        which = ("field 'failure.type' does" if lost else "field 'property' does") if prefix != named else \
            "fields 'property' and 'case' do"
        raise RegressionFileError(f"{path}: {which} not match the file's name: the property, case and failure type "
                                  f"make {expected} (a stored file is never edited: regressions/README.md)")
    return StoredCase(path, data["schema_version"], data["property"], case, data["failure"], data["backend"],
                      data["versions"], data["date"], data.get("known"))


def _reject_constant(path: Path, name: str) -> None:
    raise RegressionFileError(f"{path}: invalid JSON: {name} is not a JSON number (non-finite numbers are "
                              "stored as the strings \"inf\", \"-inf\", \"nan\")")


def iter_store(directory: Path | str | None = None) -> list[Path]:
    """The store's regression files (``*.json``, no hidden temp files), sorted by name."""
    directory = Path(directory) if directory is not None else regressions_dir()
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("*.json") if not p.name.startswith("."))


# The most (chunk, value head) tasks a replay runs on an interpreting backend: ~5 ms a task and op there, so
# about a minute and a half; the H200 nightly's million-token find (65,536 tasks) took 6 minutes on the cpu.
# Counted in tasks of one 64-wide K tile and one V tile, op run by op run (``interpreter_tasks``): an H200
# varlen_split find of 4,320 tasks at K=256, packed and each sequence alone, took 4 min 16 s on the cpu.
INTERPRETER_TASKS = 8192


def interpreter_tasks(prop: str, case: Case) -> float:
    """The interpreter's work of replaying property ``prop`` on ``case`` in tasks of one 64-wide K tile and
    one V tile (INTERPRETER_TASKS): its (chunk, value head) tasks, times its tiles per task against those
    two, times the op runs of the property."""
    tiles = (-(-case.K // 64) + -(-case.V // 64)) / 2
    return len(case.chunk_bounds()) * case.HV * tiles * (2 if prop in OPS_TWICE else 1)


def unavailable(stored: StoredCase, backend: str, subject: str | None = None) -> str | None:
    """Why the stored case cannot run on ``backend`` by what it is, whatever this machine has (a
    perf file times a device, which an interpreting backend has none of; a subject runs on its
    own backends only), or None where it can. A replay reports it UNAVAILABLE, not a failure."""
    if stored.property == "perf" and BACKENDS[backend].interpret:
        return f"a perf case times a device; backend {backend!r} has none (the device nightly replays it)"
    if stored.property == "history" and (why := history.refuses(backend)) is not None:
        return why
    tasks = interpreter_tasks(stored.property, stored.case)
    # index_width runs real sizes on purpose: on the interpreter it audits only the programs with the largest addresses;
    # plan_coverage builds no tensor and launches nothing (its cases are large: the cpu fuzz writes them so)
    if BACKENDS[backend].interpret and stored.property not in ("index_width", *NO_TENSORS) and tasks > INTERPRETER_TASKS:
        return (f"{tasks:g} (chunk, value head) tasks of 64-wide tiles are past the interpreter's {INTERPRETER_TASKS} "
                "(minutes a call); a device replays it (a failure confined to one chunk is stored as that chunk too: "
                "Case.block)")
    runs_on = subjects.get(subject or stored.case.subject).backends
    if backend not in runs_on:
        return f"subject {subject or stored.case.subject!r} runs on the backends {list(runs_on)}, not {backend!r}"
    return None


def missing(stored: StoredCase, backend: str, subject: str | None = None) -> str | None:
    """What the stored case needs on ``backend`` that this environment lacks, with how to install it: a
    foreign subject's package (its declaration's ``distribution``), for its own case or as the differential
    property's peer (fla-core's kernels of the platform); None where nothing is missing. A replay reports it
    MISSING, not run (a subject whose declaration cannot be loaded at all: ``load``'s SubjectUnavailableError)."""
    name = subject or stored.case.subject
    peer = subjects.get(subjects.PLATFORM_PEERS[backend]) if backend in subjects.PLATFORM_PEERS else None
    needs = subjects.get(name) if subjects.get(name).foreign else peer if stored.property == "differential" else None
    if needs is None or needs.installed_version is not None or backend not in needs.backends:
        return None
    why = f"subject {name!r}" if needs.name == name else f"the differential property's peer {needs.name!r}"
    how = f"python install.py {EXTRA_OF[backend]} --upstream (or --dev)" if needs.distribution == "fla-core" else \
        f"pip install {needs.distribution}"
    return f"{needs.distribution} is not installed, and {why} is its kernels: {how}"


EXTRA_OF = {"cpu": "cpu", "cuda": "cuda", "npu-cuda": "cuda", "npu": "npu"}  # install.py's name of each backend


def fails_as_recorded(failure: Mapping[str, Any], error: BaseException) -> bool:
    """Whether ``error`` is the failure a file recorded: of its type or a subclass of it, or, where it
    recorded a device fault, any device fault (runner.device_fault). A fault surfaces wherever the device
    reports it: fla's illegal address was recorded as Triton's RuntimeError from a launch and came back in
    an H200 nightly as torch's AcceleratorError from a synchronize."""
    if failure["type"] in {cls.__name__ for cls in type(error).__mro__}:
        return True
    return names_device_fault(failure["type"], failure.get("message", "")) and device_fault(error)


class KnownDefectFixed(Exception):
    """A file marked known no longer fails as recorded: its defect is gone (module doc)."""


def replay(stored: StoredCase, backend: str | None = None, runner: CaseRunner | None = None,
           subject: str | None = None) -> Metrics:
    """Run the stored property on the stored case; ``backend`` and ``subject`` (if given) replace
    the case's own. Raises PropertyFailure (or the exception the case raised) if it still fails.
    With ``runner`` the case runs in its child process (``runner.CaseRunner``), so a case
    that crashes or hangs raises CaseCrashed/CaseTimeout instead of taking this process down.

    A file marked known, replayed on its own subject, inverts that: it returns ``{"known": {reason,
    still_fails}}`` while it fails as recorded (``fails_as_recorded``) and raises KnownDefectFixed
    when it passes on the backend it was found on; on another backend a pass says nothing of the
    defect (TF32 dots exist on a GPU only): its metrics, with ``known_elsewhere`` naming that backend."""
    case = stored.case.on(backend) if backend else stored.case
    case = case.of(subject) if subject else case

    def run() -> Metrics:
        if runner is not None:
            return runner.run(stored.property, case).metrics
        return run_property(stored.property, case)

    if stored.known is None or case.subject != stored.case.subject:
        return run()
    try:
        metrics = run()
    except Exception as e:  # noqa: BLE001 - the known failure, or another one (re-raised)
        if not fails_as_recorded(stored.failure, e):
            raise
        return {"known": {"reason": stored.known["reason"], "still_fails": f"{type(e).__name__}: {e}"[:500]}}
    if (case.backend or "cpu") != stored.backend:
        return {**metrics, "known_elsewhere": {"reason": stored.known["reason"], "found_on": stored.backend}}
    raise KnownDefectFixed(
        f"{stored.path} is marked known ({stored.known['reason']}) but no longer fails on subject {case.subject} "
        f"{subjects.get(case.subject).installed_version}: the defect is gone; remove the file's 'known' mark (and "
        f"the file once the fix is released) and its Known entry in the subject's declaration. Metrics now: "
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
    from .properties import FP32_RTOL, LOW_PRECISION_FACTOR

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
        elif (dtype == "float32" and isinstance(s_now, (int, float)) and cur["tol"] > FP32_RTOL
              and math.isclose(cur["tol"], LOW_PRECISION_FACTOR * s_now, rel_tol=1e-9)):
            why = (f"the float32 bound is LOW_PRECISION_FACTOR x the rounding sensitivity {s_now:.3e} "
                   f"(properties.error_bounds: the output cancels){since}")
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
    dtypes = case.dtype + "".join(f" {name}={d}" for name, d in (("beta", case.beta_dtype), ("g", case.g_dtype)) if d)
    parts = [layout, f"H={case.H} HV={case.HV} K={case.K} V={case.V} BT={case.BT}", dtypes,
             "gate" if case.use_g else "no gate", f"dist={case.dist} seed={case.seed}"]
    if case.memory:
        parts.append("memory=" + ",".join(f"{k}:{v}" for k, v in sorted(case.memory.items())))
    if case.knobs:
        parts.append("knobs=" + ",".join(f"{k}={v}" for k, v in sorted(case.knobs.items())))
    if case.corruption:
        parts.append(f"corruption={case.corruption}")
    if case.backend:
        parts.append(f"backend={case.backend}")
    if subjects.get(case.subject).foreign:
        parts.append(f"subject={case.subject}")
    if case.before:
        parts.append(f"after {len(case.before)} calls")
    return " ".join(parts)
