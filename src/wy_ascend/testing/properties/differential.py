"""The differential property (``check_differential``): one case on its subject and on a peer, another
implementation of the two ops on the same backend (``subjects.peer``: wy_ascend's peer is fla-core's
kernels of that platform, a foreign subject's is wy_ascend), each against the float64 oracle on the
same drawn inputs. A failure says which side fails the bounds where the other holds them, so a nightly
find is attributed at once: a defect of one implementation, or (both failing) a case or bound to triage.

A peer runs only what it claims (``claimed``: its dtypes, chunk sizes, K/V range, head ratios, varlen,
views, knobs); the case's knobs it does not take are dropped for it, and a case it does not claim is
outside the property (``peer_case`` is None)."""

from __future__ import annotations

from ... import subjects
from ..case import Case
from ..failure import Metrics, PropertyFailure
from .common import backend_name
from .oracle import check_oracle


def claimed(claims: subjects.Claims, case: Case, forced_g: str | None = None) -> bool:
    """Whether a subject claiming ``claims`` takes ``case`` (what the fuzz strategies draw for it); ``forced_g``:
    the dtype its call always passes g in (``Subject.forced_g_dtype``), a g dtype it takes whatever it claims."""
    low, high = claims.dims
    dims_ok = all(low <= d <= high and (not claims.pow2_dims or d & (d - 1) == 0) for d in (case.K, case.V))
    ratio_ok = claims.head_ratios is None or case.HV // case.H in claims.head_ratios
    gates_ok = claims.gate_dtypes or (case.beta_dtype is None and case.g_dtype in (None, forced_g))
    return (case.dtype in claims.dtypes and case.BT in claims.chunk_sizes and dims_ok and ratio_ok and gates_ok
            and (claims.varlen or case.cu_seqlens is None) and (claims.fixed or case.cu_seqlens is not None)
            and (claims.strided or not case.memory) and (claims.gateless or case.use_g)
            and case.corruption is None)


def peer_case(case: Case) -> Case | None:
    """``case`` as its peer runs it (the knobs the peer does not take dropped), or None where no peer runs
    on the case's backend here or the peer does not claim the case."""
    peer = subjects.peer(case.subject, backend_name(case))
    if peer is None:
        return None
    knobs = {k: v for k, v in case.knobs.items() if peer.claims.takes(k)}
    moved = case.replace(subject=peer.name, knobs=knobs)
    return moved if claimed(peer.claims, moved, peer.forced_g_dtype) else None


def _verdict(case: Case) -> tuple[Metrics | None, str | None]:
    try:
        return check_oracle(case), None
    except PropertyFailure as e:
        return e.metrics, str(e)


def check_differential(case: Case) -> Metrics:
    """The case on its subject and on its peer (``peer_case``), each against the oracle; PropertyFailure
    naming the side (or both) that fails the bounds, with the other's result on the same case."""
    other = peer_case(case)
    if other is None:
        raise ValueError(f"differential: no peer of subject {case.subject!r} on backend {backend_name(case)!r} "
                         "takes this case here")
    mine, mine_failed = _verdict(case)
    theirs, theirs_failed = _verdict(other)
    metrics: Metrics = {case.subject: mine or {}, other.subject: theirs or {}}
    if mine_failed and theirs_failed:
        raise PropertyFailure(f"both {case.subject} and {other.subject} fail the oracle on this case (the case or "
                              f"the bound to triage): {case.subject}: {mine_failed}; {other.subject}: "
                              f"{theirs_failed}", metrics)
    if mine_failed or theirs_failed:
        bad, good = (case.subject, other.subject) if mine_failed else (other.subject, case.subject)
        raise PropertyFailure(f"{bad} fails where {good} holds the bounds on the same case: "
                              f"{mine_failed or theirs_failed}", metrics)
    return metrics
