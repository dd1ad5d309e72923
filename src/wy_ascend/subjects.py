"""Subjects: the implementations of the WY ops the fuzz suite tests, declared as data (public API).

A subject is declared once, by whoever writes the kernel, as a ``Subject``: its name and version,
the ops it implements (``recompute_w_u_fwd`` alone, or with ``prepare_wy_repr_bwd``), how the suite's
canonical arguments map onto its call (``Calling``), what it claims to take (``Claims``), which target
semantics the cpu backend's interpreter applies to its kernels (``Target``) and its known defects
(``Known``: a stored file and a predicate over the cases it covers, as data). Every field is checked
when the declaration is made, with an error naming the field (``DeclarationError``). ``SCHEMA`` is the
version of this API; a declaration states the one it was written for.

The suite's canonical call (this project's conventions): k [B,T,H,K], v [B,T,HV,V], beta and g
[B,T,HV] with g in log2 units (the kernels take ``exp2(g)``), A [B,T,HV,BT] in k's dtype, dw, du like
w, u, optional cu_seqlens and chunk_indices (wy_ascend's format); ``Subject.ops`` turns that call into
the subject's own (``Calling``) and its results back.

Loading (``load``, ``get``): a subject is named by

* a built-in name (``wy_ascend``, ``fla-ascend``, ``fla``: declared in ``wy_ascend.builtin_subjects``
  with this API and registered as entry points like anyone's),
* an entry point of group ``wy_ascend.subjects`` (its name is the subject's),
* an import path ``package.module:attribute`` naming a ``Subject``.

``--subject`` and ``WY_ASCEND_SUBJECT`` take any of these. A subject loaded by import path is noted in
``WY_ASCEND_SUBJECT_PATHS`` so that the processes the suite starts (case runners, history servers)
resolve its name alike. ``Subject.loaded`` says how a subject was found, for the store.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import dataclasses
import importlib
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import torch

from .backends import BACKENDS, LaunchConfig, check_available
from .interpreter import RULES as ASCEND_RULES
from .validation import MAX_DIM, SUPPORTED_BT

SCHEMA = 1  # the version of this declaration API
ENTRY_POINT_GROUP = "wy_ascend.subjects"
PATHS_ENV = "WY_ASCEND_SUBJECT_PATHS"  # import paths loaded in this process tree, comma-separated
DEFAULT = "wy_ascend"
# The built-in subjects, resolved by the same loader as anyone's (also registered as entry points).
BUILTIN = {
    "wy_ascend": "wy_ascend.builtin_subjects:WY_ASCEND",
    "fla-ascend": "wy_ascend.builtin_subjects:FLA_ASCEND",
    "fla": "wy_ascend.builtin_subjects:FLA",
}

DTYPE_NAMES = ("float32", "bfloat16", "float16")
FWD_ARGS = ("k", "v", "beta", "A", "g", "cu_seqlens", "chunk_indices")
BWD_ARGS = ("k", "v", "beta", "A", "dw", "du", "g", "cu_seqlens", "chunk_indices")
GATE_UNITS = ("log2", "ln", "none")
GATE_LAYOUTS = ("token", "head")
A_DTYPES = ("k", *DTYPE_NAMES)
CHUNK_INDICES = ("optional", "inside", "prebuilt")
KNOBS = tuple(f.name for f in dataclasses.fields(LaunchConfig))
# The rules each targeted triton-ascend version calls for (the one this project's emulation is calibrated on).
TRITON_ASCEND_RULES = {"3.2": ASCEND_RULES}

Forward = Callable[..., tuple[torch.Tensor, torch.Tensor]]
Backward = Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]]


class DeclarationError(ValueError):
    """A subject's declaration is malformed; the message names the field and what it must be."""


def _bad(where: str, name: str, expected: str, got: Any) -> DeclarationError:
    return DeclarationError(f"{where}.{name} must be {expected}, got {got!r}")


def _names(where: str, name: str, value: Any, allowed: tuple[Any, ...] | frozenset[Any], empty: bool = False) -> None:
    if not isinstance(value, (tuple, frozenset)) or (not value and not empty) or not set(value) <= set(allowed):
        raise _bad(where, name, f"a {'possibly empty' if empty else 'non-empty'} tuple of {sorted(allowed)}", value)


