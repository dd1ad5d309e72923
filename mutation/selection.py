"""Coverage-based test selection for generated mutants: run only the tests that execute the mutated lines.

A mutant can change the outcome of a test only if the test executes a changed line (the suite's runs are
deterministic: ``--profile ci`` is derandomized, and the runs' plugin derandomizes tests/: generated.py). So, as mutmut and
cosmic-ray do, the unmutated tree's coverage is recorded once, each line with the tests that executed it
(coverage's dynamic contexts, one per pytest node id), and a mutant runs only those tests of each command.
The map is recorded per tree (``generated.fingerprint`` of the snapshot) and per commands, and cached in
``.mutants-coverage/<fingerprint>-<commands hash>.json``: a rerun or a resumed shard of the same tree reads it.

How lines get their tests. In the pytest process, a plugin of coverage's (``_wy_cov_contexts``, written
beside the guard plugins) starts a context at pytest's ``runtestprotocol`` frame (setup, call and teardown
of one item) named by the item's node id, and writes the id to a file (``WY_COV_CONTEXT_FILE``). The tests'
other processes are measured too: coverage's ``patch = subprocess, fork, _exit`` starts it in every child
interpreter (a ``sitecustomize`` beside the plugins calls ``coverage.process_startup``), keeps it across
forks and saves the data of children that leave by ``os._exit``. Coverage asks the plugin for a context at a
function call only while none is active, and a context lasts until the frame that started it returns. It
keeps one context per process, not per thread: a context a thread started ended, with the thread's frame,
for the main thread too, whose later lines went to the empty context (a nested pytest's, the CLI's); so only
a process's main thread starts contexts, and a thread's lines take the main thread's. There:

* a process a test starts that is no server (the CLI, a script, a pytest as the README's nox commands and
  the planted-bug runs start) runs to its end within that test: all its lines are that test's (the id the
  recorded pytest puts in ``WY_COV_TEST`` at each item, which the process inherits). They went to the empty
  context, which runs every test of the command, or for a nested pytest to its own items' ids, which no
  command collects (a survivor, interpreter.py's bf16 arithmetic, was run only by the README's fla-ascend
  fuzz command);
* any other process lives across tests, or may: a server (its outermost code calls one of ``SERVERS``: the
  case runner's ``serve`` and fork server, the history server, multiprocessing's spawned children such as the
  warm pool's and the lowering's workers), a fork of one (a case child), a fork of the recorded pytest (a
  test's ``multiprocessing`` fork). There a frame of package code that starts outside any context (not a
  module body) takes the id in that file, the test running at that moment: a case, a task, a wait is the
  test's that sent it, as is whatever it calls. The functions of ``SERVERS`` (the loops themselves) and
  code outside the package (multiprocessing's worker loop) start none, so their own lines stay outside any
  test. This replaced naming only each case's entry (the case runner's ``run_within_memory``, the history
  server's ``run_sequence``, the warm pool's ``run_config``): everything else those processes ran (their
  start-up, the lowering's tasks, a case child's calls around its case, a test's forked writers) went to the
  empty context, every test's (docs/ledger.md has the numbers).

The recorded pytest's own lines outside any item (imports, a module's declarations checked at import, exit
handlers) stay in the empty context: they run once for every test (a package function a test module calls
while pytest collects it records under that module, ``_collected``). The baseline records its commands side
by side, each split over its test files into ``--jobs`` parts (generated.Runner._record), and a command's map
is the union of its parts'.

What the selection can miss, and what is done about it:

* lines run outside any test (imports, module and class bodies, a function's defaults, a server's loop, an
  exit handler) carry the empty context, and a statement outside any function that the map lacks may have
  run where coverage did not look: a mutant changing either runs every test of that command (``select``
  gives None), except a module or class-level definition, which runs the tests of the statements that read
  what it defines (``Readers``): it misses a name read only through a string built at run time
  (``getattr(m, "X" + s)``, ``globals()``), a star import, or a file other than Python source;
* in a process that lives across tests, work records under the test running when its package frame began,
  which is not always the test it serves: a server's or a worker's start-up (its imports included) is the
  test that started it or the one running when it got there, and the state it sets up is read by later
  tests' cases (as a session fixture's, below); a frame that waits across tests (a case child's read of its
  next case) is the test running when it began to wait; background work that outlives its test (a pool's
  task still running, a child left behind) is its own test's only if it began then. A mutant there runs the
  tests recorded, not the later ones that depend on it;
* a statement inside a function that no test executed (dead code, a device-only path, or code run only in
  a process coverage does not follow: a subprocess started with an environment without
  ``COVERAGE_PROCESS_CONFIG`` or without this PYTHONPATH) runs no test: the mutant survives, as it would on
  a full run of the first two kinds. A function that forks is not one: its child runs the rest of the
  forking frame untraced, so ``changed_statements`` counts its statements as outside any function. The
  Triton interpreter runs the kernels' own functions, so their lines carry the tests that launched them
  (``FULL_FILES`` would name a file whose lines the map cannot tell);
* tests that read the imported source as text (``inspect.getsource``) execute no line of it:
  ``SOURCE_READERS`` names their modules, which run with every mutant of the file they read;
* state set up once for many tests (a session or module fixture, a memo filled while pytest collects a test
  module: a package function that module calls at import records under the module) is recorded against the
  first test or module that set it up: a mutant there runs it, not the later ones that only read the state;
* a test whose verdict depends on another test run before it in the same process is not selected with it
  (the runner's ``passes_alone`` already voids kills of order-dependent tests).

Checked against full runs of the same sample (``--generated 10 --seed 5`` with and without ``--select``):
docs/data/mutants-selection-check.md.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

CACHE_DIR = ".mutants-coverage"
# Functions that live across tests: a server process's outermost code (testing/runner.py's ``serve`` and
# ``serve_forks``, testing/history.py's ``serve``, multiprocessing's ``spawn_main`` of the warm pool's and the
# lowering's workers) and the case loop of the runner's children (``_serve``). Their own lines stay outside any
# test; each package function they call (a case, a task, a wait) starts the context of the test running then.
SERVERS = frozenset({"_serve", "serve", "serve_forks", "spawn_main"})
# Files whose lines the recording may not attribute to tests: every test of every command (none so far:
# the interpreter runs the kernels' own functions, so their lines carry the tests that launched them).
FULL_FILES: frozenset[str] = frozenset()
# Test modules that read a file of src/wy_ascend as text (inspect.getsource of the imported, mutated
# module): they run with every mutant of it. (Tests that read src/ by path read the snapshot's unmutated
# copy, so no mutant changes what they see.)
SOURCE_READERS: dict[str, tuple[str, ...]] = {
    "kernels.py": ("tests/test_ops.py", "tests/test_cuda_variant.py"),
}

PLUGIN = '''\
"""coverage plugin of mutation/selection.py: one context per pytest item, followed into the processes it starts."""
import os
import threading
from pathlib import Path

import coverage

FILE = os.environ.get("WY_COV_CONTEXT_FILE", "")
SERVERS = __SERVERS__
PACKAGE = __PACKAGE__
BORN = os.getpid()  # a forked child keeps this module and so its parent's pid here
# The first process to load this plugin is the recorded pytest (it names a context per item); any other was
# started by one of its tests (WY_COV_TEST, set at each item) or by such a process.
OUTER = os.environ.setdefault("WY_COV_OUTER_PID", str(BORN)) == str(BORN)
SPAWNED_IN = None if OUTER else os.environ.get("WY_COV_TEST")
server = False


def _serves(frame):
    """Whether this process is a server (its outermost code calls one of SERVERS): it lives across tests, so
    only the package functions its loop calls name one."""
    global server
    while frame is not None and not server:
        server = bool(set(frame.f_code.co_names) & SERVERS)
        frame = frame.f_back
    return server


def _collected(frame):
    """The test module (its path, a node id that selects the whole module) whose import, while pytest collects
    it, calls the package function of ``frame`` (a parametrize list built at import), else None: the package's
    own import-time calls (a declaration checked at import) stay every test's, as importlib's frames stand
    between them and the test module that imports it."""
    if frame.f_code.co_name == "<module>" or PACKAGE not in frame.f_code.co_filename:
        return None
    caller = frame.f_back
    while caller is not None and PACKAGE in caller.f_code.co_filename:
        caller = caller.f_back
    if caller is None or not os.path.basename(caller.f_code.co_filename).startswith("test_"):
        return None
    test_file = caller.f_code.co_filename
    while caller is not None and caller.f_code.co_filename == test_file:
        if caller.f_code.co_name == "<module>":
            return os.path.relpath(test_file).replace(os.sep, "/")
        caller = caller.f_back
    return None


def _running():
    """The test the recorded pytest runs now (FILE), None before its first."""
    try:
        return Path(FILE).read_text() or None
    except OSError:
        return None


class Contexts(coverage.CoveragePlugin):
    def dynamic_context(self, frame):
        code = frame.f_code
        if threading.current_thread() is not threading.main_thread():
            return None  # the context is the process's: one a thread ended would end the main thread's too
        if OUTER and os.getpid() == BORN:  # the recorded pytest: one context per item
            if code.co_name == "runtestprotocol" and "item" in frame.f_locals:
                nodeid = frame.f_locals["item"].nodeid
                if FILE:
                    Path(FILE).write_text(nodeid)
                os.environ["WY_COV_TEST"] = nodeid  # what a process this test starts inherits
                return nodeid
            return _collected(frame)
        if SPAWNED_IN and os.getpid() == BORN and not _serves(frame):
            return SPAWNED_IN  # a process run to its end within one test (the CLI, a nested pytest, a script)
        if FILE and PACKAGE in code.co_filename and code.co_name != "<module>" and code.co_name not in SERVERS:
            return _running()  # work done for a test in a server, a pool's worker or a fork: the test running now
        return None


def coverage_init(reg, options):
    reg.add_dynamic_context(Contexts())
'''.replace("__SERVERS__", f"frozenset({sorted(SERVERS)!r})").replace("__PACKAGE__", repr(f"{os.sep}wy_ascend{os.sep}"))

SITECUSTOMIZE = '''\
"""Written by mutation/selection.py for a coverage recording: coverage in every child interpreter."""
import os

if os.environ.get("COVERAGE_PROCESS_CONFIG") or os.environ.get("COVERAGE_PROCESS_START"):
    import coverage

    coverage.process_startup()
'''

RCFILE = """\
[run]
parallel = true
data_file = {data}
source_pkgs = wy_ascend
patch = subprocess, fork, _exit
plugins = _wy_cov_contexts
disable_warnings = no-data-collected, module-not-measured, already-imported
"""


def cache_path(root: Path, fingerprint: str, commands: list[str]) -> Path:
    """Where the maps of the tree ``fingerprint`` under ``commands`` are kept (the recording's own files in the
    key too: a changed plugin records other maps of the same tree)."""
    digest = hashlib.sha256((json.dumps(commands) + PLUGIN + SITECUSTOMIZE + RCFILE).encode()).hexdigest()[:12]
    return root / CACHE_DIR / f"{fingerprint}-{digest}.json"


def recording(tmp: Path, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The interpreter arguments (before ``-m pytest``'s) and the environment that run one pytest command
    under coverage, its data under ``tmp``: the plugin and sitecustomize first on PYTHONPATH, with
    coverage itself, so that every child finds them."""
    import coverage

    data = tmp / "coverage-data"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir()
    helpers = tmp / "coverage-helpers"
    helpers.mkdir(exist_ok=True)
    (helpers / "_wy_cov_contexts.py").write_text(PLUGIN)
    (helpers / "sitecustomize.py").write_text(SITECUSTOMIZE)
    rc = tmp / "coveragerc"
    rc.write_text(RCFILE.format(data=data / ".coverage"))
    paths = [str(helpers), str(Path(coverage.__file__).resolve().parent.parent), env.get("PYTHONPATH", "")]
    return ["-m", "coverage", "run", f"--rcfile={rc}"], {
        **env, "WY_COV_CONTEXT_FILE": str(tmp / "coverage-context"),
        "PYTHONPATH": os.pathsep.join(filter(None, paths))}


