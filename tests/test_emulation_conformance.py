"""Conformance of the Ascend emulation (wy_ascend/interpreter.py) to its own rules.

The shipped kernels obey every rule, so only a kernel that breaks one shows the rule still holds.
For each rule the module docstring lists the situations it covers (axis by axis); here tiny
kernels break the rule in those situations, drawn by Hypothesis over every combination and, so
that no value is left to chance, each value of each axis once with the others at their first, and
assert the rule's own outcome (its message, or the poisoned or wrapped value). Each kernel's
compliant twin (a reload, a lane masked off, a barrier, another address, tl.cast, int64) passes
with the right values. ``test_the_documented_situations_are_the_tested_ones`` holds the docstring
and the axes drawn here to one list.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

if os.environ.get("WY_ASCEND_BACKEND", "cpu") != "cpu":
    pytest.skip("the emulation runs on the cpu backend only", allow_module_level=True)

import triton  # noqa: E402  (after conftest set TRITON_INTERPRET)
import triton.language as tl  # noqa: E402

from wy_ascend import backends, interpreter  # noqa: E402
from wy_ascend.interpreter import AscendSemanticsError, ascend_semantics  # noqa: E402

backends.kernel_for(backends.BACKENDS["cpu"], "fwd")  # applies interpreter.prepare()

SITUATIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "clobber": {"dtype": ("float32", "float16", "bfloat16"), "operand": ("tile", "transposed", "permuted", "reshaped"),
                "masked": ("no", "yes"), "read": ("store", "dot", "arithmetic"), "emulation": ("on", "off")},
    "shared": {"dtype": ("float32", "float16", "bfloat16"),
               "pair": ("same", "transposed", "transposed-left", "permuted", "reshaped"),
               "masked": ("no", "yes"), "emulation": ("on", "off")},
    "bounds": {"access": ("load", "store"), "dtype": ("float32", "float16", "bfloat16", "int32", "int64"),
               "index": ("int32", "int64"), "side": ("below", "past"), "masked": ("no", "yes"),
               "pointer": ("offsets", "block"), "emulation": ("on", "off")},
    "barrier": {"programs": ("1", "2"), "op": ("store", "barrier", "load"), "length": ("1", "2", "3"),
                "lanes": ("all", "low", "high"), "dtype": ("float32", "float16", "bfloat16", "int32", "int64"),
                "index": ("int32", "int64"), "allocations": ("one", "two"), "pointer": ("offsets", "block"),
                "grid-axis": ("0", "1"), "emulation": ("on", "off")},
    "wrap": {"op": ("add", "sub", "mul"), "operand": ("program-id", "argument", "arange"), "index": ("int32", "int64")},
    "folded": {"axis": ("0", "1", "2"), "size": ("1", "2"), "form": ("direct", "assigned", "derived", "bitwise", "helper"),
               "conversion": ("to", "cast"), "emulation": ("on", "off")},
    "grid": {"axis": ("0", "1", "2"), "blocks": ("at", "past"), "spread": ("one", "two"), "emulation": ("on", "off")},
}
SITUATIONS["race"] = SITUATIONS["barrier"]  # one space of store/barrier/load sequences breaks both

N = 4  # lanes of a load or store
M = 16  # a dot's tiles are M x M (the interpreter's least); of integers in [-2, 2], so every dot is exact in every dtype
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "int32": torch.int32, "int64": torch.int64}
DRAWN = settings(max_examples=150, derandomize=True, deadline=None, database=None,
                 suppress_health_check=[HealthCheck.too_slow])


def _documented() -> dict[str, dict[str, tuple[str, ...]]]:
    """The module docstring's list: ``* rule: axis v|v; axis v|v`` bullets (continued on indented lines)."""
    doc = interpreter.__doc__ or ""
    block = doc[doc.index("Situations each rule covers"):]
    bullets = re.findall(r"^\* (\w+): (.*(?:\n  .*)*)", block, flags=re.M)
    return {rule: {axis: tuple(values.split("|"))
                   for axis, values in (part.split() for part in " ".join(text.split()).split("; "))}
            for rule, text in bullets}


