"""mutation/generated.py without running pytest: sites, sampling, the mutants it writes, the report.

The mutants are built on the real src/wy_ascend (read once per module, so an edit made while the
tests run cannot mix two versions); a few sites per file and operator keep this under a few seconds.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mutation import generated as gm
from mutation import mutants as hand

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    return gm.read_sources(ROOT / "src" / "wy_ascend")


@pytest.fixture(scope="module")
def sites(sources: dict[str, str]) -> list[gm.Site]:
    return gm.find_sites(sources)


def _one_per_file_and_operator(sites: list[gm.Site]) -> list[gm.Site]:
    groups: dict[tuple[str, str], list[gm.Site]] = defaultdict(list)
    for s in sites:
        groups[s.file, s.operator].append(s)
    return [g[len(g) // 2] for g in groups.values()]  # the middle site of each: deterministic


def _differences(a: ast.AST, b: ast.AST, path: tuple = ()) -> list[tuple]:
    """Paths (field, index) of the outermost nodes where ``a`` and ``b`` differ."""
    if type(a) is not type(b):
        return [path]
    out: list[tuple] = []
    for name, va in ast.iter_fields(a):
        vb = getattr(b, name)
        if isinstance(va, list):
            if len(va) != len(vb):
                return [path]
            for i, (x, y) in enumerate(zip(va, vb)):
                if isinstance(x, ast.AST):
                    out += _differences(x, y, (*path, (name, i)))
                elif x != y:
                    return [path]
        elif isinstance(va, ast.AST):
            out += _differences(va, vb, (*path, (name, -1)))
        elif va != vb:
            return [path]
    return out


def test_every_module_and_every_operator_has_sites(sites: list[gm.Site], sources: dict[str, str]) -> None:
    assert {s.operator for s in sites} == set(gm.OPERATORS)
    files = {s.file for s in sites}
    assert {"kernels.py", "planning.py", "validation.py", "ops.py", "reference.py", "backends.py", "layout.py",
            "testing/case.py"} <= files <= set(sources)


def test_ids_are_unique_stable_and_name_the_node(sites: list[gm.Site], sources: dict[str, str]) -> None:
    ids = [s.id for s in sites]
    assert len(set(ids)) == len(ids)
    assert [s.id for s in gm.find_sites(dict(sources))] == ids  # same source, same ids
    for s in sites:
        assert re.fullmatch(rf"{re.escape(s.file)}:{s.line}:{s.col}:{s.operator}(~\d+)?", s.id), s.id
    tree = {f: ast.parse(text) for f, text in sources.items()}
    for s in sites[::7]:
        node = gm._resolve(tree[s.file], s.path)[1]
        assert (node.lineno, node.col_offset) == (s.line, s.col), s.id  # type: ignore[attr-defined]


def test_sampling_is_deterministic_stratified_and_seeded(sites: list[gm.Site]) -> None:
    a = gm.sample(sites, 150, seed=3)
    assert [s.id for s in a] == [s.id for s in gm.sample(list(sites), 150, seed=3)]
    assert len(a) == 150 and len({s.id for s in a}) == 150
    assert [s.id for s in a] != [s.id for s in gm.sample(sites, 150, seed=4)]
    per_file = defaultdict(int)
    for s in a:
        per_file[s.file] += 1
    assert set(per_file) == {s.file for s in sites}  # every module with sites gets mutants
    assert min(per_file.values()) >= min(2, min(sum(1 for s in sites if s.file == f) for f in per_file))
    uniform = gm.sample(sites, 150, seed=3, uniform=True)
    assert len(uniform) == 150 and [s.id for s in uniform] == [s.id for s in gm.sample(sites, 150, 3, uniform=True)]
    assert gm.sample(sites[:10], 150, seed=0) == sites[:10]


def test_every_operator_compiles_and_changes_only_its_node(sites: list[gm.Site], sources: dict[str, str]) -> None:
    mutants, broken = gm.build_mutants(sources, _one_per_file_and_operator(sites))
    assert broken == []
    assert {m.site.operator for m in mutants} == set(gm.OPERATORS)
    original = {f: ast.parse(text) for f, text in sources.items()}
    for m in mutants:
        compile(m.mutated, m.site.file, "exec")
        assert m.mutated != m.original and m.diff
        diffs = _differences(original[m.site.file], ast.parse(m.mutated))
        assert diffs, m.id
        assert all(d[: len(m.site.path)] == m.site.path for d in diffs), (m.id, diffs, m.site.path)
        # the text outside the changed lines is untouched: comments, formatting and line numbers
        if m.site.operator not in ("swap_args", "cmp_swap", "drop_stmt", "drop_call"):
            assert len(m.mutated.splitlines()) == len(m.original.splitlines()), m.id


def test_what_is_never_mutated(tmp_path: Path) -> None:
    source = '''"""Module docstring 7."""
from __future__ import annotations

__all__ = ["f", 8]


def f(x: int = 1, y: Annotated[int, 9] = 2) -> Literal[10]:
    """Docstring 11."""
    z: Annotated[int, 12] = 3
    if x < 4:
        raise ValueError(f"x must be >= {x + 13}")
    print(x + 14)
    log.info("%d", x + 15)
    g(x, y)
    return x * 5
'''
    sites = gm.find_sites({"m.py": source})
    literals = {s.description.split(" ->")[0] for s in sites if s.operator == "const_inc"}
    assert literals == {"1", "2", "3", "4", "5"}  # none of 7..15: docstrings, __all__, annotations, messages, output
    ops = sorted(s.operator for s in sites if s.operator not in ("const_inc", "const_dec"))
    assert ops == ["binop", "cmp_flip", "cmp_swap", "drop_call", "drop_stmt", "drop_stmt", "swap_args"]
    # drop_stmt: the annotated assignment and the raise; not the return (not in an if body)
    mutants, broken = gm.build_mutants({"m.py": source}, sites)
    assert not broken
    by_op = {m.site.operator: m for m in mutants}
    assert "    if x <= 4:\n" in by_op["cmp_flip"].mutated
    assert "    if 4 < x:\n" in by_op["cmp_swap"].mutated
    assert "    return x / 5\n" in by_op["binop"].mutated
    assert "    g(y, x)\n" in by_op["swap_args"].mutated
    assert "    pass\n    return x * 5\n" in by_op["drop_call"].mutated


def test_negative_literals_bounds_and_augmented_assignments() -> None:
    source = "def f(x, n):\n    x[0] += n\n    return x[1:n], range(n - 1)\n"
    sites = gm.find_sites({"m.py": source})
    mutants = {m.id: m for m in gm.build_mutants({"m.py": source}, sites)[0]}
    assert mutants["m.py:2:6:const_dec"].mutated.splitlines()[1] == "    x[(-1)] += n"
    assert mutants["m.py:2:4:binop"].mutated.splitlines()[1] == "    x[0] -= n"
    assert mutants["m.py:3:15:bound_inc"].mutated.splitlines()[2] == "    return x[1:(n + 1)], range(n - 1)"
    assert mutants["m.py:3:25:bound_dec"].mutated.splitlines()[2] == "    return x[1:n], range((n - 1 - 1))"


def test_report_score_counts_timeouts_and_leaves_out_argued_equivalents() -> None:
    def r(i: str, verdict: str) -> dict:
        return {"id": i, "key": f"k{i}", "verdict": verdict}

    results = {i: r(i, v) for i, v in [("a", "killed"), ("b", "killed"), ("c", "timeout"), ("d", "survived"),
                                        ("e", "survived"), ("f", "invalid"), ("g", "error")]}
    s = gm.summarize(results, [{"key": "ke", "reason": "same value"}], timeouts_kill=True)
    assert (s["killed"], s["timeout"], s["survived"], s["invalid"], s["error"]) == (2, 1, 2, 1, 1)
    assert s["score"] == pytest.approx(3 / 5) and s["score_non_equivalent"] == pytest.approx(3 / 4)
    assert gm.summarize(results, [], timeouts_kill=False)["score"] == pytest.approx(2 / 4)


def test_markdown_lists_every_survivor_with_its_diff(sources: dict[str, str], sites: list[gm.Site]) -> None:
    mutants, _ = gm.build_mutants(sources, gm.sample(sites, 4, seed=0))
    results = [gm._result(m, v, "fp", "sfp") for m, v in zip(mutants, ["killed", "survived", "timeout", "invalid"])]
    doc = {"n": 4, "seed": 0, "summary": gm.summarize({r["id"]: r for r in results}, [], True), "results": results,
           "fingerprint": "fp", "src_fingerprint": "sfp", "commands": ["python -m pytest tests/"], "timeout": 60.0,
           "sites": len(sites), "sites_per_file": {}, "sites_per_operator": {}, "baseline": {"verdict": "survived"}}
    text = gm.markdown(doc)
    assert "## Survivors (1)" in text and f"`{mutants[1].id}`" in text and mutants[1].diff.splitlines()[3] in text
    assert "## Timeouts (1)" in text and "## Invalid" in text and "Score: **66.7%**" in text


def test_recheck_makes_a_reports_survivors_again_on_the_current_source(sources: dict[str, str], sites: list[gm.Site],
                                                                      tmp_path: Path) -> None:
    mutants, _ = gm.build_mutants(sources, gm.sample(sites, 8, seed=2))
    killed, argued, moved = mutants[0], mutants[1], mutants[2]
    gone = next(m for m in mutants[3:] if m.site.file != moved.site.file)
    kept = [m for m in mutants[3:] if m.site.file not in (moved.site.file, gone.site.file)]
    results = [gm._result(m, "killed" if m is killed else "survived", "fp", "sfp") for m in mutants]
    report = tmp_path / "old.json"
    report.write_text(json.dumps({"results": results}))
    # Since the report: ten lines above one survivor (its line numbers move), and a line of
    # another survivor's change edited (it no longer applies).
    edited = dict(sources)
    edited[moved.site.file] = "# new\n" * 10 + edited[moved.site.file]
    old_line = next(line for line in gone.diff.splitlines()[3:] if line.startswith("-"))[1:]
    edited[gone.site.file] = edited[gone.site.file].replace(old_line + "\n", old_line + "  # edited\n", 1)
    again, not_built = gm.recheck_mutants(report, edited, [{"key": argued.key, "reason": "argued"}])
    by_id = {m.id: m for m in again}
    assert killed.id not in by_id and argued.id not in by_id and gone.id not in by_id
    assert by_id[moved.id].mutated == "# new\n" * 10 + moved.mutated and by_id[moved.id].site.line == moved.site.line + 10
    assert by_id[moved.id].key == moved.key
    for m in kept:
        assert by_id[m.id].mutated == m.mutated and by_id[m.id].key == m.key
    assert [(s.id, why) for s, why in not_built] == [(gone.id, f"its lines occur 0 times in {gone.site.file} now")]


def test_recheck_moves_a_site_with_its_lines_when_the_change_is_below_it() -> None:
    """A call's swapped arguments sit on lines below the call (the site's line): ten lines inserted
    above move the site by ten, not to the changed line (kernels.py's _bwd_group call, a site at 454,
    was rechecked at 466: the sample of one source tree failed the test above)."""
    source = "def f(a, b):\n    return a - b\n\n\ndef g(x, y):\n    return f(\n        x,\n        y,\n    )\n"
    (site,) = [s for s in gm.find_sites({"m.py": source}) if s.operator == "swap_args"]
    (mutant,), _ = gm.build_mutants({"m.py": source}, [site])
    again = gm.reapply(gm._result(mutant, "survived", "fp", "sfp"), {"m.py": "# new\n" * 10 + source})
    assert not isinstance(again, str) and (site.line, again.site.line) == (6, 16)
    assert again.mutated == "# new\n" * 10 + mutant.mutated


@pytest.mark.parametrize("text", ["not json", '{"runs": []}', '{"results": [{"id": "a.py:1:0:binop"}]}'])
def test_recheck_of_a_file_that_is_no_report_is_a_clear_error(tmp_path: Path, text: str, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    assert hand.main(["--recheck", str(bad), "--worktree", "--dry-run", "--report", str(tmp_path / "r.json")]) == 2
    assert f"--recheck: {bad} is not a generated-mutant report" in capsys.readouterr().err


def test_mutants_py_delegates_generated(capsys: pytest.CaptureFixture[str]) -> None:
    assert hand.main(["--generated", "3", "--seed", "1", "--dry-run", "--worktree"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("generated mutants: ") and len(re.findall(r"^--- a/src/wy_ascend/", out, re.M)) == 3


def test_plugin_orders_killers_then_near_tests_then_fast_modules(tmp_path: Path, monkeypatch) -> None:
    order = {"durations": {"tests/test_a.py::x": 5, "tests/test_a.py::y": 1, "tests/test_b.py::z": 0.5,
                           "tests/test_ops.py::o": 3},
             "priority": ["tests/test_a.py::x"], "near": ["test_ops."]}
    (tmp_path / "order.json").write_text(json.dumps(order))
    monkeypatch.setenv("WY_MUTANT_SRC", str(tmp_path))
    monkeypatch.setenv("WY_GEN_REPORT", str(tmp_path / "report.json"))
    monkeypatch.setenv("WY_GEN_ORDER", str(tmp_path / "order.json"))
    plugin: dict = {}
    exec(compile(gm.PLUGIN, "_wy_gen_plugin", "exec"), plugin)

    class Item:
        def __init__(self, nodeid: str) -> None:
            self.nodeid = nodeid

    items = [Item(n) for n in ("tests/test_a.py::y", "tests/test_a.py::x", "tests/test_b.py::z", "tests/test_ops.py::o",
                               "tests/test_new.py::n")]
    plugin["pytest_collection_modifyitems"](None, None, items)
    # the killer's module first (killer ahead of its neighbour), the module named near, then by time; untimed last
    assert [i.nodeid for i in items] == ["tests/test_a.py::x", "tests/test_a.py::y", "tests/test_ops.py::o",
                                         "tests/test_b.py::z", "tests/test_new.py::n"]


@pytest.mark.parametrize("no_shrink", [False, True])
def test_the_plugin_derandomizes_every_test_that_does_not_choose_and_keeps_the_rest(tmp_path: Path, monkeypatch,
                                                                                     no_shrink: bool) -> None:
    """A mutant's runs draw what the baseline drew: the plugin's collection hook loads a Hypothesis profile that
    derandomizes every test leaving ``derandomize`` unset (a test's own random draws once failed a baseline on a
    case no earlier run had met), over the profile loaded before (fuzz/'s --profile: its examples kept), with the
    shrink phase off only under WY_GEN_NO_SHRINK. A test's own settings still win where it sets them."""
    from hypothesis import Phase, given, settings
    from hypothesis import strategies as st

    monkeypatch.setenv("WY_MUTANT_SRC", str(tmp_path))
    monkeypatch.setenv("WY_GEN_REPORT", str(tmp_path / "report.json"))
    if no_shrink:
        monkeypatch.setenv("WY_GEN_NO_SHRINK", "1")
    else:
        monkeypatch.delenv("WY_GEN_NO_SHRINK", raising=False)
    before = settings.default
    # every phase and no derandomize of its own: what this process loaded before (a mutation run's own plugin,
    # say) does not decide what the hook is seen to do
    settings.register_profile("_test_before", parent=before, max_examples=7, phases=tuple(Phase), derandomize=False)
    settings.load_profile("_test_before")
    plugin: dict = {}
    try:
        exec(compile(gm.PLUGIN, "_wy_gen_plugin", "exec"), plugin)
        plugin["pytest_collection"](None)
        now = settings.default
        assert now.derandomize and now.max_examples == 7
        assert (Phase.shrink in now.phases) is not no_shrink

        def draws() -> list[int]:
            seen: list[int] = []

            @settings(max_examples=20)  # a test that sets no derandomize of its own
            @given(st.integers())
            def drawing(x: int) -> None:
                seen.append(x)

            drawing()
            return seen

        assert draws() == draws()
    finally:
        settings.register_profile("_test_restore", parent=before)
        settings.load_profile("_test_restore")


# --------------------------------------------------------------------------- shards and --merge


def _ids_of_dry_run(out: str) -> list[str]:
    return re.findall(r"^(\S+\.py:\d+:\d+:\w+(?:~\d+)?)  \[", out, re.M)


def test_shards_partition_the_sample(sites: list[gm.Site], capsys: pytest.CaptureFixture[str]) -> None:
    picked = gm.sample(sites, 23, seed=5)
    for n in range(1, 6):
        shards = [gm.shard_of(picked, k, n) for k in range(1, n + 1)]
        ids = [s.id for shard in shards for s in shard]
        assert sorted(ids) == sorted(s.id for s in picked) and len(set(ids)) == len(picked)  # disjoint, the sample
        assert all(len(shard) in (len(picked) // n, -(-len(picked) // n)) for shard in shards)  # balanced
    # Through the command line: the same sample in every shard, each shard its positions i % N == K - 1.
    # One commit for the four runs (the working tree may be edited meanwhile; the sample would move).
    # A tree with no .git of its own (an exported copy inside another repository) has no commit: the tool's rule.
    rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip() \
        if (ROOT / ".git").exists() else ""
    args = ["--generated", "7", "--seed", "1", "--dry-run", *(["--rev", rev] if rev else ["--worktree"])]
    assert hand.main(args) == 0
    whole = _ids_of_dry_run(capsys.readouterr().out)
    parts = []
    for k in (1, 2, 3):
        assert hand.main([*args, "--shard", f"{k}/3"]) == 0
        out = capsys.readouterr().out
        assert f"; shard {k}/3: " in out.splitlines()[0]
        parts.append(_ids_of_dry_run(out))
    assert len(whole) == 7 and parts == [whole[0::3], whole[1::3], whole[2::3]]


@pytest.mark.parametrize("value", ["0/4", "5/4", "1/0", "a/b", "1-4", "", "-1/4", "1/4/2"])
def test_shard_must_be_k_of_n(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        gm.parse_args(["--generated", "3", f"--shard={value}"])
    assert exit_.value.code == 2 and "error: --shard: " in capsys.readouterr().err


def test_shard_reports_have_their_own_default_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert gm.parse_args(["--generated", "3", "--shard", "2/4"]).report == ROOT / "mutants-report.shard-2-of-4.json"
    assert gm.parse_args(["--generated", "3", "--shard", "1/1"]).report == ROOT / "mutants-report.shard-1-of-1.json"
    assert gm.parse_args(["--generated", "3"]).report == ROOT / gm.DEFAULT_REPORT
    assert gm.parse_args(["--generated", "3", "--shard", "2/4", "--report", "x.json"]).report == Path("x.json")
    a = tmp_path / "a.json"
    a.write_text("{}")
    for argv, message in [
        (["--generated", "3", "--merge", str(a)], "(not --generated and --merge together)"),
        (["--blind-spots", "--recheck", str(a)], "(not --recheck and --blind-spots together)"),
        (["--merge", str(a), "--shard", "1/2"], "--shard does not apply"),
        (["--merge", str(tmp_path / "none.json")], f"--merge: no report at {tmp_path / 'none.json'}"),
        (["--merge", str(a), "--report", str(a)], "is one of the reports merged"),
    ]:
        with pytest.raises(SystemExit):
            gm.parse_args(argv)
        assert message in capsys.readouterr().err, argv


def _report(results: list[dict], ids: list[str], *, seed: int = 0, shard: str | None = None) -> dict:
    """A report as main writes it (the fields --merge checks and markdown reads)."""
    return {"tool": "mutation/generated.py", "n": len(results), "seed": seed, "generated": len(ids),
            "shard": shard, "sample_size": len(ids), "sample_ids": ids, "recheck_of": None,
            "sampling": "stratified by file (min 2)", "operators": sorted(gm.OPERATORS), "sites": 100,
            "sites_per_file": {}, "sites_per_operator": {}, "fingerprint": "fp", "src_fingerprint": "sfp",
            "commands": ["python -m pytest tests/"], "jobs": 1, "timeout": 150.0, "timeouts_kill": True,
            "not_built": [], "equivalent": [], "baseline": {"verdict": "survived", "seconds": 10.0},
            "results": results, "elapsed": 60.0, "finished": True,
            "summary": gm.summarize({r["id"]: r for r in results}, [], True)}


@pytest.fixture(scope="module")
def verdicts(sources: dict[str, str], sites: list[gm.Site]) -> list[dict]:
    mutants, _ = gm.build_mutants(sources, gm.sample(sites, 9, seed=4))
    cycle = ["killed", "survived", "timeout", "killed", "invalid", "error", "killed", "killed", "survived"]
    return [gm._result(m, v, "fp", "sfp") for m, v in zip(mutants, cycle)]


def _merge(tmp_path: Path, docs: list[dict]) -> tuple[int, list[Path], Path]:
    paths = []
    for i, d in enumerate(docs):
        paths.append(tmp_path / f"shard-{i + 1}.json")
        paths[-1].write_text(json.dumps(d))
    out = tmp_path / "merged.json"
    rc = hand.main(["--merge", *map(str, paths), "--report", str(out), "--equivalent", str(tmp_path / "none.json")])
    return rc, paths, out


def test_merging_the_shards_gives_the_report_of_the_whole_sample(verdicts: list[dict], tmp_path: Path) -> None:
    ids = [r["id"] for r in verdicts]
    whole = _report(verdicts, ids)
    # Shard 2 was interrupted once: a pending result in a rerun-from-scratch copy of shard 2 is
    # filled from the finished one (the result that exists).
    shards = [_report(gm.shard_of(verdicts, k, 2), ids, shard=f"{k}/2") for k in (1, 2)]
    unfinished = _report([{**r, "verdict": "pending"} for r in gm.shard_of(verdicts, 2, 2)], ids, shard="2/2")
    rc, _, out = _merge(tmp_path, [shards[1], unfinished, shards[0]])
    assert rc == 0
    merged = json.loads(out.read_text())
    assert merged["results"] == whole["results"] and merged["summary"] == whole["summary"]
    assert merged["n"] == 9 and merged["missing"] == [] and merged["finished"] is True
    assert [m["shard"] for m in merged["merged_from"]] == ["2/2", "2/2", "1/2"]
    text = out.with_suffix(".md").read_text()
    assert "merged from 3 reports" in text and "none missing" in text and "Score: **71.4%**" in text
    # One shard alone: the other's mutants are missing, the score is over those present.
    rc, _, out = _merge(tmp_path, [shards[0]])
    merged = json.loads(out.read_text())
    assert rc == 0 and merged["missing"] == ids[1::2] and merged["finished"] is False
    assert "**4 missing**" in out.with_suffix(".md").read_text()


def test_merge_refuses_shards_of_another_sample_or_disagreeing(verdicts: list[dict], tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    ids = [r["id"] for r in verdicts]
    one = _report(gm.shard_of(verdicts, 1, 2), ids, shard="1/2")
    rc, paths, out = _merge(tmp_path, [one, _report(gm.shard_of(verdicts, 2, 2), ids, seed=7, shard="2/2")])
    err = capsys.readouterr().err
    assert rc == 2 and not out.exists()
    assert f"--merge: {paths[1]} is not of the same sample as {paths[0]}: seed differs (7 there, 0 in" in err
    rc, paths, _ = _merge(tmp_path, [one, {**one, "src_fingerprint": "other"}])
    assert rc == 2 and f"{paths[1]} is not of the same sample as {paths[0]}: src_fingerprint differs" in \
        capsys.readouterr().err
    flipped = [{**r, "verdict": "survived"} if r["verdict"] == "killed" else r for r in gm.shard_of(verdicts, 1, 2)]
    rc, paths, _ = _merge(tmp_path, [one, _report(flipped, ids, shard="1/2")])
    assert rc == 2 and f"--merge: shards disagree on {ids[0]}: killed in {paths[0]}, survived in {paths[1]}" in \
        capsys.readouterr().err
    rc, paths, _ = _merge(tmp_path, [one, {"results": []}])
    assert rc == 2 and f"--merge: {paths[1]} is not a generated-mutant report" in capsys.readouterr().err


def test_a_kill_by_a_test_that_fails_alone_unmutated_is_no_verdict(tmp_path: Path, sources: dict[str, str],
                                                                   sites: list[gm.Site],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The killers of a file run first on its next mutants; a test that fails when run alone (it passed in
    the baseline only after the tests before it) would then kill every mutant. Its kill is an error (no
    verdict, rerun on resume), checked once per test on the unmutated tree; a test that passes alone keeps
    its kill."""
    (tmp_path / "src" / "wy_ascend").mkdir(parents=True)
    (tmp_path / "regressions").mkdir()
    runner = gm.Runner(tmp_path, gm.parse_args(["--generated", "1", "--worktree"]))
    mutant = gm.make_mutant(sites[0], sources[sites[0].file])
    alone_runs: list[list[str]] = []

    def one_command(cmd: list[str], env: dict[str, str], tmp: Path, timeout: float | None, prefix=()) -> gm.Outcome:
        if "::" in cmd[0] and tmp.name.startswith("wy-gen-baseline-"):  # the killer alone, unmutated
            alone_runs.append(cmd)
            return gm.Outcome("killed" if "order_dependent" in cmd[0] else "survived", 0.1)
        if "::" in cmd[0]:  # the killer alone on the mutant: it fails there too (a real kill)
            return gm.Outcome("killed", 0.1, "failed", cmd[0])
        return gm.Outcome("killed", 0.1, "failed", killer)

    monkeypatch.setattr(runner, "_one_command", one_command)
    killer = "tests/test_x.py::test_order_dependent"
    for _ in range(2):
        outcome = runner.run(mutant, None)
        assert outcome.verdict == "error" and outcome.killer is None and "fails alone" in outcome.detail
    killer = "tests/test_x.py::test_real"
    assert runner.run(mutant, None).verdict == "killed"
    assert [c[0] for c in alone_runs] == ["tests/test_x.py::test_order_dependent", "tests/test_x.py::test_real"]


def test_a_recheck_folds_into_its_samples_report_as_the_later_trees_score(verdicts: list[dict], tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``--merge R --rechecked C``: C's verdicts replace R's survivors' (the first kept), C's unbuilt ones are gone
    and not counted; a recheck naming a mutant that did not survive in R, or a report that is no recheck, is
    refused by name."""
    ids = [r["id"] for r in verdicts]
    survivors = [r for r in verdicts if r["verdict"] == "survived"]
    assert len(survivors) == 2
    recheck = {**_report([{**survivors[0], "verdict": "killed", "killer": "tests/test_x.py::test_y",
                           "fingerprint": "later"}], [survivors[0]["id"]]),
               "recheck_of": "r.json", "fingerprint": "later", "src_fingerprint": "later-src",
               "not_built": [{"id": survivors[1]["id"], "why": "its lines occur 0 times in x.py now"}]}
    path = tmp_path / "recheck.json"
    path.write_text(json.dumps(recheck))
    rc, paths, out = _merge(tmp_path, [_report(verdicts, ids)])
    assert rc == 0 and json.loads(out.read_text())["summary"]["survived"] == 2
    args = ["--merge", str(paths[0]), "--report", str(out), "--equivalent", str(tmp_path / "none.json")]
    assert hand.main([*args, "--rechecked", str(path)]) == 0
    folded = json.loads(out.read_text())
    s = folded["summary"]
    assert (s["killed"], s["survived"], s["gone"], s["timeout"]) == (5, 0, 1, 1) and s["score"] == 1.0
    first = next(r for r in folded["results"] if r["id"] == survivors[0]["id"])
    assert first["verdict"] == "killed" and first["first"] == {"verdict": "survived", "fingerprint": "fp",
                                                               "src_fingerprint": "sfp"}
    assert folded["rechecked"]["decided"] == 1 and folded["rechecked"]["gone"] == 1 and folded["survivors"] == []
    text = out.with_suffix(".md").read_text()
    assert "Survivors rechecked on a later tree" in text and "tests/test_x.py::test_y" in text and "gone 1" in text
    killed_in_sample = next(r for r in verdicts if r["verdict"] == "killed")
    path.write_text(json.dumps({**recheck, "results": [{**killed_in_sample, "verdict": "survived"}]}))
    assert hand.main([*args, "--rechecked", str(path)]) == 2
    assert f"--rechecked: {path} has {killed_in_sample['id']}, which is not a survivor of this sample" in \
        capsys.readouterr().err
    path.write_text(json.dumps({**recheck, "recheck_of": None}))
    assert hand.main([*args, "--rechecked", str(path)]) == 2
    assert f"--rechecked: {path} is not a --recheck report" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        gm.parse_args(["--generated", "3", "--rechecked", str(path)])
    assert "--rechecked goes with --merge" in capsys.readouterr().err


def test_a_kill_by_a_test_that_passes_alone_on_the_mutant_is_decided_in_pytests_order(
        tmp_path: Path, sources: dict[str, str], sites: list[gm.Site], monkeypatch: pytest.MonkeyPatch) -> None:
    """A kill whose first failing test passes alone on the mutant came from the runner's order (a test before it
    left state behind: test_declarations' entry-point test once failed the subject-not-installed test after it,
    on every mutant that ran both); the command runs again in pytest's order, without the order file, and that
    verdict counts, whichever it is."""
    (tmp_path / "src" / "wy_ascend").mkdir(parents=True)
    (tmp_path / "regressions").mkdir()
    runner = gm.Runner(tmp_path, gm.parse_args(["--generated", "1", "--worktree"]))
    mutant = gm.make_mutant(sites[0], sources[sites[0].file])
    runs: list[tuple[str, bool]] = []
    in_pytest_order = "survived"

    def one_command(cmd: list[str], env: dict[str, str], tmp: Path, timeout: float | None, prefix=()) -> gm.Outcome:
        ordered = "WY_GEN_ORDER" in env
        runs.append((cmd[0], ordered))
        if "::" in cmd[0]:  # the killer alone (on the mutant, or unmutated): it passes
            return gm.Outcome("survived", 0.1)
        if ordered:  # the runner's order: the leaky test before it fails it
            return gm.Outcome("killed", 0.1, "failed", "tests/test_x.py::test_after_a_leak")
        return gm.Outcome(in_pytest_order, 0.1, "failed" if in_pytest_order == "killed" else "",
                          "tests/test_x.py::test_real" if in_pytest_order == "killed" else None)

    monkeypatch.setattr(runner, "_one_command", one_command)
    monkeypatch.setattr(runner, "_order_file", lambda tmp, file: tmp / "order.json")
    outcome = runner.run(mutant, None)
    assert outcome.verdict == "survived"
    # each command: in the runner's order (killed), its killer alone (passes), again in pytest's order (passes)
    assert [ordered for cmd, ordered in runs if "::" not in cmd] == [True, False] * len(runner.commands)
    assert [cmd for cmd, _ in runs if "::" in cmd] == ["tests/test_x.py::test_after_a_leak"] * len(runner.commands)
    in_pytest_order = "killed"
    outcome = runner.run(mutant, None)
    assert outcome.verdict == "killed" and outcome.killer == "tests/test_x.py::test_real"
    assert "test_after_a_leak passed alone on the mutant: run again in pytest's order" in outcome.detail


@pytest.mark.parametrize("where,stamped,linked", [
    (".venv", True, True),
    (".nox/cpu", True, True),  # the same place in the snapshot, whatever the environment's path in the checkout
    (".venv", False, False),  # its record is of another pyproject.toml: nox would install into it
    (None, True, False),  # an environment outside the checkout: not the one the snapshot's nox looks for
])
def test_the_snapshot_shares_the_environment_only_where_its_install_is_recorded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str | None, stamped: bool, linked: bool) -> None:
    import importlib.util
    import shutil
    import sys

    checkout, tree = tmp_path / "checkout", tmp_path / "snap" / "tree"
    tree.mkdir(parents=True)
    for name in ("install.py", "pyproject.toml"):
        shutil.copy(ROOT / name, tree / name)
    prefix = (checkout / where) if where else tmp_path / "elsewhere" / "env"
    prefix.mkdir(parents=True)
    spec = importlib.util.spec_from_file_location("wy_test_install", ROOT / "install.py")
    assert spec is not None and spec.loader is not None
    install = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(install)
    key = install.install_key("cpu", dev=True)
    (prefix / install.STAMP).write_text(("" if stamped else "-e .[cpu,test,upstream] pyproject:0000\n")
                                        + (key + "\n" if stamped else ""))
    monkeypatch.setattr(gm, "ROOT", checkout)
    monkeypatch.setattr(sys, "prefix", str(prefix))
    monkeypatch.setattr(sys, "base_prefix", str(tmp_path / "python"))
    link = gm.share_environment(tree)
    if linked:
        assert link == tree / where and link.is_symlink() and link.resolve() == prefix.resolve()
    else:
        assert link is None and not any(p.is_symlink() for p in tree.rglob("*"))
    if link is not None:
        link.unlink()
    monkeypatch.setattr(sys, "base_prefix", str(prefix))  # no venv at all: the interpreter's own prefix
    assert gm.share_environment(tree) is None and not any(p.is_symlink() for p in tree.rglob("*"))


@pytest.mark.parametrize("jobs", [1, 2, 3])
@pytest.mark.parametrize("known", [False, True])
def test_a_recording_splits_each_command_into_balanced_parts_over_all_its_test_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int, known: bool) -> None:
    import argparse

    snap, checkout = tmp_path / "tree", tmp_path / "checkout"
    sizes = {"tests/test_a.py": 9000, "tests/test_b.py": 5000, "tests/test_c.py": 4000, "tests/sub/test_d.py": 3000,
             "tests/e_test.py": 1000, "tests/conftest.py": 50000, "tests/helpers.py": 50000}
    for name, size in sizes.items():
        (snap / name).parent.mkdir(parents=True, exist_ok=True)
        (snap / name).write_text("#" * size)
    seconds = {"tests/test_a.py": 1.0, "tests/test_b.py": 30.0, "tests/test_c.py": 2.0, "tests/sub/test_d.py": 3.0,
               "tests/e_test.py": 4.0}
    if known:  # the last recording's seconds, not the sizes, weigh the files
        (checkout / gm.selection.CACHE_DIR).mkdir(parents=True)
        (checkout / gm.selection.CACHE_DIR / gm.DURATIONS_FILE).write_text(json.dumps(
            {f"{f}::test_{i}": s / 2 for f, s in seconds.items() for i in range(2)}))
    monkeypatch.setattr(gm, "ROOT", checkout)
    runner = gm.Runner(snap, argparse.Namespace(tests=None, jobs=jobs))
    parts = runner._parts(["tests/", "-k", "x"])
    assert runner._parts(["-k", "x"]) == [(["-k", "x"], 1.0)]  # no directory named: the command whole
    if jobs == 1:
        assert parts == [(["tests/", "-k", "x"], 1.0)]
        return
    weight = seconds if known else {f: float(s) for f, s in sizes.items() if f in seconds}
    files = [f for cmd, _ in parts for f in cmd if f.endswith(".py")]
    assert sorted(files) == sorted(weight) and len(parts) == min(jobs, len(weight))  # each test file once
    assert all(cmd[-2:] == ["-k", "x"] for cmd, _ in parts)
    for cmd, w in parts:
        assert w == pytest.approx(sum(weight[f] for f in cmd[:-2]))
    # longest first into the lightest part: no part beyond an even share plus the heaviest file
    assert max(w for _, w in parts) <= sum(weight.values()) / jobs + max(weight.values())


_NODES = [f"tests/test_{m}.py::test_{t}" for m in "ab" for t in "xyz"] + [f"fuzz/test_{t}.py::test_{t}" for t in "pq"]


@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(durations=st.dictionaries(st.sampled_from(_NODES), st.floats(0, 500)),
       picks=st.lists(st.one_of(st.none(), st.lists(st.sampled_from(_NODES + ["tests/test_a.py"]), max_size=4)),
                      min_size=2, max_size=2),
       more=st.lists(st.sampled_from(_NODES), max_size=3), timeout=st.one_of(st.none(), st.floats(1, 5000)))
@example(durations={_NODES[0]: 100.0, _NODES[1]: 50.0, _NODES[6]: 7.0}, picks=[["tests/test_a.py"], [_NODES[6]]],
         more=[_NODES[3]], timeout=3000.0)  # a whole module selected: each of its nodes counts
def test_a_mutants_time_limit_covers_three_times_its_selected_tests_and_never_passes_the_runs(
        tmp_path_factory: pytest.TempPathFactory, durations: dict[str, float], picks: list[list[str] | None],
        more: list[str], timeout: float | None) -> None:
    """Runner.time_limit over drawn baseline durations, selections (a command whole, none of its tests, some
    nodes or a whole module) and run timeouts: never past the run's timeout (None stays None), the run's own
    wherever a command runs whole, else 3x the selected tests' baseline seconds and a start allowance a command
    run, plus 120, up to it (a mutant that runs them at the baseline's speed is never cut), and never less for a
    larger selection."""
    tmp = tmp_path_factory.mktemp("limit")
    (tmp / "src" / "wy_ascend").mkdir(parents=True)
    (tmp / "regressions").mkdir()
    runner = gm.Runner(tmp, gm.parse_args(["--generated", "1", "--worktree", "--select"]))
    runner.order["durations"] = durations
    limit = runner.time_limit(picks, timeout)
    if timeout is None or any(p is None for p in picks):
        assert limit == timeout
        return
    run = [p for p in picks if p]
    selected = sum(s for p in run for n, s in durations.items() if any(n == k or n.split("::")[0] == k for k in p))
    assert limit == min(timeout, 3 * (selected + gm.STARTUP_S * len(run)) + 120)
    wider = [p + more if p else p for p in picks]
    assert runner.time_limit(wider, timeout) >= limit
