"""mutation/selection.py without running coverage: which statements a mutant changes, which tests of each
command it runs, and the plugin keeping only those (the recording itself runs with ``--select``;
docs/data/mutants-selection-check.md compares it with full runs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mutation import generated as gm
from mutation import selection

ROOT = Path(__file__).resolve().parents[1]

SOURCE = '''\
LIMIT = 3


def f(a,
      b=LIMIT + 1):
    y = g(a,
          b)
    return y


class C:
    size = 2

    def m(self):
        return self.size
'''
COMMANDS = [["tests/"], ["fuzz/", "--profile", "ci"]]


def _statements(old: str, new: str) -> list[tuple[int, bool]]:
    return selection.changed_statements(SOURCE, SOURCE.replace(old, new, 1))


def test_a_changed_line_is_its_statements_first_line_and_says_whether_a_function_runs_it() -> None:
    assert _statements("          b)", "          b + 1)") == [(6, True)]  # a call's second line: the call's
    assert _statements("b=LIMIT + 1", "b=LIMIT - 1") == [(4, False)]  # a default: the def, run at import
    assert _statements("LIMIT = 3", "LIMIT = 4") == [(1, False)]
    assert _statements("    size = 2", "    size = 3") == [(12, False)]  # a class body
    assert _statements("        return self.size", "        pass") == [(15, True)]


FORKING = """\
import os


def forked(fn):
    pid = os.fork()
    if pid == 0:
        out = fn()
        os._exit(0)
    return pid


def plain(fn):
    return fn()
