"""Generated mutants: AST mutation operators over src/wy_ascend, sampled and run with CI's commands.

    python -m mutation --generated 150                  # sample 150 (seed 0), run them, 2 at a time
    python -m mutation --generated 150 --seed 3 --jobs 2 --report /tmp/m.json
    python -m mutation --generated 150 --seed-from-commit --select --report docs/data/mutants-150-seed<S>.json
    python -m mutation --generated 150 --dry-run        # the sample and its diffs, nothing run
    python -m mutation --generated 5 --tests tests/test_planning.py   # plumbing check, one quick command
    python -m mutation --generated 150 --worktree      # the working tree, uncommitted edits included
    python -m mutation --recheck old.json --report new.json   # old.json's survivors on this tree
    python -m mutation --generated 150 --seed 3 --shard 2/4   # the 2nd quarter: mutants-report.shard-2-of-4.json
    python -m mutation --merge mutants-report.shard-*-of-4.json --report m.json   # one report of the shards
    nox -s mutants -- --generated 150 [--seed S] [--jobs J] [--shard K/N]

Sites. Every ``.py`` under src/wy_ascend (kernels included) is parsed fresh at the start of
the run; an ``ast.NodeVisitor`` lists every place one operator applies:

=============  ==========================================================================
operator       change
=============  ==========================================================================
cmp_flip       one comparison operator: < <=, > >=, == !=, is / is not, in / not in
cmp_swap       the two sides of a one-operator order comparison (a < b -> b < a)
bool_flip      and <-> or
const_inc/dec  an integer literal +1 / -1 (slice bounds, range bounds and index literals too)
bound_inc/dec  a non-literal slice bound or range/tl.range/tl.arange argument +1 / -1
binop          + -, * /, // %, ** *, & |, ^ |, << >> (also augmented assignments: += -> -=)
drop_call      a call statement (``f(x)`` on its own line) -> ``pass``
drop_stmt      an assignment, augmented assignment, raise, ``return`` in an if body, break or
               continue -> ``pass``
swap_args      two neighbouring positional arguments of a call (when they differ)
=============  ==========================================================================

Not mutated: docstrings and other string literals, type annotations (arguments, returns,
annotated assignments), decorators, ``__all__``, ``from __future__`` / imports, the
message of a ``raise`` (the ``raise`` itself can be dropped), f-strings, calls of
``print``/``logging``/``warnings.warn`` and ``if TYPE_CHECKING:`` blocks.

A mutant's source is the original text with the smallest edit inside the target node: the
operator token, the two operand or argument texts swapped, the literal, the bound wrapped in
``(... + 1)``, the statement replaced by ``pass`` (else, as a fallback, the node's span
replaced by ``ast.unparse`` of the mutated node, in parentheses). Comments, formatting and
the other lines stay as they were, so the diff is the one change, tracebacks point at the
same lines, and tests that read the source (``inspect.getsource(kernels)``) see the same
text; ``ast.unparse`` of the whole module would rewrite every line. Each mutant is checked
on creation: its enclosing top-level statement parses to exactly the original one with the
target node replaced (``ast.dump`` equal) and the module parses, i.e. it differs from the
original in the targeted node only. Ids are ``file:line:col:operator`` (``~2`` appended when two nodes of one operator
start at the same place, e.g. the outer ``+`` of ``a + b + c``).

Sampling (``--seed``, default 0; ``--seed-from-commit``: the first 8 hex digits of the mutated commit's
hash, so a sample drawn after the work is fixed by what was committed): ``--generated N`` is split over the files in proportion to
their sites (largest remainder, at least ``--min-per-file`` per file that has sites), then
drawn uniformly within each file by ``random.Random(f"{seed}:{file}")``: the same source and
seed give the same sample on every machine. ``--uniform`` draws N from all sites at once.

Running. The files of a commit (``--rev``, default HEAD: ``git archive``, what CI checks
out) are copied once at the start and the source is read from that copy, so nobody's
uncommitted work in progress (a half-written test that hangs) and no edit made during the
run mixes into it. ``--worktree`` copies the working tree as it is instead (less .git,
caches and outputs).
Shards (``--shard K/N``, 1 <= K <= N): every shard draws the same sample (same seed, N and source)
and runs only the mutants at positions i of it (in site order, as listed by ``--dry-run``) with
i % N == K - 1, so the N shards are disjoint and together are the sample; each runs the baseline
itself (it sets the timeout and the test order), so shards can run on different machines or nights.
Each mutant (and the unmutated baseline first) gets its own copy of src/ with the one file
mutated, first on PYTHONPATH, a temp Hypothesis database, fuzz report, and a regression
store seeded with the real regressions/*.json (so CI's replay runs, and nothing real is
written), and mutation/mutants.py's guard plugin (every ``wy_ascend`` module must come from the
mutated copy). CI's commands run one after the other (this order until one of them has
killed more of the file's mutants than the other), each with ``-x -q -p no:cacheprovider``
and without xdist (the parallelism is across mutants, ``--jobs``):

    python -m pytest tests/                    (WY_ASCEND_BACKEND=cpu)
    python -m pytest fuzz/ --profile ci

A helper plugin (``_wy_gen_plugin``) in each run: imports every ``wy_ascend`` module first
(one that fails to import makes the mutant *invalid*); derandomizes Hypothesis for tests that do
not set ``derandomize`` themselves (every run of a tree then draws the same examples: the baseline,
its coverage map and each mutant; a test drawing afresh each run once failed a baseline on a case
no earlier run had drawn, and a map of one run's draws would not be the next run's); turns off
Hypothesis' shrink phase for tests that do not set their own phases (shrinking only minimizes a failure already
found, so it changes no verdict, and it is most of a failing property's time: ``--shrink``
keeps it); orders the tests: first those that killed earlier mutants of the same file, then
the tests named after the file (``test_<stem>.py``, ``NEAR_TESTS``), each group by the
baseline's durations, fastest first; and notes the first failing test. The command that
killed most mutants of the file so far runs first. ``--no-reorder`` keeps pytest's and CI's
order; a survivor runs every test of both commands either way, so no order changes a verdict
unless a test depends on another's side effects (the killers table of the report would show
one test killing mutants all over the package).

Selection (``--select``, mutation/selection.py): the baseline runs under coverage, each line recorded with
the tests that executed it (the case children's included), once per tree (cached in .mutants-coverage/);
each mutant then runs, of each command, only the tests that execute its changed statements (none: the
command is skipped; a statement run outside any test: all of them). Its module doc says what it can miss.

Verdicts: ``killed`` (a command failed: pytest exit 1 or 2, or it crashed with a signal other
than SIGKILL), ``survived`` (both commands passed), ``timeout`` (no verdict within
``--timeout`` s for both commands, or with ``--select`` within 3x the selected tests' baseline seconds
plus a start allowance a command, if less: ``Runner.time_limit``; counted as killed when the baseline
took less than the timeout, as CI would time out too), ``invalid`` (the mutated package does not import; not
counted), ``error`` (anything else: the guard, SIGKILL, a usage error, or a kill whose first failing
test fails alone on the unmutated tree, an order-dependent test that the killers-first order would credit
with every mutant: ``Runner.passes_alone``; not counted, rerun on resume). A kill whose first failing test
passes alone on the mutant came from the order (a test leaving state to the next): the command runs again in
pytest's order, whose verdict counts (``Runner._killed_by_order``).
Score = (killed + timeout) / (killed + timeout + survived); with ``--equivalent FILE`` (JSON
``[{"id" or "key", "reason"}]``, default mutation/equivalent.json when it exists) the survivors
argued equivalent are left out of the denominator as well.

Report: ``--report PATH`` (default mutants-report.json in the repository root, with ``--shard
K/N`` mutants-report.shard-K-of-N.json, so that shards do not overwrite each other) and the same
name with ``.md``: the score, counts per file and operator, the tests that killed, and every
survivor, timeout, invalid and error with its diff. Both are rewritten atomically (temp file,
rename) after every mutant. Resuming: a run with an existing report reuses each result whose
mutant and whole tree (src/, tests/, fuzz/, regressions/, ...) are unchanged and reruns the
rest (``--fresh`` ignores the report; ``--keep-killed`` also keeps kills made on an older
test suite when src/wy_ascend is unchanged, for rerunning only survivors after adding tests).
A shard's report holds its own mutants and the whole sample's ids (``sample_ids``); rerun the same
``--shard`` command to resume it. ``--merge R1 R2 ... --report OUT`` writes one report (and .md) of
shard reports of one sample: they must agree on seed, N (``generated``), sampling, operators, source
and tree fingerprints, sample and commands (else exit 2 naming the file and the field); each
mutant's result is the one that exists (a final verdict over ``error`` over ``pending``; two
different final verdicts for one mutant are an error naming it); mutants in no report are listed
as missing, and the score is over those present.
Exit status 0 whatever the score (it is a measurement), 2 when the baseline fails, the
arguments are wrong or reports do not merge, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import difflib
import hashlib
import importlib.util
import io
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from . import mutants as hand
from . import selection

ROOT = hand.ROOT
PACKAGE_NAME = "wy_ascend"
DEFAULT_REPORT = "mutants-report.json"
DEFAULT_EQUIVALENT = "mutation/equivalent.json"
# CI's commands (.ci/run: nox -s tests, nox -s regress, nox -s fuzz -- --profile ci): cheapest first.
CI_COMMANDS: tuple[tuple[str, ...], ...] = (("tests/",), ("fuzz/", "--profile", "ci"))
# The recorded baseline's seconds per test, kept beside the coverage maps: how the next recording weighs its parts.
DURATIONS_FILE = "durations.json"
# Seconds a selected pytest command takes beyond its tests (interpreter, imports, collection) in a mutant's
# time limit (Runner.time_limit): a generous allowance, so a limit is reached by a hang, not by a slow start.
STARTUP_S = 60
PYTEST_FLAGS = ("-x", "-q", "-p", "no:cacheprovider", "-p", "_wy_mutant_guard", "-p", "_wy_gen_plugin")
# The tree copied for a run: everything CI reads, less version control, caches and outputs.
SNAPSHOT_IGNORE = (".git", ".nox", ".venv", ".hypothesis", ".pytest_cache", ".mypy_cache", ".ruff_cache",
                   ".benchmarks", ".dbg", ".device", ".whl", "build", "dist", "__pycache__", "*.egg-info", "*.pyc",
                   "fuzz-report.json*", "mutants-report*", "lowering-report.json", "bench.json", selection.CACHE_DIR)

OPERATORS = ("cmp_flip", "cmp_swap", "bool_flip", "const_inc", "const_dec", "bound_inc", "bound_dec", "binop",
             "drop_call", "drop_stmt", "swap_args")

CMP_FLIP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In,
}
ORDER_OPS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
BINOP_SWAP: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Mod,
    ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd, ast.BitXor: ast.BitOr,
    ast.LShift: ast.RShift, ast.RShift: ast.LShift, ast.MatMult: ast.Mult,
}
SYMBOL = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is",
          ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in", ast.Add: "+", ast.Sub: "-", ast.Mult: "*",
          ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**", ast.BitAnd: "&", ast.BitOr: "|",
          ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>", ast.MatMult: "@", ast.And: "and", ast.Or: "or"}
RANGE_CALLS = {"range", "tl.range", "tl.arange", "tl.static_range", "torch.arange"}
QUIET_CALLS = {"print", "warnings.warn"}  # output only: neither dropped nor mutated inside
QUIET_PREFIXES = ("logging.", "logger.", "log.", "LOG.", "_log.", "_logger.")
# Test modules likely to kill a mutant of a file, besides tests/test_<stem>.py (run ahead of the rest).
NEAR_TESTS: dict[str, tuple[str, ...]] = {
    "kernels.py": ("test_ops.", "test_interpreter.", "test_fuzz.py::test_oracle"),
    "layout.py": ("test_ops.", "test_validation."),
    "ops.py": ("test_fuzz.py::test_oracle",),
    "validation.py": ("test_fuzz.py::test_bad_input",),
    "planning.py": ("test_fuzz.py::test_plan_coverage",),
}


# --------------------------------------------------------------------------- sites and mutants


@dataclass(frozen=True)
class Site:
    """One mutation: ``operator`` at the node ``path`` (field/index steps from the module) of ``file``."""

    file: str  # relative to src/wy_ascend, "/"-separated
    line: int
    col: int
    operator: str
    path: tuple[tuple[str, int], ...]  # (field, index or -1) steps from the Module to the target node
    arg: int = 0  # cmp_flip: which operator of the comparison; swap_args: the first of the pair
    description: str = ""
    id: str = ""


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _is_quiet_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = _dotted(node.func)
    return name in QUIET_CALLS or name.startswith(QUIET_PREFIXES)


def _is_type_checking(node: ast.If) -> bool:
    return _dotted(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _is_dunder_all(node: ast.AST) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets)


def _is_int(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


# Fields never visited: annotations, decorators, docstring-like strings, f-strings.
_SKIP_FIELDS = {"annotation", "returns", "decorator_list", "type_comment", "type_params"}


class SiteFinder(ast.NodeVisitor):
    """Lists every mutation site of one module (``visit`` the Module)."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.sites: list[Site] = []
        self._path: list[tuple[str, int]] = []
        self._in_if_body = 0

    # -- traversal with the path to each node
    def generic_visit(self, node: ast.AST) -> None:
        for name, value in ast.iter_fields(node):
            if name in _SKIP_FIELDS:
                continue
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, ast.AST):
                        self._child(node, name, i, item)
            elif isinstance(value, ast.AST):
                self._child(node, name, -1, value)

    def _child(self, parent: ast.AST, name: str, index: int, child: ast.AST) -> None:
        self._path.append((name, index))
        in_if = isinstance(parent, ast.If) and name in ("body", "orelse")
        self._in_if_body += in_if
        try:
            self.visit(child)
        finally:
            self._in_if_body -= in_if
            self._path.pop()

    def _add(self, node: ast.AST, operator: str, description: str, arg: int = 0) -> None:
        self.sites.append(Site(self.file, node.lineno, node.col_offset, operator, tuple(self._path), arg, description))

    # -- skipped subtrees
    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        pass

    def visit_Import(self, node: ast.Import) -> None:
        pass

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        pass

    def visit_Raise(self, node: ast.Raise) -> None:
        self._drop(node, "raise dropped")  # the message (node.exc's arguments) is not mutated

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node):
            self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant):  # docstrings and other bare literals
            return
        if isinstance(node.value, ast.Call):
            if _is_quiet_call(node.value):
                return
            self._add(node, "drop_call", f"call {_dotted(node.value.func) or 'statement'}(...) dropped")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if _is_quiet_call(node):
            return
        positional = node.args
        if not any(isinstance(a, ast.Starred) for a in positional):
            for i in range(len(positional) - 1):
                if ast.dump(positional[i]) != ast.dump(positional[i + 1]):
                    self._add(node, "swap_args", f"{_dotted(node.func) or 'call'}: arguments {i} and {i + 1} swapped",
                              arg=i)
        if _dotted(node.func) in RANGE_CALLS:
            for i, a in enumerate(positional):
                if not _is_int(a) and not isinstance(a, ast.Starred):
                    self._path.append(("args", i))
                    self._add(a, "bound_inc", f"{_dotted(node.func)} bound {ast.unparse(a)} + 1")
                    self._add(a, "bound_dec", f"{_dotted(node.func)} bound {ast.unparse(a)} - 1")
                    self._path.pop()
        self.generic_visit(node)

    def visit_Slice(self, node: ast.Slice) -> None:
        for name in ("lower", "upper"):
            bound = getattr(node, name)
            if bound is not None and not _is_int(bound):
                self._path.append((name, -1))
                self._add(bound, "bound_inc", f"slice {name} bound {ast.unparse(bound)} + 1")
                self._add(bound, "bound_dec", f"slice {name} bound {ast.unparse(bound)} - 1")
                self._path.pop()
        self.generic_visit(node)

    def _drop(self, node: ast.stmt, description: str) -> None:
        self._add(node, "drop_stmt", description)

    def _visit_droppable(self, node: ast.stmt) -> None:
        if _is_dunder_all(node):
            return
        if not (isinstance(node, ast.AnnAssign) and node.value is None):
            kind = type(node).__name__.lower()
            self._drop(node, f"{kind} dropped")
        self.generic_visit(node)

    visit_Assign = visit_AnnAssign = visit_Break = visit_Continue = _visit_droppable

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        new = BINOP_SWAP.get(type(node.op))
        if new is not None:
            self._add(node, "binop", f"{SYMBOL[type(node.op)]}= -> {SYMBOL[new]}=")
        self._visit_droppable(node)

    def visit_Return(self, node: ast.Return) -> None:
        if self._in_if_body:
            self._drop(node, "return in an if body dropped")
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        for i, op in enumerate(node.ops):
            new = CMP_FLIP.get(type(op))
            if new is not None:
                self._add(node, "cmp_flip", f"{SYMBOL[type(op)]} -> {SYMBOL[new]}", arg=i)
        if len(node.ops) == 1 and isinstance(node.ops[0], ORDER_OPS):
            self._add(node, "cmp_swap", f"sides of {SYMBOL[type(node.ops[0])]} swapped")
        self.generic_visit(node)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        new = ast.Or if isinstance(node.op, ast.And) else ast.And
        self._add(node, "bool_flip", f"{SYMBOL[type(node.op)]} -> {SYMBOL[new]}")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        new = BINOP_SWAP.get(type(node.op))
        if new is not None:
            self._add(node, "binop", f"{SYMBOL[type(node.op)]} -> {SYMBOL[new]}")
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if type(node.value) is int:
            self._add(node, "const_inc", f"{node.value} -> {node.value + 1}")
            self._add(node, "const_dec", f"{node.value} -> {node.value - 1}")



