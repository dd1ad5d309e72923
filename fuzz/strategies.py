"""Hypothesis strategies for cases, sized by a profile and shrinking toward simple cases.

Draws are ordered so that the shrinker (integers toward their lower bound, ``sampled_from``
toward its first element, ``one_of`` toward its first branch, lists toward fewer elements,
optional dict keys toward absent) ends on the simplest case that still fails: one short
sequence, H = HV = 1, K = V = 16, BT = 16, float32, no gate, "realistic" inputs, seed 0 and
the backend's default launch knobs.

Cost: the Triton interpreter's time grows with a case's tasks (chunks x value heads) times
the K/V tiles each task loops over. ``Sizes.max_tasks`` bounds that product: each layout is
drawn under a chunk budget derived from the heads, dims and tiles drawn before it, so the
CPU profiles' examples stay well under a second.

The backend is never drawn: it comes from the run configuration and decides which chunk
sizes and UB sizes are plannable, by the UB model (``properties.supported``), not by asking the
planner: a planner that wrongly refuses a problem then fails the property, instead of narrowing
what is drawn. Plan cases also draw the device (``backends.DEVICES``) and chunk sizes the
model says do not fit it (plan_coverage then checks that the planner refuses them).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import random
from dataclasses import dataclass
from typing import Any

import torch
from hypothesis import assume
from hypothesis import strategies as st

from fuzz.pool import Entry
from wy_ascend import subjects
from wy_ascend.backends import BACKENDS, DEVICES
from wy_ascend.planning import plan
from wy_ascend.subjects import Claims, Known
from wy_ascend.testing.case import DISTRIBUTIONS, DTYPES, INDEX_DTYPES, MEMORY_ARGS, MEMORY_LAYOUTS, Case
from wy_ascend.testing.properties import ARGUMENTS, BACKWARD_ONLY, CORRUPTIONS, PARTITION_KNOBS, supported
from wy_ascend.validation import SUPPORTED_BT

# The Ascend launch limit (blocks per launch) and the CUDA grid's y limit: the large
# strategies draw task rectangles beyond it on one axis.
BLOCK_LIMIT = 65535
# Value heads per key head; the last entries are the "more" of grouped-query layouts.
HEAD_RATIOS = (1, 2, 3, 4, 6, 8, 16, 32)
# UB capacities for the ub_bytes knob: the 910B's 192 KiB first, then smaller ones that
# force narrower K/V tiles (48 KiB leaves only 16-wide tiles for BT <= 32).
UB_CHOICES = (192 * 1024, 96 * 1024, 64 * 1024, 48 * 1024)
TILE_CAPS = (128, 64, 32, 16)
# Varlen layout families; the first is the simplest (and where shrinking ends).
VARLEN_KINDS = ("one", "mixed", "boundary", "multiples", "long_among_short", "tiny_and_empty")
LARGE_KINDS = ("long_grid", "wide_heads", "long_varlen")
# K/V of large cases: few values, since each distinct one compiles anew on a device.
LARGE_DIMS = (16, 32, 64, 128)


@dataclass(frozen=True)
class Sizes:
    """Bounds of the cases one profile draws."""

    max_tokens: int = 300  # tokens per case (B * T, or cu_seqlens[-1])
    max_tasks: int = 20  # chunks x value heads x (K/V tiles per task / 2), the interpreter's cost unit
    max_seqs: int = 24  # sequences in a varlen batch
    split_seqs: int = 8  # sequences in a varlen_split case (each one also runs alone)
    max_batch: int = 4  # B of a fixed batch
    max_heads: int = 4  # key heads H
    max_value_heads: int = 16  # value heads HV
    dims: tuple[int, ...] = (16, 32, 64, 24, 48, 17, 100, 128, 80, 256)  # K/V drawn 3 times in 4; first = simplest
    max_dim: int = 256  # bound of the other draws (any integer in [16, max_dim])
    # K/V below 16 (tiles narrower than a dot's 16 rows), drawn one time in eight where the subject's
    # claims take them; the foreign subjects' runs draw SMALL_DIMS (fuzz/profiles.py).
    small_dims: tuple[int, ...] = ()
    plan_tasks: int = 4096  # plan_coverage cases: tasks (no tensors are built, so far more than max_tasks)
    large_tokens: int = 2**22  # large cases: tokens of a long varlen batch
    large_bytes: int = 48 * 2**30  # large cases: host bytes (float64 generation, oracle, device copies)

    def scaled(self, **changes: Any) -> Sizes:
        return dataclasses.replace(self, **changes)


CPU_SIZES = Sizes()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def num_chunks(lengths: list[int] | tuple[int, ...], BT: int) -> int:
    return sum(cdiv(n, BT) for n in lengths)


def host_bytes_per_token(H: int, HV: int, K: int, V: int, BT: int) -> int:
    """Host bytes one token costs a property run: float64 generation of k, v, beta, g, A, dw, du,
    their casts, and the float64 oracle's autograd intermediates (a factor 6 over the inputs)."""
    elements = H * K + HV * (2 * K + 2 * V + BT + 3)
    return 6 * 8 * elements


def case_host_bytes(case: Case) -> int:
    return case.B * case.T * host_bytes_per_token(case.H, case.HV, case.K, case.V, case.BT)


# ----------------------------------------------------------------------------- known defects

OWN_CLAIMS = subjects.get(subjects.DEFAULT).claims


def known_defect(prop: str, case: Case) -> Known | None:
    """The known defect of the case's subject (at its installed version, from its declaration:
    ``subjects.Known``) that covers ``case`` under property ``prop``, if any (fuzz/test_fuzz.py rejects
    such a case before running it); for a history case, that covers it or any of its earlier calls. Noted in
    ``KNOWN_LEFT_OUT``."""
    known = subjects.get(case.subject).known_defect(prop, case)
    if known is not None:
        KNOWN_LEFT_OUT.setdefault(prop, set()).add(known.file)
    return known


# property -> the files of the known defects whose cases this process left out of its draws (known_defect): a
# test whose every draw one covers ends Unsatisfiable, which the run reports as a skip naming them (conftest).
KNOWN_LEFT_OUT: dict[str, set[str]] = {}


def known_everywhere(prop: str, subject: str) -> Known | None:
    """The known defect of ``subject`` (at its installed version) that every case of ``prop`` fails, if
    any: the property's test has nothing left to draw (fuzz/test_fuzz.py skips it, naming the file)."""
    return subjects.get(subject).known_everywhere(prop)


# ----------------------------------------------------------------------------- pieces


def plannable_chunk_sizes(backend: str) -> list[int]:
    """BT values the backend can plan with its default knobs, ascending."""
    return [bt for bt in SUPPORTED_BT if supported(Case(BT=bt, backend=backend))]


def chunk_sizes(backend: str) -> st.SearchStrategy[int]:
    """BT values the backend can plan with its default knobs (16 first)."""
    return st.sampled_from(plannable_chunk_sizes(backend))


def subject_chunk_sizes(subject: str, backend: str = "cpu") -> tuple[int, ...]:
    """The BT a subject's calls take on ``backend``: its claims' (a foreign one), else what the planner plans."""
    own = subjects.get(subject)
    return own.claims.chunk_sizes if own.foreign else tuple(plannable_chunk_sizes(backend))


def _ub_choices(backend: str, BT: int) -> list[int]:
    return [ub for ub in UB_CHOICES if supported(Case(BT=BT, backend=backend, knobs={"ub_bytes": ub}))]