def _flag(where: str, name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise _bad(where, name, "True or False", value)


@dataclass(frozen=True)
class Claims:
    """What a subject claims to take; the fuzz strategies draw nothing else for it, so every failure is a
    defect of the subject, not a call it never promised to take.

    ``dtypes``: k's dtypes; ``chunk_sizes``: the BT it takes (of the oracle's, validation.SUPPORTED_BT);
    ``dims``: the K and V it takes (an inclusive range within the oracle's [1, validation.MAX_DIM]),
    ``pow2_dims`` only powers of two in it; ``head_ratios``: the HV/H it takes (None: any);
    ``varlen`` / ``fixed``: packed batches (B = 1 with cu_seqlens) / fixed-length batches; ``gate_dtypes``:
    beta and g may have a dtype other than k's; ``strided``: arguments may be non-contiguous views;
    ``validates``: a malformed call raises a TypeError/ValueError naming the argument (bad_input runs only
    then); ``knobs``: the launch knobs it takes (``LaunchConfig`` fields; None: every one); ``zero_dead_A``:
    it reads A's columns past a partial chunk's end and needs them zero (as fla's ``solve_tril`` writes them);
    ``gateless``: it takes calls without a gate (g None) beside gated ones (False: every call passes g)."""

    dtypes: tuple[str, ...] = DTYPE_NAMES
    chunk_sizes: tuple[int, ...] = SUPPORTED_BT
    dims: tuple[int, int] = (1, MAX_DIM)
    pow2_dims: bool = False
    head_ratios: tuple[int, ...] | None = None
    varlen: bool = True
    fixed: bool = True
    gate_dtypes: bool = True
    strided: bool = True
    validates: bool = True
    knobs: tuple[str, ...] | None = None
    zero_dead_A: bool = False
    gateless: bool = True

    def __post_init__(self) -> None:
        _names("Claims", "dtypes", self.dtypes, DTYPE_NAMES)
        _names("Claims", "chunk_sizes", self.chunk_sizes, SUPPORTED_BT)
        lo_hi = self.dims
        if not (isinstance(lo_hi, tuple) and len(lo_hi) == 2 and all(isinstance(d, int) for d in lo_hi)
                and 1 <= lo_hi[0] <= lo_hi[1] <= MAX_DIM):
            raise _bad("Claims", "dims", f"(low, high) with 1 <= low <= high <= {MAX_DIM}", lo_hi)
        if self.pow2_dims and not any(d & (d - 1) == 0 and d >= 16 for d in range(lo_hi[0], lo_hi[1] + 1)):
            raise _bad("Claims", "dims", "a range holding a power of two of at least 16 (pow2_dims)", lo_hi)
        if self.head_ratios is not None and (not isinstance(self.head_ratios, tuple) or not self.head_ratios or not all(
                isinstance(r, int) and r >= 1 for r in self.head_ratios)):
            raise _bad("Claims", "head_ratios", "None or a non-empty tuple of positive ints", self.head_ratios)
        for name in ("pow2_dims", "varlen", "fixed", "gate_dtypes", "strided", "validates", "zero_dead_A",
                     "gateless"):
            _flag("Claims", name, getattr(self, name))
        if not (self.varlen or self.fixed):
            raise _bad("Claims", "varlen", "True where fixed is False (a subject takes some batch)", self.varlen)
        if self.knobs is not None:
            _names("Claims", "knobs", self.knobs, KNOBS, empty=True)

    def takes(self, knob: str) -> bool:
        """Whether the subject takes launch knob ``knob`` (``knobs``; None: every one)."""
        return self.knobs is None or knob in self.knobs


@dataclass(frozen=True)
class Calling:
    """How the canonical arguments (module doc) map onto the subject's own call.

    ``forward`` / ``backward``: the canonical names the op takes positionally, in its order; ``keywords``:
    canonical name -> the subject's keyword for those it takes by keyword (keyword-only ones too). A
    canonical argument in neither is not passed (g where ``gate_units`` is "none", chunk_indices where they
    are computed inside, cu_seqlens of a subject that takes fixed batches only). ``gate_units``: "log2"
    (``exp2(g)``), "ln" (``exp(g)``: the suite passes ``g * ln 2``; its dg is then the canonical dg
    unchanged) or "none" (no gate: the suite draws none). ``gate_layout``: beta and g as [B,T,HV] ("token")
    or [B,HV,T] ("head"; dbeta and dg come back so). ``g_dtype``: the dtype g is always passed in (None:
    as drawn). ``A_dtype``: "k" (k's dtype) or a dtype name. ``chunk_indices``: "optional" (passed where a
    case passes them, in wy_ascend's format), "inside" (never passed), "prebuilt" (always passed with a
    packed batch, made by ``prepare_chunk_indices(cu_seqlens, BT)`` in the subject's own format: a callable or
    an import path).
    ``chunk_size``: the keyword the subject takes BT by (None: it reads it from A). ``backend`` and
    ``config``: the keywords the subject takes the backend's name and the launch knobs (a ``LaunchConfig``)
    by, where it takes them."""

    forward: tuple[str, ...] = ("k", "v", "beta", "A")
    backward: tuple[str, ...] = ("k", "v", "beta", "A", "dw", "du")
    keywords: Mapping[str, str] = field(default_factory=lambda: {"g": "g", "cu_seqlens": "cu_seqlens",
                                                                 "chunk_indices": "chunk_indices"})
    gate_units: str = "log2"
    gate_layout: str = "token"
    g_dtype: str | None = None
    A_dtype: str = "k"
    chunk_indices: str = "optional"
    prepare_chunk_indices: Callable[[torch.Tensor, int], torch.Tensor] | str | None = None
    chunk_size: str | None = None
    backend: str | None = None
    config: str | None = None

    def __post_init__(self) -> None:
        for op, canonical in (("forward", FWD_ARGS), ("backward", BWD_ARGS)):
            value = getattr(self, op)
            if not isinstance(value, tuple) or not set(value) <= set(canonical) or len(set(value)) != len(value):
                raise _bad("Calling", op, f"a tuple of distinct names of {list(canonical)}", value)
        if not isinstance(self.keywords, Mapping) or not set(self.keywords) <= set(BWD_ARGS) or not all(
                isinstance(v, str) and v.isidentifier() for v in self.keywords.values()):
            raise _bad("Calling", "keywords", f"a mapping of names of {list(BWD_ARGS)} to identifiers", self.keywords)
        for op, canonical in (("forward", FWD_ARGS), ("backward", BWD_ARGS)):
            twice = set(getattr(self, op)) & {n for n in self.keywords if n in canonical}
            if twice:
                raise _bad("Calling", "keywords", f"names not also positional in {op} ({sorted(twice)} are)",
                           dict(self.keywords))
        for name, choices in (("gate_units", GATE_UNITS), ("gate_layout", GATE_LAYOUTS), ("A_dtype", A_DTYPES),
                              ("chunk_indices", CHUNK_INDICES)):
            if getattr(self, name) not in choices:
                raise _bad("Calling", name, f"one of {list(choices)}", getattr(self, name))
        if self.g_dtype is not None and self.g_dtype not in DTYPE_NAMES:
            raise _bad("Calling", "g_dtype", f"None or one of {list(DTYPE_NAMES)}", self.g_dtype)
        given = callable(self.prepare_chunk_indices) or (isinstance(self.prepare_chunk_indices, str)
                                                          and _is_import_path(self.prepare_chunk_indices))
        if (self.chunk_indices == "prebuilt") != given:
            raise _bad("Calling", "prepare_chunk_indices", "a callable (cu_seqlens, BT) -> tensor, or its import path, "
                       "exactly when chunk_indices is 'prebuilt'", self.prepare_chunk_indices)
        for name in ("chunk_size", "backend", "config"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, str) and value.isidentifier()):
                raise _bad("Calling", name, "None or a keyword name", value)
        for needed, why in (("k", "forward"), ("v", "forward"), ("beta", "forward"), ("A", "forward")):
            if needed not in self.forward and needed not in self.keywords:
                raise _bad("Calling", "forward", f"a mapping that passes {needed!r} ({why} takes it)", self.forward)
        if self.gate_units != "none" and "g" not in self.forward and "g" not in self.keywords:
            raise _bad("Calling", "keywords", "a mapping that passes 'g' (gate_units is not 'none')", dict(self.keywords))
        if self.chunk_indices != "inside" and "chunk_indices" not in (*self.forward, *self.keywords):
            raise _bad("Calling", "keywords", f"a mapping that passes 'chunk_indices' (chunk_indices is "
                       f"{self.chunk_indices!r})", dict(self.keywords))

    def takes(self, name: str, op: str) -> bool:
        """Whether the op (``"fwd"``/``"bwd"``) takes canonical argument ``name``."""
        return name in (self.forward if op == "fwd" else self.backward) or name in self.keywords