"""


def test_a_function_that_forks_counts_as_outside_any_function() -> None:
    """The child of a fork runs the rest of the forking frame untraced (the first-contact sample's history.py
    survivor): a line of it the map lacks runs every test; a line of a function that does not fork, none."""
    def changed(old: str, new: str) -> list[tuple[int, bool]]:
        return selection.changed_statements(FORKING, FORKING.replace(old, new, 1))

    assert changed("out = fn()", "out = None") == [(7, False)]
    assert changed("    pid = os.fork()", "    pid = 0") == [(5, False)]
    assert changed("    return fn()", "    return None") == [(13, True)]
    assert selection.select([{}], "m.py", changed("out = fn()", "out = None"), COMMANDS[:1]) == [None]
    assert selection.select([{}], "m.py", changed("    return fn()", "    return None"), COMMANDS[:1]) == [[]]


def test_a_mutant_runs_the_tests_that_execute_its_statements_and_all_where_the_map_cannot_tell() -> None:
    maps = [{"m.py": {"6": ["tests/test_a.py::x", "tests/test_b.py::y"], "15": [""], "4": ["", "tests/test_a.py::z"]}},
            {"m.py": {"6": ["fuzz/test_fuzz.py::test_oracle"]}}]
    assert selection.select(maps, "m.py", [(6, True)], COMMANDS) == [
        ["tests/test_a.py::x", "tests/test_b.py::y"], ["fuzz/test_fuzz.py::test_oracle"]]
    # run outside any test (an import, a child's loop) by the first command: all of its tests
    assert selection.select(maps, "m.py", [(15, True)], COMMANDS) == [None, []]
    assert selection.select(maps, "m.py", [(4, False), (6, True)], COMMANDS)[0] is None
    # never run: in a function no test calls, nothing to run; in a module or class body, all (the map missed it)
    assert selection.select(maps, "m.py", [(8, True)], COMMANDS) == [[], []]
    assert selection.select(maps, "m.py", [(12, False)], COMMANDS) == [None, None]
    # a module that reads the mutated file as text runs with its every mutant, in the command that holds it
    assert selection.select(maps, "kernels.py", [(8, True)], COMMANDS) == [sorted(selection.SOURCE_READERS["kernels.py"]), []]


def test_a_narrowed_command_collects_the_selected_modules_with_its_options() -> None:
    ids = ["fuzz/test_fuzz.py::test_oracle", "fuzz/test_fuzz.py::test_bad_input", "fuzz/test_regressions.py::test_replay[a]"]
    assert selection.narrowed(COMMANDS[1], ids) == ["fuzz/test_fuzz.py", "fuzz/test_regressions.py", "--profile", "ci"]


def test_the_plugin_keeps_the_selected_items_and_modules_only(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "select.json").write_text(json.dumps(["tests/test_a.py::x", "tests/test_ops.py"]))
    monkeypatch.setenv("WY_MUTANT_SRC", str(tmp_path))
    monkeypatch.setenv("WY_GEN_REPORT", str(tmp_path / "report.json"))
    monkeypatch.setenv("WY_GEN_SELECT", str(tmp_path / "select.json"))
    monkeypatch.delenv("WY_GEN_ORDER", raising=False)
    plugin: dict = {}
    exec(compile(gm.PLUGIN, "_wy_gen_plugin", "exec"), plugin)
    deselected: list = []

    class Item:
        def __init__(self, nodeid: str) -> None:
            self.nodeid = nodeid

    class Config:
        class hook:  # noqa: N801 - pytest's name
            @staticmethod
            def pytest_deselected(items: list) -> None:
                deselected.extend(items)

    items = [Item(n) for n in ("tests/test_a.py::x", "tests/test_a.py::y", "tests/test_ops.py::o", "tests/test_ops.py::p")]
    plugin["pytest_collection_modifyitems"](None, Config, items)
    assert [i.nodeid for i in items] == ["tests/test_a.py::x", "tests/test_ops.py::o", "tests/test_ops.py::p"]
    assert [i.nodeid for i in deselected] == ["tests/test_a.py::y"]


def test_the_seed_from_a_commit_is_its_hashs_first_8_hex_digits(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                              capture_output=True, text=True, check=True).stdout.strip()

    git("init", "-q")
    git("commit", "-q", "--allow-empty", "-m", "one")
    assert gm.commit_seed("HEAD", tmp_path) == int(git("rev-parse", "HEAD")[:8], 16)


def test_every_copy_of_the_package_adds_its_lines_to_the_map(tmp_path: Path) -> None:
    """Two measured copies of one file (the snapshot's and a test's copy of the tree) give the union of their
    lines and contexts, whichever is read last (the tests/ map once held 4 lines of backends.py)."""
    from coverage import CoverageData

    data = CoverageData(basename=str(tmp_path / ".coverage"))
    snapshot, copy = "/snap/src/wy_ascend/backends.py", "/tmp/pytest-1/tree/src/wy_ascend/backends.py"
    data.set_context("tests/test_ops.py::test_a")
    data.add_lines({snapshot: [10, 11, 12]})
    data.set_context("tests/test_install.py::test_b")
    data.add_lines({copy: [1, 11]})
    data.write()
    assert selection.read_map(tmp_path / ".coverage")["backends.py"] == {
        "1": ["tests/test_install.py::test_b"], "10": ["tests/test_ops.py::test_a"],
        "11": ["tests/test_install.py::test_b", "tests/test_ops.py::test_a"], "12": ["tests/test_ops.py::test_a"]}


def test_the_parts_of_a_command_merge_into_each_lines_tests() -> None:
    a = {"ops.py": {"3": ["t::a"], "10": ["", "t::a"]}}
    b = {"ops.py": {"3": ["u::b"], "4": ["u::b"]}, "cli.py": {"1": [""]}}
    assert selection.merged([a, b]) == {"cli.py": {"1": [""]},
                                         "ops.py": {"3": ["t::a", "u::b"], "4": ["u::b"], "10": ["", "t::a"]}}
    assert selection.merged([a]) == a and selection.merged([]) == {}


PACKAGE = """\
def declare():
    return 7


DECLARED = declare()


def collected():
    return 5


def direct():
    return 1


def nested():
    return 2


def oneshot():
    return 3


def forked():
    return 4


def after_thread():
    return 8


def pooled(x):
    return x * 2


def setup():
    return 6


def handle(x):
    return x + 1


def serve():
    import sys
    setup()
    for line in sys.stdin:
        print(handle(int(line)), flush=True)
"""

TESTS = """\
import multiprocessing
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor

import pytest

import wy_ascend

VALUES = [wy_ascend.collected()]


@pytest.mark.parametrize("value", VALUES)
def test_collected(value):
    assert value == 5


