"""Shared fixtures: the backend under test (``WY_ASCEND_BACKEND``, default cpu) and its device."""

from __future__ import annotations

import os
import sys
from pathlib import Path

# The cpu backend runs Triton's interpreter, which triton selects when it is first
# imported; set it before anything imports triton (device runs export the backend).
if os.environ.get("WY_ASCEND_BACKEND", "cpu") == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")

# The repository root, so tests import the fuzz/ and benchmarks/ packages however pytest is run.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pytest
import torch

from wy_ascend.testing.properties import DEVICE_OF


@pytest.fixture(scope="session")
def backend() -> str:
    return os.environ.get("WY_ASCEND_BACKEND", "cpu")


@pytest.fixture(scope="session")
def device(backend: str) -> torch.device:
    return torch.device(DEVICE_OF[backend])
