"""Every file the fuzz suite writes replays on the machine that wrote it, whatever its property.

A ``pytest fuzz/test_fuzz.py --profile ci`` run on the cpu with every property planted to fail (its
check raises a PropertyFailure on every case, in the worker: ``WY_ASCEND_IN_PROCESS=1``) writes, for
each property the run runs, the minimal case Hypothesis shrinks to, through the suite's own path (check,
the block, the store). ``wy-ascend replay`` of those files, the property now holding, must give each a
verdict of the property, PASS, never one that it cannot run here (ERROR, MISSING, UNAVAILABLE): a
differential file once said ``ERROR ValueError: differential: no peer of subject 'wy_ascend' on backend
'cpu' takes this case here`` where the suite and the CLI ran in two environments, and a plan_coverage
file was UNAVAILABLE on the cpu that wrote it (past the interpreter's task limit, which plans never meet).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wy_ascend.cli import main
from wy_ascend.testing.properties import PROPERTIES
from wy_ascend.testing.store import iter_store, load

ROOT = Path(__file__).resolve().parents[1]
PLANT = '''
def pytest_collection_finish(session):
    from wy_ascend.testing.properties import PropertyFailure

    def planted(prop, case):
        raise PropertyFailure(f"planted: every {prop} case fails")

    for item in session.items:
        item.module.run_property = planted
'''


@pytest.mark.slow  # a fuzz run in a subprocess, then the replay of its files: ~1 min on 2 cores
@pytest.mark.cpu_interpreter
def test_every_property_writes_a_file_that_replays_to_a_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "plant_every_failure.py").write_text(PLANT)
    store, report = tmp_path / "store", tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WY_ASCEND_", "PYTEST_"))}
    env.update(PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
               WY_ASCEND_REGRESSIONS=str(store), WY_ASCEND_FUZZ_REPORT=str(report), WY_ASCEND_BACKEND="cpu",
               WY_ASCEND_IN_PROCESS="1")
    run = subprocess.run([sys.executable, "-m", "pytest", "fuzz/test_fuzz.py", "--profile", "ci", "-p", "no:xdist",
                          "-p", "no:cacheprovider", "-p", "plant_every_failure", "-rs", "-q"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    out = run.stdout + run.stderr
    assert run.returncode == 1, out[-3000:]
    ran = {name.split("::test_")[1].split("[")[0] for name, outcome in json.loads(report.read_text())["tests"].items()
           if outcome == "failed"}
    files = iter_store(store)
    written = {load(path).property for path in files}
    assert written == ran, out[-3000:]  # every property the run ran stored its failure
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED")]
    for prop in sorted(set(PROPERTIES) - ran):  # the others were skipped, each with its reason
        assert any(f"property {prop!r}" in line for line in skipped), (prop, skipped)
    assert "perf" not in ran and len(ran) == len(PROPERTIES) - 1, sorted(set(PROPERTIES) - ran)

    status = main(["replay", *map(str, files), "--backend", "cpu"])
    replayed = capsys.readouterr().out
    rows = [line.split() for line in replayed.splitlines()[:-1] if line.startswith(str(store))]
    assert len(rows) == len(files) and {row[2] for row in rows} == {"PASS"}, \
        [" ".join(row) for row in rows if row[2] != "PASS"]
    assert status == 0, replayed.splitlines()[-1]