def _with_ids(sites: list[Site]) -> list[Site]:
    """Sites with their ids ``file:line:col:operator`` (``~k`` for the k-th site of one id, in visit order)."""
    seen: Counter[str] = Counter()
    out = []
    for s in sites:
        base = f"{s.file}:{s.line}:{s.col}:{s.operator}"
        seen[base] += 1
        out.append(replace(s, id=base if seen[base] == 1 else f"{base}~{seen[base]}"))
    return out


def package_files(package: Path) -> list[Path]:
    """Every .py file of the package, sorted (relative paths)."""
    return sorted(p.relative_to(package) for p in package.rglob("*.py") if "__pycache__" not in p.parts)


def read_sources(package: Path) -> dict[str, str]:
    """The text of every module of ``package``, read now: {"kernels.py": ..., "testing/case.py": ...}."""
    return {rel.as_posix(): (package / rel).read_text() for rel in package_files(package)}


def find_sites(sources: dict[str, str]) -> list[Site]:
    """Every mutation site of every module in ``sources`` (read_sources), in file and visit order."""
    sites: list[Site] = []
    for file in sorted(sources):
        finder = SiteFinder(file)
        finder.visit(ast.parse(sources[file], filename=file))
        sites += _with_ids(finder.sites)
    return sites


def _resolve(tree: ast.AST, path: tuple[tuple[str, int], ...]) -> tuple[ast.AST, ast.AST, str, int]:
    """(parent, node, field, index) of the node at ``path``."""
    parent: ast.AST = tree
    node: ast.AST = tree
    name, index = "", -1
    for name, index in path:
        parent = node
        value = getattr(node, name)
        node = value[index] if index >= 0 else value
    return parent, node, name, index


def _mutated_node(site: Site, node: ast.AST) -> ast.AST:
    """A mutated copy of ``node`` (a statement replaced becomes ``pass``)."""
    op = site.operator
    if op in ("drop_call", "drop_stmt"):
        return ast.Pass()
    new = copy.deepcopy(node)
    if op == "cmp_flip":
        assert isinstance(new, ast.Compare)
        new.ops[site.arg] = CMP_FLIP[type(new.ops[site.arg])]()
    elif op == "cmp_swap":
        assert isinstance(new, ast.Compare)
        new.left, new.comparators = new.comparators[0], [new.left]
    elif op == "bool_flip":
        assert isinstance(new, ast.BoolOp)
        new.op = ast.Or() if isinstance(new.op, ast.And) else ast.And()
    elif op in ("const_inc", "const_dec"):
        assert isinstance(new, ast.Constant)
        value = new.value + (1 if op == "const_inc" else -1)
        # A negative literal is unary minus on a positive one in Python's AST.
        new = ast.Constant(value) if value >= 0 else ast.UnaryOp(ast.USub(), ast.Constant(-value))
    elif op in ("bound_inc", "bound_dec"):
        new = ast.BinOp(new, ast.Add() if op == "bound_inc" else ast.Sub(), ast.Constant(1))
    elif op == "binop":
        assert isinstance(new, (ast.BinOp, ast.AugAssign))
        new.op = BINOP_SWAP[type(new.op)]()
    elif op == "swap_args":
        assert isinstance(new, ast.Call)
        i = site.arg
        new.args[i], new.args[i + 1] = new.args[i + 1], new.args[i]
    else:
        raise ValueError(f"unknown operator {op!r}")
    return new


def _offset(lines: list[str], line: int, col_bytes: int) -> int:
    """Character offset in the joined text of (1-based line, UTF-8 byte column)."""
    before = sum(len(text) for text in lines[: line - 1])
    return before + len(lines[line - 1].encode()[:col_bytes].decode())


class MutationError(RuntimeError):
    """The spliced mutant does not parse to the mutated AST (a bug of this module, reported as invalid)."""


@dataclass
class Mutant:
    """One generated mutant: its site, the file's original and mutated text and their diff."""

    site: Site
    original: str
    mutated: str

    @property
    def id(self) -> str:
        return self.site.id

    @property
    def diff(self) -> str:
        name = f"src/{PACKAGE_NAME}/{self.site.file}"
        return "".join(difflib.unified_diff(self.original.splitlines(True), self.mutated.splitlines(True),
                                            f"a/{name}", f"b/{name}", n=1))

    @property
    def changed_lines(self) -> tuple[list[str], list[str]]:
        before, after = [], []
        for line in self.diff.splitlines()[2:]:
            if line.startswith("-"):
                before.append(line[1:].strip())
            elif line.startswith("+"):
                after.append(line[1:].strip())
        return before, after

    @property
    def key(self) -> str:
        """Names the change independent of line numbers: file, operator and the changed lines."""
        before, after = self.changed_lines
        raw = json.dumps([self.site.file, self.site.operator, before, after])
        return f"{self.site.file}:{self.site.operator}:{hashlib.sha1(raw.encode()).hexdigest()[:10]}"

    @property
    def sha(self) -> str:
        return hashlib.sha256(self.mutated.encode()).hexdigest()[:16]


def reapply(record: dict[str, Any], sources: dict[str, str]) -> Mutant | str:
    """The mutant of report entry ``record`` made again on ``sources``: its diff's old lines
    (context and removed) must occur exactly once in the file now, and are replaced by its new
    lines; else the reason it no longer applies. Its site's line moves with those lines (a site
    can start above its first changed line: a call whose swapped arguments are lines below it)."""
    old: list[str] = []
    new: list[str] = []
    hunk = re.search(r"^@@ -(\d+)", record["diff"], re.M)  # the line of the diff's first old line
    if hunk is None:
        return "its diff has no hunk"
    for line in record["diff"].splitlines(True)[2:]:
        if line.startswith("@@"):
            continue
        if line[:1] in (" ", "-"):
            old.append(line[1:])
        if line[:1] in (" ", "+"):
            new.append(line[1:])
    source = sources.get(record["file"])
    if source is None:
        return f"{record['file']} is gone"
    before, after = "".join(old), "".join(new)
    count = source.count(before)
    if count != 1:
        return f"its lines occur {count} times in {record['file']} now"
    at = source.index(before)
    moved = source[:at].count("\n") + 1 - int(hunk[1])
    site = Site(record["file"], record["line"] + moved, record["col"], record["operator"], (),
                description=record["description"], id=record["id"])
    return Mutant(site, source, source[:at] + after + source[at + len(before):])


def _span(lines: list[str], node: ast.AST) -> tuple[int, int]:
    """Character offsets [start, end) of ``node`` in the text of ``lines``."""
    return (_offset(lines, node.lineno, node.col_offset),  # type: ignore[attr-defined]
            _offset(lines, node.end_lineno or node.lineno, node.end_col_offset or 0))  # type: ignore[attr-defined]


