"""Settings read from the environment, through two readers: ``switch`` (1 or 0) and ``number``
(a count or a quantity). Unset or empty gives the default; anything else that does not parse, or
is out of range, is an error that names the variable and what it takes. (``WY_ASCEND_AUTOTUNE=false``
left autotuning on and ``WY_ASCEND_EMULATION=of`` the emulation, silently; ``WY_ASCEND_FUZZ_SCALE=x``
failed in float() without naming the variable.)"""

from __future__ import annotations

import os
from typing import TypeVar

N = TypeVar("N", int, float)


def switch(name: str, default: bool) -> bool:
    """``name``'s value as a switch: "1" on, "0" off, unset or empty ``default``; else ValueError."""
    raw = os.environ.get(name, "").strip()
    if raw not in ("", "0", "1"):
        raise ValueError(f"{name} must be 1 or 0, got {raw!r}")
    return raw == "1" if raw else default


def number(name: str, default: N, kind: type[N], what: str, positive: bool = False) -> N:
    """``name``'s value as a ``kind`` (int: a whole number) of ``what``, >= 0 (> 0 with ``positive``;
    NaN is neither); unset or empty ``default``; else ValueError."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value: N | None = kind(raw)
    except ValueError:
        value = None
    if value is None or not (value > 0 if positive else value >= 0):
        article = "a whole number" if kind is int else "a number"
        raise ValueError(f"{name} must be {article} of {what} {'> 0' if positive else '>= 0'}, got {raw!r}")
    return value
