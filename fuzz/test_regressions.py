"""Replay every stored regression file (``nox -s regress``).

One pytest item per file, named after it; the case runs on the run's backend
(``--backend``, else ``$WY_ASCEND_BACKEND``, else cpu), which overrides the backend
recorded in the file. ``test_store_files_parse`` always runs, so an empty store is a
passing run (not pytest's "no tests collected") and a malformed file is a failure.
Each case runs in a case runner (wy_ascend.testing.runner), so a stored case that still
crashes or hangs fails its own item (CaseCrashed/CaseTimeout) and the replay goes on.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from wy_ascend.backends import BACKEND_ENV
from wy_ascend.errors import RegressionFileError, SubjectUnavailableError
from wy_ascend.testing.runner import CaseRunner, case_timeout
from wy_ascend.testing.store import STORE_ENV, iter_store, load, regressions_dir, replay, unavailable

ROOT = Path(__file__).resolve().parent.parent
# $WY_ASCEND_REGRESSIONS (``--store``), else this checkout's store, else (installed) ./regressions
STORE = Path(os.environ.get(STORE_ENV) or (ROOT / "regressions" if (ROOT / "src" / "wy_ascend").is_dir()
                                           else regressions_dir()))
FILES = iter_store(STORE)


def run_backend(config: pytest.Config) -> str:
    """``--backend`` (defined in fuzz/conftest.py), else $WY_ASCEND_BACKEND, else cpu."""
    try:
        value = config.getoption("--backend")
    except ValueError:  # the option is not registered (conftest not loaded)
        value = None
    return value or os.environ.get(BACKEND_ENV) or "cpu"


def test_store_files_parse() -> None:
    """Every file in the store reads back: schema version 1, field by field, and still named after
    its content (``store.load``; a stored case is never edited: regressions/README.md)."""
    errors = []
    for path in FILES:
        try:
            load(path)
        except RegressionFileError as e:
            errors.append(str(e))
        except SubjectUnavailableError:
            pass  # well formed; its subject is not installed here (test_replay says so)
    assert not errors, "bad regression files:\n" + "\n".join(errors)


@pytest.fixture(scope="module")
def runner() -> Any:
    with CaseRunner(timeout_s=case_timeout()) as r:
        yield r


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_replay(path: Path, request: pytest.FixtureRequest, runner: CaseRunner) -> None:
    """The stored case no longer fails its property (nor crashes, nor hangs)."""
    try:
        stored, backend = load(path), run_backend(request.config)
    except SubjectUnavailableError as e:
        pytest.skip(str(e))
    why = unavailable(stored, backend)
    if why is not None:
        pytest.skip(why)
    replay(stored, backend=backend, runner=runner)