@dataclass(frozen=True)
class Target:
    """The semantics the cpu backend's interpreter holds the subject's kernels to: ``device`` "ascend"
    (the Ascend emulation's ``rules``, of interpreter.py: ``ASCEND_RULES``, or those a triton-ascend
    version calls for, ``for_triton_ascend``) or "gpu" (none of them: a GPU's dots do not clobber). The
    rules of every device (out-of-bounds addresses, races, int32 wrap, a GPU's grid axes) hold for both.
    "host": the subject launches no Triton kernel (torch on the host): no interpreter rule applies, and
    neither do the properties that audit kernels (index_width's address audit, compiles). ``applied``
    False: the subject's launches set the emulation themselves (wy_ascend's, per launch:
    ``LaunchConfig.emulate``), and the suite applies none around its calls."""

    device: str = "ascend"
    rules: frozenset[str] = ASCEND_RULES
    triton_ascend: str | None = None
    applied: bool = True

    def __post_init__(self) -> None:
        if self.device not in ("ascend", "gpu", "host"):
            raise _bad("Target", "device", "'ascend', 'gpu' or 'host'", self.device)
        _names("Target", "rules", self.rules, ASCEND_RULES, empty=True)
        if self.device != "ascend" and self.rules:
            raise _bad("Target", "rules", f"empty for a {self.device!r} target (the Ascend rules are Ascend's)",
                       self.rules)
        if self.triton_ascend is not None and self.triton_ascend not in TRITON_ASCEND_RULES:
            raise _bad("Target", "triton_ascend", f"None or one of {sorted(TRITON_ASCEND_RULES)}", self.triton_ascend)
        _flag("Target", "applied", self.applied)

    @staticmethod
    def for_triton_ascend(version: str, applied: bool = True) -> Target:
        """The Ascend target of a triton-ascend version (``TRITON_ASCEND_RULES``)."""
        if version not in TRITON_ASCEND_RULES:
            raise _bad("Target", "triton_ascend", f"one of {sorted(TRITON_ASCEND_RULES)}", version)
        return Target("ascend", TRITON_ASCEND_RULES[version], version, applied)


