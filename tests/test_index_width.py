"""The index_width property (testing/index_audit.py, testing/scaling.py): at a problem's real sizes,
run in a few MiB of memory, an offset computed in int32 that wraps at 2**31 is caught where it is
used (a load, a store, a block pointer); its int64 twin, and a wrapped lane that is masked off, pass."""

from __future__ import annotations

import math
import os
from typing import Any

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

if os.environ.get("WY_ASCEND_BACKEND", "cpu") != "cpu":
    pytest.skip("audits the interpreter (the cpu backend)", allow_module_level=True)

import triton  # noqa: E402  (after conftest set TRITON_INTERPRET)
import triton.language as tl  # noqa: E402

from wy_ascend import backends  # noqa: E402
from wy_ascend.planning import UnsupportedProblemError  # noqa: E402
from wy_ascend.testing import index_audit as index_audit_module  # noqa: E402
from wy_ascend.testing import scaling  # noqa: E402
from wy_ascend.testing.case import Case  # noqa: E402
from wy_ascend.testing.failure import PropertyFailure  # noqa: E402
from wy_ascend.testing.index_audit import (  # noqa: E402
    MAX_AUDITED_LOOP,
    IndexAuditError,
    IndexWrapError,
    index_audit,
    int64_bound,
    virtual_allocations,
    virtual_empty,
    wrap_of,
)
from wy_ascend.testing.scaling import Ops, check_index_width, real_size_check, subject_ops  # noqa: E402

backends.kernel_for(backends.BACKENDS["cpu"], "fwd")  # the interpreter, prepared

BLOCK = 2**14


@triton.jit
def _head_rows(x, y, T, BLOCK: tl.constexpr, WIDE: tl.constexpr, MASK_PAST: tl.constexpr):
    """y[h, t] = x[h, t] + 1 over a [heads, T] pair, one program per (block of t, h); the head's base
    h * T in int32 (wraps once h * T passes 2**31) or, WIDE, in int64. MASK_PAST masks off lanes whose
    exact offset passes 2**31 (their wrapped addresses never used)."""
    h = tl.program_id(1)
    base = tl.cast(h, tl.int64) * T if WIDE else h * T
    o = base + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = tl.cast(h, tl.int64) * T + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK) < 2**31 - 1 if MASK_PAST \
        else tl.arange(0, BLOCK) < BLOCK
    tl.store(y + o, tl.load(x + o, mask=mask) + 1, mask=mask)


@triton.jit
def _block_rows(x, y, T, BLOCK: tl.constexpr, HOW: tl.constexpr):
    """The same through block pointers of one [heads * T] row: the offset h * T + t as an int32 (which
    make_block_ptr's offsets are: "wrap"), a cast of the int64 offset to int32 ("narrow": it truncates),
    or the head's base added to the pointer in int64 and only t as the offset ("wide": exact)."""
    h = tl.program_id(1)
    if HOW == "narrow":
        start = (tl.cast(h, tl.int64) * T + tl.program_id(0) * BLOCK).to(tl.int32)
    elif HOW == "wrap" or HOW == "advance":
        start = h * T + tl.program_id(0) * BLOCK
    else:
        start = tl.program_id(0) * BLOCK
        x += tl.cast(h, tl.int64) * T
        y += tl.cast(h, tl.int64) * T
    at = 0 if HOW == "advance" else start  # "advance": made at 0, moved to the same int32 offset by tl.advance
    p_x = tl.make_block_ptr(x, (tl.cast(T, tl.int64) * 3,), (1,), (at,), (BLOCK,), (0,))
    p_y = tl.make_block_ptr(y, (tl.cast(T, tl.int64) * 3,), (1,), (at,), (BLOCK,), (0,))
    if HOW == "advance":
        p_x, p_y = tl.advance(p_x, (start - at,)), tl.advance(p_y, (start - at,))
    tl.store(p_y, tl.load(p_x) + 1)


HEADS, T = 3, 2**30  # head 2 starts at 2**31: the first offset int32 cannot hold


def _pair() -> tuple[torch.Tensor, torch.Tensor]:
    return virtual_empty((HEADS * T,), torch.float16), virtual_empty((HEADS * T,), torch.float16)