def test_the_documented_situations_are_the_tested_ones() -> None:
    assert _documented() == SITUATIONS


def _each_value(rule: str, base: dict[str, str]) -> list[dict[str, str]]:
    """Each value of each axis once, the other axes at ``base``'s value or else their first."""
    axes = SITUATIONS[rule]
    first = {axis: values[0] for axis, values in axes.items()} | base
    return [first] + [{**first, axis: v} for axis, values in axes.items() for v in values[1:]]


def _space(rule: str) -> st.SearchStrategy[dict[str, str]]:
    return st.fixed_dictionaries({axis: st.sampled_from(values) for axis, values in SITUATIONS[rule].items()})


def _conformance(rule: str, check: Callable[..., None], extra: st.SearchStrategy[Any] | None = None, fixed: Any = None,
                 base: dict[str, str] | None = None) -> tuple[Callable[..., None], Callable[..., None]]:
    """Two tests of ``check(situation, more)``: each value of each axis (``more`` = ``fixed``; the others at
    ``base``), and the product of the axes drawn (``more`` drawn from ``extra``)."""
    @pytest.mark.parametrize("situation", _each_value(rule, base or {}), ids=lambda s: "-".join(s.values()))
    def each_value(situation: dict[str, str]) -> None:
        check(situation, fixed)

    @DRAWN
    @given(_space(rule), st.none() if extra is None else extra)
    def drawn(situation: dict[str, str], more: Any) -> None:
        check(situation, more)

    return each_value, drawn