GPU = Target("gpu", frozenset())
HOST = Target("host", frozenset())

# ----------------------------------------------------------------------------- known defects as data

# What a known defect's ``covers`` may name of a call (``features``) and the functions it may call.
FEATURES = ("B", "T", "H", "HV", "K", "V", "BT", "dtype", "beta_dtype", "g_dtype", "use_g", "varlen", "chunk_indices",
            "index_dtype", "strided", "max_blocks", "num_cores", "backend", "changes_in_place", "corruption",
            "partial_chunk")
_CALLS = {"min": min, "max": max}
_NODES = (ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.BinOp, ast.Add, ast.Sub,
          ast.Mult, ast.Pow, ast.FloorDiv, ast.Mod, ast.Compare, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE,
          ast.In, ast.NotIn, ast.Name, ast.Load, ast.Constant, ast.Tuple, ast.Call, ast.IfExp)
BLOCK_LIMIT = 65535  # max_blocks where a call sets none (the Ascend launch limit)


def _predicate(where: str, text: str) -> Any:
    """``text`` compiled as a predicate over ``FEATURES``; DeclarationError naming what it may not hold."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        raise _bad(where, "covers", "a Python expression over the case features", text) from e
    for node in ast.walk(tree):
        if not isinstance(node, _NODES):
            raise _bad(where, "covers", f"an expression of comparisons, arithmetic, and/or/not, min/max over "
                       f"{list(FEATURES)} (not {type(node).__name__})", text)
        if isinstance(node, ast.Name) and node.id not in FEATURES and node.id not in _CALLS:
            raise _bad(where, "covers", f"an expression over {list(FEATURES)} (unknown name {node.id!r})", text)
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in _CALLS):
            raise _bad(where, "covers", "an expression calling only min and max", text)
    return compile(tree, f"<{where}.covers>", "eval")


def changes_in_place(case: Any) -> bool:
    """Whether a history case's calls change a cu_seqlens object in place that an earlier call passed (the
    sharing of testing/history.py ``run_sequence``: one tensor per entry count and dtype, passed where the
    call lays it out contiguously)."""
    seen: dict[tuple[int, str], tuple[int, ...]] = {}
    for call in (*case.before, case):
        if call.cu_seqlens is None or "cu_seqlens" in call.memory:
            continue
        key = (len(call.cu_seqlens), call.index_dtype)
        if seen.setdefault(key, call.cu_seqlens) != call.cu_seqlens:
            return True
    return False


def features(call: Any, whole: Any) -> dict[str, Any]:
    """The features of one call (a ``testing.case.Case``) a known defect's ``covers`` reads; ``whole``: the
    case it belongs to (a history case's earlier calls belong to it). ``partial_chunk``: some sequence ends
    in a chunk of fewer than BT tokens."""
    name = lambda d: str(d).removeprefix("torch.")  # noqa: E731
    cu = call.cu_seqlens
    lengths = [e - s for s, e in zip(cu[:-1], cu[1:])] if cu is not None else [call.T]  # each sequence's tokens
    return {"B": call.B, "T": call.T, "H": call.H, "HV": call.HV, "K": call.K, "V": call.V, "BT": call.BT,
            "dtype": call.dtype, "beta_dtype": name(call.dtype_of("beta")), "g_dtype": name(call.dtype_of("g")),
            "use_g": call.use_g, "varlen": call.cu_seqlens is not None, "chunk_indices": bool(call.chunk_indices),
            "index_dtype": call.index_dtype, "strided": any(m != "offset" for m in call.memory.values()),
            "max_blocks": call.knobs.get("max_blocks", BLOCK_LIMIT), "num_cores": call.knobs.get("num_cores"),
            "backend": call.backend or "cpu", "changes_in_place": changes_in_place(whole),
            "corruption": call.corruption, "partial_chunk": any(n % call.BT for n in lengths)}


@dataclass(frozen=True)
class Known:
    """A defect of the subject at ``version`` that its store holds, marked known: ``file`` (the regression
    file's name, its top-level ``known`` mark set), the cases it fails as data, ``covers`` (an expression
    over ``FEATURES``, e.g. ``"min(K, V) < 16"``; None: every case of its properties), the ``properties``
    it fails (None: every one) and the ``backends`` it shows on (None: every one). The fuzz draws leave
    those cases out, so a run stays green while the defect persists; the file's replay says KNOWN while it
    fails as recorded and FIXED once it does not. Another version of the subject lifts the exclusion."""

    version: str
    file: str
    covers: str | None = None
    properties: frozenset[str] | None = None
    backends: frozenset[str] | None = None
    why: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.version, str) or not self.version:
            raise _bad("Known", "version", "the subject's version the defect was found in", self.version)
        if not isinstance(self.file, str) or not self.file.endswith(".json") or "/" in self.file:
            raise _bad("Known", "file", "a regression file's name (<property>-<hash>.json)", self.file)
        if self.covers is not None:
            if not isinstance(self.covers, str):
                raise _bad("Known", "covers", "None or an expression (a string)", self.covers)
            object.__setattr__(self, "_code", _predicate("Known", self.covers))
        for name in ("properties", "backends"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, frozenset) or not value or not all(
                    isinstance(v, str) for v in value)):
                raise _bad("Known", name, "None or a non-empty frozenset of names", value)
        if self.backends is not None and not self.backends <= set(BACKENDS):
            raise _bad("Known", "backends", f"backends of {sorted(BACKENDS)}", self.backends)

    def matches(self, prop: str, case: Any) -> bool:
        """Whether the defect covers ``case`` (a history case: it or any of its earlier calls) under ``prop``."""
        if self.properties is not None and prop not in self.properties:
            return False
        if self.backends is not None and (case.backend or "cpu") not in self.backends:
            return False
        return self.covers is None or any(
            bool(eval(self._code, {"__builtins__": {}}, {**_CALLS, **features(call, case)}))  # type: ignore[attr-defined]
            for call in (*case.before, case))


# ----------------------------------------------------------------------------- the declaration


@dataclass(frozen=True)
class Subject:
    """One implementation of the WY ops, declared (module doc).

    ``name``: how runs and stored files name it; ``forward`` / ``backward``: its ops, callables or import
    paths ``"package.module:function"`` (imported on first use, inside ``around``); ``backward`` None: it
    implements the forward only. ``backends``: those it runs on (``cpu``: under the interpreter, held to
    ``target``). ``version``: a string, or None to read ``distribution``'s installed version. ``around``:
    a context manager factory ``around(backend, config)`` its imports and calls run in (what a CPU lacks
    for its package; its own launch knobs). ``schema``: the API version the declaration was written for."""

    name: str
    forward: Callable[..., Any] | str
    backward: Callable[..., Any] | str | None = None
    backends: tuple[str, ...] = ("cpu",)
    calling: Calling = field(default_factory=Calling)
    claims: Claims = field(default_factory=Claims)
    target: Target = field(default_factory=Target)
    known: tuple[Known, ...] = ()
    version: str | None = None
    distribution: str | None = None
    about: str = ""
    around: Callable[[str, LaunchConfig | None], AbstractContextManager[Any]] | None = None
    schema: int = SCHEMA
    loaded: str = field(default="", compare=False)  # how it was found (``load``): not part of the declaration

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or any(c.isspace() or c in "/:" for c in self.name):
            raise _bad("Subject", "name", "a non-empty name without spaces, '/' or ':'", self.name)
        if self.schema != SCHEMA:
            raise _bad("Subject", "schema", f"{SCHEMA} (the declaration API this wy_ascend implements)", self.schema)
        for name in ("forward", "backward"):
            value = getattr(self, name)
            if (value is None and name == "backward") or callable(value):
                continue
            if not (isinstance(value, str) and _is_import_path(value)):
                raise _bad("Subject", name, "a callable or an import path 'package.module:function'"
                           + (" (or None: forward only)" if name == "backward" else ""), value)
        _names("Subject", "backends", self.backends, tuple(BACKENDS))
        for name, kind in (("calling", Calling), ("claims", Claims), ("target", Target)):
            if not isinstance(getattr(self, name), kind):
                raise _bad("Subject", name, f"a {kind.__name__}", getattr(self, name))
        if not isinstance(self.known, tuple) or not all(isinstance(k, Known) for k in self.known):
            raise _bad("Subject", "known", "a tuple of Known", self.known)
        files = [k.file for k in self.known]
        if len(set(files)) != len(files):
            raise _bad("Subject", "known", "one entry per file", files)
        if self.version is None and not self.distribution:
            raise _bad("Subject", "version", "a version string, or None with distribution set", self.version)
        if self.around is not None and not callable(self.around):
            raise _bad("Subject", "around", "None or a callable (backend, config) -> context manager", self.around)
        if not self.claims.gateless and self.calling.gate_units == "none":
            raise _bad("Subject", "claims", "gateless True where calling.gate_units is 'none' (it takes no gate)",
                       self.claims)
        if self.claims.varlen and "cu_seqlens" not in (*self.calling.forward, *self.calling.keywords):
            raise _bad("Subject", "calling", "a mapping that passes cu_seqlens (claims.varlen is True)", self.calling)

    @property
    def foreign(self) -> bool:
        """Not this project's ops: the properties tied to its internals skip it."""
        return self.name != DEFAULT

    @property
    def ops_implemented(self) -> tuple[str, ...]:
        """``("fwd",)`` or ``("fwd", "bwd")``."""
        return ("fwd",) if self.backward is None else ("fwd", "bwd")

    @property
    def gated(self) -> bool:
        """Whether it takes a gate g (``Calling.gate_units`` not "none")."""
        return self.calling.gate_units != "none"

    @property
    def forced_g_dtype(self) -> str | None:
        """The dtype its g always comes in: ``Calling.g_dtype``, float32 for natural-log gates (a gate rounded
        after its scaling by ln 2 would not be the one the oracle used), else None (as drawn)."""
        return self.calling.g_dtype or ("float32" if self.calling.gate_units == "ln" else None)

    @property
    def installed_version(self) -> str | None:
        """``version``, else ``distribution``'s installed version (None where it is not installed)."""
        if self.version is not None:
            return self.version
        try:
            return metadata.version(self.distribution or "")
        except metadata.PackageNotFoundError:
            return None

    def known_defect(self, prop: str, case: Any) -> Known | None:
        """Its known defect at its installed version covering ``case`` under ``prop``, if any."""
        version = self.installed_version
        return next((k for k in self.known if k.version == version and k.matches(prop, case)), None)

    def known_everywhere(self, prop: str) -> Known | None:
        """Its known defect at its installed version that every case of ``prop`` fails, if any."""
        version = self.installed_version
        return next((k for k in self.known if k.version == version and k.covers is None and k.backends is None
                     and k.properties is not None and prop in k.properties), None)

    def check(self, backend: str) -> None:
        """BackendUnavailableError/ValueError where the subject cannot run on ``backend`` here."""
        if backend not in self.backends:
            raise ValueError(f"subject {self.name!r} runs on the backends {list(self.backends)}, not {backend!r}")
        check_available(BACKENDS[backend])

    def ops(self, backend: str) -> tuple[Forward, Backward | None]:
        """(forward, backward) on ``backend`` in the canonical call (module doc): ``forward(k, v, beta, A, g=None,
        cu_seqlens=None, chunk_indices=None, *, config=None) -> (w, u)``, ``backward(k, v, beta, A, dw, du, g=None,
        cu_seqlens=None, chunk_indices=None, *, config=None) -> (dk, dv, dbeta, dg)``; backward None where the
        subject implements the forward only."""
        self.check(backend)
        return _adapter(self, backend, "fwd"), (_adapter(self, backend, "bwd") if self.backward is not None else None)

    def context(self, backend: str, config: LaunchConfig | None) -> AbstractContextManager[Any]:
        """What its imports and calls on ``backend`` run in: on the cpu its target's semantics (the
        interpreter loaded first), and its own ``around``."""
        return _context(self, backend, config)


def _is_import_path(text: str) -> bool:
    module, _, attribute = text.partition(":")
    return bool(module) and bool(attribute) and all(p.isidentifier() for p in (*module.split("."), *attribute.split(".")))


def _import(path: str) -> Any:
    module, _, attribute = path.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attribute.split("."):
        obj = getattr(obj, part)
    return obj


@contextlib.contextmanager
def _context(subject: Subject, backend: str, config: LaunchConfig | None) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        if backend == "cpu" and subject.target.device != "host":
            from .backends import kernel_for
            from .interpreter import ascend_semantics

            kernel_for(BACKENDS["cpu"], "fwd")  # TRITON_INTERPRET and the emulation hooks, before its kernels load
            if subject.target.applied:
                stack.enter_context(ascend_semantics(subject.target.device == "ascend" and bool(subject.target.rules),
                                                     subject.target.rules))
        if subject.around is not None:
            stack.enter_context(subject.around(backend, config))
        yield


_RESOLVED: dict[tuple[str, str], Callable[..., Any]] = {}  # (import path, backend) -> the function imported


def _resolved(subject: Subject, op: str, backend: str) -> Callable[..., Any]:
    """The subject's function of ``op``; an import path imported for ``backend`` on first use (inside its context)."""
    fn = subject.forward if op == "fwd" else subject.backward
    if isinstance(fn, str) and (fn, backend) in _RESOLVED:
        return _RESOLVED[fn, backend]
    if isinstance(fn, str):
        path = fn
        with subject.context(backend, None):
            try:
                fn = _import(fn)
            except (ImportError, AttributeError) as e:
                raise ImportError(f"subject {subject.name!r}: cannot import its {op} {fn!r} ({e})"
                                  + (f"; install {subject.distribution}" if subject.distribution else "")) from e
        _RESOLVED[path, backend] = fn
    assert callable(fn)
    return fn


_LN2 = 0.6931471805599453
# Set by ``zeros_converted``: how the adapter makes the converted copy of a large argument of zeros.
_ZEROS: contextvars.ContextVar[tuple[Callable[[tuple[int, ...], torch.dtype], torch.Tensor], int] | None] = \
    contextvars.ContextVar("wy_ascend_zero_inputs", default=None)


@contextlib.contextmanager
def zeros_converted(make: Callable[[tuple[int, ...], torch.dtype], torch.Tensor], min_bytes: int) -> Iterator[None]:
    """Inside the block the arguments are zeros (the index-width audit's real sizes, testing/scaling.py): the
    adapter's conversions of one of at least ``min_bytes`` (a gate's units or dtype, A's dtype) take
    ``make(shape, dtype)`` (zeros, converted, are zeros) in the argument's memory order instead of writing a
    copy of GiBs."""
    token = _ZEROS.set((make, min_bytes))
    try:
        yield
    finally:
        _ZEROS.reset(token)


def _convert(x: torch.Tensor, dtype: torch.dtype, scale: float | None = None) -> torch.Tensor:
    """``x`` times ``scale`` (in float64 where x is, else float32) in ``dtype`` (``zeros_converted``)."""
    zeros = _ZEROS.get()
    if zeros is not None and x.numel() * max(x.element_size(), dtype.itemsize) >= zeros[1]:
        strides = x.stride()
        order = sorted(range(x.dim()), key=lambda d: -strides[d])
        base = zeros[0](tuple(x.shape[d] for d in order), dtype)
        return base.permute([order.index(d) for d in range(x.dim())])
    if scale is None:
        return x.to(dtype)
    return (x * scale if x.dtype == torch.float64 else x.float() * scale).to(dtype)


# What the adapter leaves out of a keyword call where it is None (absent: a fixed batch): the rest is passed
# as given, None too, so that an op's own check of a required argument sees it (bad_input).
_ABSENT_OK = frozenset({"cu_seqlens", "chunk_indices"})


def _adapter(subject: Subject, backend: str, op: str) -> Callable[..., Any]:
    """The subject's op ``op`` in the canonical call (``Subject.ops``), through its ``Calling``."""
    calling, target = subject.calling, subject.calling.forward if op == "fwd" else subject.calling.backward
    function = _resolved(subject, op, backend)  # imported now: a history server imports before it forks

    def call(k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, A: torch.Tensor, *rest: Any,
             config: LaunchConfig | None = None, **kw: Any) -> Any:
        names = ("dw", "du", "g", "cu_seqlens", "chunk_indices") if op == "bwd" else ("g", "cu_seqlens", "chunk_indices")
        args: dict[str, Any] = {"k": k, "v": v, "beta": beta, "A": A, **dict(zip(names, rest)), **kw}
        # Only tensors are converted: a malformed argument reaches the subject as given (bad_input).
        g: Any = args.get("g")
        cu: Any = args.get("cu_seqlens")
        BT = A.shape[-1] if isinstance(A, torch.Tensor) and A.dim() else None
        if isinstance(g, torch.Tensor):
            if calling.gate_units == "none":
                raise ValueError(f"subject {subject.name!r} takes no gate (gate_units 'none'), got g")
            dtype = getattr(torch, calling.g_dtype) if calling.g_dtype is not None else g.dtype
            if calling.gate_units == "ln" or dtype != g.dtype:
                g = _convert(g, dtype, _LN2 if calling.gate_units == "ln" else None)
        if calling.gate_layout == "head":
            args["beta"] = beta.transpose(1, 2) if isinstance(beta, torch.Tensor) and beta.dim() == 3 else beta
            g = g.transpose(1, 2) if isinstance(g, torch.Tensor) and g.dim() == 3 else g
        args["g"] = g
        if calling.A_dtype != "k" and isinstance(A, torch.Tensor) and A.dtype != getattr(torch, calling.A_dtype):
            args["A"] = _convert(A, getattr(torch, calling.A_dtype))
        if calling.chunk_indices == "inside":
            args["chunk_indices"] = None
        elif calling.chunk_indices == "prebuilt" and isinstance(cu, torch.Tensor) and BT is not None:
            prepare = calling.prepare_chunk_indices
            assert prepare is not None
            args["chunk_indices"] = (_import(prepare) if isinstance(prepare, str) else prepare)(cu, BT)
        positional = [args.get(n) for n in target]
        keywords = {calling.keywords[n]: args.get(n) for n in (FWD_ARGS if op == "fwd" else BWD_ARGS)
                    if n in calling.keywords and n not in target and (args.get(n) is not None or n not in _ABSENT_OK)}
        if calling.gate_units == "none":
            keywords.pop(calling.keywords.get("g", ""), None)
        if calling.chunk_size is not None:
            keywords[calling.chunk_size] = BT
        if calling.backend is not None:
            keywords[calling.backend] = backend
        if calling.config is not None:
            keywords[calling.config] = config
        with subject.context(backend, config):
            out = function(*positional, **keywords)
        return _canonical(out, op, calling, beta, g is not None)
    return call


def _canonical(out: Any, op: str, calling: Calling, beta: torch.Tensor, gated: bool) -> Any:
    """The subject's results in the canonical layouts: dbeta and dg [B,T,HV] again where it takes gates head-major."""
    if op == "fwd" or calling.gate_layout == "token" or not isinstance(out, tuple) or len(out) != 4:
        return out
    dk, dv, dbeta, dg = out
    back = lambda x: x.transpose(1, 2) if isinstance(x, torch.Tensor) and x.dim() == 3 else x  # noqa: E731
    return dk, dv, back(dbeta), back(dg) if gated else dg


# ----------------------------------------------------------------------------- loading


SUBJECTS: dict[str, Subject] = {}  # the subjects loaded in this process, by name


def _entry_points() -> dict[str, Any]:
    return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)}