def test_virtual_tensors_take_no_memory_until_touched() -> None:
    """Twelve GiB of arguments, written at their ends by the audited programs: the process grows by
    a few MiB (the resident set, from /proc)."""
    def resident() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    before = resident()
    x, y = _pair()
    with index_audit() as audit:
        _head_rows[(T // BLOCK, HEADS)](x, y, T, BLOCK=BLOCK, WIDE=True, MASK_PAST=False)
    assert y[-BLOCK:].eq(1).all() and y[:BLOCK].eq(0).all()  # the last programs ran, the first did not
    assert audit.programs == 2 * 2 and audit.programs_launched == HEADS * T // BLOCK  # the last two of each axis
    assert audit.max_offset == HEADS * T - 1
    assert audit.accesses == 2 * audit.programs  # a load and a store each
    assert resident() - before < 64 * 2**20


def test_a_launch_of_hundreds_of_millions_of_programs_runs_only_its_audited_ones() -> None:
    """One program per 16 elements: 2**26 programs a head, 3 heads. The audit hands the interpreter only the
    last two of each axis, at their place in the real grid (the interpreter's loop visited every index of the
    grid it was given, and a grid of 34 M programs ran past 120 s doing nothing); the wrap is still caught."""
    import time

    x, y = _pair()
    started = time.monotonic()
    with index_audit() as audit:
        _head_rows[(T // 16, HEADS)](x, y, T, BLOCK=16, WIDE=True, MASK_PAST=False)
    assert time.monotonic() - started < 60  # the whole grid in the interpreter: hours
    assert audit.programs == 2 * 2 and audit.programs_launched == HEADS * T // 16
    assert y[-32:].eq(1).all() and y[-48:-32].eq(0).all() and y[:16].eq(0).all()  # the last two programs of head 2
    with pytest.raises(Exception) as caught, index_audit():
        _head_rows[(T // 16, HEADS)](x, y, T, BLOCK=16, WIDE=False, MASK_PAST=False)
    assert wrap_of(caught.value) is not None


@pytest.mark.parametrize("dtype", [torch.int8, torch.float16, torch.float32])
def test_an_int32_offset_that_wraps_is_caught_and_its_int64_twin_passes(dtype: torch.dtype) -> None:
    """The wrap is told in bytes: 2**32 elements of the pointer's element size (a 1-byte element is 1 byte)."""
    x, y = virtual_empty((HEADS * T,), dtype), virtual_empty((HEADS * T,), dtype)
    with pytest.raises(Exception) as caught, index_audit():
        _head_rows[(T // BLOCK, HEADS)](x, y, T, BLOCK=BLOCK, WIDE=False, MASK_PAST=False)
    wrap = wrap_of(caught.value)
    assert wrap is not None and "load through an address whose index arithmetic wrapped" in str(wrap)
    assert f"{2**32 * dtype.itemsize:+d} bytes" in str(wrap) or f"{-2**32 * dtype.itemsize:+d} bytes" in str(wrap)
    assert "_head_rows" in str(wrap)
    with index_audit():
        _head_rows[(T // BLOCK, HEADS)](x, y, T, BLOCK=BLOCK, WIDE=True, MASK_PAST=False)


def test_a_wrapped_address_on_masked_off_lanes_is_never_used() -> None:
    x, y = _pair()
    with index_audit():
        _head_rows[(T // BLOCK, HEADS)](x, y, T, BLOCK=BLOCK, WIDE=False, MASK_PAST=True)


@triton.jit
def _selected_rows(x, y, T, BLOCK: tl.constexpr, TAKE_HEAD: tl.constexpr):
    """y[o] = x[o] + 1 with o chosen by tl.where: the head's int32 offset h * T + t (wraps on head 2), or, where
    the condition takes the other side, the offset t of head 0 (never wraps)."""
    t = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    o = tl.where((tl.arange(0, BLOCK) >= 0) == TAKE_HEAD, tl.program_id(1) * T + t, t)
    tl.store(y + o, tl.load(x + o) + 1)


@pytest.mark.parametrize("take_head", [True, False])
def test_a_select_carries_the_exact_offset_of_the_side_it_takes(take_head: bool) -> None:
    """tl.where carries each lane's exact offset from the side its condition takes: the head's wrapping int32
    offset is caught through it, and head 0's offset taken instead of it passes, its rows written."""
    x, y = _pair()
    if take_head:
        with pytest.raises(Exception) as caught, index_audit():
            _selected_rows[(T // BLOCK, HEADS)](x, y, T, BLOCK=BLOCK, TAKE_HEAD=take_head)
        assert wrap_of(caught.value) is not None
        return
    with index_audit() as audit:
        _selected_rows[(T // BLOCK, HEADS)](x, y, T, BLOCK=BLOCK, TAKE_HEAD=take_head)
    assert audit.max_offset == T - 1 and y[T - BLOCK:T].eq(1).all() and y[-BLOCK:].eq(0).all()


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(mode=st.one_of(st.none(), st.sampled_from(["0", "", "true", " 1", "1 "])), keep=st.integers(-3, 3))
def test_the_audit_needs_the_interpreter_a_positive_keep_and_no_audit_around_it(mode: str | None, keep: int) -> None:
    """index_audit refuses to start outside the interpreter (TRITON_INTERPRET not exactly "1"), with keep < 1
    (programs and iterations it keeps), and inside another audit; each by its own error. Where none holds it
    starts, and a later audit starts again once it is left."""
    with pytest.MonkeyPatch.context() as mp:
        if mode is None:
            mp.delenv("TRITON_INTERPRET", raising=False)
        else:
            mp.setenv("TRITON_INTERPRET", mode)
        with pytest.raises(IndexAuditError, match="^the index audit runs on the Triton interpreter: set "
                                                  "TRITON_INTERPRET=1"):
            with index_audit(keep):
                pass
    if keep < 1:
        with pytest.raises(ValueError, match=f"^keep must be a positive number of programs and iterations, got {keep}$"):
            with index_audit(keep):
                pass
        return
    with index_audit(keep):
        with pytest.raises(IndexAuditError, match="^index audits do not nest$"), index_audit(keep):
            pass
    with index_audit(keep):
        pass


@settings(max_examples=40, derandomize=True, database=None, deadline=None)
@given(numel=st.integers(1, 64), min_bytes=st.integers(1, 256), dtype=st.sampled_from([torch.int8, torch.float32]),
       extra=st.sampled_from([None, "requires_grad", "pin_memory"]))
def test_only_a_plain_large_allocation_is_virtual(numel: int, min_bytes: int, dtype: torch.dtype,
                                                  extra: str | None) -> None:
    """Inside virtual_allocations, torch.empty gives a virtual tensor (zeros, a view of an mmap) exactly for a
    CPU allocation of at least min_bytes asked with dtype/device/memory_format alone; any other keyword
    (requires_grad, pin_memory) is allocated as asked."""
    kwargs = {"dtype": dtype, **({extra: False} if extra else {})}
    with virtual_allocations(min_bytes=min_bytes):
        x = torch.empty(numel, **kwargs)
    assert (x.shape, x.dtype) == ((numel,), dtype)
    assert (x._base is not None) == (extra is None and numel * dtype.itemsize >= min_bytes)


@pytest.mark.parametrize("how", ["wrap", "narrow", "advance", "wide"])
def test_a_block_pointer_offset_that_wraps_or_truncates_is_caught(how: str) -> None:
    """Head 2's int32 offset 2 * 2**30 wraps, made so or reached by tl.advance; heads 0 and 1 alone reach
    2 * T - 1 elements exactly (the audit's max_offset: an offset's last element times its stride)."""
    x, y = _pair()
    if how == "wide":
        with index_audit():
            _block_rows[(T // BLOCK, HEADS)](x, y, T, BLOCK=BLOCK, HOW=how)
        assert y[-BLOCK:].eq(1).all()
        return
    with index_audit() as audit:
        _block_rows[(T // BLOCK, 2)](x, y, T, BLOCK=BLOCK, HOW=how)
    assert audit.max_offset == 2 * T - 1 and y[2 * T - BLOCK:2 * T].eq(1).all()
    with pytest.raises(Exception) as caught, index_audit():
        _block_rows[(T // BLOCK, HEADS)](x, y, T, BLOCK=BLOCK, HOW=how)
    wrap = wrap_of(caught.value)
    assert isinstance(wrap, IndexWrapError) and "block pointer whose offset[0] wrapped" in str(wrap)


@triton.jit
def _block_reach(x, y, S0, S1, O0, O1, B0: tl.constexpr, B1: tl.constexpr):
    """y[0] = the sum of x's [B0, B1] block at offsets (O0, O1), strides (S0, S1): int32 offsets and strides,
    the block's farthest element (O0 + B0 - 1) * S0 + (O1 + B1 - 1) * S1 in the block pointer's int64."""
    p = tl.make_block_ptr(x, (O0 + B0, O1 + B1), (S0, S1), (O0, O1), (B0, B1), (1, 0))
    tl.store(y, tl.sum(tl.load(p)))


@settings(max_examples=15, derandomize=True, database=None, deadline=None)
@given(offsets=st.tuples(st.integers(0, 2**16 - 1), st.integers(0, 2**16 - 1)),
       strides=st.tuples(st.integers(1, 2**16), st.integers(1, 2**16)),
       block=st.tuples(st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from([1, 2, 4, 8, 16])))
@example(offsets=(2**15, 2**15), strides=(2**16, 3), block=(1, 16))  # the reach alone passes 2**31
@example(offsets=(2**16 - 1, 0), strides=(2**16, 2**16), block=(16, 16))  # and 2**32
def test_a_block_pointers_reach_is_its_exact_farthest_element(offsets: tuple[int, int], strides: tuple[int, int],
                                                               block: tuple[int, int]) -> None:
    """max_offset of a launch through one block pointer is its reach, sum((offset + size - 1) * stride), exact in
    int64 where it passes 2**31 (none of its int32 parts wraps: no error); the element there is the one loaded."""
    reach = sum((o + n - 1) * st_ for o, n, st_ in zip(offsets, block, strides))
    x, y = virtual_empty((reach + 1,), torch.int8), torch.zeros(1, dtype=torch.int32)
    x[reach] = 1  # the block's one element there, all the others zeros
    with index_audit() as audit:
        _block_reach[(1,)](x, y, *strides, *offsets, B0=block[0], B1=block[1])
    assert audit.max_offset == reach and y.item() == 1


@triton.jit
def _long_loop(x, n, START: tl.constexpr, STEP: tl.constexpr):
    for i in tl.range(START, n, STEP):
        tl.store(x + i, 1.0)


@settings(max_examples=12, derandomize=True, database=None, deadline=None)
@given(start=st.integers(0, 5), step=st.integers(1, 3),
       count=st.integers(MAX_AUDITED_LOOP - 2, MAX_AUDITED_LOOP + 2) | st.integers(0, 2 * MAX_AUDITED_LOOP))
@example(start=0, step=1, count=MAX_AUDITED_LOOP)
@example(start=0, step=1, count=MAX_AUDITED_LOOP + 1)
def test_the_audit_runs_a_loop_up_to_its_limit_and_refuses_a_longer_one(start: int, step: int, count: int) -> None:
    """A loop that does not start at the program id runs whole up to MAX_AUDITED_LOOP iterations (counted, not
    its end bound); one more is refused by its count, before it runs (past the limit it would run for hours)."""
    n = start + count * step
    x = torch.zeros(n + 1)
    if count > MAX_AUDITED_LOOP:
        with pytest.raises(Exception, match=f"a tl.range loop of {count} iterations .*too long to audit"), \
                index_audit():
            _long_loop[(1,)](x, n, START=start, STEP=step)
        assert not x.any()
        return
    with index_audit() as audit:
        _long_loop[(1,)](x, n, START=start, STEP=step)
    assert x.nonzero().reshape(-1).tolist() == list(range(start, n, step)) and audit.accesses == count


def test_virtual_allocations_replace_only_large_plain_cpu_tensors() -> None:
    allocators = (torch.empty, torch.empty_like, torch.Tensor.new_empty)
    with virtual_allocations(min_bytes=2**20):
        big = torch.empty(2**20, dtype=torch.float32)
        small = torch.empty(16)
        like = torch.empty_like(big, dtype=torch.float64)
        strided = torch.empty_like(big.view(2**10, 2**10).t())
        new = big.new_empty((2**19, 4))
    assert torch.equal(big, torch.zeros_like(big)) and like.dtype == torch.float64 and like.shape == big.shape
    assert new.shape == (2**19, 4) and new.is_contiguous()
    assert small.numel() == 16 and strided.stride() == (1, 2**10)  # allocated as asked
    assert (torch.empty, torch.empty_like, torch.Tensor.new_empty) == allocators  # restored


def _toy_ops(wide: bool) -> Ops:
    """A subject whose forward runs _head_rows over its A argument's rows, one per value head."""
    def forward(k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, A: torch.Tensor, *rest: object) -> tuple:
        rows = A.reshape(-1)
        T = rows.numel() // HEADS
        out = torch.empty_like(rows)
        _head_rows[(T // BLOCK, HEADS)](rows, out, T, BLOCK=BLOCK, WIDE=wide, MASK_PAST=False)
        return out, out

    return Ops(forward, lambda *a: (None, None, None, None), torch.device("cpu"))


# A's 1 x T x 3 x 16 float16 elements: 3 * 2**30 at T = 2**26, three toy heads of 2**30 (the third's base 2**31).
BIG = Case(T=2**26, H=3, HV=3, K=16, V=16, BT=16, dtype="float16")
SMALL = Case(T=64, H=1, HV=1, K=16, V=16, BT=16)


def test_the_property_fails_a_subject_whose_offsets_wrap_and_passes_its_twin() -> None:
    with pytest.raises(PropertyFailure, match=r"fwd: load through an address whose index arithmetic wrapped"):
        check_index_width(BIG, _toy_ops(wide=False))
    metrics = check_index_width(BIG, _toy_ops(wide=True))
    assert metrics["fwd"]["max_offset"] >= 2**31 and metrics["bwd"]["launches"] == 0  # the toy has no backward kernel


@pytest.mark.parametrize("error", [RuntimeError("device lost"), KeyError("k"), ValueError("refused late")])
def test_an_error_that_is_no_wrap_leaves_the_audit_as_it_is(error: Exception) -> None:
    """An op's own error during the audit is the case's error, its type and text kept (not a wrap verdict):
    any error but a refusal before a launch; a ValueError after a launch too."""
    def forward(k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, A: torch.Tensor, *rest: object) -> tuple:
        if isinstance(error, ValueError):  # a refusal only before any launch
            _toy_ops(wide=True).forward(k, v, beta, A)
        raise error

    with pytest.raises(type(error)) as info:
        check_index_width(BIG, Ops(forward, lambda *a: (None, None, None, None), torch.device("cpu")))
    assert info.value is error and not isinstance(info.value, PropertyFailure)


@pytest.mark.parametrize("case", [
    # head-major gates of HV x T >= 2**31: the offset i_h * T the audit found wrapping in int32 (kernels._gate_base)
    Case(T=2**25, H=65, HV=65, K=16, V=16, BT=16, dtype="bfloat16", backend="cpu"),
    # token-major rows past 2**31 elements in both ops, varlen
    Case(T=2**21, H=16, HV=16, K=128, V=128, BT=64, dtype="bfloat16", use_g=True, backend="cpu",
         cu_seqlens=(0, 3, 2**20, 2**21)),
])
def test_wy_ascend_keeps_every_offset_exact_at_real_sizes(case: Case) -> None:
    metrics = check_index_width(case)
    assert metrics["fwd"]["max_offset"] >= 2**31
    assert ("bwd" in metrics) == (case.T * case.HV < 2**31)


@pytest.mark.parametrize("case", [Case(T=40, HV=2, use_g=True, backend="cpu"),
                                  Case(T=70, cu_seqlens=(0, 33, 70), HV=2, use_g=True, backend="cpu"),
                                  Case(T=40, HV=2, use_g=False, backend="cpu")])
def test_the_real_size_check_holds_the_last_chunk_to_its_oracle(case: Case) -> None:
    """The device path (real tensors, zeros but the last chunk) at small sizes: this project's ops pass (an
    ungated case's absent dg is no output to compare), a subject whose outputs come from the neighbouring
    tokens' rows (what a wrapped index reads) fails."""
    ops = subject_ops(case)
    metrics = real_size_check(case, ops)
    assert ("dg" in metrics) == case.use_g and {"w", "u", "dk", "dv", "dbeta"} <= set(metrics)
    assert max(m["rel_rms"] for m in metrics.values() if isinstance(m, dict)) < 1e-5  # float32 kernels
    shifted = Ops(lambda *a: tuple(x.roll(1, 1) for x in ops.forward(*a)), ops.backward, ops.device)
    with pytest.raises(PropertyFailure, match=r"last chunk's outputs are wrong.*w: rel_rms"):
        real_size_check(case, shifted)


@triton.jit
def _head_loop(x, y, T, BLOCK: tl.constexpr):
    """The heads in a loop whose counter is int64 (its start is): head h's base h * T is int64 on the device."""
    for h in tl.range(tl.cast(tl.program_id(0), tl.int64), 3):
        o = h * T + tl.arange(0, BLOCK)
        tl.store(y + o, tl.load(x + o) + 1)


def test_a_loop_counter_has_its_bounds_type() -> None:
    """The interpreter counts in Python ints, int32 where they fit; the device's counter has its bounds'
    type, int64 here, so 2 * T does not wrap there and the audit must not say it does."""
    x, y = _pair()
    with index_audit() as audit:
        _head_loop[(1,)](x, y, T, BLOCK=BLOCK)
    assert audit.max_offset == 2 * T + BLOCK - 1 and y[2 * T:2 * T + BLOCK].eq(1).all()


@settings(max_examples=20, derandomize=True, database=None, deadline=None)
@given(refusal=st.sampled_from([ValueError, UnsupportedProblemError]), text=st.text(max_size=20),
       refuses=st.sampled_from(["fwd", "bwd", "both"]))
def test_a_subject_refusing_the_sizes_before_any_launch_passes_with_its_refusal(refusal: type[Exception],
                                                                                text: str, refuses: str) -> None:
    """check_index_width on the cpu, over both refusals, their texts and which op refuses: an op refusing the
    case before any launch is recorded as {"refused": its text} (it does not accept those sizes) and the audit
    goes on to the other op, whose metrics are its audit's."""
    def op(name: str) -> Any:
        def call(*a: object) -> tuple:
            if refuses in (name, "both"):
                raise refusal(text)
            return (None,) * (2 if name == "fwd" else 4)
        return call

    metrics = check_index_width(SMALL, Ops(op("fwd"), op("bwd"), torch.device("cpu")))
    for name in ("fwd", "bwd"):
        if refuses in (name, "both"):
            assert metrics[name] == {"refused": text}
        else:
            assert metrics[name]["launches"] == 0


def test_a_device_subject_takes_the_real_size_run(monkeypatch) -> None:
    """check_index_width of ops on a device (any but the cpu: a stand-in meta device here) is real_size_check's
    run, not the cpu's virtual audit; on the cpu it is the audit."""
    ran: list[str] = []
    monkeypatch.setattr(scaling, "real_size_check", lambda case, ops: ran.append(ops.device.type) or {"real": 1})
    ops = Ops(lambda *a: (None, None), None, torch.device("meta"))
    assert check_index_width(SMALL, ops) == {"real": 1} and ran == ["meta"]
    assert "real" not in check_index_width(SMALL, ops._replace(device=torch.device("cpu"))) and ran == ["meta"]


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(calls=st.lists(st.tuples(st.booleans(), st.lists(st.booleans(), min_size=1, max_size=4)), min_size=1, max_size=3),
       data=st.data())
def test_this_project_s_ops_record_each_launch_that_bypasses_triton_s_run(calls: list[tuple[bool, list[bool]]],
                                                                         data: st.DataObject) -> None:
    """subject_ops' observer over drawn op calls (stand-ins for ops._Call: direct or not, each launch compiled or
    not) and launch orders: record_launch gets a launch's kernel and arguments exactly where its call launches
    directly and its i-th launch (counted per call, in plan order) is a compiled kernel, cuda's bypass of
    Triton's run, which compiles would otherwise never see."""
    from types import SimpleNamespace

    from wy_ascend import ops as wy_ops
    from wy_ascend import subjects

    stand_ins = [SimpleNamespace(direct=d, compiled=[object() if c else None for c in compiled], kernel=f"k{j}")
                 for j, (d, compiled) in enumerate(calls)]
    order = data.draw(st.permutations([(j, i) for j, (_, c) in enumerate(calls) for i in range(len(c))]))
    order = sorted(order, key=lambda ji: ji[1])  # each call's launches in plan order, calls interleaved
    recorded: list[tuple[str, dict[str, int]]] = []

    def forward(*a: object, config: object) -> None:
        for j, i in order:
            for observer in wy_ops._OBSERVERS:
                observer(stand_ins[j], (1,), {"launch": i})

    subject = SimpleNamespace(ops=lambda name: (forward, forward), foreign=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(subjects, "get", lambda name: subject)
        mp.setattr(scaling, "record_launch", lambda kernel, kw: recorded.append((kernel, kw)))
        subject_ops(Case(T=16, backend="cpu")).forward()
    assert recorded == [(f"k{j}", {"launch": i}) for j, i in order if calls[j][0] and calls[j][1][i]]


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(st.one_of(st.integers(-2**64, 2**64), st.sampled_from([-2**31 - 1, -2**31, 2**31 - 1, 2**31])),
       st.booleans())
def test_a_loop_bound_is_64_bit_where_a_compiled_kernel_takes_it_as_64_bit(value: int, as_constexpr: bool) -> None:
    """int64_bound over the whole integer line, plain or constexpr, against the installed Triton's own rule for
    an int argument's type (runtime.jit.mangle_type: i32 in int32's range, else i64 or u64): the audit's loop
    counters are int64 exactly where a device's would be; an int64 tensor bound is 64-bit, an int32 one not."""
    from triton.runtime.jit import mangle_type

    bound = tl.constexpr(value) if as_constexpr else value
    assert int64_bound(bound) == (mangle_type(value) != "i32")
    b = triton.runtime.interpreter.interpreter_builder
    assert int64_bound(tl.tensor(b.get_int64(0), tl.int64)) and not int64_bound(tl.tensor(b.get_int32(0), tl.int32))


@settings(max_examples=200, deadline=None)
@given(dims=st.lists(st.integers(1, 3 * index_audit_module.CORE_GRID), min_size=1, max_size=3).map(tuple),
       keep=st.integers(1, 4))
@example(dims=(index_audit_module.CORE_GRID,), keep=2).via("a core grid at its limit runs whole")
@example(dims=(index_audit_module.CORE_GRID + 1,), keep=2).via("one program past it is trimmed")
@example(dims=(8, 2), keep=2).via("two axes of a few programs each are trimmed")
@example(dims=(1, 40, 1), keep=3).via("a core grid on another axis runs whole")
def test_the_audit_runs_a_core_grid_whole_and_of_any_other_grid_the_last_programs(dims: tuple[int, ...],
                                                                                    keep: int) -> None:
    """The sub-grid an audited launch runs, over drawn grids of one to three axes: the whole grid where one axis
    alone has more than one program and at most CORE_GRID of them (a persistent core grid, whose every program
    loops over tasks), else the last ``keep`` programs along each axis (those of the largest offsets)."""
    core = math.prod(dims) == max(dims) <= index_audit_module.CORE_GRID  # one axis holds all its programs
    want = dims if core else tuple(min(d, keep) for d in dims)
    assert index_audit_module._audited(dims, keep) == want


@settings(max_examples=25, derandomize=True, database=None, deadline=None)
@given(T=st.integers(1, 70), heads=st.sampled_from([(1, 1), (1, 2), (2, 2), (2, 6)]),
       K=st.sampled_from([16, 24, 32]), V=st.sampled_from([16, 40]), use_g=st.booleans(),
       dtype=st.sampled_from(["float32", "bfloat16"]), beta=st.sampled_from([None, "float32", "bfloat16"]))
def test_the_real_size_bytes_are_what_the_real_size_run_holds(T, heads, K, V, use_g, dtype, beta) -> None:
    """device_memory.real_size_bytes (index_width's reservation on a device) over drawn small cases: exactly
    the bytes of every tensor the real-size run passes to and gets from this project's ops (cu_seqlens aside),
    plus a float32 dk per value head where heads are grouped (the backward's partial sums; the ops free it
    before returning, so it is counted, not seen)."""
    from wy_ascend.testing.device_memory import real_size_bytes

    H, HV = heads
    case = Case(T=T, H=H, HV=HV, K=K, V=V, BT=16, use_g=use_g, dtype=dtype, beta_dtype=beta, backend="cpu")
    ops, seen = subject_ops(case), {}

    def recording(op: Any) -> Any:
        def call(*args: Any) -> Any:
            outputs = op(*args)
            for x in (*args[:-1], *outputs):
                if isinstance(x, torch.Tensor):
                    seen[x.data_ptr()] = x.nbytes
            return outputs
        return call

    real_size_check(case, Ops(recording(ops.forward), recording(ops.backward), ops.device))
    grouped = 4 * T * HV * K if HV > H else 0
    assert real_size_bytes(case) == sum(seen.values()) + grouped


def test_device_too_small_comes_back_from_the_case_runner_as_itself() -> None:
    """The fuzz suite rejects a case whose run raised DeviceTooSmall (fuzz/test_fuzz.py check); the case runner
    sends a child's exception back pickled, so it must survive the round trip as its own type."""
    from wy_ascend.testing.device_memory import DeviceTooSmall
    from wy_ascend.testing.runner import _portable

    error = DeviceTooSmall("index_width's real-size run needs 700.0 GiB")
    assert _portable(error) is error


def test_the_fuzz_suite_rejects_a_case_its_device_cannot_hold(monkeypatch) -> None:
    """fuzz/test_fuzz.py's check: a case whose run raised DeviceTooSmall (its reservation past the device's
    budget) is rejected, Hypothesis then drawing another; no failure is recorded, tallied or found."""
    from hypothesis.errors import Unsatisfiable

    import fuzz.test_fuzz as fz
    from wy_ascend.testing.device_memory import DeviceTooSmall

    def too_large(prop: str, case: Case) -> None:
        raise DeviceTooSmall("index_width on this case holds more than the budget")

    said: list[tuple] = []
    monkeypatch.setenv(fz.IN_PROCESS_ENV, "1")
    monkeypatch.setattr(fz, "run_property", too_large)
    monkeypatch.setattr(fz, "_record", lambda *a: said.append(("record", *a)))
    monkeypatch.setattr(fz.TALLY, "found", lambda *a: said.append(("found", *a)))
    monkeypatch.setattr(fz.TALLY, "add", lambda prop, *a, failed, **k: said.append(("add", prop, failed)))

    @settings(max_examples=3, database=None, deadline=None)
    @given(case=st.just(Case(T=16)))
    def fuzzed(case: Case) -> None:
        fz.check("index_width", case)

    with pytest.raises(Unsatisfiable):  # every draw rejected: no example ran to a verdict
        fuzzed()
    assert said and set(said) == {("add", "index_width", False)}


def test_the_wrap_counts_and_names_only_the_lanes_that_wrapped() -> None:
    """Two heads of T = 2**30 + 8, 16 lanes a block: head 1's last block holds offsets 2**31 - 8 to 2**31 + 7,
    and only its upper 8 lanes wrap. The error counts those 8 and names the first of them, lane 8, 2**32
    elements off; the 8 active lanes before it have their exact address."""
    T2 = 2**30 + 8
    x, y = virtual_empty((2 * T2,), torch.float16), virtual_empty((2 * T2,), torch.float16)
    with pytest.raises(Exception) as caught, index_audit():
        _head_rows[(T2 // 16, 2)](x, y, T2, BLOCK=16, WIDE=False, MASK_PAST=False)
    wrap = wrap_of(caught.value)
    assert wrap is not None and "8 active lane(s), first (8,)" in str(wrap), str(wrap)
    assert f"{2**32 * 2:+d} bytes" in str(wrap)


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(shape=st.lists(st.integers(0, 5), min_size=1, max_size=3),
       dtype=st.sampled_from([torch.int8, torch.float16, torch.float32, torch.int64]))
def test_a_virtual_tensor_is_zeros_of_its_shape_and_dtype_empty_ones_included(shape: list[int], dtype: torch.dtype) -> None:
    """virtual_empty of any shape, one with no elements included (neither an mmap nor torch.frombuffer can be
    empty: such a shape gets a plain empty tensor, which reserves nothing either)."""
    t = virtual_empty(tuple(shape), dtype)
    assert t.shape == tuple(shape) and t.dtype == dtype and not t.any()
