"""An outside subject's developer's loop, run as they would (docs/subjects.md): a defect planted in a copy of
examples/natural_gate_wy is found, shrunk and stored by ``wy-ascend fuzz`` run from another directory into
its own store; the stored file replays as FAIL, as KNOWN once its declaration marks it, and as FIXED once the
defect is gone. ~30 s: two fuzz runs of the oracle property on plain torch."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "natural_gate_wy"
SPEC = "natural_gate_wy.subject:SUBJECT"


def _run(args: list[str], cwd: Path, package: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(package / "src"), *sys.path]),
           "WY_ASCEND_SUBJECT_PATHS": ""}
    env.pop("WY_ASCEND_REGRESSIONS", None)
    return subprocess.run([sys.executable, "-m", "wy_ascend.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A copy of the example whose forward takes exp2 of its natural-log gate: w wrong wherever there is one."""
    package = tmp_path / "natural_gate_wy"
    shutil.copytree(EXAMPLE, package, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    kernel = package / "src" / "natural_gate_wy" / "kernel.py"
    source = kernel.read_text()
    assert "torch.exp(g[" in source
    kernel.write_text(source.replace("torch.exp(g[", "torch.exp2(g["))
    return package


def test_a_planted_defect_is_found_shrunk_stored_marked_known_and_seen_fixed(tmp_path: Path, planted: Path,
                                                                           backend: str) -> None:
    if backend != "cpu":
        pytest.skip("the example runs on the cpu backend")
    work = tmp_path / "elsewhere"  # the subject's own repository: not this checkout
    work.mkdir()
    found = _run(["fuzz", "--subject", SPEC, "--profile", "ci", "--store", "findings", "-k", "oracle", "-n", "0",
                  "-q"], work, planted)
    assert found.returncode == 1, found.stdout[-3000:] + found.stderr[-3000:]
    files = sorted((work / "findings").glob("oracle-*.json"))
    assert len(files) == 1, found.stdout[-3000:]
    stored = json.loads(files[0].read_text())
    assert stored["subject"] == {"name": "natural-gate-wy", "version": "0.1.0", "loaded": f"import path {SPEC}",
                                 "distribution": "natural-gate-wy"}
    case = stored["case"]
    # shrunk: the simplest case that still has a gate to get wrong
    assert case["use_g"] and case.get("B", 1) == 1 and case["H"] == case["HV"] == 1 and case["K"] == case["V"] == 16
    assert case["T"] <= 2 and "w: rel_rms" in stored["failure"]["message"]

    replayed = _run(["replay", str(files[0])], work, planted)
    assert replayed.returncode == 1 and "FAIL:" in replayed.stdout, replayed.stdout[-2000:]

    # marked known: the file's mark and the declaration's Known entry (its cases, as data)
    stored["known"] = {"reason": "exp2 of a natural-log gate (planted)"}
    files[0].write_text(json.dumps(stored, indent=2))
    declaration = planted / "src" / "natural_gate_wy" / "subject.py"
    text = declaration.read_text()
    text = text.replace("from wy_ascend.subjects import HOST, Calling, Claims, Subject",
                        "from wy_ascend.subjects import HOST, Calling, Claims, Known, Subject")
    text = re.sub(r"known=\(\),[^\n]*", f'known=(Known("0.1.0", "{files[0].name}", "use_g"),),', text)
    declaration.write_text(text)
    known = _run(["replay", str(files[0])], work, planted)
    assert known.returncode == 0 and "KNOWN: still fails as recorded" in known.stdout, known.stdout[-2000:]
    again = _run(["fuzz", "--subject", SPEC, "--profile", "ci", "--store", "findings", "-k", "oracle", "-n", "0",
                  "-q"], work, planted)
    assert again.returncode == 0, again.stdout[-3000:]  # the known cases are left out of the draws

    kernel = planted / "src" / "natural_gate_wy" / "kernel.py"
    kernel.write_text(kernel.read_text().replace("torch.exp2(g[", "torch.exp(g["))
    fixed = _run(["replay", str(files[0])], work, planted)
    assert fixed.returncode == 1 and "FIXED:" in fixed.stdout, fixed.stdout[-2000:]


def test_one_cause_of_bad_input_is_one_stored_file(tmp_path: Path, backend: str) -> None:
    """The example declared as validating (it validates nothing): every corruption fails, each an explicit
    example of its own, and the run stores one file per kind of failure (an argument accepted where a TypeError
    was due, another exception raised, ...), not one per corruption (a subject that validated nothing once left
    31 files); the other failures name the file of their cause."""
    if backend != "cpu":
        pytest.skip("the example runs on the cpu backend")
    (tmp_path / "probe.py").write_text(
        "import dataclasses\nfrom natural_gate_wy.subject import SUBJECT\n"
        "S = dataclasses.replace(SUBJECT, name='validating-probe', claims=dataclasses.replace(SUBJECT.claims, "
        "validates=True))\n")
    env_package = tmp_path / "pkg"
    shutil.copytree(EXAMPLE, env_package, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    shutil.copy(tmp_path / "probe.py", env_package / "src" / "probe.py")
    run = _run(["fuzz", "--subject", "probe:S", "--profile", "ci", "--store", "findings", "-k", "bad_input", "-n", "0",
                "-q"], tmp_path, env_package)
    assert run.returncode == 1, run.stdout[-3000:]
    files = list((tmp_path / "findings").glob("bad_input-*.json"))
    again = run.stdout.count("(same cause as ")
    assert 1 <= len(files) <= 8 and again >= 20, (len(files), again, run.stdout[-3000:])


def test_a_package_importing_triton_with_its_declaration_replays_on_the_cpu(tmp_path: Path, backend: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A Triton subject's package typically imports its kernels (so triton) in its ``__init__``, so loading its
    declaration imports triton: replay on the cpu sets the interpreter's mode before it loads any subject (it
    once loaded the subject first, and every replay of a Triton package's file was an ERROR, 'backend cpu needs
    TRITON_INTERPRET=1 set before triton is first imported', while its fuzz run had found it)."""
    if backend != "cpu":
        pytest.skip("the example runs on the cpu backend")
    from wy_ascend.testing.case import Case
    from wy_ascend.testing.store import SCHEMA_VERSION, file_name

    package = tmp_path / "natural_gate_wy"
    shutil.copytree(EXAMPLE, package, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    init = package / "src" / "natural_gate_wy" / "__init__.py"
    init.write_text("import triton  # noqa: F401 - as a package of Triton kernels does\n" + init.read_text())
    declaration = package / "src" / "natural_gate_wy" / "subject.py"
    text = declaration.read_text().replace("target=HOST,", 'target=Target.for_triton_ascend("3.2"),')
    declaration.write_text(text.replace("import HOST, Calling, Claims, Subject", "import Calling, Claims, Subject, Target"))
    case = {**Case(T=2, H=1, HV=1, K=16, V=16, BT=16, dtype="float32", use_g=True).to_dict(),
            "subject": "natural-gate-wy"}  # within the example's claims (this process has not loaded it)
    record = {"schema_version": SCHEMA_VERSION, "property": "oracle", "case": case,
              "failure": {"type": "PropertyFailure", "message": "recorded by hand", "metrics": {}, "traceback": None},
              "backend": "cpu", "versions": {"wy_ascend": "0.1.0", "torch": "2", "triton": "3", "hypothesis": "6",
                                             "python": "3"}, "date": "2026-12-06T00:00:00+00:00",
              "subject": {"name": "natural-gate-wy", "version": "0.1.0", "loaded": f"import path {SPEC}",
                          "distribution": "natural-gate-wy"}}
    path = tmp_path / file_name("oracle", case, "PropertyFailure")
    path.write_text(json.dumps(record))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # a user's shell: this test process's is set
    replayed = _run(["replay", str(path)], tmp_path, package)
    assert replayed.returncode == 0 and "PASS" in replayed.stdout, replayed.stdout[-2000:] + replayed.stderr[-2000:]


def test_a_property_whose_every_draw_a_known_defect_covers_is_skipped_naming_it(tmp_path: Path, backend: str) -> None:
    """A known defect that covers every case a property's strategy draws (the tiled-wy trial: every history case
    of a subject claiming BT = 64 alone has a sequence of 65-80 tokens, so a partial chunk) leaves the test no
    case: the run skips it naming the file the store replays, not an Unsatisfiable error (as it once did)."""
    if backend != "cpu":
        pytest.skip("the example runs on the cpu backend")
    package = tmp_path / "pkg"
    shutil.copytree(EXAMPLE, package, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    (package / "src" / "probe.py").write_text(
        "import dataclasses\nfrom wy_ascend.subjects import Known\nfrom natural_gate_wy.subject import SUBJECT\n"
        "S = dataclasses.replace(SUBJECT, name='all-known', known=(Known('0.1.0', 'oracle-0123456789ab.json', "
        "'T >= 0', frozenset({'history'})),))\n")
    run = _run(["fuzz", "--subject", "probe:S", "--profile", "ci", "--store", "findings", "-k", "history", "-n", "0"],
               tmp_path, package)
    assert run.returncode == 0, run.stdout[-3000:]
    assert "every history case drawn is one a known defect covers" in run.stdout, run.stdout[-3000:]
    assert "regressions/oracle-0123456789ab.json" in run.stdout
