"""Properties the fuzz suite checks on a case; each returns metrics or raises PropertyFailure.

Tolerances (relative RMS error, ||out - ref|| / ||ref||, against the float64 oracle
evaluated on the very inputs the kernel saw, i.e. with the given, rounded A):

* float32: 1e-5. The kernels compute in fp32 (exact fp32 dot operands): each output is a
  chain of at most three dots of <= 256 terms (unit roundoff 6e-8, so ~1e-6 worst-case
  growth per chain), measured 1e-7 to 4e-7 on realistic inputs; docs/design.md section 2: 1e-5
  on strongly gated adversarial inputs, hence the bound. Those bounds are relative to the terms
  of each sum; an output that cancels (a sum far smaller than its terms) is held to 4x its
  rounding sensitivity instead where that is larger (``_bound``; a cuda nightly found a correct dg
  1.2x past 1e-5 on a 16-term dot cancelling 1,160-fold).
* bfloat16 / float16: the irreducible error is the rounding of each output to the
  dtype. ``err <= 4 * max(round_err, u / 2)`` where ``round_err`` is the relative RMS
  error of the exact result rounded (to nearest) to the dtype and ``u`` the unit
  roundoff (2**-8, 2**-11): fp32 arithmetic inside adds orders of magnitude less; the
  bf16 dot operands of the cuda backend (bf16 I/O only) add at most 0.61x the bound in
  a float64 emulation over every input distribution, so 4x leaves room for both. The floor ``u / 2`` (so a bound of at
  least 2u, one ulp) covers tensors of a few elements whose exact values happen to be
  nearly representable, where round_err says little: triton-ascend's interpreter
  converted fp32 to bf16 by truncation, off by up to one ulp (found by the fuzzer:
  regressions/oracle-72a9ba7cd5ae.json, a single dbeta one ulp off); the cpu backend now
  rounds to nearest like the devices (interpreter.py), and the floor stays for such tensors.

Each bound holds for a whole output and, with its terms measured on the block, for every block
(a chunk and a head: the WY step's unit of work), so an error confined to a few rows of a large
case cannot hide in the whole output's norm (``_worst_block``; below float32 a block's bound is
``BLOCK_SLACK`` = 2x the formula: a block of a few elements does not average its roundings).

Launch knobs that only re-partition work (block limit, cores, mode, tasks per launch) and
the kernel-variant knobs (dot_guard, gate_head_major, emulate) must not change a single bit;
knobs that change tile widths (ub_bytes, tile_cap) change summation order and are checked
against the oracle only. Every run of the ops checks that each knob reached the launch
(``_launched_as_asked``): otherwise a dropped knob would make those comparisons compare a launch
with itself.

The properties live one family to a module, where a reader would look for one: ``common`` (the case's
backend, device and inputs, the UB model, ``run_ops`` and the checks every run of the ops makes),
``exact`` (the float64 oracle), ``bounds`` (the tolerances above), ``oracle``, ``invariance``
(launch_invariance, memory_layout, varlen_split, widened_gates, grouped_heads), ``containment``,
``linearity``, ``plan_coverage``, ``bad_input``, ``perf`` and ``differential`` (one case on its subject and on
a peer implementation); compiles and index_width live in testing/scaling.py, history (a sequence of calls
against each alone in a fresh process) in testing/history.py. This module holds the registry (``PROPERTIES``,
``run_property``) and re-exports
the names other code imports from ``wy_ascend.testing.properties``; a test that patches a name patches
it in the module that looks it up.
"""

from __future__ import annotations

from collections.abc import Callable

from ...planning import UnsupportedProblemError
from ...subjects import Subject
from ..case import Case
from ..failure import Metrics, PropertyFailure
from ..history import check_history_case
from ..scaling import check_compiles, check_index_width
from .bad_input import ARGUMENTS, BACKWARD_ONLY, CORRUPTIONS, Corruption, check_bad_input
from .bounds import (
    BLOCK_SLACK,
    FP32_RTOL,
    LOW_PRECISION_FACTOR,
    NUDGED,
    UNIT_ROUNDOFF,
    Precisions,
    error_bounds,
    nudged_outputs,
    precisions,
    rel_rms,
)
from .common import (
    BWD_NAMES,
    DEVICE_OF,
    FWD_NAMES,
    LIVE_FP32,
    Seen,
    backend_name,
    build_inputs,
    device_of,
    plan_spec,
    plannable,
    run_ops,
    subject_of,
    supported,
    ub_need,
    widest_tile,
)
from .containment import check_containment, poisoned_block
from .differential import check_differential, claimed, peer_case
from .exact import oracle_outputs
from .invariance import (
    PARTITION_KNOBS,
    check_grouped_heads,
    check_launch_invariance,
    check_memory_layout,
    check_varlen_split,
    check_widened_gates,
    widened,
)
from .linearity import LINEAR_SCALES, check_linearity
from .oracle import Blocks, blocks_of, check_oracle, compare_to_oracle
from .perf import check_perf
from .plan_coverage import check_plan_coverage

