"""Two properties of a call at scale, for every subject: ``compiles`` (a launch split into many costs
no compile beyond the first) and ``index_width`` (no address arithmetic wraps at 2**31 for a problem
the subject accepts).

compiles: the case's forward and backward run once each with the launch split (the case's knobs:
wy_ascend's ``max_blocks``/``max_tasks``; fla-ascend's own grid limit lowered to the case's
``max_blocks`` by its adapter, subjects.py), every launch keyed as Triton's cache keys it
(testing/compiles.py). A kernel with two keys in one op call compiles twice for one problem shape: on
an NPU seconds per launch chunk, and a cache that grows with the problem's size.

index_width: on the cpu backend the case's real sizes run under the interpreter's address audit
(testing/index_audit.py: virtual inputs and outputs, the programs with the largest addresses,
every signed integer's exact value); a load or store through a wrapped address fails. The backward
is audited where its gates (B x T x HV) number below 2**31 and heads are not grouped: otherwise its
host code writes outputs of that many elements (dbeta, dg transposed back; a grouped dk summed) into
memory that is really there, tens of GiB. On a device the real sizes run for real: zeros but for
the last chunk of the last sequence, whose outputs must match the float64 oracle of that chunk
alone; a wrapped address reads or writes another chunk's rows (zeros, or garbage) or faults. A case
whose real size (device_memory.real_size_bytes) is past the device's ledger budget has no verdict
there (``DeviceTooSmall``, raised by its reservation; the fuzz suite rejects it): the first device run
(an H100, docs/ledger.md session 34) drew a case whose k alone was 65 GiB and ran out of memory, which
is no result. No device run has passed it yet.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import Any, NamedTuple

import torch

from .. import reference, subjects
from ..backends import BACKENDS, _given, kernel_for
from ..ops import observed
from ..planning import UnsupportedProblemError
from ..subjects import zeros_converted
from .case import Case, Inputs
from .compiles import differing, distinct, record_launch, recorded_launches
from .failure import Metrics, PropertyFailure
from .index_audit import index_audit, virtual_allocations, virtual_empty, wrap_of
from .phases import phase

# Relative RMS a device run's last chunk may differ from its oracle by: a wrapped address reads another
# chunk's or head's rows, an O(1) error; the oracle property holds each output to its precise bound.
DEVICE_CHUNK_RTOL = 0.05
INDEX_LIMIT = 2**31  # element offsets at or past it need more than int32
VIRTUAL_BYTES = 2**28  # allocations (and a foreign subject's argument conversions) this large stay virtual
# Programs of a core-grid launch under the audit: the last iterations of each cover the last tasks (a
# task of BT = 128 takes ~0.3 s in the interpreter, fla-ascend's 24 cores a case ~20 s).
AUDIT_CORES = 4


class Ops(NamedTuple):
    """A subject's two ops on a case's backend: ``forward(k, v, beta, A, g, cu_seqlens) -> (w, u)`` and
    ``backward(k, v, beta, A, dw, du, g, cu_seqlens) -> (dk, dv, dbeta, dg)``, and the device they run on."""

    forward: Callable[..., tuple[torch.Tensor, ...]]
    backward: Callable[..., tuple[torch.Tensor | None, ...]] | None  # None: a forward-only subject
    device: torch.device
    gates_head_major: bool = False  # the kernels read beta and g as [B,HV,T] (the host copies them so otherwise)


def subject_ops(case: Case, **knobs: Any) -> Ops:
    """The case's subject's ops (subjects.py) on its backend with ``knobs`` over the case's. This project's
    ops also record the launches that skip Triton's run (``direct``) and say their gates' layout."""
    name = case.backend or "cpu"
    subject = subjects.get(case.subject)
    forward, backward = subject.ops(name)
    config = case.config(**knobs)
    if subject.foreign:
        return Ops(lambda *a: forward(*a, config=config),
                   (lambda *a: backward(*a, config=config)) if backward is not None else None,
                   torch.device(BACKENDS[name].device_type), subject.calling.gate_layout == "head")

    def direct() -> Any:
        """An observer recording the launches that bypass Triton's run: cuda's (ops.py) once compiled."""
        launched = Counter[int]()

        def observer(call: Any, grid: tuple[int, ...], kwargs: dict[str, Any]) -> None:
            i = launched[id(call)]  # the op's launches run in plan order
            launched[id(call)] += 1
            if call.direct and call.compiled[i] is not None:
                record_launch(call.kernel, kwargs)
        return observer

    def own(op: Callable[..., Any]) -> Callable[..., Any]:
        def call(*a: Any) -> Any:
            with observed(direct()):
                return op(*a, config=config)
        return call

    backend = BACKENDS[name]
    kernel_for(backend, "fwd")  # the Triton mode loaded before recorded_launches imports triton
    assert backward is not None
    return Ops(own(forward), own(backward), torch.device(backend.device_type),
               _given(config.gate_head_major, backend.gate_head_major))


def check_compiles(case: Case, ops: Ops | None = None) -> Metrics:
    """One call of each op on the case compiles each kernel once, however many launches its split grid
    takes: every launch of a kernel in one call has one Triton cache key (testing/compiles.py). Needs
    a case whose launches split (some kernel launched more than once)."""
    ops = ops or subject_ops(case)
    with phase("inputs"):
        x = case.build_inputs(ops.device)
    backward = ops.backward
    calls: dict[str, Callable[[], object]] = {"fwd": lambda: ops.forward(x.k, x.v, x.beta, x.A, x.g, x.cu_seqlens)}
    if backward is not None:
        calls["bwd"] = lambda: backward(x.k, x.v, x.beta, x.A, x.dw, x.du, x.g, x.cu_seqlens)
    metrics: Metrics = {}
    failures = []
    split = False
    for op, call in calls.items():
        with phase("kernel"), recorded_launches() as launches:
            call()
        counts = Counter(launch.kernel for launch in launches)
        split = split or any(n > 1 for n in counts.values())
        for kernel, specs in distinct(launches).items():
            short = kernel.rsplit(".", 1)[-1]
            metrics[f"{op}.{short}"] = {"launches": counts[kernel], "compiles": len(specs)}
            if len(specs) > 1:
                failures.append(f"{op}: {short} compiles {len(specs)} times for one problem shape in "
                                f"{counts[kernel]} launches; its cache key differs in {differing(specs)}")
    if not split:
        raise PropertyFailure(f"compiles needs a case whose launches split; no kernel of {case.subject} launched twice "
                              f"(knobs {case.knobs})", metrics)
    if failures:
        raise PropertyFailure("a split launch recompiles: " + "; ".join(failures), metrics)
    return metrics


def _virtual_inputs(case: Case, gates_head_major: bool) -> Inputs:
    """The case's arguments at its real sizes as ``virtual_empty`` zeros (cu_seqlens real); beta and g
    [B,T,HV] views of [B,HV,T] tensors where the subject reads them so (its host copy into that layout
    would write every element: GiBs at these sizes)."""
    B, T, H, HV, K, V, BT = case.B, case.T, case.H, case.HV, case.K, case.V, case.BT
    dtype = case.torch_dtype

    def virtual(shape: tuple[int, ...], name: str) -> torch.Tensor:
        if name in ("beta", "g") and gates_head_major:
            return virtual_empty((B, HV, T), case.dtype_of(name)).transpose(1, 2)
        return virtual_empty(shape, case.dtype_of(name) if name in ("beta", "g") else dtype)

    cu = torch.tensor(case.cu_seqlens, dtype=case.dtype_of("cu_seqlens")) if case.cu_seqlens is not None else None
    return Inputs(virtual((B, T, H, K), "k"), virtual((B, T, HV, V), "v"), virtual((B, T, HV), "beta"),
                  virtual((B, T, HV, BT), "A"), virtual((B, T, HV), "g") if case.use_g else None,
                  virtual((B, T, HV, K), "dw"), virtual((B, T, HV, V), "du"), cu)


def audits_backward(case: Case) -> bool:
    """Whether ``check_index_width`` audits the case's backward on the cpu (module doc)."""
    return case.B * case.T * case.HV < INDEX_LIMIT and case.H == case.HV