def _register(subject: Any, how: str) -> Subject:
    if not isinstance(subject, Subject):
        raise DeclarationError(f"{how} must name a wy_ascend.subjects.Subject, got {type(subject).__name__}")
    subject = dataclasses.replace(subject, loaded=how)
    known = SUBJECTS.get(subject.name)
    if known is not None and known.loaded != how and known != subject:
        raise DeclarationError(f"{how} declares subject {subject.name!r}, already loaded from {known.loaded}")
    SUBJECTS.setdefault(subject.name, subject)
    return SUBJECTS[subject.name]


def load(spec: str) -> Subject:
    """The subject ``spec`` names (module doc: a built-in name, an entry point's name or an import path),
    loaded and registered; ValueError (DeclarationError for a malformed declaration) saying what is known."""
    if spec in SUBJECTS:
        return SUBJECTS[spec]
    if spec in BUILTIN:
        return _register(_import(BUILTIN[spec]), f"builtin {BUILTIN[spec]}")
    entries = _entry_points()
    if spec in entries:
        entry = entries[spec]
        dist = getattr(getattr(entry, "dist", None), "name", None)
        subject = _register(entry.load(), f"entry point {ENTRY_POINT_GROUP}:{spec}" + (f" ({dist})" if dist else ""))
        if subject.name != spec:
            raise DeclarationError(f"entry point {spec!r} of group {ENTRY_POINT_GROUP} declares subject "
                                   f"{subject.name!r}: name them alike")
        return subject
    if _is_import_path(spec):
        try:
            declared = _import(spec)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"subject {spec!r}: cannot import it ({type(e).__name__}: {e}); install the package "
                             "that provides it, or put it on sys.path") from e
        subject = _register(declared, f"import path {spec}")
        paths = [p for p in os.environ.get(PATHS_ENV, "").split(",") if p]
        if spec not in paths:  # the processes this one starts resolve the name alike
            os.environ[PATHS_ENV] = ",".join([*paths, spec])
        return subject
    raise ValueError(f"subject must be one of {sorted({*BUILTIN, *entries, *SUBJECTS})} (built in or entry points of "
                     f"group {ENTRY_POINT_GROUP}) or an import path 'package.module:name', got {spec!r}")