def _raised(launch: Callable[..., Any], *args: Any, **kwargs: Any) -> str | None:
    """The emulation's message if ``launch(*args, **kwargs)`` raised one (the interpreter wraps it), None if it
    passed."""
    try:
        launch(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the interpreter wraps the emulation's error in its own, once a call
        cause: BaseException | None = e
        while cause is not None and not isinstance(cause, AscendSemanticsError):
            cause = cause.__cause__
        assert cause is not None, f"not the emulation's error: {e!r}"
        return str(cause)
    return None


def _small(shape: tuple[int, ...], dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    """Integers in [-2, 2]: exact in every dtype, and so are their dots of M terms (|sum| <= 64)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(-2, 3, shape, generator=gen).to(dtype)


# ----------------------------------------------------------------------------- a dot clobbers its left operand

@triton.jit
def _clobber(a, b, out, N: tl.constexpr, OPERAND: tl.constexpr, MASKED: tl.constexpr, READ: tl.constexpr,
             TWIN: tl.constexpr):
    """out = what READ makes of the tile ``x`` after a dot with x as its left OPERAND (the reload with TWIN)."""
    o = tl.arange(0, N)
    flat = o[:, None] * N + o[None, :]
    rows = N // 2 if MASKED else N
    if OPERAND == "reshaped":
        x = tl.load(a + tl.arange(0, N * N), mask=tl.arange(0, N * N) < rows * N, other=0)
        left = tl.reshape(x, (N, N))
    else:
        x = tl.load(a + flat, mask=o[:, None] < rows, other=0)
        if OPERAND == "transposed":
            left = tl.trans(x)
        elif OPERAND == "permuted":
            left = tl.permute(x, (1, 0))
        else:
            left = x
    tl.store(out + N * N + flat, tl.dot(left, tl.load(b + flat), out_dtype=tl.float32))
    if TWIN:
        x = tl.load(a + flat, mask=o[:, None] < rows, other=0)
    x2 = tl.reshape(x, (N, N))  # a view of x, whichever shape it had
    if READ == "store":
        tl.store(out + flat, x2.to(tl.float32))
    elif READ == "dot":
        tl.store(out + flat, tl.dot(tl.load(b + flat), x2, out_dtype=tl.float32))
    else:
        tl.store(out + flat, x2.to(tl.float32) * 2)


def _check_clobber(s: dict[str, str], _: None) -> None:
    dtype = DTYPES[s["dtype"]]
    a, b = _small((M, M), dtype, 0), _small((M, M), dtype, 1)
    rows = M // 2 if s["masked"] == "yes" else M
    x = torch.cat([a[:rows], torch.zeros(M - rows, M, dtype=dtype)]).float()
    left = x.T if s["operand"] in ("transposed", "permuted") else x
    read = {"store": x, "dot": b.float() @ x, "arithmetic": 2 * x}[s["read"]]
    for twin in (False, True):
        out = torch.full((2, M, M), 7.0)
        with ascend_semantics(s["emulation"] == "on"):
            _clobber[(1,)](a, b, out, N=M, OPERAND=s["operand"], MASKED=s["masked"] == "yes", READ=s["read"], TWIN=twin)
        assert torch.equal(out[1], left @ b.float())  # the dot itself reads its operand before the clobber
        if s["emulation"] == "on" and not twin:
            assert bool(out[0].isnan().all()), out[0]
        else:
            assert torch.equal(out[0], read)


test_clobber_each_value, test_clobber_drawn = _conformance("clobber", _check_clobber)


# ----------------------------------------------------------------------------- operands that share storage

@triton.jit
def _shared(a, out, N: tl.constexpr, PAIR: tl.constexpr, MASKED: tl.constexpr, TWIN: tl.constexpr):
    """out = dot(left, right), both made of one tile of ``a`` per PAIR (of the tile and its reload with TWIN)."""
    o = tl.arange(0, N)
    flat = o[:, None] * N + o[None, :]
    m = o[:, None] < (N // 2 if MASKED else N)
    x = tl.load(a + flat, mask=m, other=0)
    y = tl.load(a + flat, mask=m, other=0) if TWIN else x
    if PAIR == "same":
        left, right = x, y
    elif PAIR == "transposed":
        left, right = x, tl.trans(y)
    elif PAIR == "transposed-left":
        left, right = tl.trans(x), y
    elif PAIR == "permuted":
        left, right = x, tl.permute(y, (1, 0))
    else:
        left, right = tl.reshape(x, (N, N)), tl.reshape(y, (N, N))
    tl.store(out + flat, tl.dot(left, right, out_dtype=tl.float32))


def _check_shared(s: dict[str, str], _: None) -> None:
    dtype = DTYPES[s["dtype"]]
    a = _small((M, M), dtype)
    x = a.float()
    if s["masked"] == "yes":
        x[M // 2:] = 0
    left, right = {"transposed": (x, x.T), "transposed-left": (x.T, x), "permuted": (x, x.T)}.get(s["pair"], (x, x))
    for twin in (False, True):
        out = torch.zeros(M, M)
        with ascend_semantics(s["emulation"] == "on"):
            message = _raised(_shared[(1,)], a, out, N=M, PAIR=s["pair"], MASKED=s["masked"] == "yes", TWIN=twin)
        if s["emulation"] == "on" and not twin:
            assert message is not None and "tl.dot with both operands in one tile's storage" in message
            assert "_shared (test_emulation_conformance.py:" in message
        else:
            assert message is None
            assert torch.equal(out, left @ right)


test_shared_each_value, test_shared_drawn = _conformance("shared", _check_shared)


# ----------------------------------------------------------------------------- outside every allocation

@triton.jit
def _access(x, y, shift, N: tl.constexpr, LOAD: tl.constexpr, WIDE: tl.constexpr, MASK: tl.constexpr):
    """y[o] = x[o + shift] (LOAD) or y[o + shift] = x[o], the shifted side under the lane mask MASK
    (a bit per lane; None: no mask)."""
    o = tl.arange(0, N)
    if WIDE:
        o = o.to(tl.int64)
    if MASK is None:
        if LOAD:
            tl.store(y + o, tl.load(x + o + shift))
        else:
            tl.store(y + o + shift, tl.load(x + o))
    else:
        m = ((tl.full((N,), MASK, tl.int32) >> o) & 1) != 0
        if LOAD:
            tl.store(y + o, tl.load(x + o + shift, mask=m, other=0), mask=m)
        else:
            tl.store(y + o + shift, tl.load(x + o, mask=m, other=0), mask=m)


@triton.jit
def _block_access(x, y, base, offset, shape, N: tl.constexpr, LOAD: tl.constexpr, WIDE: tl.constexpr,
                  CHECK: tl.constexpr):
    """As ``_access`` through a block pointer: y[o] = (x + base)[offset + o] (LOAD) or (y + base)[offset + o]
    = x[o], of a block of declared shape ``shape``, lanes past it masked off with CHECK (boundary_check).
    WIDE: base and shape in int64 (a block's offsets are int32 only)."""
    o = tl.arange(0, N)
    if WIDE:
        base = base.to(tl.int64)
        shape = shape.to(tl.int64)
    if LOAD:
        p = tl.make_block_ptr(x + base, (shape,), (1,), (offset,), (N,), (0,))
        tl.store(y + o, tl.load(p, boundary_check=(0,), padding_option="zero") if CHECK else tl.load(p))
    else:
        p = tl.make_block_ptr(y + base, (shape,), (1,), (offset,), (N,), (0,))
        if CHECK:
            tl.store(p, tl.load(x + o), boundary_check=(0,))
        else:
            tl.store(p, tl.load(x + o))


# Block pointers, by side: the violation unmasked (no boundary_check) and masked (boundary_check, its declared
# shape holding the outside lane: a base one element below, or a shape one past), then the compliant twin
# (boundary_check with the tensor's shape; below: the block moved in, as the interpreter's boundary_check
# masks offsets past the shape only, not below 0). Each: (base, offset, shape, boundary_check).
BLOCKS = {"below": {"no": (0, -1, N, False), "yes": (-1, 0, N + 1, True), "twin": (0, 0, N, True)},
          "past": {"no": (0, 1, N, False), "yes": (0, 1, N + 1, True), "twin": (0, 1, N, True)}}


def _check_bounds(s: dict[str, str], _: None) -> None:
    if s["pointer"] == "block":
        return _check_block_bounds(s)
    dtype = DTYPES[s["dtype"]]
    x, y = _small((N,), dtype), torch.zeros(N, dtype=dtype)
    shift, outside = (-1, 0) if s["side"] == "below" else (1, N - 1)  # the lane the shift takes outside
    shifted = x if s["access"] == "load" else y
    address = shifted.data_ptr() + (outside + shift) * shifted.element_size()
    other = y if s["access"] == "load" else x
    assert not other.data_ptr() <= address < other.data_ptr() + other.nbytes  # outside both arguments
    # masked: a lane other than the outside one masked off; the twin masks the outside lane off
    violation = None if s["masked"] == "no" else (1 << N) - 1 - (1 << (outside + 1) % N)
    twin = (1 << N) - 1 - (1 << outside)
    for mask, breaks in ((violation, True), (twin, False)):
        y.zero_()
        with ascend_semantics(s["emulation"] == "on"):
            message = _raised(_access[(1,)], x, y, shift, N=N, LOAD=s["access"] == "load", WIDE=s["index"] == "int64",
                              MASK=mask)
        if breaks:
            assert message is not None and f"{s['access']} of 1 active element(s) outside every tensor argument's" \
                " allocation" in message, message
        else:
            assert message is None
            lanes = [i for i in range(N) if mask >> i & 1]
            moved = [i + shift for i in lanes]
            if s["access"] == "load":
                assert torch.equal(y[lanes], x[moved])
            else:
                assert torch.equal(y[moved], x[lanes])


def _check_block_bounds(s: dict[str, str]) -> None:
    dtype = DTYPES[s["dtype"]]
    x, y = _small((N,), dtype), torch.zeros(N, dtype=dtype)
    blocks = BLOCKS[s["side"]]
    for (base, offset, shape, check), breaks in ((blocks[s["masked"]], True), (blocks["twin"], False)):
        y.zero_()
        with ascend_semantics(s["emulation"] == "on"):
            message = _raised(_block_access[(1,)], x, y, base, offset, shape, N=N, LOAD=s["access"] == "load",
                              WIDE=s["index"] == "int64", CHECK=check)
        if breaks:
            assert message is not None and f"{s['access']} of 1 active element(s) outside every tensor argument's" \
                " allocation" in message, message
            continue
        assert message is None
        lanes = [i for i in range(N) if 0 <= offset + i < shape]
        moved = [base + offset + i for i in lanes]
        if s["access"] == "load":
            assert torch.equal(y[lanes], x[moved]) and not y[[i for i in range(N) if i not in lanes]].any()
        else:
            assert torch.equal(y[moved], x[lanes])


test_bounds_each_value, test_bounds_drawn = _conformance("bounds", _check_bounds)


# ----------------------------------------------------------------------------- store, barrier, load sequences

LANES = {"all": frozenset(range(N)), "low": frozenset(range(N // 2)), "high": frozenset(range(N // 2, N))}
ALL, HIGH = (1 << N) - 1, (1 << N) - (1 << N // 2)  # the lane bits of "all" and "high"
MESSAGES = {  # each rule's message, by how a sequence breaks it
    "barrier": r"load of \d+ element\(s\) this program stored since its last tl.debug_barrier\(\)",
    "loaded-stored": r"load of \d+ element\(s\) another program of this launch stored",
    "stored-loaded": r"store of \d+ element\(s\) another program of this launch loaded",
    "race": r"store of \d+ element\(s\) another program of this launch stored",
}


@triton.jit
def _sequence(scratch, other, delta, N: tl.constexpr, OPS0: tl.constexpr, OPS1: tl.constexpr, AXIS: tl.constexpr,
              WIDE: tl.constexpr, TWO: tl.constexpr, BLOCK: tl.constexpr):
    """Program 0 of grid axis AXIS runs OPS0, program 1 OPS1: each op ("store" | "barrier" | "load",
    lanes) on ``scratch``'s lanes (masked lanes, or with BLOCK a block pointer over them); with TWO each
    load also reads all of ``other`` (``delta`` elements on; offsets, as a block spans one tensor)."""
    o = tl.arange(0, N)
    if WIDE:
        o = o.to(tl.int64)
    ops = OPS0 if tl.program_id(AXIS) == 0 else OPS1
    for op, lanes in ops:
        m = ((tl.full((N,), lanes, tl.int32) >> o) & 1) != 0
        p = tl.make_block_ptr(scratch, (N,), (1,), (N // 2 if lanes == HIGH else 0,), (N if lanes == ALL else N // 2,),
                              (0,))
        if op == "store" and BLOCK and lanes != 0:
            tl.store(p, tl.full((N if lanes == ALL else N // 2,), 1.0, tl.float32).to(scratch.dtype.element_ty))
        elif op == "store":
            tl.store(scratch + o, tl.full((N,), 1.0, tl.float32).to(scratch.dtype.element_ty), mask=m)
        elif op == "barrier":
            tl.debug_barrier()
        elif BLOCK and not TWO and lanes != 0:
            tl.load(p)
        elif TWO:
            w = tl.arange(0, 2 * N).to(tl.int64)
            lanes_w = ((tl.full((2 * N,), lanes, tl.int32) >> w) & 1) != 0
            tl.load(scratch + tl.where(w < N, w, delta + w - N), mask=(w >= N) | lanes_w)
        else:
            tl.load(scratch + o, mask=m)


def _broken(programs: list[list[tuple[str, frozenset[int]]]]) -> str | None:
    """How the first op to break a rule breaks it (MESSAGES' key), running the programs in order as the
    interpreter does: None if no op does."""
    stored: set[int] = set()
    loaded: set[int] = set()
    for ops in programs:
        window: set[int] = set()
        mine_stored: set[int] = set()
        mine_loaded: set[int] = set()
        for op, lanes in ops:
            if op == "barrier":
                window = set()
            elif op == "load":
                if lanes & window:
                    return "barrier"
                if lanes & stored:
                    return "loaded-stored"
                mine_loaded |= lanes
            else:
                if lanes & stored:
                    return "race"
                if lanes & loaded:
                    return "stored-loaded"
                window |= lanes
                mine_stored |= lanes
        stored |= mine_stored
        loaded |= mine_loaded
    return None


def _run_sequence(s: dict[str, str], programs: list[list[tuple[str, frozenset[int]]]]) -> None:
    """Launch ``programs`` (one or two, along grid axis ``grid-axis``) and hold the outcome to ``_broken``: the
    rule's message naming the kernel, or no error and ``scratch`` stored where some program stored."""
    dtype = DTYPES[s["dtype"]]
    scratch, other = torch.zeros(N, dtype=dtype), _small((N,), dtype)
    delta = (other.data_ptr() - scratch.data_ptr()) // scratch.element_size()
    encoded = [tuple((op, sum(1 << i for i in lanes)) for op, lanes in ops) for ops in programs]
    axis = int(s["grid-axis"])
    grid = (len(programs), 1) if axis == 0 else (1, len(programs))
    with ascend_semantics(s["emulation"] == "on"):
        message = _raised(_sequence[grid], scratch, other, delta, N=N, OPS0=encoded[0], OPS1=encoded[-1], AXIS=axis,
                          WIDE=s["index"] == "int64", TWO=s["allocations"] == "two", BLOCK=s["pointer"] == "block")
    broken = _broken(programs)
    if broken is None:
        assert message is None, message
        stored = set().union(*(lanes for ops in programs for op, lanes in ops if op == "store"))
        assert torch.equal(scratch, torch.tensor([i in stored for i in range(N)]).to(dtype))
    else:
        assert message is not None and re.search(MESSAGES[broken], message), (broken, message)
        assert "_sequence (test_emulation_conformance.py:" in message


OPS = st.tuples(st.sampled_from(("store", "barrier", "load")), st.sampled_from(tuple(LANES.values())))
REST = [("load", LANES["all"]), ("store", LANES["low"]), ("barrier", LANES["all"]), ("load", LANES["high"]),
        ("store", LANES["all"])]  # the ops after the first, for each value of each axis


def _check_sequence(s: dict[str, str], rest: list[tuple[str, frozenset[int]]]) -> None:
    """Each of the ``programs`` runs ``length`` ops: program 0's first is ``op`` on ``lanes``, the others are
    taken from ``rest`` in turn. The rules decide as ``_broken`` does; the twin (each program's loads first,
    two programs on a half each) must pass."""
    ops = iter(rest)
    programs = [[(s["op"], LANES[s["lanes"]]) if p == i == 0 else next(ops) for i in range(int(s["length"]))]
                for p in range(int(s["programs"]))]
    _run_sequence(s, programs)
    halves = [LANES["all"]] if len(programs) == 1 else [LANES["low"], LANES["high"]]
    twin = [sorted(((op, lanes & halves[p]) for op, lanes in ops), key=lambda op: op[0] != "load")
            for p, ops in enumerate(programs)]
    assert _broken(twin) is None
    _run_sequence(s, twin)


test_sequences_each_value, test_sequences_drawn = _conformance(
    "barrier", _check_sequence, st.lists(OPS, min_size=5, max_size=5), REST, {"length": "2"})  # a store, then a load


@pytest.mark.parametrize("programs, broken", [
    ([[("store", "all"), ("load", "all")]], "barrier"),
    ([[("store", "low"), ("barrier", "all"), ("store", "high"), ("load", "all")]], "barrier"),
    ([[("store", "all"), ("barrier", "all"), ("load", "all")]], None),
    ([[("load", "all"), ("store", "all")]], None),
    ([[("store", "low"), ("load", "high")]], None),
    ([[("store", "all")], [("load", "low")]], "loaded-stored"),
    ([[("store", "all"), ("barrier", "all")], [("barrier", "all"), ("load", "low")]], "loaded-stored"),
    ([[("load", "all")], [("store", "high")]], "stored-loaded"),
    ([[("store", "low")], [("store", "low")]], "race"),
    ([[("store", "low"), ("store", "low")], [("store", "high")]], None),
    ([[("load", "all")], [("load", "all")]], None),
])
@pytest.mark.parametrize("emulate", ["on", "off"])
def test_each_order_of_store_barrier_and_load(programs, broken, emulate) -> None:
    """Every order of store, barrier and load, in one program and across two, as the rules state it."""
    ops = [[(op, LANES[lanes]) for op, lanes in p] for p in programs]
    assert _broken(ops) == broken
    s = {"dtype": "float32", "grid-axis": "0", "index": "int32", "allocations": "one", "pointer": "offsets",
         "emulation": emulate}
    _run_sequence(s, ops)


# ----------------------------------------------------------------------------- int32 wraps

@triton.jit
def _wrap(out, big, c, OP: tl.constexpr, OPERAND: tl.constexpr, WIDE: tl.constexpr, N: tl.constexpr):
    """out[p, o] = v OP c, v = big + (the program id p | 0 | the lane o), in int32 (int64 with WIDE)."""
    o = tl.arange(0, N)
    if OPERAND == "program-id":
        v = tl.program_id(0) + tl.zeros((N,), tl.int32)
    elif OPERAND == "arange":
        v = o
    else:
        v = tl.zeros((N,), tl.int32)
    if WIDE:
        v = v.to(tl.int64) + big
    else:
        v = v + big
    if OP == "add":
        r = v + c
    elif OP == "sub":
        r = v - c
    else:
        r = v * c
    tl.store(out + tl.program_id(0) * N + o, r.to(tl.int64))


def _check_wrap(s: dict[str, str], _: None) -> None:
    big, c = {"add": (2**31 - 4, 5), "sub": (-(2**31) + 4, 5), "mul": (2**30 + 1, 4)}[s["op"]]
    out = torch.zeros(2, N, dtype=torch.int64)
    with ascend_semantics(True):
        _wrap[(2,)](out, big, c, OP=s["op"], OPERAND=s["operand"], WIDE=s["index"] == "int64", N=N)
    v = np.zeros((2, N), dtype=np.int64) + big
    v += {"program-id": np.arange(2)[:, None], "arange": np.arange(N)[None, :], "argument": 0}[s["operand"]]
    exact = {"add": v + c, "sub": v - c, "mul": v * c}[s["op"]]
    wrapped = exact.astype(np.uint64).astype(np.uint32).astype(np.int32)
    expected = exact if s["index"] == "int64" else wrapped
    assert (exact != wrapped).any()  # the situation overflows int32
    assert np.array_equal(out.numpy(), expected)


test_wrap_each_value, test_wrap_drawn = _conformance("wrap", _check_wrap)


# ----------------------------------------------------------------------------- the folded program id

@triton.jit
def _widen(pid, CAST: tl.constexpr):
    if CAST:
        return tl.cast(pid, tl.int64)
    return pid.to(tl.int64)


@triton.jit
def _folded(out, AXIS: tl.constexpr, FORM: tl.constexpr, CAST: tl.constexpr):
    """out[p] = the program id p of axis AXIS, widened by .to() or tl.cast (2 * p + 1 for "derived" and "bitwise")."""
    if FORM == "direct":
        if CAST:
            v = tl.cast(tl.program_id(AXIS), tl.int64)
        else:
            v = tl.program_id(AXIS).to(tl.int64)
    elif FORM == "assigned":
        pid = tl.program_id(AXIS)
        v = _widen(pid, CAST)
    elif FORM == "derived":
        pid = tl.program_id(AXIS) * 2 + 1
        v = _widen(pid, CAST)
    elif FORM == "bitwise":
        pid = ((tl.program_id(AXIS) << 2) >> 1) | 1
        v = _widen(pid, CAST)
    else:
        v = _widen(tl.program_id(AXIS), CAST)
    tl.store(out + tl.program_id(AXIS), v)


def _check_folded(s: dict[str, str], _: None) -> None:
    axis, size = int(s["axis"]), int(s["size"])
    grid = tuple(size if i == axis else 1 for i in range(3))
    out = torch.full((size,), -1, dtype=torch.int64)
    with ascend_semantics(s["emulation"] == "on"):
        message = _raised(_folded[grid], out, AXIS=axis, FORM=s["form"], CAST=s["conversion"] == "cast")
    if s["emulation"] == "on" and size == 1 and s["conversion"] == "to":
        assert message is not None and ".to() on a program id of a grid axis of 1" in message
    else:
        assert message is None
        ids = torch.arange(size)
        assert torch.equal(out, 2 * ids + 1 if s["form"] in ("derived", "bitwise") else ids)


test_folded_each_value, test_folded_drawn = _conformance("folded", _check_folded)


# ----------------------------------------------------------------------------- the device's grid limit

# The limits lowered for these launches, so that the twin at the limit runs in a blink; the real ones are
# asserted below (and a launch one past them is refused before any program runs).
LIMITS = {"ascend": 6, "gpu": (9, 5, 5)}


@triton.jit
def _ids(out, GY: tl.constexpr, GZ: tl.constexpr):
    """out[flat program id] = flat program id + 1: every program of the grid ran, once."""
    p = (tl.program_id(0) * GY + tl.program_id(1)) * GZ + tl.program_id(2)
    tl.store(out + p, p + 1)


def _grid_of(s: dict[str, str]) -> tuple[int, int, int]:
    """The situation's grid under LIMITS: its measure at the limit or one past it (two past for an even
    Ascend limit spread over two axes), on ``axis`` alone or with a second axis of 2."""
    axis, past = int(s["axis"]), s["blocks"] == "past"
    grid = [1, 1, 1]
    other = (axis + 1) % 3
    if s["emulation"] == "on":  # Ascend: the product of the dimensions
        if s["spread"] == "two":
            grid[other], grid[axis] = 2, LIMITS["ascend"] // 2 + past
        else:
            grid[axis] = LIMITS["ascend"] + past
    else:  # a GPU: each axis on its own, whatever the product
        grid[axis] = LIMITS["gpu"][axis] + past
        if s["spread"] == "two":
            grid[other] = 2
    return grid[0], grid[1], grid[2]


def _check_grid(s: dict[str, str], _: None) -> None:
    grid = _grid_of(s)
    out = torch.zeros(grid[0] * grid[1] * grid[2], dtype=torch.int32)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(interpreter, "ASCEND_MAX_BLOCKS", LIMITS["ascend"])
        mp.setattr(interpreter, "GPU_MAX_GRID", LIMITS["gpu"])
        with ascend_semantics(s["emulation"] == "on"):
            message = _raised(_ids[grid], out, GY=grid[1], GZ=grid[2])
    if s["blocks"] == "past":
        words = "past Ascend's 6 blocks a launch" if s["emulation"] == "on" else f"grid axis {s['axis']} of "
        assert message is not None and words in message and "kernel _ids" in message, message
        assert not out.any()  # refused before any program ran
    else:
        assert message is None
        assert torch.equal(out, torch.arange(1, out.numel() + 1, dtype=torch.int32))


test_grid_each_value, test_grid_drawn = _conformance("grid", _check_grid)


def test_the_grid_limits_are_the_devices() -> None:
    """Ascend's 65535 blocks a launch and CUDA's 2**31-1 x 65535 x 65535, as the planner plans with; one past
    them is refused before any program runs (a program would take the interpreter minutes to reach)."""
    assert interpreter.ASCEND_MAX_BLOCKS == 65535 == backends.ASCEND_MAX_BLOCKS
    assert interpreter.GPU_MAX_GRID == (2**31 - 1, 65535, 65535) and backends.CUDA_MAX_GRID == (2**31 - 1, 65535)
    out = torch.zeros(1, dtype=torch.int32)
    with ascend_semantics(True):
        assert "65536 blocks" in (_raised(_ids[(256, 256)], out, GY=256, GZ=1) or "")
    with ascend_semantics(False):
        assert "grid axis 1 of 65536 programs" in (_raised(_ids[(1, 65536)], out, GY=65536, GZ=1) or "")
        assert "grid axis 2 of 65536 programs" in (_raised(_ids[(1, 1, 65536)], out, GY=1, GZ=65536) or "")

