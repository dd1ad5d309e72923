"""The README's code runs as written, and its figures agree with the generated page they come from.

Every fenced ``python`` block runs alone, as a reader copies it, and prints the ``text`` block that
follows it after "prints" (on the cpu backend, the README's). Every ``bash`` block
runs line by line in the repository root, with this environment's scripts (``python``, ``nox``,
``wy-ascend``) first on the PATH, and must exit 0. A block that needs a device, a fresh environment
or a long run is preceded by ``<!-- test: ... -->`` with one line per command of the block: either a
cheaper form, which must begin with the README's command (the same command, with options that bound
it), or ``skip: <why>``. Fuzz runs write their report to a scratch directory.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCK = re.compile(r"(?:^<!-- test: (?P<how>.*?) -->\n)?^```(?P<lang>\w+)\n(?P<body>.*?)^```", re.S | re.M)
PRINTS = re.compile(r"\n\nprints\n\n```text\n(?P<out>.*?)^```", re.S | re.M)


def blocks(lang: str) -> list[re.Match[str]]:
    return [m for m in BLOCK.finditer(README) if m["lang"] == lang]


def commands() -> list[tuple[str, str]]:
    """(the README's command, what the test runs or "skip: why"), for every line of every bash block."""
    out = []
    for block in blocks("bash"):
        lines = [" ".join(shlex.split(line, comments=True)) for line in block["body"].splitlines()]
        lines = [line for line in lines if line]
        how = block["how"].splitlines() if block["how"] else lines
        assert len(how) == len(lines), f"the test comment of {lines} has {len(how)} lines for {len(lines)} commands"
        out += list(zip(lines, (h.strip() for h in how)))
    return out


def run_alone(block: re.Match[str], device: torch.device) -> tuple[dict, str]:
    """One block run in a namespace of its own (a block that needs another's names fails), with the backend
    under test's device as torch's default (the README makes its tensors where a user's are); its namespace
    and what it printed."""
    namespace: dict = {"__name__": "readme"}
    printed = io.StringIO()
    with device, contextlib.redirect_stdout(printed):
        exec(compile(block["body"], "README.md", "exec"), namespace)
    return namespace, printed.getvalue()


@pytest.fixture(scope="module")
def readme(device: torch.device) -> dict:
    """The names of every Python block, each block run alone."""
    found = blocks("python")
    assert len(found) >= 2, "the README's Python blocks: the import switch, the usage example"
    namespace: dict = {}
    for block in found:
        namespace.update(run_alone(block, device)[0])
    return namespace


@pytest.mark.parametrize("i", range(len(blocks("python"))))
def test_each_python_block_runs_alone_and_prints_what_the_readme_shows(i: int, device: torch.device,
                                                                       backend: str) -> None:
    block = blocks("python")[i]
    _, printed = run_alone(block, device)
    shown = PRINTS.match(README, block.end())
    if shown is None:
        assert printed == "", "a block that prints shows what it prints"
    elif backend == "cpu":  # the README's own run: exactly what it shows
        assert printed == shown["out"]
    else:  # another device's random inputs: the same outputs and shapes, within the float32 bound of the suite
        from wy_ascend.testing.properties import FP32_RTOL

        assert [line.split()[:-3] for line in printed.splitlines()] == [line.split()[:-3] for line in
                                                                       shown["out"].splitlines()]
        assert all(float(line.split()[-3]) < FP32_RTOL for line in printed.splitlines())


def test_the_usage_example_runs(readme) -> None:
    w, u, dk, dg = readme["w"], readme["u"], readme["dk"], readme["dg"]
    B, T, H, HV, K, V = (readme[n] for n in ("B", "T", "H", "HV", "K", "V"))
    assert w.shape == (B, T, HV, K) and u.shape == (B, T, HV, V) and dk.shape == (B, T, H, K)
    assert dg.shape == (B, T, HV) and all(bool(torch.isfinite(x).all()) for x in (w, u, dk, dg))
    assert readme["recompute_w_u_fwd"] is readme["wy_ascend"].recompute_w_u_fwd  # the import switch


def naive_g(gate: torch.Tensor, BT: int, cu: list[int] | None) -> torch.Tensor:
    """The definition, token by token: restart the sum at every sequence start and every BT tokens."""
    B, T, _ = gate.shape
    g = torch.zeros_like(gate)
    starts = set(cu[:-1]) if cu is not None else {0}
    for b in range(B):
        pos, total = 0, None
        for t in range(T):
            pos = 0 if t in starts else pos + 1
            total = gate[b, t] if pos % BT == 0 else total + gate[b, t]
            g[b, t] = total
    return g


@pytest.mark.parametrize("B,T,BT,cu", [
    (2, 70, 16, None),
    (1, 100, 64, [0, 30, 100]),
    (1, 90, 32, [0, 0, 1, 40, 40, 90]),  # empty sequences, a one-token sequence
    (1, 5, 128, [0, 5]),
])
def test_chunk_local_g_restarts_at_chunks_and_sequences(readme, B, T, BT, cu) -> None:
    gate = -torch.rand(B, T, 3, dtype=torch.float64)
    cu_t = None if cu is None else torch.tensor(cu, dtype=torch.int32)
    got = readme["chunk_local_g"](gate, BT, cu_t)
    torch.testing.assert_close(got, naive_g(gate, BT, cu), rtol=0, atol=1e-12)


def test_every_cheaper_form_is_the_readmes_command_bounded() -> None:
    found = commands()
    assert any(cmd.startswith("nox -s fuzz") for cmd, _ in found) and any(cmd.startswith("wy-ascend") for cmd, _ in found)
    for cmd, how in found:
        if how.startswith("skip:"):
            assert how[len("skip:"):].strip(), f"{cmd!r}: a skip says why"
        else:
            assert how.startswith(cmd), f"the test runs {how!r} for the README's {cmd!r}: not the same command"


@pytest.mark.parametrize("cmd,how", commands(), ids=[cmd for cmd, _ in commands()])
def test_the_shell_command_runs(cmd: str, how: str, tmp_path: Path, backend: str) -> None:
    if how.startswith("skip:"):
        pytest.skip(f"{cmd!r}: {how[len('skip:'):].strip()}")
    if backend != "cpu":  # a device run would point nox at .nox/<backend>, a build of its own
        pytest.skip(f"{cmd!r}: the README's commands set up and run the cpu backend; this run tests {backend!r}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # no xdist worker's identity
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    program = shlex.split(how)[0]
    if shutil.which(program, path=env["PATH"]) is None:
        pytest.skip(f"{cmd!r}: {program} is not on this environment's PATH")
    env["WY_ASCEND_FUZZ_REPORT"] = str(tmp_path / "fuzz-report.json")
    run = subprocess.run(["bash", "-c", how], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=1200)
    assert run.returncode == 0, f"{how}: exit {run.returncode}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"


def test_the_readme_replays_the_whole_store_as_written() -> None:
    """The README's replay of the store is one of the commands run as written (test_the_shell_command_runs:
    exit 0 on the README's install), not a cheaper form of it."""
    assert ("wy-ascend replay regressions/*.json --backend cpu",) * 2 in commands()


def test_the_verdict_table_is_the_clis() -> None:
    """The README's verdicts, their exit statuses and meanings are wy-ascend replay's (cli.VERDICTS)."""
    from wy_ascend.cli import VERDICTS

    table = README.split("| verdict | exit | meaning |", 1)[1].split("\n\n", 1)[0].strip().splitlines()[1:]
    rows = {cells[0]: (int(cells[1]), cells[2]) for cells in ([c.strip() for c in row.strip("|").split("|")]
                                                               for row in table)}
    assert rows == VERDICTS


def ci_commands() -> list[str]:
    """The nox commands .ci/run runs, in order (continued lines joined, comments dropped)."""
    text = (ROOT / ".ci" / "run").read_text().replace("\\\n", " ")
    return [" ".join(shlex.split(line, comments=True)) for line in text.splitlines() if line.startswith("nox ")]


def test_the_documented_ci_commands_are_what_ci_runs() -> None:
    """docs/ci.md's table of CI steps gives .ci/run's commands, in its order and as written, and the
    README's fuzz command for CI is one of them."""
    page = (ROOT / "docs" / "ci.md").read_text()
    table = page.split("| step | command | what fails it |", 1)[1].split("\n\n", 1)[0]
    documented = [cmd for row in table.splitlines()[2:] for cmd in re.findall(r"`(nox [^`]*)`", row.split("|")[2])]
    assert documented == ci_commands()
    said = re.search(r"CI runs `(nox [^`]*)`", README)
    assert said and said[1] in ci_commands()


def test_the_changelog_is_by_version_and_ends_at_this_one() -> None:
    """CHANGELOG.md, which the README names: unreleased changes first, then a section per version, the
    newest being pyproject.toml's."""
    import tomllib

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    sections = re.findall(r"^## (.+)$", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert "`CHANGELOG.md`" in README and sections[0] == "Unreleased" and sections[1] == version


def test_the_speed_figures_are_the_benchmark_pages() -> None:
    """The README's headline ratios against fla-core are the range of docs/benchmarks.md's headline table."""
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    table = page.split("### Headline shapes", 1)[1].split("\n\n")[1]
    rows = [[c.strip() for c in row.strip("|").split("|")] for row in table.splitlines()[2:]]
    ratio = {op: sorted(float(r[4]) for r in rows if r[1] == op) for op in ("fwd", "bwd")}
    said = re.search(r"backward takes ([\d.]+)-([\d.]+)x .*?forward\s+([\d.]+)-([\d.]+)x", README, re.S)
    assert said, "the README's speed sentence"
    assert [float(x) for x in said.groups()] == [ratio["bwd"][0], ratio["bwd"][-1], ratio["fwd"][0], ratio["fwd"][-1]]


def test_every_path_the_readme_names_exists() -> None:
    named = set(re.findall(r"`((?:docs|regressions|mutation|src|fuzz|tests|benchmarks)/[\w./-]*)`", README))
    assert "docs/design.md" in named and "regressions/README.md" in named
    assert sorted(p for p in named if not (ROOT / p).exists()) == []


def test_the_import_switch_keeps_flash_linear_attentions_arguments() -> None:
    """The README's claim: fla's wy_fast functions and ours take the same positional arguments, in order
    (read from fla-core's source: importing it on a CPU needs the subjects' shims)."""
    import ast
    import importlib.util
    import inspect

    import wy_ascend

    spec = importlib.util.find_spec("fla")
    if spec is None or spec.origin is None:
        pytest.skip("fla-core is not installed (the upstream extra)")
    source = Path(spec.origin).parent / "ops" / "gated_delta_rule" / "wy_fast.py"
    theirs = {f.name: [a.arg for a in f.args.args] for f in ast.parse(source.read_text()).body
              if isinstance(f, ast.FunctionDef)}
    for name in ("recompute_w_u_fwd", "prepare_wy_repr_bwd"):
        ours = [p.name for p in inspect.signature(getattr(wy_ascend, name)).parameters.values()
                if p.kind is p.POSITIONAL_OR_KEYWORD]
        assert ours == theirs[name], name