def get(name: str | None) -> Subject:
    """The subject called ``name`` (None: the default), loading it where needed (``load``; a name this
    process tree loaded by import path, through ``WY_ASCEND_SUBJECT_PATHS``); ValueError naming the known ones."""
    name = DEFAULT if name is None else name
    if not isinstance(name, str) or not name:
        raise ValueError(f"subject must be one of {sorted(available())} or an import path 'package.module:name', "
                         f"got {name!r}")
    if name in SUBJECTS:
        return SUBJECTS[name]
    if not _is_import_path(name):
        for path in (p for p in os.environ.get(PATHS_ENV, "").split(",") if p):
            with contextlib.suppress(ValueError, ImportError):
                load(path)
            if name in SUBJECTS:
                return SUBJECTS[name]
    return load(name)


def available() -> dict[str, str]:
    """Every subject this environment can name without an import path: name -> where it is declared."""
    out = {name: f"builtin {path}" for name, path in BUILTIN.items()}
    out.update({name: f"entry point ({getattr(getattr(ep, 'dist', None), 'name', '?')})" for name, ep in
                _entry_points().items() if name not in BUILTIN})
    out.update({name: s.loaded for name, s in SUBJECTS.items() if name not in out})
    return out


def is_known(name: str) -> bool:
    """Whether ``name`` names a subject here (loading it if needed)."""
    try:
        get(name)
    except (ValueError, ImportError):
        return False
    return True


# The foreign subject of each platform: wy_ascend's peer in the differential property (testing/properties).
PLATFORM_PEERS = {"cpu": "fla-ascend", "npu": "fla-ascend", "cuda": "fla"}


def peer(name: str, backend: str) -> Subject | None:
    """The other implementation of the ops that runs on ``backend``: a foreign subject's is wy_ascend,
    wy_ascend's is fla-core's kernels of that platform (``PLATFORM_PEERS``) where fla-core is installed;
    None where there is none."""
    other = get(DEFAULT) if get(name).foreign else get(PLATFORM_PEERS[backend]) if backend in PLATFORM_PEERS else None
    if other is None or backend not in other.backends or (other.foreign and other.installed_version is None):
        return None
    return other