def recorded(tmp: Path, env: dict[str, str], cwd: Path) -> dict[str, dict[str, list[str]]]:
    """The map of the command ``recording`` ran: combines its processes' data and reads it (``read_map``)."""
    subprocess.run([sys.executable, "-m", "coverage", "combine", f"--rcfile={tmp / 'coveragerc'}", "-q",
                    str(tmp / "coverage-data")], cwd=cwd, env=env, check=True, capture_output=True)
    return read_map(tmp / "coverage-data" / ".coverage")


def read_map(data_file: Path) -> dict[str, dict[str, list[str]]]:
    """The node ids that executed each measured line of a combined coverage data file: {file under
    src/wy_ascend: {line: [node ids, "" for outside any test]}}. Every copy of the package a test ran
    (the snapshot's, a test's copy of the tree in a temporary directory) adds its lines to the one file's:
    the last copy read used to replace the others, and the tests/ map of the first-contact sample held 4
    lines of backends.py (its survivors there were run against no test)."""
    from coverage import CoverageData

    data = CoverageData(basename=str(data_file))
    data.read()
    merged: dict[str, dict[int, set[str]]] = {}
    for path in sorted(data.measured_files()):
        parts = Path(path).parts
        if "wy_ascend" in parts:
            rel = "/".join(parts[len(parts) - parts[::-1].index("wy_ascend"):])
            into = merged.setdefault(rel, {})
            for n, contexts in data.contexts_by_lineno(path).items():
                into.setdefault(n, set()).update(contexts)
    return {rel: {str(n): sorted(c) for n, c in sorted(by_line.items())} for rel, by_line in merged.items()}