@pytest.fixture(scope="module")
def server():
    p = subprocess.Popen([sys.executable, "-c", "from wy_ascend import serve; serve()"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    yield p
    p.stdin.close()
    p.wait()


@pytest.fixture(scope="module")
def pool():
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as executor:
        yield executor


def test_direct():
    assert wy_ascend.direct() == 1


def test_nested():
    assert subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "inner/test_inner.py"]).returncode == 0


def test_oneshot():
    assert subprocess.run([sys.executable, "-c", "import wy_ascend; assert wy_ascend.oneshot() == 3"]).returncode == 0


def test_threaded():
    script = ("import threading, wy_ascend; t = threading.Thread(target=abs, args=(1,)); "
              "t.start(); t.join(); wy_ascend.after_thread()")
    assert subprocess.run([sys.executable, "-c", script]).returncode == 0


def test_forked():
    child = multiprocessing.get_context("fork").Process(target=wy_ascend.forked)
    child.start()
    child.join()
    assert child.exitcode == 0


def test_server_started(server):
    pass


def test_server_used(server):
    server.stdin.write("1\\n")
    server.stdin.flush()
    assert server.stdout.readline().strip() == "2"


def test_pool_started(pool):
    assert pool.submit(abs, -1).result() == 1


def test_pool_used(pool):
    assert pool.submit(wy_ascend.pooled, 2).result() == 4
