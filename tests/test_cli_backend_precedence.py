"""``wy-ascend replay`` runs a file on the ``--backend`` argument, else ``WY_ASCEND_BACKEND``, else the
backend the file recorded. Observed with the cpu backend only: the backend resolved is the one the
run prints (``backend   <name> (this run)``); a run resolved to cpu passes (exit 0), one resolved to
a backend this machine lacks fails to start, naming that backend (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wy_ascend.backends import BACKEND_ENV, BACKENDS, check_available
from wy_ascend.cli import main
from wy_ascend.errors import BackendUnavailableError
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import PropertyFailure
from wy_ascend.testing.store import record_failure

CASE = Case(T=40, HV=2)  # replayed with plan_coverage: plans only, no kernel runs on any backend


def unavailable(name: str) -> bool:
    try:
        check_available(BACKENDS[name])
    except BackendUnavailableError:
        return True
    return False


MISSING = [name for name in ("npu", "cuda") if unavailable(name)]


@pytest.mark.skipif(len(MISSING) < 2, reason="needs a machine without npu and cuda (a run there tells them apart)")
@pytest.mark.parametrize(("argument", "environment", "recorded", "resolved"), [
    (None, None, "cpu", "cpu"),  # nothing else given: the file's backend
    (None, None, "cuda", "cuda"),
    (None, "cpu", "cuda", "cpu"),  # the environment over the file
    (None, "npu", "cpu", "npu"),
    ("cpu", "npu", "cuda", "cpu"),  # the argument over both
    ("npu", "cpu", "cpu", "npu"),
    ("cuda", None, "cpu", "cuda"),
])
def test_replay_backend_is_the_argument_else_the_environment_else_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        argument: str | None, environment: str | None, recorded: str, resolved: str) -> None:
    path = record_failure("plan_coverage", CASE.replace(backend=recorded), PropertyFailure("planted"), tmp_path)
    if environment is None:
        monkeypatch.delenv(BACKEND_ENV, raising=False)
    else:
        monkeypatch.setenv(BACKEND_ENV, environment)
    status = main(["replay", str(path), *(["--backend", argument] if argument else [])])
    out, err = capsys.readouterr()
    assert f"backend   {resolved} (this run)" in out
    others = set(BACKENDS) - {resolved}
    if resolved == "cpu":
        assert status == 0 and "PASS" in out
    else:
        assert status == 2 and f"MISSING: backend {resolved} cannot run here" in out
        assert not any(f"MISSING: backend {name} " in out for name in others)