def merged(maps: list[dict[str, dict[str, list[str]]]]) -> dict[str, dict[str, list[str]]]:
    """One map of several (the parts of one command, recorded side by side): each line's tests, all of them."""
    into: dict[str, dict[str, set[str]]] = {}
    for m in maps:
        for rel, by_line in m.items():
            for n, tests in by_line.items():
                into.setdefault(rel, {}).setdefault(n, set()).update(tests)
    return {rel: {n: sorted(t) for n, t in sorted(by_line.items(), key=lambda kv: int(kv[0]))}
            for rel, by_line in sorted(into.items())}


def changed_statements(original: str, mutated: str) -> list[tuple[int, bool]]:
    """(first line, inside a function) of each innermost statement of ``original`` holding a line the mutant
    changes: coverage records a statement that spans lines at its first line. A function that calls
    ``fork`` does not count as one: its child runs the rest of the forking frame untraced (coverage starts
    in the child through ``sys.settrace``, which reaches new frames only), so a line of it the map lacks may
    have run (the history server's ``_forked``: a survivor of the first-contact sample that its tests kill)."""
    changed: set[int] = set()
    matcher = difflib.SequenceMatcher(None, original.splitlines(), mutated.splitlines(), autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag != "equal":
            changed.update(range(i1 + 1, max(i2, i1 + 1) + 1))
    found: dict[int, tuple[int, bool]] = {}

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                span = range(child.lineno, (child.end_lineno or child.lineno) + 1)
                for n in changed.intersection(span):  # an inner statement visited later overrides
                    found[n] = (child.lineno, in_function)
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, not _forks(child))
            else:
                visit(child, in_function)

    visit(ast.parse(original), False)
    return sorted(set(found.values()))