"""


def test_a_recording_names_the_lines_of_each_process_a_test_starts_by_that_test(tmp_path: Path) -> None:
    """A real recording of a small tree. A process a test starts and waits for (a script, a pytest as the
    README's nox commands and the planted-bug runs start one) records its lines under that test, the one a
    mutant's command can select: they went to the empty context, which runs every test of the command, or for
    a nested pytest to its own items' ids, which no command collects (interpreter.py's bf16 arithmetic, run only
    by the README's fla-ascend fuzz command, survived a sample so). In a process that serves many tests (a
    server, a pool's spawned worker) or a fork of the recorded pytest, each package function records under the
    test running when it was called: a case or a task under the test that sent it, the server's start-up under
    the test running when it got there, the server's loop (selection.SERVERS) under none. A thread starts no
    context (coverage's is the process's: one a thread ended ended the main thread's). A call a test module makes
    while pytest collects it (a parametrize list) records under that module; a call the package makes at its
    own import, there too, under none (every test's)."""
    import os
    import sys

    (tmp_path / "src" / "wy_ascend").mkdir(parents=True)
    (tmp_path / "src" / "wy_ascend" / "__init__.py").write_text(PACKAGE)
    (tmp_path / "tests").mkdir()
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "test_inner.py").write_text(
        "import wy_ascend\n\n\ndef test_inner():\n    assert wy_ascend.nested() == 2\n")
    (tmp_path / "tests" / "test_outer.py").write_text(TESTS)
    rec = tmp_path / "rec"
    rec.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "WY_COV_", "COV_CORE_"))}
    prefix, env = selection.recording(rec, {**env, "PYTHONPATH": str(tmp_path / "src")})
    run = subprocess.run([sys.executable, *prefix, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = selection.recorded(rec, env, tmp_path)["__init__.py"]
    source = PACKAGE.splitlines()

    def tests_of(statement: str) -> list[str]:
        return lines[str(source.index(statement) + 1)]

    assert tests_of("    return 1") == ["tests/test_outer.py::test_direct"]
    assert tests_of("    return 2") == ["tests/test_outer.py::test_nested"]
    assert tests_of("    return 3") == ["tests/test_outer.py::test_oneshot"]
    assert tests_of("    return 8") == ["tests/test_outer.py::test_threaded"]  # after a thread's context ended
    assert tests_of("    return 4") == ["tests/test_outer.py::test_forked"]
    assert tests_of("    return x * 2") == ["tests/test_outer.py::test_pool_used"]
    assert tests_of("    return 6") in (["tests/test_outer.py::test_server_started"],  # its start-up: the test
                                          ["tests/test_outer.py::test_server_used"])  # running when it got there
    assert tests_of("    return x + 1") == ["tests/test_outer.py::test_server_used"]
    assert tests_of("        print(handle(int(line)), flush=True)") == [""]
    assert tests_of("    return 5") == ["tests/test_outer.py"]  # called while pytest collected that module
    assert "" in tests_of("    return 7") and "tests/test_outer.py" not in tests_of("    return 7")  # the package's
    # own import-time call, there during a collection: every test's (and the processes' tests that import it)



def _frame(name: str, filename: str, back: object = None, calls: tuple[str, ...] = ()) -> object:
    from types import SimpleNamespace

    return SimpleNamespace(f_code=SimpleNamespace(co_name=name, co_filename=filename, co_names=calls), f_back=back,
                           f_locals={})


@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(process=st.sampled_from(["server", "fork of the recorded pytest", "fork of a one-shot", "one-shot"]),
       name=st.sampled_from([*sorted(selection.SERVERS), "<module>", "run_sequence", "run_config", "to_dict"]),
       package=st.booleans(), running=st.sampled_from(["", "tests/test_a.py::test_x"]), thread=st.booleans())
def test_outside_the_recorded_pytest_a_package_function_starts_the_running_test_unless_it_lives_across_tests(
        process: str, name: str, package: bool, running: str, thread: bool) -> None:
    """The plugin's rule in the processes the recorded pytest's tests start, on drawn frames: a one-shot process
    (run to its end within its test, no server) is its test's throughout; in a server, a pool's worker or a fork,
    a frame of package code starts the context of the test the recorded pytest runs now (its file), unless it
    is a module body or a function of SERVERS (the loops that live across tests), and any other frame none (the
    code between them, multiprocessing's worker loop, stays outside any test). A thread other than the main one
    starts none: coverage keeps one context per process, which a thread's ending frame would end for all."""
    import tempfile
    import threading

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "context").write_text(running)
        plugin: dict = {}
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("WY_COV_CONTEXT_FILE", str(Path(tmp) / "context"))
            mp.setenv("WY_COV_OUTER_PID", "0")  # another process recorded: this one was started by a test
            mp.setenv("WY_COV_TEST", "tests/test_a.py::test_spawner")
            exec(compile(selection.PLUGIN, "_wy_cov_contexts", "exec"), plugin)
        if process.startswith("fork"):
            plugin["BORN"] = os.getpid() + 1
        plugin["OUTER"] = process == "fork of the recorded pytest"
        outermost = _frame("<module>", "<string>", calls=("serve",) if process == "server" else ("main",))
        filename = f"/tree/src{os.sep}wy_ascend{os.sep}m.py" if package else "/usr/lib/python3/concurrent/process.py"
        asked: list = []

        def ask() -> None:
            asked.append(plugin["Contexts"]().dynamic_context(_frame(name, filename, back=outermost)))

        if thread:
            other = threading.Thread(target=ask)
            other.start()
            other.join()
        else:
            ask()
    got = asked[0]
    if thread:
        assert got is None
    elif process == "one-shot":
        assert got == "tests/test_a.py::test_spawner"
    elif package and name != "<module>" and name not in selection.SERVERS:
        assert got == (running or None)
    else:
        assert got is None


BLIND = '''\
"""A module."""
import os

X = 1


def f(a):
    """Its doc."""
    global X
    if a:
        X = a
        return a
    return -a


def forks():
    if os.fork() == 0:
        os._exit(0)
    return 1


class C:
    def m(self):
        return (1 +
                2)
'''
BLIND_STATEMENTS = {10: "if a:", 11: "X = a", 12: "return a", 13: "return -a", 24: "return (1 +"}


@settings(max_examples=40, derandomize=True, database=None, deadline=None)
@given(tests=st.dictionaries(st.sampled_from(sorted(BLIND_STATEMENTS) + [1, 2, 4, 7, 9, 17, 18, 19, 23, 25]),
                             st.lists(st.sampled_from(["", "tests/test_a.py::test_x", "fuzz/test_f.py::test_y"]),
                                      min_size=1, max_size=2)),
       split=st.integers(0, 2))
def test_blind_spots_are_the_function_statements_no_command_ran(tests: dict[int, list[str]], split: int) -> None:
    """selection.blind_spots over drawn maps of one source (any recorded lines, each with any tests, the
    empty context included, spread over one or two commands' maps): exactly the executable statements inside
    a non-forking function that no map records; never a docstring, a ``global``, a module or class body, a
    forking function's line or a continuation line."""
    recorded = {str(n): t for n, t in tests.items()}
    first = dict(list(recorded.items())[:split])
    maps = [{"m.py": first}, {"m.py": {n: t for n, t in recorded.items() if n not in first}}]
    assert selection.blind_spots(maps, {"m.py": BLIND}) == (
        {"m.py": sorted(set(BLIND_STATEMENTS) - set(tests))} if set(BLIND_STATEMENTS) - set(tests) else {})
    lines = BLIND.splitlines()
    assert all(lines[n - 1].strip() == text for n, text in BLIND_STATEMENTS.items())


def test_the_map_cache_key_is_the_same_in_every_process() -> None:
    """A tree's coverage map is found again by a later run (a resumed sample, --blind-spots): the cache path
    is one in fresh interpreters of different string-hash seeds (a set's repr in the key's text changed it)."""
    code = "from mutation import selection; print(selection.cache_path(selection.Path('r'), 'fp', ['c']))"
    paths = {subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in range(6)}
    assert len(paths) == 1, paths


@settings(max_examples=40, derandomize=True, database=None, deadline=None)
@given(reads=st.lists(st.sets(st.integers(0, 3), max_size=3), min_size=1, max_size=4),
       chained=st.integers(0, 3), mentioned=st.sets(st.integers(0, 3), max_size=2), mutated=st.integers(0, 3),
       lazy=st.booleans())
def test_a_module_level_definition_runs_the_tests_of_what_reads_it(
        tmp_path_factory: pytest.TempPathFactory, reads: list[set[int]], chained: int, mentioned: set[int],
        mutated: int, lazy: bool) -> None:
    """selection.Readers over drawn trees: constants C0..C3 (CHAIN = C{chained} + 1 reads one), functions
    reading drawn subsets of them (a name, an attribute, a "module:NAME" string, or CHAIN), each run by its own test, a test
    module mentioning drawn constants. A mutant of C{mutated}, an import-time line, runs
    exactly the tests of the functions reading it or CHAIN where CHAIN reads it, and the test module naming
    it, whichever test imported the module first; a module-level call reading it, or another file naming it,
    leaves it to every test."""
    tree = tmp_path_factory.mktemp("readers")
    src = tree / "src" / "wy_ascend"
    src.mkdir(parents=True)
    lines = [f"C{i} = {i}" for i in range(4)] + [f"CHAIN = C{chained} + 1", "", ""]
    bodies = {}
    for j, names in enumerate(reads):
        forms = ("m.C{}", "C{}", 'm.load("wy_ascend.consts:C{}")')  # an attribute, a name, a "module:NAME"
        used = [forms[i % 3].format(i) for i in sorted(names)] or ["0"]
        bodies[j] = len(lines) + 2
        lines += [f"def f{j}(m):", f"    return {' + '.join(used)}" + (" + CHAIN" if j == 0 else ""), "", ""]
    (src / "consts.py").write_text("\n".join(lines) + "\n")
    (tree / "tests").mkdir()
    (tree / "tests" / "test_names.py").write_text("".join(f"X{i} = 'C{i}'\n" for i in sorted(mentioned)))
    imported = ["tests/test_lazy.py::test_import"] if lazy else [""]  # a module imported first inside a test
    maps = [{"consts.py": {**{str(i + 1): imported for i in range(5)},
                           **{str(n): [f"tests/test_f.py::test_{j}"] for j, n in bodies.items()}}}]
    chosen = selection.select(maps, "consts.py", [(mutated + 1, False)], [["tests/"]],
                              selection.Readers(tree))
    readers = {j for j, names in enumerate(reads) if mutated in names or (j == 0 and chained == mutated)}
    expected = {f"tests/test_f.py::test_{j}" for j in readers} | (
        {"tests/test_names.py"} if mutated in mentioned else set())
    assert chosen == [sorted(expected)]
    (src / "setup.py").write_text(f"from .consts import C{mutated}\nregister(C{mutated})\n")
    assert selection.select(maps, "consts.py", [(mutated + 1, False)], [["tests/"]], selection.Readers(tree)) == [None]
    (src / "setup.py").unlink()
    (tree / "fuzz").mkdir()
    (tree / "fuzz" / "strategies.py").write_text(f"LIMIT = 'C{mutated}'\n")
    assert selection.select(maps, "consts.py", [(mutated + 1, False)], [["tests/"]], selection.Readers(tree)) == [None]
