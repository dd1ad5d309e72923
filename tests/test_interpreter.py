"""The cpu backend's interpreter (wy_ascend/interpreter.py): its speed-ups change no result, and
its Ascend emulation shows what only an NPU would (a clobbered dot operand, a dot of one tile
with itself, an address outside every tensor, a read-after-write with no barrier between, int32 wrap-around, a program
id folded to a constexpr), which makes every dot guard
of kernels.py a tested line: dropping any one fails the oracle with the emulation on and
passes with it off (the guard mutants of mutation/mutants.py)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
if os.environ.get("WY_ASCEND_BACKEND", "cpu") != "cpu":
    pytest.skip("the interpreter runs the cpu backend only", allow_module_level=True)

import triton  # noqa: E402  (after conftest set TRITON_INTERPRET)
import triton.language as tl  # noqa: E402

from wy_ascend import backends  # noqa: E402
from wy_ascend.interpreter import ascend_semantics  # noqa: E402
from wy_ascend.testing.case import Case  # noqa: E402
from wy_ascend.testing.properties import PropertyFailure, check_oracle  # noqa: E402

backends.kernel_for(backends.BACKENDS["cpu"], "fwd")  # loads the kernels and applies interpreter.prepare()


def test_memoized_np_dtypes_are_the_interpreters() -> None:
    """Every scalar, pointer and block type maps to the dtype the unpatched function gives,
    on the first call (memo filled) and the second (memo hit)."""
    from triton.runtime import interpreter

    patched = interpreter._get_np_dtype
    original = patched.__wrapped__
    scalars = [tl.int1, tl.int8, tl.uint8, tl.int16, tl.uint16, tl.int32, tl.uint32, tl.int64, tl.uint64,
               tl.float16, tl.bfloat16, tl.float32, tl.float64, tl.float8e5, tl.float8e4nv]
    types = [*scalars, *(tl.pointer_type(t) for t in scalars), *(tl.block_type(t, [2, 4]) for t in scalars),
             tl.block_type(tl.pointer_type(tl.bfloat16), [4])]
    for _ in range(2):
        assert [patched(t) for t in types] == [original(t) for t in types]


# ----------------------------------------------------------------------------- emulation, one behaviour each

N = 16


@triton.jit
def _dot_then_store_lhs(a, b, c, a_out, N: tl.constexpr):
    o = tl.arange(0, N)
    b_a = tl.load(a + o[:, None] * N + o[None, :])
    b_b = tl.load(b + o[:, None] * N + o[None, :])
    tl.store(c + o[:, None] * N + o[None, :], tl.dot(b_a, b_b, allow_tf32=False))
    tl.store(a_out + o[:, None] * N + o[None, :], b_a)  # reads the left operand after its dot


@triton.jit
def _dot_with_own_transpose(a, c, N: tl.constexpr):
    o = tl.arange(0, N)
    b_a = tl.load(a + o[:, None] * N + o[None, :])
    tl.store(c + o[:, None] * N + o[None, :], tl.dot(b_a, tl.trans(b_a), allow_tf32=False))


@triton.jit
def _dot_with_transpose_of(a, b, c, N: tl.constexpr):
    o = tl.arange(0, N)
    b_a = tl.load(a + o[:, None] * N + o[None, :])
    b_b = tl.load(b + o[:, None] * N + o[None, :])
    tl.store(c + o[:, None] * N + o[None, :], tl.dot(b_a, tl.trans(b_b), allow_tf32=False))


@triton.jit
def _copy_rows(x, y, rows, N: tl.constexpr, MASKED: tl.constexpr):
    o = tl.arange(0, N)
    if MASKED:
        tl.store(y + o, tl.load(x + o, mask=o < rows, other=0.0), mask=o < rows)
    else:
        tl.store(y + o, tl.load(x + o))


@triton.jit
def _int32_add(out, a, b):
    tl.store(out, tl.program_id(0) + a + b)


def _mats() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return torch.randn(N, N, generator=gen), torch.randn(N, N, generator=gen)


@pytest.mark.parametrize("on", [True, False])
def test_a_dot_clobbers_its_left_operand_only_under_the_emulation(on: bool) -> None:
    a, b = _mats()
    c, a_out = torch.empty(N, N), torch.empty(N, N)
    with ascend_semantics(on):
        _dot_then_store_lhs[(1,)](a, b, c, a_out, N=N)
    torch.testing.assert_close(c, a @ b, rtol=1e-5, atol=1e-5)  # the dot itself is exact either way
    assert bool(a_out.isnan().all()) == on
    if not on:
        assert torch.equal(a_out, a)
    assert torch.equal(a, _mats()[0])  # the tensor in memory is never touched, only the tile


def test_a_dot_of_a_tile_with_its_own_transpose_names_the_kernel_and_line() -> None:
    a, _ = _mats()
    c = torch.empty(N, N)
    with ascend_semantics(True), pytest.raises(Exception) as info:
        _dot_with_own_transpose[(1,)](a, c, N=N)
    text = f"{info.value!r} {info.value.__cause__!r}"
    assert "AscendSemanticsError" in text and "_dot_with_own_transpose" in text
    line = next(i for i, s in enumerate(Path(__file__).read_text().splitlines(), 1) if "tl.trans(b_a), allow" in s)
    # the location is the kernel's frame alone: no frame of triton's interpreter or of interpreter.py
    message = str(info.value.__cause__ or info.value)
    assert message.endswith(f"at _dot_with_own_transpose (test_interpreter.py:{line})"), message
    with ascend_semantics(False):
        _dot_with_own_transpose[(1,)](a, c, N=N)
        separate = torch.empty(N, N)
        _dot_with_transpose_of[(1,)](a, a.clone(), separate, N=N)
    # Bit for bit what the product of two distinct tiles gives (numpy would take a symmetric
    # product for x @ x.T, rounding otherwise: the dot_guard variants would then differ).
    assert torch.equal(c, separate)


def test_an_access_outside_every_tensor_faults_and_a_masked_one_does_not() -> None:
    x, y = torch.arange(N, dtype=torch.float32), torch.zeros(N)
    with ascend_semantics(True):
        _copy_rows[(1,)](x[: N // 2].clone(), y, N // 2, N=N, MASKED=True)  # masked-off lanes past the end: fine
        assert torch.equal(y[: N // 2], x[: N // 2])
        with pytest.raises(Exception, match="AscendSemanticsError|outside every tensor"):
            _copy_rows[(1,)](x[: N // 2].clone(), y, N // 2, N=N, MASKED=False)
    with ascend_semantics(False), pytest.raises(Exception, match="AscendSemanticsError|outside every tensor"):
        _copy_rows[(1,)](x[: N // 2].clone(), y, N // 2, N=N, MASKED=False)  # a bug with the emulation off too


def test_a_store_outside_every_tensor_faults() -> None:
    """Stores are checked like loads: an unmasked store past the end of its tensor raises before
    anything is written (the source is in range)."""
    x, y = torch.arange(N, dtype=torch.float32), torch.zeros(N // 2)
    past_y = (y.data_ptr() + y.nbytes, y.data_ptr() + 2 * y.nbytes)
    assert past_y[1] <= x.data_ptr() or past_y[0] >= x.data_ptr() + x.nbytes  # y's overrun hits no tensor
    with ascend_semantics(True), pytest.raises(Exception, match="AscendSemanticsError|outside every tensor"):
        _copy_rows[(1,)](x, y, N, N=N, MASKED=False)


@triton.jit
def _round_trip_bf16(x, y, z, N: tl.constexpr):
    """y = x rounded to bfloat16 (the interpreter's conversion, replaced by interpreter.py), z = y widened back."""
    o = tl.arange(0, N)
    b = tl.load(x + o).to(tl.bfloat16)
    tl.store(y + o, b)
    tl.store(z + o, b.to(tl.float32))


def test_float32_to_bfloat16_rounds_as_torch_does_bit_for_bit() -> None:
    """Every low half (all 65536 patterns: ties to even or odd, just above and below them) under high
    halves of both signs, normal, subnormal and next to the overflow to infinity: the interpreter's
    float32 -> bfloat16 gives torch's bits (round to nearest, ties to even), and widening back is exact."""
    highs = torch.tensor([0x3F80, 0x3F81, 0xBF80, 0xBF81, 0x0000, 0x0001, 0x7F7F, 0xFF7E], dtype=torch.int64)
    bits = ((highs[:, None] << 16) | torch.arange(1 << 16)[None, :]).flatten()
    x = bits.to(torch.int32).view(torch.float32)
    y, z = torch.empty(x.numel(), dtype=torch.bfloat16), torch.empty(x.numel())
    _round_trip_bf16[(1,)](x, y, z, N=x.numel())
    assert torch.equal(y.view(torch.int16), x.to(torch.bfloat16).view(torch.int16))
    assert torch.equal(z, y.float())


@triton.jit
def _bf16_arithmetic(x, y, out, OP: tl.constexpr, N: tl.constexpr):
    """out = x OP y with both operands bfloat16 (Triton keeps the result in bfloat16)."""
    o = tl.arange(0, N)
    a, b = tl.load(x + o), tl.load(y + o)
    if OP == "+":
        r = a + b
    elif OP == "-":
        r = a - b
    elif OP == "*":
        r = a * b
    else:
        r = a / b
    tl.store(out + o, r)


# The divisor at least 1e-30, far above where bfloat16 (normal down to 1.2e-38) rounds it to 0.
BF16_PAIRS = st.lists(st.tuples(st.floats(-3e38, 3e38), st.floats(-3e38, 3e38)
                                .filter(lambda v: abs(v) >= 1e-30)), min_size=16, max_size=16)


@pytest.mark.parametrize("op", ["+", "-", "*", "/"])
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(pairs=BF16_PAIRS)
def test_bfloat16_arithmetic_is_the_devices_bit_for_bit(op: str, pairs: list[tuple[float, float]]) -> None:
    """bf16 op bf16 over drawn operands (both signs, subnormal to overflow; no divisor that rounds to 0: 0/0 is a NaN
    whose sign bit is not specified): torch's bits, the float32 result rounded to nearest even as the devices'
    bf16 units round. The interpreter stores bfloat16 as uint16 bits, on which numpy's own op is integer
    arithmetic: interpreter._bf16_arithmetic_once replaces it (fla-ascend's bf16 forward came out ~1e37 off)."""
    x, y = (torch.tensor(v, dtype=torch.float32).to(torch.bfloat16) for v in zip(*pairs))
    out = torch.empty(16, dtype=torch.bfloat16)
    _bf16_arithmetic[(1,)](x, y, out, OP=op, N=16)
    want = {"+": x + y, "-": x - y, "*": x * y, "/": x / y}[op]
    assert torch.equal(out.view(torch.int16), want.view(torch.int16)), (x, y, out, want)


@triton.jit
def _store_then_load(x, scratch, out, N: tl.constexpr, BARRIER: tl.constexpr, OTHER_HALF: tl.constexpr):
    """scratch = x, then out = scratch read back (the other half of it with OTHER_HALF), with or
    without a barrier between: the grouped backward's dk partial sum in small."""
    o = tl.arange(0, N)
    tl.store(scratch + o, tl.load(x + o))
    if BARRIER:
        tl.debug_barrier()
    tl.store(out + o, tl.load(scratch + (o + N if OTHER_HALF else o)))


@pytest.mark.parametrize("emulate", [True, False])
def test_a_read_after_write_needs_a_barrier_in_between(emulate: bool) -> None:
    """A program that loads what it stored since its last barrier raises (a race on a GPU, unordered
    pipes on Ascend), with the emulation on or off, naming the kernel; a barrier between or another
    address passes."""
    x, out = torch.arange(N, dtype=torch.float32), torch.zeros(N)
    scratch = torch.zeros(2 * N)
    with ascend_semantics(emulate):
        with pytest.raises(Exception, match=r"stored since its last tl.debug_barrier.*_store_then_load"):
            _store_then_load[(1,)](x, scratch, out, N=N, BARRIER=False, OTHER_HALF=False)
        _store_then_load[(1,)](x, scratch, out, N=N, BARRIER=True, OTHER_HALF=False)
        assert torch.equal(out, x)
        _store_then_load[(1,)](x, scratch, out, N=N, BARRIER=False, OTHER_HALF=True)  # not an address it stored


@triton.jit
def _read_what_program_0_stored(x, scratch, out, N: tl.constexpr):
    o = tl.arange(0, N)
    if tl.program_id(0) == 0:
        tl.store(scratch + o, tl.load(x + o))
    else:
        tl.store(out + o, tl.load(scratch + o))


def test_a_program_reading_what_another_program_stored_raises() -> None:
    """The programs of a launch run in any order (and at once) on a device; the interpreter runs them
    in order, so program 1 would read program 0's store every time here. A later launch may read it."""
    x, scratch, out = torch.arange(N, dtype=torch.float32), torch.zeros(N), torch.zeros(N)
    with pytest.raises(Exception, match="another program of this launch stored"):
        _read_what_program_0_stored[(2,)](x, scratch, out, N=N)
    _read_what_program_0_stored[(1,)](x, scratch, out, N=N)
    _store_then_load[(1,)](scratch, out, x, N=N // 2, BARRIER=False, OTHER_HALF=True)  # reads scratch's second half


@triton.jit
def _store_rows(x, out, N: tl.constexpr, ROWS: tl.constexpr, TWICE: tl.constexpr):
    """Program p stores x's N values to out[p * N:], ROWS extra of them into the next program's rows
    (a store mask one row too wide), and with TWICE its own rows a second time."""
    o = tl.arange(0, 2 * N)
    base = tl.program_id(0) * N
    mask = o < N + ROWS
    tl.store(out + base + o, tl.load(x + o, mask=mask, other=0.0), mask=mask)
    if TWICE:
        tl.store(out + base + o, tl.load(x + o, mask=o < N, other=0.0), mask=o < N)


@pytest.mark.parametrize("emulate", [True, False])
def test_a_program_storing_what_another_program_stored_raises(emulate: bool) -> None:
    """Programs 0 and 1 of a launch both storing out[N] is a race on every device, though the interpreter, running
    program 1 last, leaves the right value there: it raises, with the emulation on or off, naming the kernel. One
    program storing an address twice (in order), and the next launch storing it again, pass."""
    x, out = torch.arange(2 * N, dtype=torch.float32), torch.zeros(4 * N)
    with ascend_semantics(emulate):
        with pytest.raises(Exception, match=r"store of 1 element\(s\) another program of this launch stored.*_store_rows"):
            _store_rows[(2,)](x, out, N=N, ROWS=1, TWICE=False)
        _store_rows[(2,)](x, out, N=N, ROWS=0, TWICE=True)
        _store_rows[(2,)](x, out, N=N, ROWS=0, TWICE=False)
    assert torch.equal(out[:2 * N], x[:N].repeat(2))


@triton.jit
def _row_ids(out, NY: tl.constexpr, CAST: tl.constexpr):
    """out[pid, pid1] = pid as int64 (by .to() or by tl.cast) + pid1."""
    if CAST:
        pid = tl.cast(tl.program_id(0), tl.int64)
    else:
        pid = tl.program_id(0).to(tl.int64)
    tl.store(out + pid * NY + tl.program_id(1), pid + tl.program_id(1))


@pytest.mark.parametrize("grid", [(1, 2), (2, 1), (3, 2)])
def test_to_on_a_program_id_of_a_grid_axis_of_1_fails_under_the_emulation(grid: tuple[int, int]) -> None:
    """Ascend folds the program id of a grid axis of 1 to a constexpr, whose .to() does not compile
    there (docs/design.md section 3): the emulation raises; tl.cast, arithmetic with it and any wider
    axis are fine, and so is everything with the emulation off."""
    def ids(cast: bool) -> torch.Tensor:
        out = torch.full(grid, -1, dtype=torch.int64)
        _row_ids[grid](out, NY=grid[1], CAST=cast)
        return out

    expected = torch.arange(grid[0])[:, None] + torch.arange(grid[1])[None, :]
    with ascend_semantics(False):
        assert torch.equal(ids(False), expected)
    with ascend_semantics(True):
        assert torch.equal(ids(True), expected)
        if grid[0] == 1:
            with pytest.raises(Exception, match="AscendSemanticsError.*folds that program id to a constexpr"):
                ids(False)
        else:
            assert torch.equal(ids(False), expected)


def test_int32_arithmetic_wraps_as_on_the_device() -> None:
    out = torch.zeros(1, dtype=torch.int32)
    with ascend_semantics(True):
        _int32_add[(1,)](out, 2**31 - 1, 1)
    assert int(out) == -(2**31)


# ----------------------------------------------------------------------------- every guard is tested code

# One fixed, small case per kernel path: two K and V tiles (tile_cap 16) so every loop runs its
# dot twice, a gate, grouped heads and a tail chunk. The guard mutants need no more: each one
# makes a tile loop read its clobbered left operand, or the dM/dA dots read a clobbered A^T.
GUARD_CASES = (
    Case(T=40, H=1, HV=2, K=24, V=20, BT=16, use_g=True, backend="cpu", knobs={"tile_cap": 16}),
    Case(cu_seqlens=(0, 5, 37), H=2, HV=4, K=32, V=17, BT=32, backend="cpu", knobs={"tile_cap": 16}),
)


def _guard_mutants() -> list:
    from mutation.mutants import MUTANTS

    return [m for m in MUTANTS if m.emulated]


def _load_mutated(mutant, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Apply ``mutant`` to a copy of the package and swap the mutated module in (kernels.py: its
    entry kernels; ops.py: the mutated op functions), undone by monkeypatch at the end."""
    from mutation.mutants import mutate
    from wy_ascend import kernels

    package = tmp_path / "wy_ascend"
    shutil.copytree(ROOT / "src" / "wy_ascend", package)
    mutate(mutant, package)
    name = f"wy_ascend.mutated_{mutant.file.removesuffix('.py')}"
    spec = importlib.util.spec_from_file_location(name, package / mutant.file, submodule_search_locations=None)
    module = importlib.util.module_from_spec(spec)
    module.__package__ = "wy_ascend"
    spec.loader.exec_module(module)
    if mutant.file == "kernels.py":
        monkeypatch.setattr(kernels, "KERNELS", module.KERNELS)
    else:
        assert mutant.file == "ops.py"
        from wy_ascend import ops

        module._OBSERVERS = ops._OBSERVERS  # the properties' launch check observes the mutated ops' launches too
        for fn in ("recompute_w_u_fwd", "prepare_wy_repr_bwd"):
            monkeypatch.setattr(ops, fn, getattr(module, fn))  # the wy_ascend subject calls them from ops


@pytest.mark.parametrize("mutant", _guard_mutants(), ids=lambda m: m.id)
def test_each_dot_guard_fails_the_oracle_only_under_the_emulation(mutant, tmp_path, monkeypatch) -> None:
    _load_mutated(mutant, tmp_path, monkeypatch)
    monkeypatch.setenv("WY_ASCEND_EMULATION", "0")
    with monkeypatch.context() as m:
        # value-preserving where dots never clobber: the oracle passes (the launch check is off here: it
        # sees the ops-level dot_guard_switched_off without the emulation, tests/test_launched_as_asked.py)
        m.setattr("wy_ascend.testing.properties.common._launched_as_asked", lambda case, kernel, launches: None)
        for case in GUARD_CASES:
            check_oracle(case)
    monkeypatch.setenv("WY_ASCEND_EMULATION", "1")
    failures = []
    for case in GUARD_CASES:
        try:
            check_oracle(case)
        except PropertyFailure as e:
            failures.append(str(e))
        except Exception as e:  # noqa: BLE001 - the interpreter wraps the emulation's error in its own
            assert "AscendSemanticsError" in repr(e), f"{mutant.id}: not the emulation's error: {e!r}"
            failures.append(repr(e))
    assert failures, f"{mutant.id} passed the oracle under the Ascend emulation"


def test_the_unmutated_kernels_pass_under_the_emulation() -> None:
    for case in GUARD_CASES:
        check_oracle(case)


# ----------------------------------------------------------------------------- which interpreter


@pytest.mark.parametrize("installed, refused", [
    ({"triton-ascend": "3.2.0"}, None),
    ({"triton": "3.8.0"}, "upstream triton 3.8.0 (both own"),
    ({"triton-ascend": "3.2.0", "triton": "3.8.0"}, "upstream triton 3.8.0 installed over triton-ascend 3.2.0"),
])
def test_the_cpu_backend_refuses_upstream_triton_before_any_launch(installed, refused, monkeypatch, capsys) -> None:
    """Upstream triton's interpreter (alone, or installed over triton-ascend's files) is refused by
    name when the backend is resolved, so replay says why and exits 2 (the backend cannot run)."""
    from importlib import metadata

    from wy_ascend import cli, interpreter

    def version(dist: str) -> str:
        if dist in installed:
            return installed[dist]
        raise metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(interpreter.metadata, "version", version)
    interpreter.check_interpreter.cache_clear()  # both are cached per process: cleared before and after
    backends.check_available.cache_clear()
    try:
        status = cli.main(["replay", str(ROOT / "regressions" / "oracle-72a9ba7cd5ae.json"), "--backend", "cpu"])
    finally:
        interpreter.check_interpreter.cache_clear()
        backends.check_available.cache_clear()
    out = capsys.readouterr()
    if refused is None:
        assert status == 0, out.out + out.err
    else:
        assert status == 2 and refused in out.out + out.err and "Traceback" not in out.out + out.err


# ----------------------------------------------------------------------------- the patches' guards


@settings(max_examples=40, derandomize=True, database=None, deadline=None)
@given(rules=st.sets(st.sampled_from(["clobber", "shared_operands", "grid", "folded_program_id", "Clobber", "dot", ""])),
       enabled=st.booleans())
def test_ascend_semantics_takes_a_subset_of_its_rules_and_refuses_any_other(rules: set[str], enabled: bool) -> None:
    """A subject's target calls for some of the emulation's rules: any subset of RULES is applied as given for
    the block (and the previous state restored after it); a name outside RULES is refused, naming the set."""
    from wy_ascend import interpreter

    before = interpreter._STATE.active, interpreter._STATE.rules
    if rules <= interpreter.RULES:
        with ascend_semantics(enabled, frozenset(rules)):
            assert (interpreter._STATE.active, interpreter._STATE.rules) == (enabled, rules)
        assert (interpreter._STATE.active, interpreter._STATE.rules) == before
        return
    with pytest.raises(ValueError, match=r"^rules must be a subset of \['clobber', 'folded_program_id', 'grid', "
                                         rf"'shared_operands'\], got {re.escape(str(sorted(rules)))}$"):
        with ascend_semantics(enabled, frozenset(rules)):
            pass
    assert (interpreter._STATE.active, interpreter._STATE.rules) == before


@pytest.mark.parametrize(("patch", "hook"), [("_patch_language_once", "_patch_lang"),
                                             ("_memoize_np_dtypes_once", "_get_np_dtype")])
def test_a_speed_up_is_skipped_where_the_interpreter_lacks_its_hook(monkeypatch, patch: str, hook: str) -> None:
    """A triton whose interpreter has no such function gets no patch (none set in its place); one that has it
    gets it wrapped (each patch run uncached, on a stand-in attribute restored after)."""
    from triton.runtime import interpreter

    from wy_ascend import interpreter as ours

    monkeypatch.delattr(interpreter, hook)
    getattr(ours, patch).__wrapped__()
    assert not hasattr(interpreter, hook)
    calls: list[object] = []
    monkeypatch.setattr(interpreter, hook, lambda x: calls.append(x) or "found", raising=False)
    stand_in = getattr(interpreter, hook)
    getattr(ours, patch).__wrapped__()
    assert getattr(interpreter, hook) is not stand_in


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(values=st.lists(st.floats(width=32, allow_nan=False), min_size=1, max_size=8),
       to=st.sampled_from(["rtz", "rtne", "float16"]))
def test_a_conversion_the_bf16_rounding_does_not_take_is_the_interpreters_own(values: list[float], to: str) -> None:
    """The bf16 patch takes float32 -> bfloat16 with no rounding mode (and bfloat16 -> float32); any other
    conversion (an explicit rounding mode, another pair of dtypes) is the interpreter's unpatched one, bit
    for bit."""
    from triton.runtime import interpreter

    from wy_ascend import interpreter as ours

    patched = interpreter._convert_float
    original = next(c.cell_contents for c in patched.__closure__
                    if getattr(c.cell_contents, "__name__", "") == "_convert_float")
    assert original is not patched
    x = np.asarray(values, dtype=np.float32)
    mode = None if to == "float16" else getattr(interpreter._ir.ROUNDING_MODE, to.upper())
    out = tl.float16 if to == "float16" else tl.bfloat16
    assert ours._round_bf16_to_nearest_once.cache_info().currsize == 1  # applied by prepare()
    assert np.array_equal(patched(x, tl.float32, out, mode), original(x, tl.float32, out, mode))


@settings(max_examples=40, derandomize=True, database=None, deadline=None)
@given(kind=st.sampled_from(["float32", "float16", "bfloat16", "int8", "int32", "int64", "uint8", "uint32"]),
       shape=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple), broadcast=st.booleans())
def test_a_clobbered_tile_reads_nan_or_the_most_negative_integer(kind: str, shape: tuple[int, ...],
                                                                 broadcast: bool) -> None:
    """_poison overwrites a clobbered dot operand as Ascend may: NaN for a float tile (bfloat16's quiet-NaN bits
    where the interpreter stores it as uint16), the dtype's most negative value for an integer one; a broadcast
    view (no storage of its own) gets a fresh array of that fill in its place, its source untouched."""
    from types import SimpleNamespace

    from wy_ascend.interpreter import _poison

    dtype = np.uint16 if kind == "bfloat16" else np.dtype(kind)
    source = np.ones(shape[-1:], dtype=dtype)
    data = np.broadcast_to(source, shape) if broadcast else np.ones(shape, dtype=dtype)
    handle = SimpleNamespace(data=data, get_element_ty=lambda: SimpleNamespace(is_floating=lambda: kind[0] in "fb"))
    _poison(handle)
    assert handle.data.shape == shape and handle.data.dtype == dtype and handle.data.flags.writeable
    if kind.startswith("float"):
        assert np.isnan(handle.data).all()
    else:
        assert (handle.data == (0x7FC0 if kind == "bfloat16" else np.iinfo(dtype).min)).all()
    assert (source == 1).all() and (handle.data is not data) == broadcast