def blind_spots(maps: list[dict[str, dict[str, list[str]]]], sources: dict[str, str]) -> dict[str, list[int]]:
    """Per file of ``sources`` (paths under src/wy_ascend, as the maps key them): the first lines of the
    statements inside functions (as ``changed_statements`` counts them: a forking function's are not) that
    coverage's parser calls executable and that no command's map records: a mutant of one runs no test and
    survives, whatever the suite checks elsewhere. Lines run outside any test (the empty context) ran."""
    from coverage.python import PythonParser

    out: dict[str, list[int]] = {}
    for rel, text in sorted(sources.items()):
        parser = PythonParser(text=text)
        parser.parse_source()
        ran = {int(n) for m in maps for n, tests in m.get(rel, {}).items() if tests}
        lines = sorted((set(_function_statements(ast.parse(text))) & parser.statements) - ran)
        if lines:
            out[rel] = lines
    return out


def _function_statements(node: ast.AST, in_function: bool = False) -> Iterator[int]:
    """First lines of the statements under ``node`` inside a function that does not fork (``_forks``)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.stmt) and in_function:
            yield child.lineno
        functional = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        yield from _function_statements(child, not _forks(child) if functional else in_function)


def _forks(function: ast.AST) -> bool:
    """Whether ``function``'s body (a function nested in it included) calls ``fork`` (``os.fork()`` or a bare
    ``fork()``)."""
    return any(isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "fork"
               for node in ast.walk(function))


class Readers:
    """Who reads a module-level definition of a tree: a mutant of ``X = ...`` at import time (the empty context,
    every test) can change a run only where ``X`` is read afterwards. Statements that define names at module
    or class level (assignments, defs and classes by their defaults, decorators and bases, imports) pass them
    on to the definitions that read them (``B = f(A)``: B too); the statements inside functions that read any of
    them (a name, an attribute or a string naming it) are the readers, and their tests are the mutant's.
    A test module that mentions a name (the tests read constants as ``backends.X``) runs whole; any other file
    of the tree that mentions one (a fuzz helper, a conftest, a script the tests start), or a module-level
    statement that reads one and defines nothing (a call at import), leaves the statement to every test."""

    def __init__(self, tree: Path, package: str = "wy_ascend") -> None:
        src = tree / "src" / package
        self.statements: dict[str, list[tuple[int, bool, frozenset[str], frozenset[str]]]] = {}
        for path in sorted(src.rglob("*.py")):
            rel = path.relative_to(src).as_posix()
            self.statements[rel] = list(_definitions(ast.parse(path.read_text())))
        self.others: dict[str, str] = {}  # path -> text, every other Python file of the tree
        for path in sorted(tree.rglob("*.py")):
            rel = path.relative_to(tree).as_posix()
            if not rel.startswith(f"src/{package}/") and not any(p.startswith(".") for p in path.parts[len(tree.parts):]):
                self.others[rel] = path.read_text(errors="replace")

    def of(self, file: str, line: int) -> tuple[list[tuple[str, int]], set[str]] | None:
        """(reader statements as (file, line), test modules naming one) of the module-level statement at
        ``line`` of ``file``, or None where the selection cannot be narrowed (the class doc)."""
        found = [(defines, reads) for n, inside, defines, reads in self.statements.get(file, []) if n == line and not inside]
        if not found or not found[0][0]:
            return None
        names = set(found[0][0])
        grew = True
        while grew:  # definitions that read a changed name change with it
            grew = False
            for rel, stmts in self.statements.items():
                for n, inside, defines, reads in stmts:
                    if inside or (rel, n) == (file, line) or not reads & names:
                        continue
                    if not defines:
                        return None
                    if not defines <= names:
                        names |= defines
                        grew = True
        readers = [(rel, n) for rel, stmts in self.statements.items() for n, inside, _, reads in stmts
                   if inside and reads & names]
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names))) + r")\b")
        modules = set()
        for rel, text in self.others.items():
            if pattern.search(text):
                if not re.fullmatch(r"(tests|fuzz)/test_[^/]*\.py", rel):
                    return None
                modules.add(rel)
        return readers, modules


def _definitions(tree: ast.Module) -> Iterator[tuple[int, bool, frozenset[str], frozenset[str]]]:
    """(first line, inside a function, names it defines at module or class level, names it reads) of each
    statement: a def or class reads only what runs when it is defined (decorators, defaults, bases)."""
    def walk(node: ast.AST, inside: bool) -> Iterator[tuple[int, bool, frozenset[str], frozenset[str]]]:
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.stmt) or (isinstance(child, ast.Expr) and isinstance(child.value, ast.Constant)):
                continue  # a docstring reads nothing
            functional = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if functional or isinstance(child, ast.ClassDef):
                head = [*child.decorator_list, *(child.bases if isinstance(child, ast.ClassDef) else
                                                 [*child.args.defaults, *filter(None, child.args.kw_defaults)])]
                yield child.lineno, inside, frozenset() if inside else frozenset({child.name}), _reads(head)
                yield from walk(child, inside or (functional and not _forks(child)))
                continue
            defines: set[str] = set()
            if not inside:
                targets = getattr(child, "targets", None) or [getattr(child, "target", None)]
                defines = {n.id for t in targets if t is not None for n in ast.walk(t) if isinstance(n, ast.Name)}
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    defines = {(a.asname or a.name).split(".")[0] for a in child.names}
            reads = _reads([child]) | ({a.name for a in child.names} if isinstance(child, ast.ImportFrom) else set())
            yield child.lineno, inside, frozenset(defines), reads
            if not isinstance(child, (ast.Import, ast.ImportFrom)):
                yield from walk(child, inside)
    yield from walk(tree, False)


def _reads(nodes: list[ast.AST]) -> frozenset[str]:
    """The names ``nodes`` read: a name, an attribute, or an identifier in a string (``getattr(m, "X")``, a
    subject's ``"package.module:X"``)."""
    out: set[str] = set()
    for node in nodes:
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                out.add(n.id)
            elif isinstance(n, ast.Attribute):
                out.add(n.attr)
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):  # "module:NAME", getattr(m, "NAME")
                out.update(re.findall(r"[A-Za-z_]\w*", n.value))
    return frozenset(out)


