"""The containment property (``check_containment``): NaN planted in one chunk and key head
(``poisoned_block``) stays there, every other output element bit-identical to the clean run's
(compared by ``invariance._bitwise``): an error confined to a few rows that the oracle's relative RMS
can miss cannot hide from it."""

from __future__ import annotations

import torch

from ..case import Case
from ..failure import Metrics, PropertyFailure
from ..phases import phase
from .common import BWD_NAMES, FWD_NAMES, build_inputs, run_ops
from .invariance import _bitwise


def poisoned_block(case: Case) -> tuple[int, int, int, int]:
    """The block ``check_containment`` poisons: (batch, first token, end token, key head) of one chunk
    of the case, picked from its seed (the chunk ``seed mod chunks``, the key head ``seed // chunks mod H``)."""
    chunks = case.chunk_bounds()
    if not chunks:
        raise PropertyFailure("containment needs a case with at least one chunk")
    b, start, end = chunks[case.seed % len(chunks)]
    return b, start - b * case.T, end - b * case.T, (case.seed // len(chunks)) % case.H


def check_containment(case: Case) -> Metrics:
    """NaN in every input of one chunk and key head (k of that head; v, beta, g, A, dw, du of its
    HV/H value heads) stays inside that chunk and those heads: every other output element is
    bit-identical to the clean run's. The WY step is local to a chunk and a head group by its
    math, so this holds for any layout, variant and launch; a read across a chunk's or a head's
    bounds (a mask one row too wide, a wrong stride, a neighbour's rows multiplied by zero) or a
    store outside its task carries the NaN out. The oracle's relative RMS can miss an error
    confined to a few rows of a large case; this cannot."""
    b, t0, t1, hk = poisoned_block(case)
    G = case.HV // case.H
    heads = slice(hk * G, (hk + 1) * G)
    inputs = build_inputs(case)
    clean = run_ops(case, inputs)
    with phase("inputs"):
        poisoned = {}
        for name in ("k", "v", "beta", "A", "g", "dw", "du"):
            x = getattr(inputs, name)
            if x is not None:
                x = x.clone()
                x[b, t0:t1, hk if name == "k" else heads] = float("nan")
                poisoned[name] = x
    dirty = run_ops(case, inputs._replace(**poisoned))
    u_block = dirty["u"]
    assert u_block is not None
    if not bool(torch.isnan(u_block[b, t0:t1, heads]).all()):  # every row of A there is NaN: so is u
        raise PropertyFailure("containment: the poisoned block's u is not all NaN (the NaN never reached the kernel)")

    def outside(out: dict[str, torch.Tensor | None]) -> dict[str, torch.Tensor | None]:
        """The outputs with the poisoned block zeroed (dk per key head, the others per value head)."""
        kept: dict[str, torch.Tensor | None] = {}
        for name, x in out.items():
            if x is not None:
                x = x.clone()
                x[b, t0:t1, hk if name == "dk" else heads] = 0
            kept[name] = x
        return kept

    metrics = _bitwise(f"NaN in chunk tokens {t0}:{t1} of batch {b}, key head {hk} reached other outputs",
                       outside(dirty), outside(clean), FWD_NAMES + BWD_NAMES)
    metrics["block"] = {"batch": b, "tokens": [t0, t1], "key_head": hk}
    return metrics