__all__ = [
    "ARGUMENTS", "BACKWARD_ONLY", "BLOCK_SLACK", "BWD_NAMES", "CORRUPTIONS", "DEVICE_OF", "FP32_RTOL", "FWD_NAMES",
    "KERNEL_FREE", "LINEAR_SCALES", "LIVE_FP32", "LOW_PRECISION_FACTOR", "NUDGED", "OPS_TWICE", "PARTITION_KNOBS", "PROPERTIES",
    "UNIT_ROUNDOFF", "WY_ASCEND_ONLY", "Blocks", "Corruption", "Metrics", "Precisions", "PropertyFailure", "Seen",
    "applies", "applies_to", "backend_name", "blocks_of", "build_inputs", "check_bad_input", "check_compiles",
    "check_containment", "check_differential", "check_history_case",
    "check_grouped_heads", "check_index_width", "check_launch_invariance", "check_linearity", "check_memory_layout",
    "check_oracle", "check_perf", "check_plan_coverage", "check_varlen_split", "check_widened_gates",
    "compare_to_oracle", "device_of", "error_bounds", "nudged_outputs", "oracle_outputs", "plan_spec", "plannable",
    "poisoned_block", "precisions", "rel_rms", "run_ops", "run_property", "specialization_labels", "subject_of",
    "supported", "ub_need", "widened", "widest_tile", "claimed", "peer_case",
]



# Properties that run the ops twice at the case's size, the second run a variant of the first (what a
# replay costs the interpreter: testing/store.py interpreter_tasks).
OPS_TWICE = frozenset({"launch_invariance", "memory_layout", "varlen_split", "widened_gates", "grouped_heads",
                       "containment", "linearity", "differential"})
# Properties that launch no kernel (the others run the case's forward and backward kernels).
KERNEL_FREE = frozenset({"plan_coverage", "bad_input"})


def specialization_labels(prop: str, case: Case) -> list[str]:
    """Labels of the kernel specializations property ``prop`` launches on ``case`` (its forward's
    and backward's, ``Case.specializations``): none where it launches no kernel or the case has no plan."""
    if prop in KERNEL_FREE or subject_of(case).foreign:  # a foreign subject's kernels are its own
        return []
    try:
        return [s.label for s in case.specializations().values()]
    except UnsupportedProblemError:
        return []


PROPERTIES: dict[str, Callable[[Case], Metrics]] = {
    "oracle": check_oracle,
    "launch_invariance": check_launch_invariance,
    "memory_layout": check_memory_layout,
    "varlen_split": check_varlen_split,
    "grouped_heads": check_grouped_heads,
    "widened_gates": check_widened_gates,
    "containment": check_containment,
    "linearity": check_linearity,
    "plan_coverage": check_plan_coverage,
    "bad_input": check_bad_input,
    "perf": check_perf,
    "compiles": check_compiles,
    "index_width": check_index_width,
    "differential": check_differential,
    "history": check_history_case,
}



# Properties of this project's own machinery, with why a foreign subject (subjects.Subject.foreign)
# has nothing for them to check.
WY_ASCEND_ONLY = {
    "plan_coverage": "it checks wy_ascend's launch planner, which a foreign subject does not use",
    "perf": "its bounds are wy_ascend's performance targets on a device backend",
}


def applies(name: str, case: Case) -> str | None:
    """Why property ``name`` does not apply to ``case``'s subject, or None where it does."""
    return WY_ASCEND_ONLY.get(name) if subject_of(case).foreign else None


def applies_to(name: str, subject: Subject) -> str | None:
    """Why the fuzz suite runs no case of property ``name`` for ``subject`` (its internals are wy_ascend's:
    ``applies``; or its declaration leaves the property nothing to draw), or None where it does. A stored case
    of such a property still replays (bad_input holds a subject that claims no validation to less)."""
    claims, foreign = subject.claims, subject.foreign
    reasons = {
        "bad_input": not claims.validates and "it claims no validation of its arguments (Claims.validates)",
        "launch_invariance": foreign and not any(claims.takes(k) for k in PARTITION_KNOBS)
        and "it takes no launch knob that re-partitions its work",
        "compiles": subject.target.device == "host" and "it launches no Triton kernel (target 'host')"
        or foreign and not claims.takes("max_blocks")
        and "it has no grid limit of its own to lower, so no call of the suite's sizes splits its launch",
        "varlen_split": not claims.varlen and "it claims no packed batches (Claims.varlen)",
        "grouped_heads": claims.head_ratios is not None and max(claims.head_ratios) == 1
        and "it claims no grouped heads (Claims.head_ratios)",
        "index_width": subject.target.device == "host"
        and "it launches no Triton kernel whose addresses the audit checks (target 'host')",
        "widened_gates": not claims.gate_dtypes
        and "it takes beta and g in k's dtype only (Claims.gate_dtypes): their float32 twin is not a call it claims",
    }
    return WY_ASCEND_ONLY.get(name) if foreign and name in WY_ASCEND_ONLY else reasons.get(name) or None


def run_property(name: str, case: Case) -> Metrics:
    """Run property ``name`` on ``case`` (raises PropertyFailure when it does not hold; ValueError
    where it does not apply to the case's subject or the subject cannot run on its backend)."""
    if name not in PROPERTIES:
        raise ValueError(f"property must be one of {sorted(PROPERTIES)}, got {name!r}")
    why = applies(name, case)
    if why is not None:
        raise ValueError(f"property {name!r} does not apply to subject {case.subject!r}: {why}")
    subject_of(case).check(backend_name(case))
    return PROPERTIES[name](case)