def _operator_span(source: str, start: int, end: int) -> tuple[int, int]:
    """The operator token(s) in ``source[start:end]``, the text between two operands: everything
    but whitespace, parentheses, line continuations and comments (e.g. ``) <= (`` -> ``<=``,
    `` not in `` -> ``not in``)."""
    gap = list(source[start:end])
    i = 0
    while i < len(gap):  # blank out comments: operators never contain '#'
        if gap[i] == "#":
            while i < len(gap) and gap[i] != "\n":
                gap[i] = " "
                i += 1
        i += 1
    filler = set(" \t\n\r\\()")
    body = [j for j, c in enumerate(gap) if c not in filler]
    if not body:
        raise MutationError(f"no operator between offsets {start} and {end}")
    return start + body[0], start + body[-1] + 1


def _edits(site: Site, source: str, lines: list[str], node: ast.AST, new: ast.AST) -> list[tuple[int, int, str]]:
    """The smallest text edits (start, end, replacement) that turn ``node`` into ``new``: an operator
    token, two swapped operand texts, a literal, a bound wrapped in ``(... + 1)``, a statement -> ``pass``."""
    op = site.operator
    text = (lambda n: source.__getitem__(slice(*_span(lines, n))))  # noqa: E731 - the source text of a node
    if op in ("drop_call", "drop_stmt"):
        return [(*_span(lines, node), "pass")]
    if op in ("const_inc", "const_dec"):
        value = new.value if isinstance(new, ast.Constant) else -new.operand.value  # type: ignore[attr-defined]
        return [(*_span(lines, node), str(value) if value >= 0 else f"({value})")]
    if op in ("bound_inc", "bound_dec"):
        return [(*_span(lines, node), f"({text(node)} {'+' if op == 'bound_inc' else '-'} 1)")]
    if op == "cmp_flip":
        assert isinstance(node, ast.Compare) and isinstance(new, ast.Compare)
        before = node.left if site.arg == 0 else node.comparators[site.arg - 1]
        gap = _operator_span(source, _span(lines, before)[1], _span(lines, node.comparators[site.arg])[0])
        return [(*gap, SYMBOL[type(new.ops[site.arg])])]
    if op == "bool_flip":
        assert isinstance(node, ast.BoolOp) and isinstance(new, ast.BoolOp)
        return [(*_operator_span(source, _span(lines, a)[1], _span(lines, b)[0]), SYMBOL[type(new.op)])
                for a, b in zip(node.values, node.values[1:])]
    if op == "binop" and isinstance(node, ast.BinOp):
        gap = _operator_span(source, _span(lines, node.left)[1], _span(lines, node.right)[0])
        return [(*gap, SYMBOL[type(new.op)])]  # type: ignore[attr-defined]
    if op == "binop" and isinstance(node, ast.AugAssign):
        gap = _operator_span(source, _span(lines, node.target)[1], _span(lines, node.value)[0])
        return [(*gap, SYMBOL[type(new.op)] + "=")]  # type: ignore[attr-defined]
    if op in ("cmp_swap", "swap_args"):
        if isinstance(node, ast.Compare):
            a, b = node.left, node.comparators[0]
        else:
            assert isinstance(node, ast.Call)
            a, b = node.args[site.arg], node.args[site.arg + 1]
        return [(*_span(lines, a), text(b)), (*_span(lines, b), text(a))]
    raise MutationError(f"no text edit for operator {op!r}")


def _apply(source: str, edits: list[tuple[int, int, str]]) -> str:
    for start, end, replacement in sorted(edits, reverse=True):  # from the end: earlier offsets stay valid
        source = source[:start] + replacement + source[end:]
    return source


@lru_cache(maxsize=64)
def _parsed(source: str) -> ast.Module:
    """The AST of ``source``, parsed once (make_mutant swaps one node in and back out while it dumps)."""
    return ast.parse(source)


def _dump_with(tree: ast.AST, parent: ast.AST, name: str, index: int, new: ast.AST) -> str:
    """``ast.dump(tree)`` with ``new`` in place of ``parent.name[index]`` (``parent.name`` when index < 0);
    ``tree`` is left as it was."""
    old = getattr(parent, name)[index] if index >= 0 else getattr(parent, name)
    try:
        if index >= 0:
            getattr(parent, name)[index] = new
        else:
            setattr(parent, name, new)
        return ast.dump(tree)
    finally:
        if index >= 0:
            getattr(parent, name)[index] = old
        else:
            setattr(parent, name, old)


def make_mutant(site: Site, source: str) -> Mutant:
    """The mutant of ``site`` on ``source`` (the text of site.file).

    The text changes as little as possible (``_edits``); should that not parse to the mutated AST,
    the target node's whole span is replaced by ``ast.unparse`` of the mutated node instead. Raises
    MutationError unless the result parses to exactly the original AST with that one node replaced.

    The check is done on the enclosing top-level statement (decorators included): the edits lie
    inside it, the text before and after it is the original's, and its mutated text parses on its
    own to exactly one statement, the original one with the node replaced (``ast.dump`` equal, so
    brackets and strings in it are balanced: the rest of the module tokenizes and parses as before);
    the whole mutated module must parse too. This costs one function's dump, not the module's.
    """
    tree = _parsed(source)
    parent, node, name, index = _resolve(tree, site.path)
    new = _mutated_node(site, node)
    lines = source.splitlines(True)
    candidates = []
    try:
        candidates.append(_apply(source, _edits(site, source, lines, node, new)))
    except MutationError:
        pass
    # Fallback: a statement as itself unparsed (one line), an expression unparsed in parentheses.
    whole = ast.unparse(new) if isinstance(new, ast.stmt) else f"({ast.unparse(new)})"
    candidates.append(_apply(source, [(*_span(lines, node), whole)]))
    top = tree.body[site.path[0][1]]
    first = min([top.lineno, *(d.lineno for d in getattr(top, "decorator_list", []))])
    start = _offset(lines, first, 0)
    end = _span(lines, top)[1]
    expected = ast.dump(new) if len(site.path) == 1 else _dump_with(top, parent, name, index, new)
    for mutated in candidates:
        delta = len(mutated) - len(source)
        if mutated[:start] != source[:start] or mutated[end + delta:] != source[end:]:
            continue
        try:
            body = ast.parse(mutated[start:end + delta]).body
            if len(body) == 1 and ast.dump(body[0]) == expected:
                ast.parse(mutated)
                return Mutant(site, source, mutated)
        except SyntaxError:
            continue
    raise MutationError(f"{site.id}: no spliced text parses to the mutated AST")


# --------------------------------------------------------------------------- sampling


def sample(sites: list[Site], n: int, seed: int, *, uniform: bool = False, min_per_file: int = 2) -> list[Site]:
    """``n`` sites (all of them if there are fewer), deterministic in (sites, n, seed), in site order.

    Stratified (default): each file with sites gets ``min(min_per_file, its sites)``, the rest of
    ``n`` is shared in proportion to the sites (largest remainder), and each file's share is
    drawn uniformly with ``random.Random(f"{seed}:{file}")``. ``uniform``: one draw from all sites.
    """
    if n >= len(sites):
        return list(sites)
    if uniform:
        picked = set(random.Random(f"{seed}:all").sample(range(len(sites)), n))
        return [s for i, s in enumerate(sites) if i in picked]
    by_file: dict[str, list[Site]] = defaultdict(list)
    for s in sites:
        by_file[s.file].append(s)
    files = sorted(by_file)
    quota = {f: min(min_per_file, len(by_file[f])) for f in files}
    if sum(quota.values()) > n:  # more files than n allows: the largest files first
        quota = dict.fromkeys(files, 0)
        for f in sorted(files, key=lambda f: (-len(by_file[f]), f))[:n]:
            quota[f] = 1
    rest = n - sum(quota.values())
    spare = {f: len(by_file[f]) - quota[f] for f in files}
    total_spare = sum(spare.values())
    if rest > 0 and total_spare:
        shares = {f: rest * spare[f] / total_spare for f in files}
        extra = {f: min(spare[f], int(shares[f])) for f in files}
        left = rest - sum(extra.values())
        for f in sorted(files, key=lambda f: (-(shares[f] - int(shares[f])), f)):
            if left <= 0:
                break
            if extra[f] < spare[f]:
                extra[f] += 1
                left -= 1
        for f in files:  # whatever rounding left over, to files with sites to spare
            while left > 0 and extra[f] < spare[f]:
                extra[f] += 1
                left -= 1
        quota = {f: quota[f] + extra[f] for f in files}
    out: list[Site] = []
    for f in files:
        rng = random.Random(f"{seed}:{f}")
        picked = set(rng.sample(range(len(by_file[f])), quota[f]))
        out += [s for i, s in enumerate(by_file[f]) if i in picked]
    return out


def build_mutants(sources: dict[str, str], sites: list[Site]) -> tuple[list[Mutant], list[tuple[Site, str]]]:
    """The mutants of ``sites`` on ``sources`` (the texts find_sites read) and the sites that could not be made."""
    made, failed = [], []
    for s in sites:
        try:
            made.append(make_mutant(s, sources[s.file]))
        except (MutationError, AttributeError, IndexError, KeyError, TypeError, AssertionError) as e:
            failed.append((s, f"{type(e).__name__}: {e}"))
    return made, failed


# --------------------------------------------------------------------------- running

PLUGIN = '''\
"""pytest plugin of mutation/generated.py: import check, no shrinking, test order, first failure."""
import json, os, sys, traceback
from pathlib import Path

import pytest

SRC = Path(os.environ["WY_MUTANT_SRC"]).resolve()
OUT = Path(os.environ["WY_GEN_REPORT"])
STATE = {"first_failure": None, "durations": {}, "import_error": None}


def _write():
    OUT.write_text(json.dumps(STATE))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    if os.environ.get("WY_GEN_IMPORT_ALL") == "1":
        import importlib

        names = set()
        for p in (SRC / "wy_ascend").rglob("*.py"):
            parts = p.relative_to(SRC).with_suffix("").parts
            if parts[-1] == "__main__":
                continue
            names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
        for name in sorted(names):
            try:
                importlib.import_module(name)
            except BaseException as e:  # the mutated package does not import: the mutant is invalid
                STATE["import_error"] = f"{name}: {type(e).__name__}: {e}"[:500]
                STATE["traceback"] = traceback.format_exc()[-3000:]
                _write()
                raise pytest.UsageError(f"generated mutant does not import: {STATE['import_error']}")


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session):
    from hypothesis import Phase, settings

    phases = settings.default.phases
    if os.environ.get("WY_GEN_NO_SHRINK") == "1":
        phases = tuple(p for p in phases if p not in (Phase.shrink, Phase.explain))
    settings.register_profile("_wy_gen", parent=settings.default, phases=phases, derandomize=True)
    settings.load_profile("_wy_gen")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    select = os.environ.get("WY_GEN_SELECT")  # the tests that execute the mutated lines (mutation/selection.py)
    if select:
        keep = set(json.loads(Path(select).read_text()))
        chosen = [it for it in items if it.nodeid in keep or it.nodeid.split("::")[0] in keep]
        kept = {it.nodeid for it in chosen}
        config.hook.pytest_deselected(items=[it for it in items if it.nodeid not in kept])
        items[:] = chosen
    path = os.environ.get("WY_GEN_ORDER")
    if not path:
        return
    order = json.loads(Path(path).read_text())
    durations, priority, near = order.get("durations", {}), order.get("priority", []), order.get("near", [])
    rank = {nodeid: i for i, nodeid in enumerate(priority)}
    slow = max(durations.values(), default=0.0) + 1.0  # tests the baseline did not time: last
    position = {id(item): i for i, item in enumerate(items)}

    def key(it):  # earlier killers first, then tests near the mutated file, then the fastest
        return (rank.get(it.nodeid, len(rank)), not any(n in it.nodeid for n in near), durations.get(it.nodeid, slow))

    # Whole modules stay together (their module-scoped fixtures are set up once), ordered by their
    # best item and then their total time; the items of a module by the same key.
    modules = {}
    for it in items:
        modules.setdefault(it.nodeid.split("::")[0], []).append(it)
    module_key = {m: (min(key(it)[:2] for it in group), sum(durations.get(it.nodeid, slow) for it in group),
                      position[id(group[0])]) for m, group in modules.items()}
    items.sort(key=lambda it: (module_key[it.nodeid.split("::")[0]], key(it), position[id(it)]))


def pytest_runtest_logreport(report):
    d = STATE["durations"]
    d[report.nodeid] = d.get(report.nodeid, 0.0) + report.duration
    if report.failed and STATE["first_failure"] is None:
        STATE["first_failure"] = report.nodeid


def pytest_collectreport(report):
    if report.failed and STATE["first_failure"] is None:
        STATE["first_failure"] = f"collecting {report.nodeid}"


def pytest_sessionfinish(session, exitstatus):
    _write()
'''