def check_index_width(case: Case, ops: Ops | None = None) -> Metrics:
    """No load or store of the case's forward and backward addresses other memory than exact arithmetic
    gives, at the case's real sizes (module doc: the cpu audit; a device's real run). A subject that
    refuses the problem (ValueError, UnsupportedProblemError before any launch) passes: it does not
    accept those sizes."""
    # Poisoned outputs are written whole; AUDIT_CORES programs of a core grid each run their last tasks.
    ops = ops or subject_ops(case, poison_outputs=False, num_cores=AUDIT_CORES)
    if ops.device.type != "cpu":
        return real_size_check(case, ops)
    with phase("inputs"):
        x = _virtual_inputs(case, ops.gates_head_major)
    calls: dict[str, Callable[[], object]] = {"fwd": lambda: ops.forward(x.k, x.v, x.beta, x.A, x.g, x.cu_seqlens)}
    backward = ops.backward
    if audits_backward(case) and backward is not None:
        calls["bwd"] = lambda: backward(x.k, x.v, x.beta, x.A, x.dw, x.du, x.g, x.cu_seqlens)
    metrics: Metrics = {"largest_tensor": max(t.numel() for t in x if t is not None)}
    for op, call in calls.items():
        wrapped = None
        # the adapter's conversions of a foreign subject's arguments (gate units, dtypes) stay virtual too
        with phase("kernel"), virtual_allocations(VIRTUAL_BYTES), zeros_converted(virtual_empty, VIRTUAL_BYTES), \
                index_audit() as audit:
            try:
                call()
            except (ValueError, UnsupportedProblemError) as e:
                if audit.launches or wrap_of(e):
                    raise
                metrics[op] = {"refused": str(e)}
                continue
            except Exception as e:
                if wrap_of(e) is None:
                    raise
                wrapped = str(wrap_of(e))  # raised below, outside this block: the traceback's frames hold GiBs
        metrics[op] = audit.metrics()
        if wrapped is not None:
            raise PropertyFailure(f"{op}: {wrapped}", metrics)
    return metrics