@st.composite
def heads(draw: st.DrawFn, sizes: Sizes = CPU_SIZES, grouped: bool = False,
          claims: Claims = OWN_CLAIMS) -> tuple[int, int]:
    """(H, HV) with HV a multiple of H, by a ratio the subject's ``claims`` take; ``grouped`` forces HV > H."""
    H = draw(st.integers(1, max(1, min(sizes.max_heads, sizes.max_value_heads // (2 if grouped else 1)))))
    ratios = [r for r in claims.head_ratios or HEAD_RATIOS
              if H * r <= sizes.max_value_heads and (r > 1 or not grouped)] or [1]
    return H, H * draw(st.sampled_from(ratios))


SMALL_DIMS = (8, 4, 12, 1, 15)  # Sizes.small_dims of a foreign subject's run


@st.composite
def dims(draw: st.DrawFn, sizes: Sizes = CPU_SIZES, claims: Claims = OWN_CLAIMS) -> int:
    """A K or V size the subject's ``claims`` take, in [16, max_dim]: mostly from ``sizes.dims`` (small on
    the CPU), else any integer; one in eight from ``sizes.small_dims`` (below 16) where it claims those."""
    low, high = claims.dims
    small = [d for d in sizes.small_dims if low <= d < 16]
    if small and draw(st.integers(0, 7)) == 7:
        return draw(st.sampled_from(small))
    claimed = lambda d: low <= d <= high and (not claims.pow2_dims or d & (d - 1) == 0)  # noqa: E731
    # None of the sizes' dims claimed (tiles larger than the sizes' dims): the smallest one it claims.
    pick = [d for d in sizes.dims if claimed(d)] or [next(d for d in range(max(16, low), high + 1) if claimed(d))]
    if draw(st.integers(0, 3)) < 3 or claims.pow2_dims or min(sizes.max_dim, high) < max(16, low):
        return draw(st.sampled_from(pick))
    return draw(st.integers(max(16, low), min(sizes.max_dim, high)))


# Knobs that change the kernel a case compiles through its tiles (a pooled case keeps its entry's
# specializations; an entry holds both grouped-dk variants: fuzz/pool.py).
TILE_KNOBS = ("tile_cap", "ub_bytes")


def subject_knob_values(subject: str, backend: str, large: bool = False) -> dict[str, st.SearchStrategy[Any]]:
    """A foreign subject's knobs (``Claims.knobs``): ``max_blocks`` lowers its own grid limit (its
    host-side launch split), ``num_cores`` (cpu only: what its stub device reports) its core grid."""
    values = {name: value for name, value in knob_values(backend, 16, large).items()
              if subjects.get(subject).claims.takes(name)}
    if backend != "cpu":
        values.pop("num_cores", None)
    return values


def knob_values(backend: str, BT: int, large: bool = False, grouped: bool = False) -> dict[str, st.SearchStrategy[Any]]:
    """One strategy per launch knob; small values (down to 1) unless ``large`` (then few launches);
    ``grouped`` (HV > H) adds the knob that only grouped heads use."""
    default_mode = BACKENDS[backend].mode
    modes = (default_mode, "grid" if default_mode == "persistent" else "persistent")
    values: dict[str, st.SearchStrategy[Any]] = {
        "max_blocks": st.sampled_from((BLOCK_LIMIT, 4096, 1000, 257)) if large else st.integers(1, 64),
        "num_cores": st.sampled_from((20, 24, 1, 7, 132)) if large else st.integers(1, 48),
        "mode": st.sampled_from(modes),
        "max_tasks": st.sampled_from((2**20, 65536, 100_003)) if large else st.integers(1, 64),
        "tile_cap": st.sampled_from(TILE_CAPS),
    }
    if backend != "npu":  # the backward's grouped-dk variant (kernels.GROUP_DK), not lowered for the NPU
        values["group_dk"] = st.booleans()
    if BACKENDS[backend].interpret:  # bf16 I/O: cuda's bf16 dot operands (its k^T load included)
        values["lowp_dot"] = st.booleans()
        if grouped:  # cuda's sum of a per-value-head backward's dk
            values["dk_sum_kernel"] = st.booleans()
    ub = _ub_choices(backend, BT)
    if ub:
        values["ub_bytes"] = st.sampled_from(ub)
    if BACKENDS[backend].interpret:
        # The interpreter runs every kernel variant a backend can select (a bug in a branch only
        # cuda or npu takes fails here too); the backend's own value first.
        values["dot_guard"] = st.sampled_from((BACKENDS[backend].dot_guard, not BACKENDS[backend].dot_guard))
        values["gate_head_major"] = st.sampled_from((BACKENDS[backend].gate_head_major,
                                                     not BACKENDS[backend].gate_head_major))
    return values


@st.composite
def launch_knobs(
    draw: st.DrawFn, backend: str = "cpu", BT: int = 16, *, require_partition: bool = False, large: bool = False,
    keep_tiles: bool = False, grouped: bool = False, subject: str = subjects.DEFAULT,
) -> dict[str, Any]:
    """Launch knobs (empty = the backend's defaults); ``require_partition`` adds at least one
    knob that re-partitions the work (what launch_invariance compares against the defaults);
    ``keep_tiles`` leaves out the knobs that change tiles (pooled cases); ``grouped``: for HV > H;
    a foreign ``subject``: its own knobs only (``subject_knob_values``)."""
    foreign = subjects.get(subject).foreign
    values = subject_knob_values(subject, backend, large) if foreign else knob_values(backend, BT, large, grouped)
    if keep_tiles:
        values = {k: v for k, v in values.items() if k not in TILE_KNOBS}
    knobs = dict(draw(st.fixed_dictionaries({}, optional=values)))
    partitions = [k for k in PARTITION_KNOBS if k in values]  # none for a subject without such knobs (fla)
    if require_partition and partitions and not any(k in knobs for k in PARTITION_KNOBS):
        name = draw(st.sampled_from(partitions))
        knobs[name] = draw(values[name])
    if knobs.get("lowp_dot") and "dot_guard" not in knobs:
        knobs["dot_guard"] = draw(values["dot_guard"])  # half of them the cuda variant whole: unguarded too
    if knobs.get("dot_guard") is False:
        knobs["emulate"] = False  # the unguarded variant is cuda's, whose dots never clobber
    return knobs


def tiles_per_task(backend: str, BT: int, K: int, V: int, knobs: dict[str, Any]) -> int:
    """K and V tiles one backward task loops over with these knobs (the planner's BK/BV)."""
    config = Case(BT=BT, K=K, V=V, backend=backend, knobs=knobs).config(num_cores=1)
    p = plan("bwd", NT=1, BH=1, BT=BT, K=K, V=V, spec=BACKENDS[backend].spec(torch.device("cpu"), config))
    return cdiv(K, p.BK) + cdiv(V, p.BV)


# ----------------------------------------------------------------------------- layouts


def seq_length(BT: int, cap: int) -> st.SearchStrategy[int]:
    """A sequence length in [1, cap], often on a chunk boundary (BT - 1, BT, BT + 1, 2 BT ...)."""
    cap = max(1, cap)
    special = sorted({n for n in (1, BT - 1, BT, BT + 1, 2 * BT - 1, 2 * BT, 2 * BT + 1, 3 * BT) if 1 <= n <= cap})
    return st.one_of(st.integers(1, cap), st.sampled_from(special))


def fit_lengths(lengths: list[int], BT: int, max_chunks: int, max_tokens: int) -> list[int]:
    """The longest prefix of ``lengths`` within the chunk and token budgets; the first length
    that overflows is cut to what is left (a batch always keeps at least one sequence)."""
    out: list[int] = []
    chunks = tokens = 0
    for n in lengths:
        room = min(max_tokens - tokens, (max_chunks - chunks) * BT)
        if n > room:
            if room > 0 or not out:
                out.append(max(0, room))
            break
        out.append(n)
        chunks += cdiv(n, BT)
        tokens += n
    return out


@st.composite
def varlen_lengths(draw: st.DrawFn, BT: int, sizes: Sizes = CPU_SIZES, max_chunks: int = 8) -> list[int]:
    """Sequence lengths of a packed batch, from one of the layout families in VARLEN_KINDS."""
    max_seqs = max(2, sizes.max_seqs)
    cap = max(1, min(sizes.max_tokens, max_chunks * BT))
    kind = draw(st.sampled_from(VARLEN_KINDS))
    if kind == "one":
        lengths = [draw(seq_length(BT, cap))]
    elif kind == "mixed":
        element = st.one_of(seq_length(BT, min(cap, 2 * BT + 1)), st.just(0))
        lengths = draw(st.lists(element, min_size=2, max_size=max_seqs))
    elif kind == "boundary":
        lengths = draw(st.lists(st.sampled_from([n for n in (BT - 1, BT, BT + 1) if n >= 1]), min_size=2,
                                max_size=max_seqs))
    elif kind == "multiples":
        lengths = draw(st.lists(st.one_of(st.integers(1, 3).map(lambda m: m * BT), st.just(0)), min_size=1,
                                max_size=max_seqs))
    elif kind == "long_among_short":
        shorts = draw(st.lists(st.integers(0, max(1, BT // 2)), min_size=2, max_size=max_seqs - 1))
        shorts = fit_lengths(shorts, BT, max(0, max_chunks - 3), cap - (2 * BT + 1))  # room for the long one
        room = min(cap - sum(shorts), (max_chunks - num_chunks(shorts, BT)) * BT)
        long = draw(st.integers(min(room, 2 * BT + 1), room)) if room >= 1 else 0
        at = draw(st.integers(0, len(shorts)))
        lengths = shorts[:at] + [long] + shorts[at:]
    else:  # tiny_and_empty: many sequences of 0-2 tokens, possibly all empty
        lengths = draw(st.lists(st.integers(0, 2), min_size=2, max_size=max_seqs))
    return fit_lengths(lengths, BT, max_chunks, cap)


@st.composite
def layouts(
    draw: st.DrawFn, BT: int, sizes: Sizes = CPU_SIZES, max_chunks: int = 8, varlen: bool | None = None
) -> dict[str, Any]:
    """Case fields of the token layout: ``{B, T}`` (fixed batch) or ``{cu_seqlens}`` (packed batch).
    ``varlen`` None draws either (a fixed batch of one first)."""
    max_chunks = max(1, max_chunks)
    if varlen is None:
        varlen = draw(st.booleans())
    if varlen:
        lengths = draw(varlen_lengths(BT, sizes, max_chunks))
        cu = [0]
        for n in lengths:
            cu.append(cu[-1] + n)
        return {"cu_seqlens": tuple(cu)}
    B = draw(st.integers(1, max(1, min(sizes.max_batch, max_chunks))))
    cap = max(1, min(sizes.max_tokens // B, (max_chunks // B) * BT))
    return {"B": B, "T": draw(seq_length(BT, cap))}


# ----------------------------------------------------------------------------- arguments


@st.composite
def memory_layout(draw: st.DrawFn, ndim: int) -> str:
    """A memory layout (case.MEMORY_LAYOUTS) of an argument of rank ``ndim``; "offset" first."""
    kind = draw(st.sampled_from(MEMORY_LAYOUTS if ndim > 1 else MEMORY_LAYOUTS[:-1]))
    if kind == "offset":
        return kind
    return f"{kind}:{draw(st.integers(0, ndim - (2 if kind == 'transposed' else 1)))}"


@st.composite
def arguments(draw: st.DrawFn, use_g: bool, varlen: bool, memory: bool, indices: bool = True) -> dict[str, Any]:
    """Case fields of the optional arguments and memory layouts: ``chunk_indices`` (varlen only, where
    ``indices``: the caller's option) and ``memory``: with ``memory`` a layout for some of every argument
    passed (at least one), else only for chunk_indices when they are passed. Shrinks toward contiguous,
    none passed."""
    chunk_indices = varlen and indices and draw(st.booleans())
    absent = {"g": not use_g, "cu_seqlens": not varlen, "chunk_indices": not chunk_indices}
    names = [n for n in MEMORY_ARGS if not absent.get(n)] if memory else ["chunk_indices"] * chunk_indices
    layouts = {n: memory_layout(MEMORY_ARGS[n]) for n in names}
    chosen = dict(draw(st.fixed_dictionaries({}, optional=layouts)))
    if memory and not chosen:
        name = draw(st.sampled_from(names))
        chosen[name] = draw(layouts[name])
    return {"chunk_indices": chunk_indices, "memory": chosen}


@st.composite
def caller_dtypes(draw: st.DrawFn, dtype: str, use_g: bool, varlen: bool) -> dict[str, Any]:
    """Case fields of the dtypes a caller may pass beside k's: beta's and g's (each k's half the
    time, else any float dtype; flash-linear-attention passes a float32 g with bfloat16 k and beta)
    and cu_seqlens' (int64 or int32). Shrinks toward k's dtype and int64."""
    def float_dtype() -> st.SearchStrategy[str | None]:
        return st.one_of(st.none(), st.sampled_from(tuple(DTYPES))).map(lambda d: None if d == dtype else d)

    return {"beta_dtype": draw(float_dtype()), "g_dtype": draw(float_dtype()) if use_g else None,
            "index_dtype": draw(st.sampled_from(tuple(INDEX_DTYPES))) if varlen else "int64"}


# ----------------------------------------------------------------------------- cases


@st.composite
def pooled(draw: st.DrawFn, pool: tuple[Entry, ...], sizes: Sizes, *, grouped: bool = False,
           varlen: bool | None = None, dim_cap: int | None = None) -> tuple[Any, ...]:
    """(H, HV, K, V, BT, dtype, use_g, varlen, caller dtypes) of a case of one ``pool`` entry (the
    dtypes as ``caller_dtypes`` gives them, the entry's own): K and V vary within the entry
    (fuzz/pool.py); entries that cannot give ``grouped``/``varlen`` are left out (all of the
    backend's entries when none of the pool can: a compile outside the pool)."""
    from fuzz.pool import entries

    def fits(e: Entry) -> bool:
        t = e.template
        return (varlen is None or (t.cu_seqlens is not None) == varlen) and (t.HV > t.H or not grouped)

    choices = [e for e in pool if fits(e)] or [e for e in entries(pool[0].template.backend or "cpu") if fits(e)]
    entry = draw(st.sampled_from(choices))
    t = entry.template
    cap = min(sizes.max_dim, dim_cap or sizes.max_dim)
    K = draw(st.sampled_from([k for k in entry.K_choices if k <= cap] or entry.K_choices))
    V = draw(st.sampled_from([v for v in entry.V_choices if v <= cap] or entry.V_choices))
    dtypes = {"beta_dtype": t.beta_dtype, "g_dtype": t.g_dtype, "index_dtype": t.index_dtype}
    return t.H, t.HV, K, V, t.BT, t.dtype, t.use_g, t.cu_seqlens is not None, dtypes


def chunk_budget(sizes: Sizes, backend: str, HV: int, K: int, V: int, BT: int, knobs: dict[str, Any]) -> int:
    """Chunks a case may have under ``sizes.max_tasks`` given its heads and tiles."""
    factor = max(1, tiles_per_task(backend, BT, K, V, knobs) // 2)
    return max(1, sizes.max_tasks // (HV * factor))


@st.composite
def cases(
    draw: st.DrawFn,
    sizes: Sizes = CPU_SIZES,
    backend: str = "cpu",
    *,
    varlen: bool | None = None,
    grouped: bool = False,
    partition_knobs: bool = False,
    memory: bool = False,
    pool: tuple[Entry, ...] | None = None,
    subject: str = subjects.DEFAULT,
) -> Case:
    """A valid, plannable case on ``backend``. ``varlen``: True/False forces a packed/fixed batch;
    ``grouped``: HV > H; ``partition_knobs``: at least one knob that re-partitions the launches;
    ``memory``: arguments in memory layouts other than contiguous (``arguments``); ``pool``: the
    structure comes from one of its entries (``pooled``), so the case compiles nothing new.
    ``subject``: whose ops the case runs; a foreign one's cases draw only what it claims
    (``subjects.Claims``), and no pool (it is this project's compiles)."""
    claims = subjects.get(subject).claims
    dtypes: dict[str, Any] | None = None
    if pool and not subjects.get(subject).foreign:
        H, HV, K, V, BT, dtype, use_g, varlen, dtypes = draw(pooled(pool, sizes, grouped=grouped, varlen=varlen))
    else:
        H, HV = draw(heads(sizes, grouped, claims))
        K, V = draw(dims(sizes, claims)), draw(dims(sizes, claims))
        BT = draw(st.sampled_from(subject_chunk_sizes(subject, backend)))
        dtype = draw(st.sampled_from(claims.dtypes))
        use_g = draw(gate(subject))
    varlen = claimed_varlen(subject, varlen)
    knobs = draw(launch_knobs(backend, BT, require_partition=partition_knobs, keep_tiles=bool(pool), grouped=HV > H,
                              subject=subject))
    # a foreign subject's tiles are its own: its budget counts the default plan's (its knobs may not plan here)
    tiles = knobs if not subjects.get(subject).foreign else {}
    layout = draw(layouts(BT, sizes, chunk_budget(sizes, backend, HV, K, V, BT, tiles), varlen))
    args = claimed_arguments(subject, draw(arguments(use_g, "cu_seqlens" in layout, memory and claims.strided,
                                                        optional_indices(subject))))
    dtypes = dtypes or draw(caller_dtypes(dtype, use_g, "cu_seqlens" in layout))
    dtypes.update(claimed_gate_dtypes(subject, dtype, use_g, dtypes))
    dist = draw(st.sampled_from(DISTRIBUTIONS))
    seed = draw(st.integers(0, 2**32 - 1))
    return Case(H=H, HV=HV, K=K, V=V, BT=BT, dtype=dtype, use_g=use_g, dist=dist, seed=seed, knobs=knobs,
                backend=backend, subject=subject, **layout, **args, **dtypes)


def optional_indices(subject: str) -> bool:
    """Whether chunk_indices of wy_ascend's format are the subject's caller's option (``Calling.chunk_indices``)."""
    return subjects.get(subject).calling.chunk_indices == "optional"


def claimed_arguments(subject: str, args: dict[str, Any]) -> dict[str, Any]:
    """``arguments``' draw within the subject's declaration: no chunk indices of wy_ascend's where they are not
    the caller's option (computed inside or always prebuilt in its own format: ``Calling.chunk_indices``), no
    argument laid out in memory for one that claims contiguous arguments only (``Claims.strided``)."""
    own = subjects.get(subject)
    if own.calling.chunk_indices != "optional":
        args = {"chunk_indices": False, "memory": {n: m for n, m in args["memory"].items() if n != "chunk_indices"}}
    return args if own.claims.strided else {**args, "memory": {}}


def gate(subject: str) -> st.SearchStrategy[bool]:
    """Whether a case passes a gate g: drawn, never for a subject that takes none (``gate_units`` "none"), always
    for one that takes none without it (``Claims.gateless`` False)."""
    own = subjects.get(subject)
    return st.booleans() if own.gated and own.claims.gateless else st.just(own.gated)


def claimed_varlen(subject: str, varlen: bool | None) -> bool | None:
    """A strategy's ``varlen`` flag within the subject's claims: True for one that takes packed batches only,
    False for one that takes fixed ones only (a property asking for the other gets the one it takes)."""
    claims = subjects.get(subject).claims
    return varlen if claims.varlen and claims.fixed else claims.varlen


def claimed_gate_dtypes(subject: str, dtype: str, use_g: bool, drawn: dict[str, Any]) -> dict[str, Any]:
    """The caller dtypes ``drawn`` within the subject's declaration: beta and g in k's dtype where it claims
    no other (``gate_dtypes``); g in the dtype its call forces (``Calling.g_dtype``), float32 for natural-log
    gates (a gate rounded after its scaling by ln 2 is not the one the oracle used: subjects.Calling)."""
    own = subjects.get(subject)
    beta, g = (drawn.get("beta_dtype"), drawn.get("g_dtype")) if own.claims.gate_dtypes else (None, None)
    forced = own.forced_g_dtype
    if use_g and forced is not None:
        g = None if forced == dtype else forced
    return {"beta_dtype": beta, "g_dtype": g if use_g else None}


@functools.cache
def corruptions_adding_cu_seqlens() -> frozenset[str]:
    """Corruptions that pass a cu_seqlens where the valid case had none (found by applying each
    to a tiny fixed batch of two): paired with B == 1 only, since cu_seqlens with B > 1 is a
    second defect that validation rightly reports first."""
    inputs = Case(B=2, T=4).build_inputs()
    return frozenset(name for name, corrupt in CORRUPTIONS.items()
                     if corrupt(inputs, 0)[0].get("cu_seqlens") is not None)


def subject_corruptions(subject: str) -> tuple[str, ...]:
    """The corruptions (properties.CORRUPTIONS) of arguments the subject takes: none of the backward's for a
    forward-only one, none of g for one without a gate, none of chunk_indices where they are not the caller's
    option, none that pass cu_seqlens to one that takes fixed batches only."""
    own = subjects.get(subject)
    ops = own.ops_implemented

    def takes(name: str) -> bool:
        # the corrupted argument (the cu_* corruptions are of cu_seqlens'; a shape mismatch, of every call's)
        argument = "cu_seqlens" if name.startswith("cu_") else next(
            (a for a in sorted(ARGUMENTS, key=len, reverse=True) if name.startswith(a + "_")), "k")
        if name in BACKWARD_ONLY and "bwd" not in ops:
            return False
        if argument == "g" and not own.gated or argument == "chunk_indices" and own.calling.chunk_indices != "optional":
            return False
        if (argument in ("cu_seqlens", "chunk_indices") or name in corruptions_adding_cu_seqlens()) \
                and not own.claims.varlen:
            return False
        return any(own.calling.takes(argument, op) for op in ops)
    return tuple(name for name in CORRUPTIONS if takes(name))


def example_case(subject: str, backend: str, **fields: Any) -> Case:
    """A test's explicit example (``Case(**fields)``) within the subject's claims: its first chunk size, dtype and
    dims where it claims no others, a packed batch of one sequence where it takes no fixed one, no gate where it
    takes none, g in the dtype its call forces."""
    own = subjects.get(subject)
    claims = own.claims
    case = Case(**fields)
    low, high = claims.dims
    K = case.K if low <= case.K <= high and (not claims.pow2_dims or case.K & (case.K - 1) == 0) else \
        (_pow2_dim(claims) if claims.pow2_dims else min(max(case.K, low), high))
    use_g = own.gated and (case.use_g or not claims.gateless)
    change: dict[str, Any] = {
        "BT": case.BT if case.BT in subject_chunk_sizes(subject, backend) else subject_chunk_sizes(subject, backend)[0],
        "dtype": case.dtype if case.dtype in claims.dtypes else claims.dtypes[0], "K": K, "V": K, "use_g": use_g}
    if claims.head_ratios is not None and case.HV // case.H not in claims.head_ratios:
        change["HV"] = case.H * claims.head_ratios[0]
    if case.cu_seqlens is None and not claims.fixed:
        change.update(cu_seqlens=(0, case.B * case.T), T=case.B * case.T, B=1)
    case = case.replace(**change)
    return case.replace(backend=backend, subject=subject,
                        **claimed_gate_dtypes(subject, case.dtype, use_g, {"beta_dtype": case.beta_dtype,
                                                                          "g_dtype": case.g_dtype}))


@st.composite
def bad_input_cases(draw: st.DrawFn, sizes: Sizes = CPU_SIZES, backend: str = "cpu",
                    subject: str = subjects.DEFAULT) -> Case:
    """A small valid case plus one ``corruption`` from properties.CORRUPTIONS at a drawn position
    (``corrupt_at``: e.g. which pair of cu_seqlens decreases). Inputs are built, no kernel runs;
    the case's own optional arguments and layouts are dropped (the corruption sets the arguments)."""
    corruption = draw(st.sampled_from(subject_corruptions(subject)))
    small = sizes.scaled(max_tokens=min(sizes.max_tokens, 128), max_tasks=min(sizes.max_tasks, 16),
                         max_seqs=min(sizes.max_seqs, 8))
    if corruption in corruptions_adding_cu_seqlens():
        small = small.scaled(max_batch=1)
    case = draw(cases(small, backend, subject=subject))
    assume(case.T >= 1)  # with no tokens some corruptions change nothing (v[:, :-1] of an empty v)
    return case.replace(corruption=corruption, corrupt_at=draw(st.integers(0, 2**16)), chunk_indices=False, memory={})


@st.composite
def large_cases(
    draw: st.DrawFn,
    sizes: Sizes = CPU_SIZES,
    backend: str = "cpu",
    *,
    varlen: bool | None = None,
    grouped: bool = False,
    partition_knobs: bool = False,
    memory: bool = False,
    pool: tuple[Entry, ...] | None = None,
    subject: str = subjects.DEFAULT,
) -> Case:
    """An accelerator-sized case within ``sizes.large_bytes`` of host memory, one of LARGE_KINDS
    (flags as for ``cases``):

    * ``long_grid``: a fixed batch with NT * B * HV > 65535 tasks (T not a multiple of BT),
    * ``wide_heads``: B * HV > 65535 batch-heads (one launch axis past the CUDA y limit),
    * ``long_varlen``: up to ``large_tokens`` packed tokens in hundreds of sequences: one long
      sequence among short ones, empty and length-1 sequences, chunk-boundary lengths.
    """
    head_sizes = sizes.scaled(max_heads=min(sizes.max_heads, 4))
    dtypes: dict[str, Any] | None = None
    foreign, claims = subjects.get(subject).foreign, subjects.get(subject).claims
    if pool and not foreign:
        H, HV, K, V, BT, dtype, use_g, varlen, dtypes = draw(pooled(pool, head_sizes, grouped=grouped, varlen=varlen,
                                                                    dim_cap=max(LARGE_DIMS)))
    else:
        H, HV = draw(heads(head_sizes, grouped, claims))
        large_dims = claimed_dims(claims, LARGE_DIMS)
        K, V = draw(st.sampled_from(large_dims)), draw(st.sampled_from(large_dims))
        BT = draw(st.sampled_from(subject_chunk_sizes(subject, backend)))
        dtype = draw(st.sampled_from(claims.dtypes))
        use_g = draw(gate(subject))
    varlen = claimed_varlen(subject, varlen)
    kinds = {None: LARGE_KINDS, True: ("long_varlen",), False: ("long_grid", "wide_heads")}[varlen]
    kind = draw(st.sampled_from(kinds))
    knobs = draw(launch_knobs(backend, BT, require_partition=partition_knobs, large=True, keep_tiles=bool(pool),
                              grouped=HV > H, subject=subject))
    max_tokens = min(sizes.large_tokens, sizes.large_bytes // host_bytes_per_token(H, HV, K, V, BT))
    layout: dict[str, Any]
    if kind == "long_grid":
        B = draw(st.integers(1, 4))
        nt_min = BLOCK_LIMIT // (B * HV) + 1
        NT = draw(st.integers(nt_min, 2 * nt_min))
        T = NT * BT - draw(st.integers(0, BT - 1))
        layout = {"B": B, "T": T}
        assume(B * T <= max_tokens)
    elif kind == "wide_heads":
        B = BLOCK_LIMIT // HV + 1 + draw(st.integers(0, 64))
        T = draw(st.integers(1, BT))
        layout = {"B": B, "T": T}
        assume(B * T <= max_tokens)
    else:
        total = draw(st.integers(max(1, max_tokens // 4), max(1, max_tokens)))
        n = draw(st.integers(min(100, sizes.max_seqs), max(min(100, sizes.max_seqs), sizes.max_seqs)))
        layout = {"cu_seqlens": _long_varlen_cu(random.Random(draw(st.integers(0, 2**32 - 1))), total, n, BT)}
    args = claimed_arguments(subject, draw(arguments(use_g, "cu_seqlens" in layout, memory and claims.strided,
                                                        optional_indices(subject))))
    dtypes = dtypes or draw(caller_dtypes(dtype, use_g, "cu_seqlens" in layout))
    dtypes.update(claimed_gate_dtypes(subject, dtype, use_g, dtypes))
    dist = draw(st.sampled_from(DISTRIBUTIONS))
    seed = draw(st.integers(0, 2**32 - 1))
    return Case(H=H, HV=HV, K=K, V=V, BT=BT, dtype=dtype, use_g=use_g, dist=dist, seed=seed, knobs=knobs,
                backend=backend, subject=subject, **layout, **args, **dtypes)


def _long_varlen_cu(rng: random.Random, total: int, n: int, BT: int) -> tuple[int, ...]:
    """cu_seqlens of ``n`` sequences over ``total`` tokens: one long sequence holding about half
    the tokens, the rest split at random with ~10% empty, ~5% length 1 and ~15% on a chunk boundary."""
    n = max(2, n)
    long = total // 2
    lengths = []
    for _ in range(n - 1):
        r = rng.random()
        lengths.append(0 if r < 0.1 else 1 if r < 0.15 else rng.choice((BT - 1, BT, BT + 1)) if r < 0.3 else -1)
    free = [i for i, x in enumerate(lengths) if x < 0]
    fixed = sum(x for x in lengths if x > 0)
    rest = max(0, total - long - fixed)
    cuts = sorted(rng.randrange(rest + 1) for _ in range(max(0, len(free) - 1)))
    for i, a, b in zip(free, [0, *cuts], [*cuts, rest]):
        lengths[i] = b - a
    lengths = [max(0, x) for x in lengths]
    lengths.insert(rng.randrange(n), long)
    cu = [0]
    for x in lengths:
        cu.append(cu[-1] + x)
    return tuple(cu)


@st.composite
def beyond_limit_plan_cases(draw: st.DrawFn, backend: str = "cpu") -> Case:
    """Plan-only cases (B = 1) whose task rectangle passes the 65535-block limit on one axis:
    "chunks" (NT * HV > 65535, T not a multiple of BT) or "heads" (HV > 65535 value heads in
    one or two chunks: the batch-head axis past CUDA's grid-y limit). Never built as tensors."""
    axis = draw(st.sampled_from(("chunks", "heads")))
    BT = draw(chunk_sizes(backend))
    K, V = draw(st.sampled_from(LARGE_DIMS)), draw(st.sampled_from(LARGE_DIMS))
    knobs = draw(launch_knobs(backend, BT, large=True))
    if axis == "chunks":
        H, HV = 1, draw(st.sampled_from((1, 2, 4, 8)))
        NT = BLOCK_LIMIT // HV + 1 + draw(st.integers(0, 64))
        T = NT * BT - draw(st.integers(0, BT - 1))
    else:
        H = draw(st.sampled_from((1, 2, 4)))
        HV = H * (BLOCK_LIMIT // H + 1 + draw(st.integers(0, 8)))
        T = draw(st.integers(1, 2 * BT))
    return Case(T=T, H=H, HV=HV, K=K, V=V, BT=BT, knobs=knobs, backend=backend)


@st.composite
def plan_cases(draw: st.DrawFn, sizes: Sizes = CPU_SIZES, backend: str = "cpu") -> Case:
    """Cases for plan_coverage, which builds no tensors: up to ``plan_tasks`` tasks, and one
    draw in twenty a task rectangle past the 65535-block limit (``beyond_limit_plan_cases``),
    planned for a drawn device (``backends.DEVICES``; None first: the backend's own spec). The
    chunk size is the backend's, so a device with a smaller UB gets some it cannot plan.

    check_plan_coverage plans ``len(case.chunk_bounds())`` chunks (every batch's) by B * HV,
    so a fixed batch costs it B times its tasks: B stays small here."""
    if draw(st.integers(0, 19)) < 19:
        plan_sizes = sizes.scaled(max_tasks=sizes.plan_tasks, max_tokens=sizes.plan_tasks * 8,
                                  max_seqs=max(sizes.max_seqs, 64), max_batch=min(sizes.max_batch, 4),
                                  max_value_heads=max(sizes.max_value_heads, 32))
        case = draw(cases(plan_sizes, backend))
    else:
        case = draw(beyond_limit_plan_cases(backend))
    if "ub_bytes" in case.knobs and draw(st.booleans()):  # any capacity, not only UB_CHOICES: tile boundaries
        case = case.replace(knobs={**case.knobs, "ub_bytes": draw(st.integers(16 * 1024, 256 * 1024))})
    return case.replace(device=draw(st.sampled_from((None, *DEVICES))))


# "mixed" draws one accelerator-sized case in this many: each costs seconds (float64 inputs, the
# oracle, a long launch), so a larger share would leave the nightly run few small cases.
MIXED_LARGE_ONE_IN = 8


@st.composite
def mixed_cases(draw: st.DrawFn, small: st.SearchStrategy[Case], large: st.SearchStrategy[Case]) -> Case:
    """One ``large`` case in MIXED_LARGE_ONE_IN, else a ``small`` one (shrinks towards small)."""
    return draw(large if draw(st.integers(0, MIXED_LARGE_ONE_IN - 1)) == MIXED_LARGE_ONE_IN - 1 else small)


def case_strategy(kind: str, sizes: Sizes, backend: str, **flags: Any) -> st.SearchStrategy[Case]:
    """The case strategy of a profile kind: "small" (cases), "mixed" (cases, some large) or "large"."""
    if kind == "small":
        return cases(sizes, backend, **flags)
    if kind == "mixed":
        return mixed_cases(cases(sizes, backend, **flags), large_cases(sizes, backend, **flags))
    if kind == "large":
        return large_cases(sizes, backend, **flags)
    raise ValueError(f"kind must be 'small', 'mixed' or 'large', got {kind!r}")


# ----------------------------------------------------------------------------- performance

# Issue 13's shape grid: K and V from PERF_DIMS (K != V included), HV/H from PERF_RATIOS, fixed
# and varlen batches, small and large token counts; bf16 with the gate, BT = 64 (the gated delta
# rule's chunk size). Tokens x value heads stay within PERF_MAX_ROWS so a case's inputs (built in
# float64 on the host) take a second, not a minute.
PERF_DIMS = (16, 32, 48, 64, 80, 128, 192, 256)
PERF_RATIOS = (1, 2, 4)
PERF_TOKENS = (1024, 8192, 32768)
PERF_MAX_ROWS = 2**19


@st.composite
def perf_cases(draw: st.DrawFn, backend: str) -> Case:
    """A shape of the performance grid on ``backend``; shrinks toward few tokens, K = V = 16, one
    head, a fixed batch of one."""
    K, V = draw(st.sampled_from(PERF_DIMS)), draw(st.sampled_from(PERF_DIMS))
    ratio = draw(st.sampled_from(PERF_RATIOS))
    tokens = draw(st.sampled_from(PERF_TOKENS))
    H = draw(st.sampled_from([h for h in (1, 2, 4, 8, 16) if tokens * h * ratio <= PERF_MAX_ROWS]))
    layout: dict[str, Any]
    if draw(st.booleans()):
        rng = random.Random(draw(st.integers(0, 2**32 - 1)))
        cuts = sorted(rng.sample(range(1, tokens), draw(st.integers(1, 15))))
        layout = {"cu_seqlens": (0, *cuts, tokens)}
    else:
        B = draw(st.sampled_from((1, 2, 4, 8)))
        layout = {"B": B, "T": tokens // B}
    return Case(H=H, HV=H * ratio, K=K, V=V, BT=64, dtype="bfloat16", use_g=True, backend=backend, **layout)


# ----------------------------------------------------------------------------- scale: compiles and index width


@st.composite
def split_cases(draw: st.DrawFn, sizes: Sizes = CPU_SIZES, backend: str = "cpu",
                subject: str = subjects.DEFAULT) -> Case:
    """A small case for the compiles property whose launches split: grid launches of at most
    ``max_blocks`` programs, fewer than its tasks (chunks x value heads, of a fixed or a packed batch),
    and, in a core grid, launches of at most ``max_tasks`` (as many) tasks. A foreign subject lowers its
    own grid limit to ``max_blocks`` (subjects.py: fla-ascend's ASCEND_MAX_GRID_DIM). Shrinks toward two
    chunks of one head, a launch a task."""
    claims = subjects.get(subject).claims
    BT = draw(st.sampled_from(subject_chunk_sizes(subject, backend)))
    H, HV = draw(heads(sizes.scaled(max_value_heads=min(4, sizes.max_value_heads)), claims=claims))
    most = max(2, sizes.max_tasks // HV)
    layout: dict[str, Any]
    if claimed_varlen(subject, draw(st.booleans())):  # a packed batch: a few sequences of one to two chunks each
        lengths = draw(st.lists(st.integers(1, 2 * BT), min_size=1, max_size=3))
        assume(2 <= num_chunks(lengths, BT) <= most)
        chunks, layout = num_chunks(lengths, BT), {"T": sum(lengths), "cu_seqlens": (0, *itertools.accumulate(lengths))}
    else:
        chunks = draw(st.integers(2, most))
        layout = {"T": draw(st.integers((chunks - 1) * BT + 1, chunks * BT))}
    limit = draw(st.integers(1, chunks * HV - 1))
    knobs = {"mode": "grid", "max_blocks": limit}
    if draw(st.booleans()):  # wy_ascend's core grid splits by tasks; a foreign subject's grid by max_blocks still
        knobs.update(mode="persistent", max_tasks=limit)
    K = V = claimed_dims(claims, (16,))[0]
    dtype, use_g = draw(st.sampled_from(claims.dtypes)), draw(gate(subject))
    return Case(H=H, HV=HV, K=K, V=V, BT=BT, dtype=dtype, use_g=use_g,
                seed=draw(st.integers(0, 2**16)), backend=backend, knobs=knobs, subject=subject, **layout,
                **claimed_gate_dtypes(subject, dtype, use_g, {}))


def claimed_dims(claims: Claims, values: tuple[int, ...]) -> list[int]:
    """The K/V of ``values`` the claims take, else the smallest they take (of at least 16 where they can)."""
    low, high = claims.dims
    return [d for d in values if low <= d <= high and (not claims.pow2_dims or d & (d - 1) == 0)] or \
        [_pow2_dim(claims) if claims.pow2_dims else max(16, low) if high >= 16 else high]


def _pow2_dim(claims: Claims) -> int:
    """The smallest power of two of at least 16 a subject claiming ``pow2_dims`` takes."""
    return next(d for d in range(max(16, claims.dims[0]), claims.dims[1] + 1) if d & (d - 1) == 0)


INDEX_LIMIT = 2**31
# Value heads of the "gates" class: (HV - 1) * T reaches 2**31 with HV * T just past it (the head-major
# gate offset i_h * T of the last head), T below 2**31 (an int32 kernel argument).
GATE_HEADS = (65, 33, 17, 9, 5, 3)
ROW_HEADS = (1, 2, 4, 8, 16)
INDEX_DIMS = (16, 64, 128)
ROW_MIN_BT = 128  # or the widest plannable ("rows": fewer programs for the interpreter to visit)


@st.composite
def index_width_cases(draw: st.DrawFn, backend: str = "cpu", subject: str = subjects.DEFAULT) -> Case:
    """A problem past 2**31 elements for the index_width property, of one of two classes (the first, where
    shrinking ends; on a device backend only the second, below):

    * "gates": value heads x tokens past 2**31, (HV - 1) x T reaching it (the forward audited), K = V = 16,
      bfloat16 or float16 gates, no g: a subject that copies beta into another layout writes 2 bytes per
      element (4.4 GiB, ~10 s: fla-ascend's), one that reads it as laid out nothing;
    * "rows": A (tokens x value heads x BT) past 2**31 elements, the gates below (both ops audited): a
      fixed batch of one or two rows, or a varlen batch of a few sequences; BT of at least ROW_MIN_BT (or
      the widest), for the interpreter visits every program of a grid launch (2**31 / BT**2 chunks x heads
      of them, each ~10 us where it runs none).

    Tokens are the least that reach the class's 2**31 plus up to three chunks; BT is drawn widest first."""
    own = subjects.get(subject)
    claims = own.claims
    chunk_sizes_ = sorted(subject_chunk_sizes(subject, backend), reverse=True)
    dims_ = claimed_dims(claims, INDEX_DIMS)
    narrow = [d for d in ("bfloat16", "float16") if d in claims.dtypes]
    # The gates class needs 2-byte gates, and runs only where the audit is virtual (the cpu backend): at real
    # size its A alone is 2**31 x BT elements (256 GiB in bfloat16 at BT = 64), past any device's memory.
    classes = ("gates", "rows") if narrow and backend == "cpu" else ("rows",)
    takes = lambda ratio: claims.head_ratios is None or ratio in claims.head_ratios  # noqa: E731
    if draw(st.sampled_from(classes)) == "gates":
        BT = draw(st.sampled_from(chunk_sizes_))
        HV = draw(st.sampled_from([hv for hv in GATE_HEADS if takes(1) or takes(hv)] or GATE_HEADS))
        tokens = cdiv(INDEX_LIMIT, HV - 1) + draw(st.integers(0, 3 * BT))
        H = draw(st.sampled_from([h for h in (HV, 1) if takes(HV // h)] or [HV]))
        fixed = {"T": tokens} if claims.fixed else {"T": tokens, "cu_seqlens": (0, tokens)}
        dtype, use_g = draw(st.sampled_from(narrow)), own.gated and not claims.gateless  # g where it needs one
        return Case(H=H, HV=HV, K=dims_[0], V=dims_[0], BT=BT, dtype=dtype, use_g=use_g, backend=backend,
                    subject=subject, **fixed, **claimed_gate_dtypes(subject, dtype, use_g, {}))
    BT = draw(st.sampled_from([bt for bt in chunk_sizes_ if bt >= min(ROW_MIN_BT, chunk_sizes_[0])]))
    HV = draw(st.sampled_from(ROW_HEADS))
    tokens = cdiv(INDEX_LIMIT, HV * BT) + draw(st.integers(0, 3 * BT))
    K, V = draw(st.sampled_from(dims_)), draw(st.sampled_from(dims_))
    dtype, use_g = draw(st.sampled_from(claims.dtypes)), draw(gate(subject))
    layout: dict[str, Any] = {"T": tokens}
    shapes = ("one_row", "two_rows") * claims.fixed + ("varlen",) * claims.varlen
    shape = draw(st.sampled_from(shapes))
    if shape == "two_rows":
        layout = {"B": 2, "T": cdiv(tokens, 2)}
    elif shape == "varlen":
        cuts = sorted(draw(st.lists(st.integers(1, tokens - 1), min_size=1, max_size=3, unique=True)))
        layout = {"T": tokens, "cu_seqlens": (0, *cuts, tokens)}
    return Case(H=HV, HV=HV, K=K, V=V, BT=BT, dtype=dtype, use_g=use_g, backend=backend, subject=subject, **layout,
                **claimed_gate_dtypes(subject, dtype, use_g, {}))


# ----------------------------------------------------------------------------- features


def layout_features(case: Case) -> set[str]:
    """Names of the layout features a case exercises (what tests/test_strategies.py counts)."""
    BT = case.BT
    lengths = case.seq_lens
    out = {"varlen" if case.cu_seqlens is not None else "fixed"}
    out.add("one_sequence" if len(lengths) == 1 else "many_sequences")
    if 0 in lengths:
        out.add("empty_sequence")
    if case.T == 0:
        out.add("no_tokens")
    for n, name in ((1, "length_1"), (BT - 1, "length_BT-1"), (BT, "length_BT"), (BT + 1, "length_BT+1")):
        if n in lengths:
            out.add(name)
    nonempty = [n for n in lengths if n]
    if case.cu_seqlens is not None and len(nonempty) > 1 and all(n % BT == 0 for n in nonempty):
        out.add("multiples_of_BT")
    if len(lengths) >= 3 and max(lengths) > 2 * BT and sorted(lengths)[-2] <= BT // 2:
        out.add("long_among_short")
    if case.cu_seqlens is None and case.T % BT:
        out.add("T_not_multiple_of_BT")
    if case.cu_seqlens is None and case.B > 1:
        out.add("batch")
    if len(lengths) >= 100:
        out.add("hundreds_of_sequences")
    if len(case.chunk_bounds()) * case.HV > BLOCK_LIMIT:
        out.add("tasks_beyond_block_limit")
    if case.B * case.HV > BLOCK_LIMIT:
        out.add("batch_heads_beyond_block_limit")
    return out



def describe(case: Case) -> str:
    """One line naming a case's shape."""
    layout = f"cu_seqlens={list(case.cu_seqlens)}" if case.cu_seqlens is not None else f"B={case.B} T={case.T}"
    return (f"{layout} H={case.H} HV={case.HV} K={case.K} V={case.V} BT={case.BT} {case.dtype} "
            f"use_g={case.use_g} {case.dist} seed={case.seed} knobs={case.knobs}")


# ----------------------------------------------------------------------------- history cases

# Small calls (the interpreter's time is per chunk, head and tile): a few heads, narrow K and V.
HISTORY_SIZES = dataclasses.replace(CPU_SIZES, max_heads=2, max_value_heads=4, dims=(16, 24, 32, 17), max_dim=32,
                                    max_seqs=4)
# What a later call of a sequence changes of an earlier one, each kind once a sequence (history_cases).
HISTORY_CHANGES = ("BT", "dtype", "gate dtypes", "index_dtype", "use_g", "knobs", "heads", "dims", "cu_seqlens values",
                   "chunk_indices", "inputs")


def _other(values: tuple[Any, ...], current: Any) -> st.SearchStrategy[Any]:
    """Another value than ``current`` among ``values``; ValueError where there is none (a narrow claim)."""
    others = [v for v in values if v != current]
    if not others:
        raise ValueError(f"no other value than {current!r} among {values}")
    return st.sampled_from(others)


@st.composite
def changed(draw: st.DrawFn, case: Case, what: str) -> Case:
    """``case`` with ``what`` (one of HISTORY_CHANGES) changed to another value its subject claims: a memo then
    sees a key that differs in that part. ValueError where the case cannot take the change (Case's own checks,
    or a subject claiming one value only: one chunk size, one dtype, no gate)."""
    own = subjects.get(case.subject)
    claims = own.claims
    if what == "BT":
        return case.replace(BT=draw(_other(subject_chunk_sizes(case.subject), case.BT)), knobs={})
    if what == "dtype":
        dtype = draw(_other(claims.dtypes, case.dtype))
        return case.replace(dtype=dtype, **claimed_gate_dtypes(case.subject, dtype, case.use_g, {}))
    if what == "gate dtypes":
        if not claims.gate_dtypes:
            raise ValueError("the subject takes beta and g in k's dtype only")
        drawn = {"beta_dtype": draw(st.sampled_from(tuple(DTYPES))),
                 "g_dtype": draw(st.sampled_from(tuple(DTYPES))) if case.use_g else None}
        return case.replace(**claimed_gate_dtypes(case.subject, case.dtype, case.use_g, drawn))
    if what == "index_dtype":
        return case.replace(index_dtype=draw(_other(tuple(INDEX_DTYPES), case.index_dtype)))
    if what == "use_g":
        if not own.gated:
            raise ValueError("the subject takes no gate")
        use_g = not case.use_g
        return case.replace(use_g=use_g, memory={}, **claimed_gate_dtypes(case.subject, case.dtype, use_g,
                                                                           {"beta_dtype": case.beta_dtype}))
    if what == "knobs":
        return case.replace(knobs=draw(launch_knobs("cpu", case.BT, grouped=case.HV > case.H, subject=case.subject)))
    if what == "heads":
        claims = subjects.get(case.subject).claims
        H, HV = draw(heads(HISTORY_SIZES, claims=claims).filter(lambda h: h != (case.H, case.HV)))
        return case.replace(H=H, HV=HV, knobs={})
    if what == "dims":
        low, high = claims.dims
        ok = lambda d: low <= d <= high and (not claims.pow2_dims or d & (d - 1) == 0)  # noqa: E731
        return case.replace(K=draw(_other(tuple(d for d in (16, 24, 32, 48) if ok(d)) or (case.K,), case.K)),
                            V=draw(_other(tuple(d for d in (16, 17, 32, 40) if ok(d)) or (case.V,), case.V)))
    if what == "cu_seqlens values":  # the same entry count, so the call shares the tensor, changed in place
        cu = case.cu_seqlens
        assert cu is not None
        if len(cu) == 2:
            return case.replace(cu_seqlens=(0, cu[1] + draw(st.integers(1, 40))))
        # the first boundary moved, T kept; where it can, so that the chunks change (stale chunk indices of the
        # old values then give other results: with the same chunks they give the same ones)
        def chunks(cut: int) -> tuple[int, int]:
            return -(-cut // case.BT), -(-(cu[2] - cut) // case.BT)
        cuts = [c for c in range(cu[2] + 1) if chunks(c) != chunks(cu[1])] or \
            [c for c in range(cu[2] + 1) if c != cu[1]]
        return case.replace(cu_seqlens=(0, draw(st.sampled_from(cuts)), *cu[2:]))
    if what == "chunk_indices":
        if own.calling.chunk_indices != "optional":
            raise ValueError("the subject's chunk indices are not the caller's option")
        return case.replace(chunk_indices=not case.chunk_indices)
    return case.replace(seed=draw(st.integers(0, 2**32 - 1)), dist=draw(st.sampled_from(DISTRIBUTIONS)))


def history_changes(subject: str) -> tuple[str, ...]:
    """HISTORY_CHANGES a subject's claims leave room for (one chunk size: no other BT; no gate: no use_g ...)."""
    own = subjects.get(subject)
    cannot = {"BT": len(subject_chunk_sizes(subject)) < 2, "dtype": len(own.claims.dtypes) < 2,
              "gate dtypes": not own.claims.gate_dtypes, "use_g": not (own.gated and own.claims.gateless),
              "chunk_indices": own.calling.chunk_indices != "optional" or not own.claims.varlen,
              "cu_seqlens values": not own.claims.varlen}
    return tuple(what for what in HISTORY_CHANGES if not cannot.get(what))


@st.composite
def history_cases(draw: st.DrawFn, subject: str = subjects.DEFAULT) -> Case:
    """A history case on the cpu: 3 to 5 calls of ``subject``, the last the case and the others its ``before``.
    The first (three in four a packed batch with a sequence longer than 64 tokens, so chunk sizes give other
    chunk indices), then earlier calls each with another kind of thing changed (``changed``); varlen calls of
    one entry count share one cu_seqlens tensor when run (testing/history.py), so a cache sees other chunk
    sizes, dtypes, knobs and in-place changes of one object. Shrinks toward fewer, simpler calls."""
    first = draw(cases(HISTORY_SIZES, "cpu", varlen=claimed_varlen(subject, draw(st.sampled_from((True, True, True,
                                                                                                  False)))),
                       subject=subject))
    if first.cu_seqlens is not None:
        lengths = draw(st.lists(st.integers(0, 40), min_size=1, max_size=3))
        at = draw(st.integers(0, len(lengths)))
        lengths[at:at] = [draw(st.integers(65, 80))]
        first = first.replace(cu_seqlens=tuple(sum(lengths[:i]) for i in range(len(lengths) + 1)))
    calls = [first]
    # A sequence's changes are of distinct kinds, each kind as likely as the others (a permutation's prefix
    # would be: Hypothesis draws permutations near their identity order, and the last kinds came almost never).
    for what in draw(st.lists(st.sampled_from(history_changes(subject)), min_size=2, max_size=4, unique=True)):
        earlier = draw(st.sampled_from(calls))
        if what in ("cu_seqlens values", "chunk_indices") and earlier.cu_seqlens is None:
            what = "inputs"
        try:
            case = draw(changed(earlier, what))
        except ValueError:  # a change this case cannot take (Case's own checks)
            assume(False)
        assume(supported(case))
        calls.append(case)
    return calls[-1].replace(before=tuple(calls[:-1]))