@dataclass
class Outcome:
    """What running the commands on one copy gave."""

    verdict: str  # killed, survived, timeout, invalid, error
    seconds: float
    detail: str = ""
    killer: str | None = None  # first failing test (nodeid)
    command: str | None = None  # the command that decided
    command_index: int | None = None
    durations: dict[str, float] = field(default_factory=dict)  # per test, every command that ran
    command_seconds: list[float] = field(default_factory=list)
    selected: list[int | str] = field(default_factory=list)  # per command run: tests selected, or "all"


class Runner:
    """Runs CI's commands on mutated copies of the snapshot's src/ (one temp dir per run)."""

    def __init__(self, snapshot: Path, args: argparse.Namespace) -> None:
        self.snapshot = snapshot
        self.args = args
        self.commands = [shlex.split(t) for t in args.tests] if args.tests else [list(c) for c in CI_COMMANDS]
        self.order: dict[str, Any] = {"durations": {}, "priority": []}
        self.killers: dict[str, Counter[str]] = defaultdict(Counter)  # file -> killing test -> count
        self.command_kills: dict[str, Counter[int]] = defaultdict(Counter)  # file -> command index -> kills
        self.alone: dict[str, bool] = {}  # "command index:test id" -> passes run alone unmutated (passes_alone)
        # --select: per command, the tests that executed each line of the unmutated tree (mutation/selection.py)
        self.maps: list[dict[str, dict[str, list[str]]]] | None = None
        self.readers: selection.Readers | None = None  # who reads a module-level definition (built at first use)
        self.lock = threading.Lock()
        self.procs: set[subprocess.Popen[str]] = set()
        self.stopping = False

    def command_line(self, cmd: list[str]) -> str:
        return " ".join(["python -m pytest", *cmd, *PYTEST_FLAGS, *self.args.pytest_args])

    def _env(self, tmp: Path, src: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PYTEST_", "WY_ASCEND_", "HYPOTHESIS_", "WY_MUTANT_", "WY_GEN_"))}
        backend = self.args.backend or os.environ.get("WY_ASCEND_BACKEND") or "cpu"
        guard = tmp / "guard"
        env.update(
            PYTHONPATH=os.pathsep.join([str(src), str(guard), *filter(None, [os.environ.get("PYTHONPATH")])]),
            WY_ASCEND_BACKEND=backend,
            WY_ASCEND_REGRESSIONS=str(tmp / "regressions"),
            HYPOTHESIS_STORAGE_DIRECTORY=str(tmp / "hypothesis"),
            WY_ASCEND_HYPOTHESIS_DB=str(tmp / "hypothesis" / "examples"),
            WY_ASCEND_FUZZ_REPORT=str(tmp / "fuzz-report.json"),
            WY_MUTANT_SRC=str(src),
            WY_MUTANT_REPORT=str(tmp / "guard-report.json"),
            WY_GEN_REPORT=str(tmp / "gen-report.json"),
            # this interpreter's scripts first: a test that runs ``nox --no-venv`` gets a ``python``
            # that has the packages, as in an activated environment (CI's)
            PATH=os.pathsep.join([str(Path(sys.executable).parent), *filter(None, [os.environ.get("PATH")])]),
        )
        if backend == "cpu":
            env["TRITON_INTERPRET"] = "1"  # what tests/conftest.py sets before triton is imported
        if not self.args.shrink:
            env["WY_GEN_NO_SHRINK"] = "1"
        if self.args.jobs > 1 and "OMP_NUM_THREADS" not in os.environ:
            env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // self.args.jobs))
        return env

    def _order_file(self, tmp: Path, file: str | None) -> Path | None:
        if self.args.no_reorder:
            return None
        with self.lock:
            priority = [t for t, _ in self.killers[file].most_common()] if file else []
            near = [f"test_{Path(file).stem}.", *NEAR_TESTS.get(file, ())] if file else []
            doc = {"durations": dict(self.order["durations"]), "priority": priority, "near": near}
        path = tmp / "order.json"
        path.write_text(json.dumps(doc))
        return path

    @contextlib.contextmanager
    def _workspace(self, mutant: Mutant | None) -> Iterator[tuple[Path, dict[str, str]]]:
        """A temporary copy of the snapshot's src/ with ``mutant`` applied (None: unmutated), the guard
        plugins and a store seeded with the real regressions; the directory and the commands' env."""
        name = mutant.id.replace("/", "_").replace(":", "_") if mutant else "baseline"
        with tempfile.TemporaryDirectory(prefix=f"wy-gen-{name[:60]}-") as tmp_name:
            tmp = Path(tmp_name)
            src = tmp / "src"
            shutil.copytree(self.snapshot / "src", src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
            if mutant is not None:
                (src / PACKAGE_NAME / mutant.site.file).write_text(mutant.mutated)
            (tmp / "guard").mkdir()
            (tmp / "guard" / "_wy_mutant_guard.py").write_text(hand.GUARD)
            (tmp / "guard" / "_wy_gen_plugin.py").write_text(PLUGIN)
            store = tmp / "regressions"
            store.mkdir()
            for f in sorted((self.snapshot / "regressions").glob("*.json")):
                shutil.copy2(f, store / f.name)
            yield tmp, self._env(tmp, src)

    def passes_alone(self, killer: str, command_index: int) -> bool:
        """Whether test ``killer`` passes run alone on the unmutated tree (once per test). One that fails
        alone passed the baseline's full run only after the tests before it; run first (earlier killers
        go first) it fails on every mutant: a fla-core test that imported fla bare took 22 false kills."""
        key = f"{command_index}:{killer}"
        with self.lock:
            if key in self.alone:
                return self.alone[key]
        with self._workspace(None) as (tmp, env):
            step = self._alone(killer, command_index, env, tmp)
        with self.lock:
            self.alone[key] = step.verdict == "survived"
        return self.alone[key]

    def _killed_by_order(self, step: Outcome, command_index: int, env: dict[str, str], tmp: Path) -> bool:
        """Whether ``step``'s kill came from the order its tests ran in: its first failing test passes when run
        alone on the same mutant. The runner's order (earlier killers, then near tests, then the fastest) is not
        the one the baseline passed in; a test that leaves state behind (a subject registered, a module
        patched) can fail the next one there on any mutant, and ``passes_alone`` (the test alone, unmutated)
        does not see it: the subject-not-installed test of test_declarations took four false kills so."""
        if step.verdict != "killed" or not step.killer or "::" not in step.killer:
            return False
        env = {k: v for k, v in env.items() if k not in ("WY_GEN_ORDER", "WY_GEN_SELECT")}
        return self._alone(step.killer, command_index, env, tmp).verdict == "survived"

    def _alone(self, test: str, command_index: int, env: dict[str, str], tmp: Path) -> Outcome:
        """Test ``test`` (a node id) run alone: command ``command_index`` with that one node and without the
        plugin's import-everything-first (a fresh process imports only what the test does)."""
        return self._one_command([test, *self.commands[command_index][1:]], {**env, "WY_GEN_IMPORT_ALL": "0"}, tmp, None)

    def time_limit(self, chosen: list[list[str] | None], timeout: float | None) -> float | None:
        """A mutant's time limit: the run's ``timeout``, or, where each command it runs runs a selection
        (``tests_for``), 3x those tests' baseline seconds plus STARTUP_S a command, plus 120, if less: a hang
        on a mutant that a few tests execute then costs minutes, not 3x the whole baseline."""
        if timeout is None or any(ids is None for ids in chosen):
            return timeout
        durations = self.order["durations"]
        seconds = sum(STARTUP_S + sum(s for node, s in durations.items() if node in keep or node.split("::")[0] in keep)
                      for keep in (set(ids) for ids in chosen if ids))
        return min(timeout, 3 * seconds + 120)

    def tests_for(self, mutant: Mutant) -> list[list[str] | None]:
        """Per command: the tests to run on ``mutant`` (None: all of them), from ``maps`` (--select)."""
        if self.maps is None:
            return [None] * len(self.commands)
        statements = selection.changed_statements(mutant.original, mutant.mutated)
        with self.lock:
            if self.readers is None:
                self.readers = selection.Readers(self.snapshot, PACKAGE_NAME)
        return selection.select(self.maps, mutant.site.file, statements, self.commands, self.readers)

    def run(self, mutant: Mutant | None, timeout: float | None, record: bool = False) -> Outcome:
        """Run the commands on the snapshot's src/ with ``mutant`` applied (None: the baseline), each on the
        tests ``tests_for`` picks. A kill whose first failing test fails alone on the unmutated tree
        (``passes_alone``) is no verdict. ``record`` (the baseline): under coverage (``_record``), setting ``maps``."""
        start = time.monotonic()
        chosen = self.tests_for(mutant) if mutant is not None else [None] * len(self.commands)
        timeout = self.time_limit(chosen, timeout)
        with self._workspace(mutant) as (tmp, env):
            order = self._order_file(tmp, mutant.site.file if mutant else None)
            if order is not None:
                env["WY_GEN_ORDER"] = str(order)
            if record:  # the baseline (mutant None): side by side under coverage
                outcome = self._record(tmp, env)
                outcome.seconds = time.monotonic() - start
                return outcome
            outcome = Outcome("survived", 0.0)
            order = list(range(len(self.commands)))
            if mutant is not None and not self.args.no_reorder:  # the command that killed most of this file first
                with self.lock:
                    kills = self.command_kills[mutant.site.file]
                    order.sort(key=lambda i: (-kills[i], i))
            outcome.selected = ["all" if c is None else len(c) for c in chosen]
            first = True
            for i in order:
                cmd, run_env = self.commands[i], dict(env)
                if chosen[i] == []:  # no test of this command executes the changed lines
                    continue
                if chosen[i] is not None:
                    cmd = selection.narrowed(cmd, chosen[i])
                    (tmp / f"select-{i}.json").write_text(json.dumps(chosen[i]))
                    run_env["WY_GEN_SELECT"] = str(tmp / f"select-{i}.json")
                run_env["WY_GEN_IMPORT_ALL"] = "1" if first else "0"
                first = False
                left = None if timeout is None else timeout - (time.monotonic() - start)
                step = self._one_command(cmd, run_env, tmp, left)
                if self._killed_by_order(step, i, run_env, tmp):
                    # its killer passes alone on the mutant: a test before it in this order made it fail (state
                    # one test leaves to the next). The command again in pytest's order, which the baseline passed.
                    plain = {k: v for k, v in run_env.items() if k != "WY_GEN_ORDER"}
                    left = None if timeout is None else timeout - (time.monotonic() - start)
                    first_killer = step.killer
                    step = self._one_command(cmd, plain, tmp, left)
                    step.detail = f"({first_killer} passed alone on the mutant: run again in pytest's order) {step.detail}"
                outcome.durations.update(step.durations)
                outcome.command_seconds.append(round(step.seconds, 1))
                if step.verdict != "survived":
                    outcome.verdict, outcome.detail, outcome.killer = step.verdict, step.detail, step.killer
                    outcome.command = self.command_line(cmd)
                    outcome.command_index = i
                    break
            if first:
                outcome.detail = "no test executes the changed lines"
        killer = outcome.killer
        if (mutant is not None and outcome.verdict == "killed" and killer and "::" in killer
                and not self.passes_alone(killer, outcome.command_index or 0)):
            outcome.verdict, outcome.killer = "error", None
            outcome.detail = f"its first failing test {killer} fails alone on the unmutated tree (order-dependent): no verdict"
        outcome.seconds = time.monotonic() - start
        return outcome

    def _record(self, tmp: Path, env: dict[str, str]) -> Outcome:
        """The unmutated baseline under coverage, its processes side by side: each command split into ``--jobs``
        parts over its test files (``_parts``), run by ``--jobs`` threads, each part a pytest of its own with its
        own coverage data, context file and reports. A command's map is the union of its parts' (a line's tests
        do not depend on the split; which test first sets up a shared fixture does: selection.py). Sets ``maps``
        when every part passes; the outcome's command_seconds are each command's parts' seconds added."""
        parts = [(i, k, part) for i, cmd in enumerate(self.commands) for k, part in enumerate(self._parts(cmd))]

        def one(item: tuple[int, int, tuple[list[str], float]]) -> tuple[int, int, Outcome, dict | None]:
            i, k, (cmd, _) = item
            where = tmp / f"record-{i}-{k}"
            where.mkdir()
            run_env = {**env, "WY_GEN_IMPORT_ALL": "1", "WY_GEN_REPORT": str(where / "gen-report.json"),
                       "WY_MUTANT_REPORT": str(where / "guard-report.json"),
                       "WY_ASCEND_FUZZ_REPORT": str(where / "fuzz-report.json")}
            prefix, run_env = selection.recording(where, run_env)
            step = self._one_command(cmd, run_env, where, None, prefix)
            return i, k, step, (selection.recorded(where, run_env, self.snapshot) if step.verdict == "survived" else None)

        with ThreadPoolExecutor(max(1, self.args.jobs)) as pool:  # the heaviest parts first
            done = sorted(pool.map(one, sorted(parts, key=lambda item: -item[2][1])), key=lambda r: r[:2])
        outcome = Outcome("survived", 0.0, command_seconds=[0.0] * len(self.commands))
        maps: list[list[dict[str, dict[str, list[str]]]]] = [[] for _ in self.commands]
        for i, _, step, part_map in done:
            outcome.durations.update(step.durations)
            outcome.command_seconds[i] = round(outcome.command_seconds[i] + step.seconds, 1)
            if part_map is not None:
                maps[i].append(part_map)
            elif outcome.verdict == "survived":
                outcome.verdict, outcome.detail, outcome.killer = step.verdict, step.detail, step.killer
                outcome.command, outcome.command_index = self.command_line(self.commands[i]), i
        if outcome.verdict == "survived":
            self.maps = [selection.merged(m) for m in maps]
        return outcome

    def _parts(self, cmd: list[str]) -> list[tuple[list[str], float]]:
        """``cmd`` as at most ``--jobs`` commands over disjoint sets of the test files of its first argument, a
        directory, with each part's weight: the files' seconds in the last recording (DURATIONS_FILE in the
        coverage cache: any tree's, a guide only), else their sizes; ``cmd`` whole where it names no directory."""
        target = self.snapshot / cmd[0] if cmd and not cmd[0].startswith("-") else None
        if self.args.jobs < 2 or target is None or not target.is_dir():
            return [(cmd, 1.0)]
        files = sorted(p.relative_to(self.snapshot).as_posix() for p in target.rglob("*.py")
                       if p.name.startswith("test_") or p.name.endswith("_test.py"))
        known: dict[str, float] = defaultdict(float)
        with contextlib.suppress(OSError, ValueError, AttributeError):
            for test, seconds in json.loads((ROOT / selection.CACHE_DIR / DURATIONS_FILE).read_text()).items():
                known[test.split("::")[0]] += float(seconds)
        weight = {f: known[f] if known else float((self.snapshot / f).stat().st_size) for f in files}
        bins: list[tuple[list[str], float]] = [([], 0.0) for _ in range(min(self.args.jobs, len(files)))]
        for f in sorted(files, key=lambda f: -weight[f]):  # longest first into the lightest part
            b = min(range(len(bins)), key=lambda j: bins[j][1])
            bins[b] = ([*bins[b][0], f], bins[b][1] + weight[f])
        return [([*sorted(names), *cmd[1:]], w) for names, w in bins if names]

    def _one_command(self, cmd: list[str], env: dict[str, str], tmp: Path, timeout: float | None,
                     prefix: list[str] | tuple[str, ...] = ()) -> Outcome:
        """Run pytest ``cmd`` (after ``prefix``'s interpreter arguments, e.g. coverage's) and tell its verdict."""
        gen_report = Path(env["WY_GEN_REPORT"])
        guard_report = Path(env["WY_MUTANT_REPORT"])
        for p in (gen_report, guard_report):
            p.unlink(missing_ok=True)
        start = time.monotonic()
        if timeout is not None and timeout <= 0:
            return Outcome("timeout", 0.0, "no time left for this command")
        full = [sys.executable, *prefix, "-m", "pytest", *cmd, *PYTEST_FLAGS, *self.args.pytest_args]
        proc = subprocess.Popen(full, cwd=self.snapshot, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True)
        with self.lock:
            if self.stopping:
                _kill_group(proc)
            self.procs.add(proc)
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.communicate()
            return Outcome("timeout", time.monotonic() - start, f"no verdict within the timeout ({' '.join(cmd)})")
        except BaseException:  # Ctrl-C or SIGTERM while this thread waits: the group must not outlive us
            _kill_group(proc)
            raise
        finally:
            with self.lock:
                self.procs.discard(proc)
        seconds = time.monotonic() - start
        if self.args.verbose:
            print(f"--- {' '.join(cmd)} (exit {proc.returncode})\n{output}", flush=True)
        try:
            gen = json.loads(gen_report.read_text())
        except (OSError, ValueError):
            gen = {}
        durations = gen.get("durations", {})
        killer = gen.get("first_failure")
        rc = proc.returncode
        if self.stopping:
            return Outcome("error", seconds, "interrupted")
        if not gen.get("import_error") and rc in (2, 3, 4) and env.get("WY_GEN_IMPORT_ALL") == "1":
            # A collection, internal or usage error before the plugin's import check ran (a conftest
            # imports wy_ascend): import every module in a process of its own to tell.
            gen["import_error"] = import_error(env)
        if gen.get("import_error"):
            return Outcome("invalid", seconds, f"does not import: {gen['import_error']}")
        if rc == -signal.SIGKILL:
            return Outcome("error", seconds, "killed by SIGKILL (out of memory?): no verdict")
        if rc < 0:
            return Outcome("killed", seconds, f"suite crashed with {signal.Signals(-rc).name}", killer, durations=durations)
        if "mutant guard" in output:
            return Outcome("error", seconds, hand._first_failure(output))
        if rc in (0, 1, 2):
            try:
                loaded = json.loads(guard_report.read_text())
            except (OSError, ValueError):
                loaded = None
            if loaded is None and rc != 2:
                return Outcome("error", seconds, "guard report missing: cannot tell which wy_ascend ran")
            if loaded is not None and (loaded["outside"] or PACKAGE_NAME not in loaded["modules"]):
                return Outcome("error", seconds, f"mutated copy not (fully) loaded: {loaded['outside']}")
        if rc == 0:
            return Outcome("survived", seconds, "", durations=durations)
        if rc in (1, 2):  # a test failed (1) or collection failed / the session was interrupted by an error (2)
            return Outcome("killed", seconds, hand._first_failure(output), killer, durations=durations)
        return Outcome("error", seconds, f"pytest exit {rc}: {hand._first_failure(output)}", durations=durations)

    def note_kill(self, file: str, killer: str | None, command_index: int | None) -> None:
        with self.lock:
            if killer and not killer.startswith("collecting "):
                self.killers[file][killer] += 1
            if command_index is not None:
                self.command_kills[file][command_index] += 1

    def stop(self) -> None:
        """Kill every pytest process group this runner started (Ctrl-C)."""
        with self.lock:
            self.stopping = True
            for proc in list(self.procs):
                _kill_group(proc)


IMPORT_CHECK = """
import importlib, os, sys
from pathlib import Path
pkg = Path(os.environ["WY_MUTANT_SRC"]) / "wy_ascend"
names = sorted({".".join(p.relative_to(pkg.parent).with_suffix("").parts).removesuffix(".__init__")
                for p in pkg.rglob("*.py") if p.stem != "__main__"})
for name in names:
    try:
        importlib.import_module(name)
    except BaseException as e:
        print(f"{name}: {type(e).__name__}: {e}"[:500])
        sys.exit(1)
"""


def import_error(env: dict[str, str]) -> str | None:
    """Why the mutated package at ``env["WY_MUTANT_SRC"]`` does not import (None: every module imports)."""
    proc = subprocess.run([sys.executable, "-c", IMPORT_CHECK], env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode == 0:
        return None
    return (proc.stdout.strip() or proc.stderr.strip()[-500:] or f"exit {proc.returncode}")


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the process group of a pytest this module started
    except (ProcessLookupError, PermissionError):
        pass


# --------------------------------------------------------------------------- snapshot, fingerprints, report


def snapshot_tree(dest: Path, rev: str | None = None) -> Path:
    """Copy the working tree (less .git, caches and outputs), or the files of commit ``rev``
    (``git archive``: what CI checks out), to ``dest``/tree; return that path."""
    tree = dest / "tree"
    if rev is None:
        shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(*SNAPSHOT_IGNORE), symlinks=True)
        return tree
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev], capture_output=True, check=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12 / 3.11.4
            tar.extractall(tree, filter="data")
        else:
            tar.extractall(tree)  # noqa: S202 - our own repository's archive
    return tree


def share_environment(tree: Path) -> Path | None:
    """Link the environment this runs in (a venv inside the checkout, e.g. .venv) into the snapshot
    ``tree`` at the same place, so that a test running the README's ``nox`` commands there finds the
    one environment, installed, where it would otherwise build its own: minutes of downloads on the
    first mutant that runs such a test, and two jobs building it at once race (four `error` verdicts
    of the seed-3896271331 sample, docs/ci.md). Only where the environment records the cpu install of
    the snapshot's own pyproject.toml (its install.py's record), so nox installs nothing into it.
    The mutant's src/ still comes first (PYTHONPATH). Returns the link, or None (nox then builds one)."""
    if sys.prefix == sys.base_prefix:  # no venv: the interpreter's own installation
        return None
    prefix = Path(sys.prefix).resolve()
    try:
        rel = prefix.relative_to(ROOT.resolve())
    except ValueError:
        return None
    spec = importlib.util.spec_from_file_location("wy_snapshot_install", tree / "install.py")
    if spec is None or spec.loader is None:
        return None
    install = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(install)
    if not install.installed(prefix, install.install_key("cpu", dev=True)):
        return None
    link = tree / rel
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(prefix, target_is_directory=True)
    return link


def fingerprint(root: Path, under: str | None = None) -> str:
    """sha256 over the paths and contents of the files of ``root`` (or of ``root/under``)."""
    h = hashlib.sha256()
    base = root / under if under else root
    for p in sorted(base.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            rel = p.relative_to(root).as_posix()
            if rel.startswith("mutation/") or rel.startswith("mutants-report") or (
                    p.name.startswith("mutants-") and p.suffix in (".json", ".md")):
                # the runner, its equivalence list and its reports (also one kept as docs/data/mutants-*.json,
                # so that committing a shard's report does not void its resume): no verdict depends on them
                continue
            h.update(rel.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def load_equivalent(path: Path | None) -> list[dict[str, str]]:
    if path is None or not path.exists():
        return []
    doc = json.loads(path.read_text())
    entries = doc.get("mutants", doc) if isinstance(doc, dict) else doc
    return [e for e in entries if isinstance(e, dict) and (e.get("id") or e.get("key"))]


def summarize(results: dict[str, dict[str, Any]], equivalent: list[dict[str, str]], timeouts_kill: bool,
              ) -> dict[str, Any]:
    """Counts and scores of ``results`` (id -> result)."""
    counts = Counter(r["verdict"] for r in results.values())
    eq_ids = {e.get("id") for e in equivalent} | {e.get("key") for e in equivalent}
    survived = [i for i, r in results.items() if r["verdict"] == "survived"]
    argued = [i for i in survived if i in eq_ids or results[i]["key"] in eq_ids]
    killed = counts["killed"] + (counts["timeout"] if timeouts_kill else 0)
    counted = killed + counts["survived"]
    score = killed / counted if counted else None
    non_eq = counted - len(argued)
    seconds = {v: sorted(r["seconds"] for r in results.values() if r["verdict"] == v and "seconds" in r)
               for v in ("killed", "survived", "timeout", "invalid")}
    return {
        "killed": counts["killed"], "survived": counts["survived"], "timeout": counts["timeout"],
        "invalid": counts["invalid"], "error": counts["error"], "pending": counts["pending"], "gone": counts["gone"],
        "timeouts_counted_as_killed": timeouts_kill,
        "score": score,
        "argued_equivalent": len(argued),
        "score_non_equivalent": killed / non_eq if non_eq else None,
        "median_seconds": {v: xs[len(xs) // 2] for v, xs in seconds.items() if xs},
        "total_seconds": round(sum(sum(xs) for xs in seconds.values()), 1),
        "score_note": "(killed + timeout) / (killed + timeout + survived)" if timeouts_kill
        else "killed / (killed + survived); timeouts not counted (the baseline did not finish within the timeout)",
    }


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(doc: dict[str, Any]) -> str:
    """The report as markdown: score, tables per file and operator, killers, survivors with diffs."""
    s = doc["summary"]
    results = doc["results"]
    equivalent = {e.get("id") or e.get("key"): e.get("reason", "") for e in doc.get("equivalent", [])}
    title = (f"the {doc['n']} survivors of {doc['recheck_of']} not argued equivalent, again" if doc.get("recheck_of")
             else f"{doc['n']} sampled (seed {doc['seed']})")
    if doc.get("shard"):
        title = f"shard {doc['shard']}, {doc['n']} of {doc.get('sample_size', '?')} " + (
            f"survivors of {doc['recheck_of']}, again" if doc.get("recheck_of") else f"sampled (seed {doc['seed']})")
    merged = doc.get("merged_from")
    if merged:
        title += f", merged from {len(merged)} reports"
    out = [f"# Generated mutants: {title}", ""]
    if merged:
        missing = doc.get("missing", [])
        out += [f"{doc['n']} of the sample's {doc.get('sample_size', '?')} mutants have a result, from "
                + ", ".join(f"`{m['report']}` (shard {m['shard'] or 'none'}, {m['n']} mutants"
                            + ("" if m.get("finished") else ", unfinished") + ")" for m in merged)
                + (f"; **{len(missing)} missing** (in no report): " + ", ".join(f"`{i}`" for i in missing[:20])
                   + (" ..." if len(missing) > 20 else "") if missing else "; none missing") + ".", ""]
    again = doc.get("rechecked")
    if again:
        out += [f"Survivors rechecked on a later tree (`{again['report']}`, fingerprint `{again['fingerprint']}`, src "
                f"`{again['src_fingerprint']}`): {again['decided']} take their verdict there; gone: {again['gone']} "
                "(their code changed since; not counted). The score is of that tree, the other verdicts carried over "
                "from this sample's.", "", "| survived on this sample's tree | there | first failing test there |",
                "|---|---|---|"]
        out += [f"| `{r['id']}` | {r['verdict']} | `{_cell(r.get('killer') or r.get('detail') or '')}` |"
                for r in results if r.get("first") is not None or r["verdict"] == "gone"]
        out.append("")
    out += [f"Score: **{_pct(s['score'])}** = {s['score_note']}; killed {s['killed']}, timeout {s['timeout']}, "
            f"survived {s['survived']}, invalid {s['invalid']} (not counted), error {s['error']} (not counted)"
            + (f", pending {s['pending']}" if s["pending"] else "") + (f", gone {s['gone']}" if s.get("gone") else "")
            + ".",
            f"Without the {s['argued_equivalent']} survivors argued equivalent: **{_pct(s['score_non_equivalent'])}**.",
            "", "Median seconds per mutant: " + (", ".join(f"{v} {x:.0f}" for v, x in s["median_seconds"].items())
                                                 or "n/a") + f"; {s['total_seconds']:.0f} s of runs in all.",
            "", f"Commands (each `-x`, without xdist, on a copy of the tree at fingerprint `{doc['fingerprint']}`, "
            f"src `{doc['src_fingerprint']}`):", ""]
    out += [f"    {c}" for c in doc["commands"]]
    if doc.get("select"):
        out += ["", "Each mutant ran only the tests of each command that execute its changed lines (`--select`, "
                "mutation/selection.py; a line run outside any test: all of them)."]
    if doc.get("not_built"):
        out += ["", "Not built (not run, not counted):", ""] + [f"- `{b['id']}`: {b['why']}" for b in doc["not_built"]]
    base = doc.get("baseline") or {}
    verdict = "pass" if base.get("verdict") == "survived" else base.get("verdict", "?")
    out += ["", f"Baseline: {verdict} in {base.get('seconds', 0):.0f} s {base.get('command_seconds', '')}; per-mutant "
            f"timeout {doc['timeout']:.0f} s; {doc['sites']} sites in src/wy_ascend; run time {doc.get('elapsed', 0):.0f} s.",
            ""]
    for label, key in (("file", "file"), ("operator", "operator")):
        table: dict[str, Counter[str]] = defaultdict(Counter)
        for r in results:
            table[r[key]][r["verdict"]] += 1
        out += [f"| {label} | killed | timeout | survived | invalid | error | sites |", "|---|---|---|---|---|---|---|"]
        for k in sorted(table):
            c = table[k]
            sites = doc["sites_per_file"].get(k, "") if key == "file" else doc["sites_per_operator"].get(k, "")
            out.append(f"| {k} | {c['killed']} | {c['timeout']} | {c['survived']} | {c['invalid']} | {c['error']} "
                       f"| {sites} |")
        out.append("")
    killers = Counter(r["killer"] for r in results if r["verdict"] == "killed" and r.get("killer"))
    if killers:
        out += ["| first failing test | mutants killed |", "|---|---|"]
        out += [f"| `{_cell(k)}` | {n} |" for k, n in killers.most_common()]
        out.append("")
    groups = (("Survivors", "survived"), ("Timeouts", "timeout"), ("Errors (not counted)", "error"),
              ("Invalid (do not import; not counted)", "invalid"),
              ("Gone (the mutated lines changed on the rechecked tree; not counted)", "gone"))
    for title, verdict in groups:
        rows = [r for r in results if r["verdict"] == verdict]
        if not rows:
            continue
        out += [f"## {title} ({len(rows)})", ""]
        if verdict == "survived":
            out += ["Each survivor: killed by a new property or test, or argued equivalent "
                    f"(list it in `{DEFAULT_EQUIVALENT}` with its id or key and the reason).", ""]
        out += ["| id | key | change | before | after | equivalent? / detail |", "|---|---|---|---|---|---|"]
        for r in rows:
            before, after = r["changed_lines"]
            note = equivalent.get(r["id"]) or equivalent.get(r["key"]) or r.get("detail", "")
            out.append(f"| `{r['id']}` | `{r['key']}` | {_cell(r['description'])} | `{_cell(' / '.join(before))}` "
                       f"| `{_cell(' / '.join(after))}` | {_cell(note)} |")
        out.append("")
        if verdict in ("survived", "timeout"):
            for r in rows:
                out += [f"<details><summary><code>{r['id']}</code></summary>", "", "```diff", r["diff"].rstrip(), "```",
                        "", "</details>", ""]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------- shards and merging


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` -> (K, N) with 1 <= K <= N; ValueError saying what is wrong."""
    m = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if not m:
        raise ValueError(f"{text!r} is not K/N (e.g. 1/4: the first of four shards)")
    k, n = int(m[1]), int(m[2])
    if n < 1 or not 1 <= k <= n:
        raise ValueError(f"{text!r}: need 1 <= K <= N")
    return k, n


def shard_of(items: list[Any], k: int, n: int) -> list[Any]:
    """The items of shard ``k`` of ``n`` (1-based): those at positions i with i % n == k - 1."""
    return [x for i, x in enumerate(items) if i % n == k - 1]


def shard_report_name(k: int, n: int) -> str:
    """The default report of shard k/n: mutants-report.shard-K-of-N.json (no two shards share one)."""
    return f"{DEFAULT_REPORT.removesuffix('.json')}.shard-{k}-of-{n}.json"


# What must be equal in every report merged: the same sample (seed, N, sampling, operators, the
# source it was drawn from, hence the same ids) run with the same commands on the same tree.
# "seed" and "generated" (N) first, so that a different sample is named by its cause.
MERGE_SAME = ("tool", "seed", "generated", "recheck_of", "sampling", "operators", "src_fingerprint", "sample_size",
              "sample_ids", "fingerprint", "commands")
FINAL = ("killed", "survived", "timeout", "invalid")


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def merge_reports(paths: list[Path], equivalent: list[dict[str, str]]) -> dict[str, Any]:
    """One report of the shard reports at ``paths`` (ValueError, naming the file and the field or
    the mutant, when they are not of one sample or two of them give one mutant different verdicts).
    Each mutant's result is the one that exists: a final verdict over ``error`` over ``pending``."""
    docs: list[dict[str, Any]] = []
    for p in paths:
        try:
            d = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"--merge: {p} is not a readable JSON report ({type(e).__name__}: {e})") from e
        if not isinstance(d, dict) or d.get("tool") != "mutation/generated.py" or not isinstance(d.get("results"), list):
            raise ValueError(f"--merge: {p} is not a generated-mutant report")
        missing = [f for f in MERGE_SAME if f not in d]
        if missing:
            raise ValueError(f"--merge: {p} has no {', '.join(missing)} (written before --shard existed?)")
        docs.append(d)
    first = docs[0]
    for p, d in zip(paths[1:], docs[1:]):
        for f in MERGE_SAME:
            if d[f] != first[f]:
                raise ValueError(f"--merge: {p} is not of the same sample as {paths[0]}: {f} differs "
                                 f"({_short(d[f])} there, {_short(first[f])} in {paths[0]})")
    sample_ids: list[str] = first["sample_ids"]
    in_sample = set(sample_ids)
    merged: dict[str, dict[str, Any]] = {}
    origin: dict[str, Path] = {}
    rank = {"pending": 0, "error": 1, **dict.fromkeys(FINAL, 2)}
    for p, d in zip(paths, docs):
        for r in d["results"]:
            i = r["id"]
            if i not in in_sample:
                raise ValueError(f"--merge: {p} has a result for {i}, which is not in the sample")
            prev = merged.get(i)
            if prev is not None and prev["verdict"] in FINAL and r["verdict"] in FINAL and prev["verdict"] != r["verdict"]:
                raise ValueError(f"--merge: shards disagree on {i}: {prev['verdict']} in {origin[i]}, "
                                 f"{r['verdict']} in {p}")
            if prev is None or rank.get(r["verdict"], 0) > rank.get(prev["verdict"], 0):
                merged[i], origin[i] = r, p
    not_built = list({b["id"]: b for d in docs for b in d.get("not_built", [])}.values())
    unbuilt = {b["id"] for b in not_built}
    results = [merged[i] for i in sample_ids if i in merged]
    absent = [i for i in sample_ids if i not in merged and i not in unbuilt]
    timeouts_kill = all(d.get("timeouts_kill", True) for d in docs)
    by_id = {r["id"]: r for r in results}
    baselines = [d["baseline"] for d in docs if d.get("baseline")]
    doc = {**first, "n": len(results), "shard": None, "results": results, "not_built": not_built,
           "equivalent": equivalent, "timeouts_kill": timeouts_kill,
           "timeout": max(float(d.get("timeout") or 0.0) for d in docs),
           "baseline": next((b for b in baselines if b.get("verdict") == "survived"), baselines[0] if baselines else None),
           "elapsed": round(sum(float(d.get("elapsed") or 0.0) for d in docs), 1),
           "merged_from": [{"report": str(p), "shard": d.get("shard"), "n": d.get("n"), "finished": d.get("finished"),
                            "elapsed": d.get("elapsed"), "baseline_seconds": (d.get("baseline") or {}).get("seconds")}
                           for p, d in zip(paths, docs)],
           "missing": absent,
           "finished": not absent and all(d.get("finished") for d in docs),
           "summary": summarize(by_id, equivalent, timeouts_kill),
           "survivors": [r["id"] for r in results if r["verdict"] == "survived"]}
    return doc


def fold_recheck(doc: dict[str, Any], path: Path, equivalent: list[dict[str, str]]) -> dict[str, Any]:
    """``doc`` with the verdicts of ``path``, a ``--recheck`` of its survivors on a later tree: each survivor the
    recheck decided takes that verdict (its first one and tree kept under ``first``), each it could not build
    (its lines changed since) is ``gone`` and not counted; ValueError naming the file, or the mutant, where the
    recheck is not of this sample's survivors."""
    try:
        r = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"--rechecked: {path} is not a readable JSON report ({type(e).__name__}: {e})") from e
    if not isinstance(r, dict) or r.get("tool") != "mutation/generated.py" or not r.get("recheck_of") \
            or not isinstance(r.get("results"), list):
        raise ValueError(f"--rechecked: {path} is not a --recheck report (no recheck_of)")
    by_id = {x["id"]: x for x in doc["results"]}
    for rr in [*r["results"], *r.get("not_built", [])]:
        first = by_id.get(rr["id"])
        if first is None or first["verdict"] != "survived" or rr.get("key", first["key"]) != first["key"]:
            raise ValueError(f"--rechecked: {path} has {rr['id']}, which is not a survivor of this sample")
    for rr in r["results"]:
        if rr["verdict"] in FINAL:
            first = by_id[rr["id"]]
            by_id[rr["id"]] = {**rr, "first": {"verdict": first["verdict"], "fingerprint": first["fingerprint"],
                                               "src_fingerprint": first["src_fingerprint"]}}
    for b in r.get("not_built", []):
        by_id[b["id"]] = {**by_id[b["id"]], "verdict": "gone", "detail": b["why"]}
    results = [by_id[x["id"]] for x in doc["results"]]
    return {**doc, "results": results,
            "rechecked": {"report": str(path), "fingerprint": r["fingerprint"], "src_fingerprint": r["src_fingerprint"],
                          "commands": r["commands"], "decided": sum(x.get("first") is not None for x in results),
                          "gone": len(r.get("not_built", []))},
            "summary": summarize(by_id, equivalent, doc["timeouts_kill"]),
            "survivors": [x["id"] for x in results if x["verdict"] == "survived"]}


def merge_main(args: argparse.Namespace) -> int:
    """``--merge REPORT ... --report OUT``: one report (and its .md) of shard reports."""
    try:
        equivalent = load_equivalent(args.equivalent)
        doc = merge_reports(args.merge, equivalent)
        if args.rechecked is not None:
            doc = fold_recheck(doc, args.rechecked, equivalent)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    report_path: Path = args.report.resolve()
    md_path = report_path.with_suffix(".md")
    _atomic_write(report_path, json.dumps(doc, indent=1) + "\n")
    _atomic_write(md_path, markdown(doc))
    s = doc["summary"]
    shards = ", ".join(str(m["shard"] or "whole sample") for m in doc["merged_from"])
    print(f"merged {len(args.merge)} reports ({shards}): {doc['n']} of the sample's {doc['sample_size']} mutants, "
          f"{len(doc['missing'])} missing; score {_pct(s['score'])} = {s['score_note']}: killed {s['killed']}, "
          f"timeout {s['timeout']}, survived {s['survived']}, invalid {s['invalid']}, error {s['error']}, pending "
          f"{s['pending']}" + (f", gone {s['gone']} (survivors rechecked in {doc['rechecked']['report']})"
                               if doc.get("rechecked") else "") + f"; non-equivalent score {_pct(s['score_non_equivalent'])}")
    print(f"report: {report_path} and {md_path}")
    return 0


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m mutation --generated", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--generated", type=int, metavar="N", help="how many mutants to sample")
    p.add_argument("--recheck", type=Path, metavar="REPORT",
                   help="run the survivors of REPORT (those not argued equivalent) again on this tree: each "
                        "survivor's diff is applied to the current source; one whose lines changed is listed as gone")
    p.add_argument("--merge", type=Path, nargs="+", metavar="REPORT",
                   help="combine shard reports of one sample (same seed, N, tree) into --report OUT and its .md")
    p.add_argument("--rechecked", type=Path, metavar="REPORT",
                   help="with --merge: fold in REPORT, a --recheck of the merged sample's survivors on a later tree: "
                        "each survivor it decided takes that verdict (the tree named with it), each whose code is "
                        "gone is 'gone' (not counted), so the score is of the later tree")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    p.add_argument("--seed-from-commit", action="store_true",
                   help="the seed is the mutated commit's hash (--rev, default HEAD): its first 8 hex digits")
    p.add_argument("--shard", metavar="K/N",
                   help="run only shard K of N (1-based): the sampled mutants at positions i with i %% N == K-1 "
                        "(the baseline runs in every shard; default report mutants-report.shard-K-of-N.json)")
    p.add_argument("--jobs", type=int, default=2, help="mutants run in parallel (default 2)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds per mutant, all commands (default: 3 x the baseline's time + 120)")
    p.add_argument("--backend", help="WY_ASCEND_BACKEND of the runs (default: the environment's, else cpu)")
    p.add_argument("--tests", action="append", default=None, metavar="PATH",
                   help="development: one pytest command per value instead of CI's commands (repeatable; "
                        "'fuzz/test_fuzz.py::test_plan_coverage --profile ci' gives a command its own options)")
    p.add_argument("--rev", metavar="REV", default=None,
                   help="mutate and test the files of this commit (git archive; default HEAD, so that the run "
                        "is of committed work and nobody's work in progress)")
    p.add_argument("--worktree", action="store_true",
                   help="mutate and test the working tree as it is (uncommitted edits included) instead of a commit")
    p.add_argument("--report", type=Path, default=None,
                   help=f"JSON report (default {DEFAULT_REPORT}, with --shard K/N {shard_report_name(1, 4)} "
                        "for 1/4; the markdown goes next to it as .md)")
    p.add_argument("--equivalent", type=Path, default=ROOT / DEFAULT_EQUIVALENT,
                   help=f"JSON list of survivors argued equivalent (default {DEFAULT_EQUIVALENT} if it exists)")
    p.add_argument("--only", action="append", default=[], metavar="ID", help="run only these sampled ids (repeatable)")
    p.add_argument("--operators", default=",".join(OPERATORS), help="comma-separated operators to sample from")
    p.add_argument("--files", action="append", default=[], metavar="FILE",
                   help="sample only from these files of src/wy_ascend (repeatable; e.g. planning.py)")
    p.add_argument("--uniform", action="store_true", help="sample uniformly over all sites (not per file)")
    p.add_argument("--min-per-file", type=int, default=2, help="stratified sampling: at least this many per file")
    p.add_argument("--fresh", action="store_true", help="ignore an existing report (default: resume from it)")
    p.add_argument("--keep-killed", action="store_true",
                   help="resume: keep kills made on another test suite too (src/wy_ascend unchanged)")
    p.add_argument("--shrink", action="store_true", help="keep Hypothesis' shrink phase (slower kills, same verdicts)")
    p.add_argument("--select", action="store_true",
                   help="run on each mutant only the tests that execute its changed lines (mutation/selection.py: "
                        "coverage recorded once per tree with the baseline, cached in .mutants-coverage/)")
    p.add_argument("--no-reorder", action="store_true", help="run the tests in pytest's order")
    p.add_argument("--dry-run", action="store_true", help="print the sample and its diffs; run nothing")
    p.add_argument("--blind-spots", action="store_true",
                   help="list the statements inside functions that no test executes (the coverage map of --select, "
                        "recorded first if this tree has none); run no mutant")
    p.add_argument("-v", "--verbose", action="store_true", help="print each command's pytest output")
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = p.parse_args(argv)
    modes = [m for m, v in (("--generated", args.generated), ("--recheck", args.recheck), ("--merge", args.merge),
                            ("--blind-spots", args.blind_spots or None)) if v is not None]
    if len(modes) != 1:
        p.error("give one of --generated N, --recheck REPORT, --merge REPORT [REPORT ...] and --blind-spots"
                + (f" (not {' and '.join(modes)} together)" if modes else ""))
    if args.shard is not None:
        try:
            args.shard = parse_shard(args.shard)
        except ValueError as e:
            p.error(f"--shard: {e}")
    if args.rechecked is not None and (args.merge is None or not args.rechecked.is_file()):
        p.error(f"--rechecked goes with --merge and names a --recheck report; no report at {args.rechecked}"
                if args.merge is not None else "--rechecked goes with --merge")
    if args.merge is not None:
        clash = [o for o, v in (("--shard", args.shard), ("--dry-run", args.dry_run), ("--only", args.only),
                                ("--fresh", args.fresh)) if v]
        if clash:
            p.error(f"--merge combines finished reports; {', '.join(clash)} does not apply")
        for path in args.merge:
            if not path.is_file():
                p.error(f"--merge: no report at {path}")
        args.report = args.report if args.report is not None else ROOT / DEFAULT_REPORT
        if any(path.resolve() == args.report.resolve() for path in args.merge):
            p.error(f"--merge: the output --report {args.report} is one of the reports merged; name another")
        return args
    if args.report is None:
        args.report = ROOT / (shard_report_name(*args.shard) if args.shard else DEFAULT_REPORT)
    if (args.generated is not None and args.generated < 1) or args.jobs < 1:
        p.error("--generated and --jobs must be >= 1")
    if args.recheck is not None and not args.recheck.is_file():
        p.error(f"--recheck: no report at {args.recheck}")
    if args.worktree and args.rev:
        p.error("--worktree and --rev exclude each other")
    if not args.worktree and args.rev is None:
        if (ROOT / ".git").exists():
            args.rev = "HEAD"
        else:  # a copy without history (e.g. this tool's own snapshot): the files as they are
            args.worktree = True
    unknown = set(args.operators.split(",")) - set(OPERATORS)
    if unknown:
        p.error(f"unknown operators {sorted(unknown)}; known: {', '.join(OPERATORS)}")
    if args.seed_from_commit:
        if args.rev is None:
            p.error("--seed-from-commit names the seed by the commit mutated (--rev, default HEAD), not --worktree")
        try:
            args.seed = commit_seed(args.rev)
        except subprocess.CalledProcessError as e:
            p.error(f"--seed-from-commit: git rev-parse {args.rev} failed: {e.stderr.decode().strip()}")
    return args


def commit_seed(rev: str, root: Path = ROOT) -> int:
    """The sampling seed a commit fixes: its hash's first 8 hex digits as an integer (a sample drawn after
    the work, from what was committed, so no one picks the seed or works its survivors in advance)."""
    full = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", f"{rev}^{{commit}}"],
                          capture_output=True, check=True).stdout.decode().strip()
    return int(full[:8], 16)


def recheck_mutants(report: Path, sources: dict[str, str],
                    equivalent: list[dict[str, str]]) -> tuple[list[Mutant], list[tuple[Site, str]]]:
    """The survivors of ``report`` not argued ``equivalent``, made again on ``sources`` (``reapply``);
    those that no longer apply, with the reason."""
    argued = {e.get("id") for e in equivalent} | {e.get("key") for e in equivalent}
    mutants, gone = [], []
    fields = ("id", "key", "file", "line", "col", "operator", "description", "diff", "verdict")
    try:
        results = json.loads(report.read_text())["results"]
        missing = sorted({f for r in results for f in fields if f not in r})
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"--recheck: {report} is not a generated-mutant report ({type(e).__name__}: {e})") from e
    if missing:
        raise ValueError(f"--recheck: {report} is not a generated-mutant report (results without {missing})")
    for r in results:
        if r["verdict"] != "survived" or r["id"] in argued or r["key"] in argued:
            continue
        m = reapply(r, sources)
        if isinstance(m, str):
            gone.append((Site(r["file"], r["line"], r["col"], r["operator"], (), description=r["description"],
                              id=r["id"]), m))
        else:
            mutants.append(m)
    return mutants, gone


def _result(m: Mutant, verdict: str, fp: str, src_fp: str, outcome: Outcome | None = None) -> dict[str, Any]:
    before, after = m.changed_lines
    r: dict[str, Any] = {
        "id": m.id, "key": m.key, "file": m.site.file, "line": m.site.line, "col": m.site.col,
        "operator": m.site.operator, "description": m.site.description, "verdict": verdict,
        "changed_lines": [before, after], "diff": m.diff, "mutant_sha": m.sha, "fingerprint": fp,
        "src_fingerprint": src_fp,
    }
    if outcome is not None:
        r.update(seconds=round(outcome.seconds, 1), detail=outcome.detail, killer=outcome.killer,
                 command=outcome.command, command_index=outcome.command_index,
                 command_seconds=outcome.command_seconds, selected=outcome.selected)
    return r


def save_map(path: Path, maps: list[dict[str, dict[str, list[str]]]], durations: dict[str, float]) -> None:
    """Cache a tree's coverage map at ``path`` and the baseline's test durations beside it."""
    _atomic_write(path, json.dumps(maps))
    _atomic_write(path.parent / DURATIONS_FILE, json.dumps(durations))
    print(f"coverage map recorded: {path}", flush=True)


def blind_main(args: argparse.Namespace) -> int:
    """--blind-spots: the statements inside functions that no test executes (``selection.blind_spots``), from
    the tree's cached coverage map, recorded first where there is none (as ``--select``'s baseline does)."""
    with tempfile.TemporaryDirectory(prefix="wy-gen-snapshot-") as snap_name:
        snapshot = snapshot_tree(Path(snap_name), args.rev)
        sources = read_sources(snapshot / "src" / PACKAGE_NAME)
        share_environment(snapshot)
        runner = Runner(snapshot, args)
        path = selection.cache_path(ROOT, fingerprint(snapshot), [runner.command_line(c) for c in runner.commands])
        if path.is_file():
            maps = json.loads(path.read_text())
            print(f"coverage map of this tree: {path}", flush=True)
        else:
            print("recording the coverage map (the unmutated suite under coverage)", flush=True)
            out = runner.run(None, None, record=True)
            if out.verdict != "survived" or runner.maps is None:
                print(f"the unmutated suite must pass to be mapped: {out.verdict} {out.detail}", file=sys.stderr)
                return 2
            maps = runner.maps
            save_map(path, maps, out.durations)
    spots = selection.blind_spots(maps, sources)
    total = sum(len(v) for v in spots.values())
    print(f"{total} statements inside functions of src/{PACKAGE_NAME} run by no test (a mutant of one survives):")
    for rel, lines in spots.items():
        text = sources[rel].splitlines()
        print(f"{rel} ({len(lines)})")
        for n in lines:
            print(f"  {n:5d}  {text[n - 1].strip()[:100]}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.merge:
        return merge_main(args)
    if args.blind_spots:
        return blind_main(args)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="wy-gen-snapshot-") as snap_name:
        try:
            snapshot = snapshot_tree(Path(snap_name), args.rev)
        except subprocess.CalledProcessError as e:
            print(f"git archive {args.rev} failed: {e.stderr.decode().strip()}", file=sys.stderr)
            return 2
        package = snapshot / "src" / PACKAGE_NAME
        operators = set(args.operators.split(","))
        sources = read_sources(package)
        all_sites = find_sites(sources)
        sites = [s for s in all_sites if s.operator in operators and (not args.files or s.file in args.files)]
        if args.recheck:
            try:
                mutants, broken = recheck_mutants(args.recheck, sources, load_equivalent(args.equivalent))
            except ValueError as e:
                print(e, file=sys.stderr)
                return 2
            picked = [m.site for m in mutants]
        else:
            picked = sample(sites, args.generated, args.seed, uniform=args.uniform, min_per_file=args.min_per_file)
            mutants, broken = build_mutants(sources, picked)
        sample_ids = [s.id for s in picked]
        if args.shard:  # by position in the whole sample, the same in every shard: shards are disjoint, cover it
            in_shard = {s.id for s in shard_of(picked, *args.shard)}
            mutants = [m for m in mutants if m.id in in_shard]
            broken = [(s, why) for s, why in broken if s.id in in_shard]
        if args.only:
            known = {m.id for m in mutants}
            missing = [i for i in args.only if i not in known]
            if missing:
                where = f" (shard {args.shard[0]}/{args.shard[1]})" if args.shard else ""
                print(f"ids not in the sample{where}: {missing}", file=sys.stderr)
                return 2
            mutants = [m for m in mutants if m.id in args.only]
        per_file = Counter(s.file for s in sites)
        chosen = f"rechecking {len(picked)} survivors of {args.recheck}" if args.recheck else \
            f"sampled {len(picked)} (seed {args.seed})"
        if args.shard:
            chosen += f"; shard {args.shard[0]}/{args.shard[1]}: {len(mutants)} of them"
        print(f"generated mutants: {len(sites)} sites in {len(per_file)} files of src/{PACKAGE_NAME}; {chosen}: "
              + ", ".join(f"{f} {n}" for f, n in sorted(Counter(m.site.file for m in mutants).items())), flush=True)
        for s, why in broken:
            print(f"  could not build {s.id}: {why}", file=sys.stderr)
        if args.dry_run:
            for m in mutants:
                print(f"\n{m.id}  [{m.key}]  {m.site.description}\n{m.diff}", end="")
            return 0
        fp, src_fp = fingerprint(snapshot), fingerprint(snapshot, f"src/{PACKAGE_NAME}")
        shared = share_environment(snapshot)
        shared_text = f"{shared.name} -> {sys.prefix}" if shared else "none shared (nox builds its own there)"
        print(f"environment of the snapshot's nox sessions: {shared_text}", flush=True)
        runner = Runner(snapshot, args)
        commands = [runner.command_line(c) for c in runner.commands]
        report_path: Path = args.report.resolve()
        md_path = report_path.with_suffix(".md")
        previous: dict[str, Any] = {}
        if report_path.exists() and not args.fresh:
            try:
                previous = json.loads(report_path.read_text())
            except ValueError:
                print(f"warning: {report_path} is not JSON; starting afresh", file=sys.stderr)
        same_setup = previous.get("commands") == commands and previous.get("select", False) == args.select
        old = {r["id"]: r for r in previous.get("results", [])} if same_setup else {}
        results: dict[str, dict[str, Any]] = {}
        todo: list[Mutant] = []
        for m in mutants:
            r = old.get(m.id)
            reuse = r is not None and r.get("mutant_sha") == m.sha and r["verdict"] in (
                "killed", "survived", "timeout", "invalid") and (
                r.get("fingerprint") == fp or (args.keep_killed and r["verdict"] in ("killed", "invalid")
                                               and r.get("src_fingerprint") == src_fp))
            if reuse:
                results[m.id] = r
            else:
                results[m.id] = _result(m, "pending", fp, src_fp)
                todo.append(m)
        equivalent = load_equivalent(args.equivalent)
        doc: dict[str, Any] = {
            "tool": "mutation/generated.py", "n": len(mutants), "seed": args.seed, "generated": args.generated,
            "shard": f"{args.shard[0]}/{args.shard[1]}" if args.shard else None,
            "sample_size": len(sample_ids), "sample_ids": sample_ids,
            "recheck_of": str(args.recheck) if args.recheck else None,
            "sampling": "uniform" if args.uniform else f"stratified by file (min {args.min_per_file})",
            "operators": sorted(operators), "sites": len(sites), "sites_per_file": dict(sorted(per_file.items())),
            "sites_per_operator": dict(sorted(Counter(s.operator for s in sites).items())),
            "fingerprint": fp, "src_fingerprint": src_fp, "commands": commands, "jobs": args.jobs,
            "shrink": args.shrink, "reorder": not args.no_reorder, "timeout": 0.0,
            "not_built": [{"id": s.id, "why": why} for s, why in broken],
            "equivalent": equivalent, "baseline": None, "select": args.select,
        }
        write_lock = threading.Lock()
        earlier = float(previous.get("elapsed") or 0.0) if same_setup else 0.0

        def write(final: bool = False) -> None:
            with write_lock:
                doc["results"] = [results[m.id] for m in mutants]
                doc["elapsed"] = round(earlier + time.monotonic() - t0, 1)  # every sitting of a resumed report
                doc["finished"] = final
                doc["summary"] = summarize(results, equivalent, doc.get("timeouts_kill", True))
                doc["survivors"] = [r["id"] for r in doc["results"] if r["verdict"] == "survived"]
                _atomic_write(report_path, json.dumps(doc, indent=1) + "\n")
                _atomic_write(md_path, markdown(doc))

        def terminate(signum: int, frame: object) -> None:  # timeout(1), a CI step's limit: stop as on Ctrl-C
            raise KeyboardInterrupt

        previous_handler = signal.signal(signal.SIGTERM, terminate)
        base_prev = previous.get("baseline") if same_setup else None
        maps_path = selection.cache_path(ROOT, fp, commands)
        if args.select and maps_path.is_file():
            runner.maps = json.loads(maps_path.read_text())
            print(f"coverage map of this tree: {maps_path}", flush=True)
        if base_prev and base_prev.get("fingerprint") == fp and base_prev.get("verdict") == "survived" and (
                not args.select or runner.maps is not None):
            baseline = base_prev
            print(f"baseline: reused from {report_path.name} ({baseline['seconds']:.0f} s)", flush=True)
        else:
            record = args.select and runner.maps is None
            print(f"baseline (unmutated copy{', under coverage' if record else ''}): {' && '.join(commands)}",
                  flush=True)
            try:
                out = runner.run(None, None, record=record)
            except KeyboardInterrupt:
                runner.stop()
                signal.signal(signal.SIGTERM, previous_handler)
                print("interrupted during the baseline", file=sys.stderr)
                return 130
            baseline = {"verdict": out.verdict, "seconds": round(out.seconds, 1), "detail": out.detail,
                        "command_seconds": out.command_seconds, "fingerprint": fp, "durations": out.durations}
            print(f"baseline: {'pass' if out.verdict == 'survived' else out.verdict.upper()} in {out.seconds:.0f} s "
                  f"{out.command_seconds} {out.detail}", flush=True)
        doc["baseline"] = baseline
        if args.select and runner.maps is not None and not maps_path.is_file():
            save_map(maps_path, runner.maps, baseline.get("durations", {}))
        if baseline["verdict"] != "survived":
            write(final=True)
            signal.signal(signal.SIGTERM, previous_handler)
            print("the unmutated suite must pass before mutants mean anything; stopping", file=sys.stderr)
            return 2
        runner.order["durations"] = baseline.get("durations", {})
        timeout = args.timeout if args.timeout is not None else 3 * baseline["seconds"] + 120
        doc["timeout"] = timeout
        doc["timeouts_kill"] = baseline["seconds"] < timeout
        for r in results.values():  # earlier kills teach the order
            if r["verdict"] == "killed":
                runner.note_kill(r["file"], r.get("killer"), r.get("command_index"))
        write()
        print(f"{len(mutants)} mutants, {len(mutants) - len(todo)} reused from the report, {len(todo)} to run, "
              f"jobs {args.jobs}, timeout {timeout:.0f} s", flush=True)
        done = Counter[str]()

        def one(m: Mutant) -> None:
            if runner.stopping:
                return
            try:
                out = runner.run(m, timeout)
            except Exception as e:  # noqa: BLE001 - one broken run (disk full, ...) is an error, not the end
                out = Outcome("error", 0.0, f"runner: {type(e).__name__}: {e}")
            if runner.stopping:
                return
            if out.verdict == "killed":
                runner.note_kill(m.site.file, out.killer, out.command_index)
            results[m.id] = _result(m, out.verdict, fp, src_fp, out)
            with write_lock:
                done["n"] += 1
                k = done["n"]
            print(f"  [{k}/{len(todo)}] {out.verdict:8s} {m.id:44s} {out.seconds:5.0f} s  "
                  f"{out.killer or out.detail or ''}"[:240], flush=True)
            write()

        pool = ThreadPoolExecutor(max_workers=args.jobs)
        futures = [pool.submit(one, m) for m in todo]
        try:
            for f in futures:
                f.result()
        except KeyboardInterrupt:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            runner.stop()
            for f in futures:
                f.cancel()
            pool.shutdown(wait=True)
            write()
            print(f"\ninterrupted: finished results kept in {report_path} (rerun the same command to resume)",
                  file=sys.stderr)
            return 130
        pool.shutdown(wait=True)
        signal.signal(signal.SIGTERM, previous_handler)
        write(final=True)
        s = doc["summary"]
        print(f"\nscore: {_pct(s['score'])} = {s['score_note']}: killed {s['killed']}, timeout {s['timeout']}, "
              f"survived {s['survived']}, invalid {s['invalid']}, error {s['error']}; "
              f"non-equivalent score {_pct(s['score_non_equivalent'])} in {time.monotonic() - t0:.0f} s")
        for r in doc["results"]:
            if r["verdict"] in ("survived", "timeout", "error"):
                print(f"  {r['verdict']:8s} {r['id']:44s} {r['description']}")
        print(f"report: {report_path} and {md_path}")
        if args.rev is None and fingerprint(ROOT, f"src/{PACKAGE_NAME}") != src_fp:
            print(f"note: src/{PACKAGE_NAME} in {ROOT} changed during the run; the run used the copy taken at its "
                  "start", file=sys.stderr)
        return 0