def _last_chunk(case: Case) -> tuple[int, int, int]:
    """(batch, first token, end token) of the case's last chunk: its largest addresses."""
    b, start, end = case.chunk_bounds()[-1]
    return b, start - b * case.T, end - b * case.T


def real_size_check(case: Case, ops: Ops) -> Metrics:
    """The real-size run (module doc): what index_width does on a device; it runs anywhere (the tests run it
    on the cpu at small sizes). On a device its reservation (device_memory.case_bytes: real_size_bytes) is
    refused with DeviceTooSmall before it starts where it passes the ledger's budget."""
    b, t0, t1 = _last_chunk(case)
    chunk_case = case.replace(B=1, T=t1 - t0, cu_seqlens=None)
    with phase("inputs"):
        small = chunk_case.build_inputs(ops.device)
        big = [torch.zeros((case.B, case.T, *s.shape[2:]), dtype=s.dtype, device=ops.device) if s is not None else None
               for s in small[:-1]]
        for full, part in zip(big, small[:-1]):
            if full is not None and part is not None:
                full[b, t0:t1] = part[0]
        cu = torch.tensor(case.cu_seqlens, dtype=case.dtype_of("cu_seqlens"), device=ops.device) \
            if case.cu_seqlens is not None else None
    k, v, beta, A, g, dw, du = big
    with phase("kernel"):
        outputs = (*ops.forward(k, v, beta, A, g, cu),
                   *(ops.backward(k, v, beta, A, dw, du, g, cu) if ops.backward is not None else ()))
    with phase("oracle"):
        k64, v64, beta64, A64, dw64, du64 = (x.double() for x in (small.k, small.v, small.beta, small.A, small.dw,
                                                                  small.du))
        g64 = small.g.double() if small.g is not None else None
        exact = (*reference.wy_fwd(k64, v64, beta64, A64, g64, None),
                 *reference.wy_bwd_given_A(k64, v64, beta64, A64, dw64, du64, g64, None))
    metrics: Metrics = {"chunk": [b, t0, t1]}
    failures = []
    for name, got, ref in zip(("w", "u", "dk", "dv", "dbeta", "dg"), outputs, exact):
        if got is None or ref is None:
            continue
        diff = torch.linalg.vector_norm(got[b:b + 1, t0:t1].to(torch.float64) - ref)
        scale = torch.linalg.vector_norm(ref)
        err = float(diff / scale) if scale > 0 else float(diff)
        metrics[name] = {"rel_rms": err}
        if not err <= DEVICE_CHUNK_RTOL or math.isnan(err):
            failures.append(f"{name}: rel_rms {err:.3e} > {DEVICE_CHUNK_RTOL} on the last chunk (tokens {t0}:{t1} "
                            f"of batch {b})")
    if failures:
        raise PropertyFailure("at the real sizes the last chunk's outputs are wrong (an index that wraps reads "
                              "another chunk's rows): " + "; ".join(failures), metrics)
    return metrics