def select(maps: list[dict[str, dict[str, list[str]]]], file: str, statements: list[tuple[int, bool]],
           commands: list[list[str]], readers: Readers | None = None) -> list[list[str] | None]:
    """Per command: None (run all its tests) or the node ids (and test modules) to run, none to skip it,
    for a mutant of ``file`` (under src/wy_ascend) changing ``statements`` (``changed_statements``).

    All tests: a statement run outside any test (the empty context: an import, a child's loop) or never run
    though not in a function (a module or class body the map missed), or a file of ``FULL_FILES``; with
    ``readers``, a module or class-level statement instead runs the tests of the statements that read what it
    defines (``Readers``), all where it cannot tell or a reader ran outside any test. Its own contexts are not
    its tests: it runs at import, under whichever test imported its module first."""
    found = {line: readers.of(file, line) if readers is not None else None  # per statement, not per command
             for line, in_function in statements if not in_function}
    out: list[list[str] | None] = []
    for m, cmd in zip(maps, commands):
        paths = [t.rstrip("/") for t in cmd if not t.startswith("-")]
        ids = _in_command(paths, SOURCE_READERS.get(file, ()))
        everything = file in FULL_FILES
        for line, in_function in statements:
            if in_function:
                contexts = m.get(file, {}).get(str(line), [])
                everything |= "" in contexts
                ids.update(contexts)
                continue
            read_by = found[line]
            if read_by is None:
                everything = True
                continue
            for rel, n in read_by[0]:
                read = m.get(rel, {}).get(str(n), [])
                everything |= "" in read
                ids.update(read)
            ids |= _in_command(paths, read_by[1])
        out.append(None if everything else sorted(ids))
    return out


def _in_command(paths: list[str], modules: Iterable[str]) -> set[str]:
    """The test modules of ``modules`` that a command collecting ``paths`` collects."""
    return {r for r in modules if any(r == p or r.startswith(p + "/") for p in paths)}


def narrowed(cmd: list[str], ids: list[str]) -> list[str]:
    """``cmd`` collecting only the test modules of ``ids`` (its options kept); the plugin keeps the ids."""
    first_option = next((i for i, t in enumerate(cmd) if t.startswith("-")), len(cmd))
    return [*dict.fromkeys(n.split("::")[0] for n in ids), *cmd[first_option:]]
