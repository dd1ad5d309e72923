"""``wy-ascend fuzz`` finds its suite: this checkout's ``fuzz/``, else the ``fuzz`` package installed beside
wy_ascend, else a FileNotFoundError that says how to get it (never an AttributeError on a missing package)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

import pytest

import wy_ascend
from wy_ascend import cli

ROOT = Path(__file__).resolve().parents[1]


def _suite(where: Path) -> Path:
    where.mkdir(parents=True)
    for name in ("__init__.py", "test_fuzz.py", "strategies.py"):
        (where / name).write_text("")
    return where


def test_the_checkout_suite_first() -> None:
    assert cli.fuzz_suite() == ROOT / "fuzz"


@pytest.mark.parametrize("installed", ["package", "namespace", "none"])
def test_an_installed_suite_else_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, installed: str) -> None:
    """Outside a checkout (wy_ascend installed from a wheel): the ``fuzz`` package beside it; a ``fuzz``
    namespace without a file (no origin), or none at all, is no suite."""
    monkeypatch.setattr(wy_ascend, "__file__", str(tmp_path / "site" / "wy_ascend" / "__init__.py"))
    suite = _suite(tmp_path / "site" / "fuzz")
    specs = {"package": importlib.util.spec_from_file_location("fuzz", suite / "__init__.py"),
             "namespace": importlib.machinery.ModuleSpec("fuzz", None, is_package=True), "none": None}
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: specs[installed] if name == "fuzz" else None)
    if installed == "package":
        assert cli.fuzz_suite() == suite
        return
    with pytest.raises(FileNotFoundError, match=r"fuzz suite is not installed here: install wy_ascend from its "
                                                r"repository \(pip install 'wy_ascend\[cpu,test\]'\)"):
        cli.fuzz_suite()
