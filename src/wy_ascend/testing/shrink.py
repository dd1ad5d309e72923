"""Shrinking past Hypothesis: a failure confined to one block of a large case, as that block alone.

compare_to_oracle names the worst block (a chunk and a head) of each output; where one is past its
bound, ``failing_block`` gives that chunk as a case of its own size with the same inputs
(``Case.block``). The fuzz suite runs it and stores it instead of the large case when it fails too
(fuzz/test_fuzz.py): Hypothesis shrinks T from the end of the streams, so a chunk deep in a case of
a million tokens is out of its reach, and such a case replays in seconds on a device but not on
the CPU's interpreter.
"""

from __future__ import annotations

from .case import Case


def failing_block(case: Case, error: BaseException) -> Case | None:
    """The block case of the first output whose worst block ``error``'s metrics put past its bound,
    or None (no such block, or the case is that block already)."""
    metrics = getattr(error, "metrics", None)
    for row in (metrics or {}).values():
        worst = row.get("worst_block") if isinstance(row, dict) else None
        if isinstance(worst, dict) and not worst.get("rel_rms", 0.0) <= worst.get("tol", float("inf")):
            block = case.block(*worst["tokens"])
            return block if block != case else None
    return None
