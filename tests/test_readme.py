"""The README's Python blocks run as written, and its ``chunk_local_g`` is the chunk-local
cumulative log2 gate that the oracle and the kernels assume.

The blocks run in one namespace, those that only define functions first (the usage example
calls ``chunk_local_g``, which the README defines further down, under "Building g").
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def readme_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(), re.S | re.M)


@pytest.fixture(scope="module")
def readme() -> dict:
    blocks = readme_blocks()
    assert blocks, "the README has no Python block"
    namespace: dict = {"__name__": "readme"}
    for block in sorted(blocks, key=lambda b: not b.lstrip().startswith("def ")):
        exec(compile(block, "README.md", "exec"), namespace)
    return namespace


def naive_g(gate: torch.Tensor, BT: int, cu: list[int] | None) -> torch.Tensor:
    """The definition, token by token: restart the sum at every sequence start and every BT tokens."""
    B, T, _ = gate.shape
    g = torch.zeros_like(gate)
    for b in range(B):
        starts = set(cu[:-1]) if cu is not None else {0}
        total = None
        pos = 0
        for t in range(T):
            pos = 0 if t in starts else pos + 1
            total = gate[b, t] if pos % BT == 0 else total + gate[b, t]
            g[b, t] = total
    return g


def test_the_usage_example_runs(readme) -> None:
    w, u, dk, dg = readme["w"], readme["u"], readme["dk"], readme["dg"]
    B, T, H, HV, K, V = (readme[n] for n in ("B", "T", "H", "HV", "K", "V"))
    assert w.shape == (B, T, HV, K) and u.shape == (B, T, HV, V) and dk.shape == (B, T, H, K)
    assert dg.shape == (B, T, HV) and all(bool(torch.isfinite(x).all()) for x in (w, u, dk, dg))


@pytest.mark.parametrize(
    "B,T,BT,cu",
    [
        (2, 70, 16, None),
        (1, 100, 64, [0, 30, 100]),
        (1, 90, 32, [0, 0, 1, 40, 40, 90]),  # empty sequences, a one-token sequence
        (1, 5, 128, [0, 5]),
    ],
)
def test_chunk_local_g_restarts_at_chunks_and_sequences(readme, B, T, BT, cu) -> None:
    gate = -torch.rand(B, T, 3, dtype=torch.float64)
    cu_t = None if cu is None else torch.tensor(cu, dtype=torch.int32)
    got = readme["chunk_local_g"](gate, BT, cu_t)
    torch.testing.assert_close(got, naive_g(gate, BT, cu), rtol=0, atol=1e-12)
