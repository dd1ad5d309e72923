"""The case: a small, serializable description of one kernel invocation.

A case names the subject (the implementation it runs, ``wy_ascend.subjects``), the layout
(fixed ``B x T`` or ``cu_seqlens``), the heads and dims, the
chunk size, the dtypes (k's, and beta's, g's and cu_seqlens' where they differ), the gate flag,
the input distribution and its seed, the launch knobs and the backend. ``build_inputs``
rebuilds the tensors deterministically from those fields alone, on the case's device (float64
from the counter-based generator of ``rng``, one stream per draw, then cast), so a case written
to ``regressions/`` reproduces its failure anywhere: on every device the same values up to the
float64 rounding of the transcendental functions and of ``build_A``'s triangular solve.
``arguments`` hands them to the ops as a caller may: optional ``chunk_indices`` passed, any
argument in another memory layout (``memory``: offset, strided, sliced or transposed-back views
of equal values).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from .. import subjects
from ..backends import BACKENDS, DEVICES, LaunchConfig
from ..layout import prepare_chunk_indices
from ..planning import plan
from ..reference import build_A
from ..specialization import Specialization, of_launch
from . import rng

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
INDEX_DTYPES = {"int64": torch.int64, "int32": torch.int32}

# Input distributions. "realistic" is what a trained model feeds the op; the others are
# adversarial but inside the contract.
DISTRIBUTIONS = (
    "realistic",  # L2-normalized keys, beta in (0, 1), chunk-local cumulative log2 gates, steps in (-inf, 0) (below -1 on ~2%)
    "beta_extremes",  # beta exactly 0 or 1
    "repeated_keys",  # every chunk reuses at most 2 distinct keys (rank-deficient k k^T, large |A|)
    "long_gates",  # gate steps down to -8 per token: exp2 spans up to hundreds of binary decades per chunk
    "zeros",  # k, v, beta and the incoming gradients zero on random tokens
)
# The generator stream of each draw (``rng``), by its index: append only, for a stored case's
# inputs depend on it.
STREAMS = ("k", "v", "beta", "gate", "dw", "du", "beta_bit", "key_pick", "long_gate", "zero_k", "zero_v", "zero_dw",
           "zero_du", "zero_beta")

# Launch knobs, then the kernel-variant knobs (backends.LaunchConfig says what each does).
LAUNCH_KNOBS = ("max_blocks", "num_cores", "ub_bytes", "mode", "tile_cap", "max_tasks", "dot_guard", "gate_head_major",
                "emulate", "group_dk", "lowp_dot", "dk_sum_kernel")
# Knobs the interpreter takes to run what a compiled backend does by its own rule (Ascend's semantics,
# cuda's bf16 dot operands, cuda's dk sum): a case moved to a compiled backend drops them (``Case.on``).
INTERPRETER_KNOBS = ("emulate", "lowp_dot", "dk_sum_kernel")


# The op arguments a case may lay out in memory otherwise than contiguously, with their ranks.
MEMORY_ARGS = {"k": 4, "v": 4, "beta": 3, "A": 4, "g": 3, "dw": 4, "du": 4, "cu_seqlens": 1, "chunk_indices": 2}
# Memory layouts of one argument (``Case.memory``), each a view with the argument's values:
#   "offset"        contiguous at a storage offset of one element
#   "strided:d"     every other element of dim d (the stride of d doubled)
#   "sliced:d"      a slice of dim d, one element in from both ends of a larger tensor
#   "transposed:d"  dims d and the last swapped in storage (a transposed tensor transposed back)
MEMORY_LAYOUTS = ("offset", "strided", "sliced", "transposed")


def _parse_layout(name: str, layout: str) -> tuple[str, int]:
    """(kind, dim) of a memory layout of argument ``name``; ValueError naming both if invalid."""
    kind, _, dim = layout.partition(":")
    ndim = MEMORY_ARGS.get(name)
    if ndim is None:
        raise ValueError(f"memory layouts are for the arguments {sorted(MEMORY_ARGS)}, got {name!r}")
    if kind == "offset" and not dim:
        return kind, 0
    last = ndim - 1 if kind == "transposed" else ndim
    if kind not in MEMORY_LAYOUTS[1:] or not dim.isdigit() or int(dim) >= last:
        raise ValueError(f"memory layout of {name} must be 'offset' or one of {MEMORY_LAYOUTS[1:]} ':d' with "
                         f"d < {last}, got {layout!r}")
    return kind, int(dim)


def lay_out(x: torch.Tensor, layout: str, name: str) -> torch.Tensor:
    """A view with ``x``'s shape and values in memory layout ``layout`` (MEMORY_LAYOUTS). The
    storage around it holds NaN (integers: 0, an index in range) so a read past the view shows."""
    kind, d = _parse_layout(name, layout)
    fill = float("nan") if x.is_floating_point() else 0
    if kind == "transposed":
        return x.transpose(d, -1).contiguous().transpose(d, -1)
    if kind == "offset":
        return torch.full((x.numel() + 1,), fill, dtype=x.dtype, device=x.device)[1:].view(x.shape).copy_(x)
    grown = list(x.shape)
    grown[d] = 2 * grown[d] if kind == "strided" else grown[d] + 2
    base = torch.full(grown, fill, dtype=x.dtype, device=x.device)
    view = base[(slice(None),) * d + (slice(None, None, 2),)] if kind == "strided" else base.narrow(d, 1, x.shape[d])
    return view.copy_(x)


# Case fields added after regression files were first stored, with their defaults: ``to_dict``
# leaves them out at the default, so a case that does not use them keeps the stored form and the
# file name (store.case_hash) it had before they existed.
LATER_FIELDS: dict[str, Any] = {"corrupt_at": 0, "chunk_indices": False, "memory": {}, "device": None,
                                 "beta_dtype": None, "g_dtype": None, "index_dtype": "int64", "offset": 0,
                                 "subject": "wy_ascend", "before": ()}


class Inputs(NamedTuple):
    """The tensors of one case, on its device, in its dtype."""

    k: torch.Tensor
    v: torch.Tensor
    beta: torch.Tensor
    A: torch.Tensor
    g: torch.Tensor | None
    dw: torch.Tensor
    du: torch.Tensor
    cu_seqlens: torch.Tensor | None


@dataclass(frozen=True)
class Case:
    """One kernel invocation. With ``cu_seqlens`` the batch is packed (B == 1, T = last entry)."""

    B: int = 1
    T: int = 16
    H: int = 1
    HV: int = 1
    K: int = 16
    V: int = 16
    BT: int = 16
    cu_seqlens: tuple[int, ...] | None = None
    dtype: str = "float32"
    use_g: bool = False
    dist: str = "realistic"
    seed: int = 0
    knobs: dict[str, Any] = field(default_factory=dict)
    backend: str | None = None
    # bad_input only: the name of the corruption applied to valid inputs (properties.CORRUPTIONS).
    corruption: str | None = None
    # bad_input only: where the corruption lands (each corruption takes it modulo its positions).
    corrupt_at: int = 0
    # The caller passes the precomputed chunk_indices of cu_seqlens (varlen only).
    chunk_indices: bool = False
    # Memory layout of op arguments (MEMORY_ARGS name -> MEMORY_LAYOUTS entry); absent: contiguous.
    memory: dict[str, str] = field(default_factory=dict)
    # plan_coverage only: the device (backends.DEVICES) whose spec is planned; None: the backend's, on CPU_INTERPRETER_CORES.
    device: str | None = None
    # beta's and g's dtypes where they differ from k's (None: k's). The ops take any float dtype for
    # each and return dbeta and dg in it; flash-linear-attention calls with g in float32 and k, beta in
    # bfloat16.
    beta_dtype: str | None = None
    g_dtype: str | None = None
    # cu_seqlens' dtype (and that of the chunk_indices passed with them): INDEX_DTYPES.
    index_dtype: str = "int64"
    # Tokens of every input stream before the case's first: its B x T tokens are tokens offset ..
    # offset + B*T - 1 of the streams' flat token axis, so one chunk of a large case is a case of its
    # own size (``block_case``), with the same inputs.
    offset: int = 0
    # The implementation of the ops the case runs (wy_ascend.subjects: "wy_ascend", "fla-ascend", "fla").
    subject: str = "wy_ascend"
    # history only: the calls made before this one in the same process (testing/history.py), each a case of
    # the same backend and subject with no earlier calls of its own.
    before: tuple[Case, ...] = ()

    def __post_init__(self) -> None:
        if self.cu_seqlens is not None:
            object.__setattr__(self, "cu_seqlens", tuple(int(x) for x in self.cu_seqlens))
            if not self.cu_seqlens:
                raise ValueError("cu_seqlens must hold the offsets 0, ..., T of a packed batch, got none")
            object.__setattr__(self, "B", 1)
            object.__setattr__(self, "T", self.cu_seqlens[-1])
        for name in ("dtype", "beta_dtype", "g_dtype"):
            value = getattr(self, name)
            if value not in DTYPES and (name == "dtype" or value is not None):
                raise ValueError(f"{name} must be one of {sorted(DTYPES)}{'' if name == 'dtype' else ' or None'}, "
                                 f"got {value!r}")
        if not isinstance(self.offset, int) or isinstance(self.offset, bool) or self.offset < 0:
            raise ValueError(f"offset must be an int >= 0 (tokens before the case's first), got {self.offset!r}")
        if self.index_dtype not in INDEX_DTYPES:
            raise ValueError(f"index_dtype must be one of {sorted(INDEX_DTYPES)}, got {self.index_dtype!r}")
        if self.dist not in DISTRIBUTIONS:
            raise ValueError(f"dist must be one of {DISTRIBUTIONS}, got {self.dist!r}")
        unknown = set(self.knobs) - set(LAUNCH_KNOBS)
        if unknown:
            raise ValueError(f"knobs must be among {LAUNCH_KNOBS}, got {sorted(unknown)}")
        if self.chunk_indices and self.cu_seqlens is None:
            raise ValueError("chunk_indices=True needs cu_seqlens (chunk_indices describe a varlen batch)")
        for name, layout in self.memory.items():
            _parse_layout(name, layout)
        absent = {"g": not self.use_g, "cu_seqlens": self.cu_seqlens is None, "chunk_indices": not self.chunk_indices}
        if any(absent.get(name) for name in self.memory):
            raise ValueError(f"memory lays out an argument the case does not pass: {sorted(self.memory)}")
        if self.subject is None:
            raise ValueError(f"subject must be one of {sorted(subjects.available())}, got None")
        subjects.get(self.subject)  # ValueError naming the subjects there are
        if self.device is not None and self.device not in DEVICES:
            raise ValueError(f"device must be one of {sorted(DEVICES)} or None, got {self.device!r}")
        object.__setattr__(self, "before", tuple(self.before))
        for call in self.before:
            if not isinstance(call, Case) or call.before or (call.backend, call.subject) != (self.backend, self.subject):
                raise ValueError("before must hold cases of the case's backend and subject with no earlier calls of "
                                 f"their own, got {call!r}")

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def dtype_of(self, name: str) -> torch.dtype:
        """The dtype of op argument ``name``: beta's, g's (and so dbeta's, dg's), cu_seqlens' and
        chunk_indices' are the case's own where it sets them, every other one is k's."""
        if name in ("beta", "dbeta", "g", "dg"):
            return DTYPES[getattr(self, f"{name.lstrip('d')}_dtype") or self.dtype]
        if name in ("cu_seqlens", "chunk_indices"):
            return INDEX_DTYPES[self.index_dtype]
        return self.torch_dtype

    @property
    def seq_lens(self) -> list[int]:
        if self.cu_seqlens is None:
            return [self.T] * self.B
        return [b - a for a, b in zip(self.cu_seqlens[:-1], self.cu_seqlens[1:])]

    def config(self, **extra: Any) -> LaunchConfig:
        """The case's launch knobs, with NaN-poisoned outputs (an unwritten element cannot pass)
        unless ``extra`` says otherwise."""
        return LaunchConfig(**{"poison_outputs": True, **self.knobs, **extra})

    def specializations(self) -> dict[str, Specialization]:
        """The compiled kernel each op of this case launches ({"fwd": ..., "bwd": ...}), by the
        rules ops.py launches with (specialization.of_launch; the plan's tiles need no device).
        Raises planning.UnsupportedProblemError where the case is not plannable."""
        backend = BACKENDS[self.backend or "cpu"]
        config = self.config(num_cores=1)
        spec = backend.spec(torch.device("cpu"), config)
        varlen = self.cu_seqlens is not None
        group_dk = backend.groups_dk(config, self.H, self.HV, len(self.chunk_bounds()) * self.H)
        return {kernel: of_launch(backend, config, plan(kernel, NT=1, BH=1, BT=self.BT, K=self.K, V=self.V, spec=spec),
                                  BT=self.BT, K=self.K, V=self.V, H=self.H, HV=self.HV, dtype=self.torch_dtype,
                                  gate_dtype=self.dtype_of("beta"), g_dtype=self.dtype_of("g") if self.use_g else None,
                                  index_dtype=self.dtype_of("cu_seqlens") if varlen else None,
                                  use_g=self.use_g, varlen=varlen, group_dk=group_dk)
                for kernel in ("fwd", "bwd")}

    def replace(self, **changes: Any) -> Case:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON data; those in LATER_FIELDS only where they differ from their default."""
        d = dataclasses.asdict(self)
        d["cu_seqlens"] = list(self.cu_seqlens) if self.cu_seqlens is not None else None
        d["before"] = [call.to_dict() for call in self.before] or ()
        for name, default in LATER_FIELDS.items():
            if d[name] == default:
                del d[name]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Case:
        """Inverse of ``to_dict``; unknown or mistyped fields raise ValueError/TypeError."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown case fields {sorted(unknown)}; known: {sorted(names)}")
        for name in ("B", "T", "H", "HV", "K", "V", "BT", "seed", "corrupt_at", "offset"):
            if name in d and (not isinstance(d[name], int) or isinstance(d[name], bool)):
                raise TypeError(f"case field {name!r} must be an int, got {d[name]!r}")
        if "knobs" in d and not isinstance(d["knobs"], dict):
            raise TypeError(f"case field 'knobs' must be an object, got {d['knobs']!r}")
        if not isinstance(d.get("subject", ""), str):
            raise TypeError(f"case field 'subject' must be a subject's name, got {d['subject']!r}")
        for name in ("dtype", "index_dtype", "beta_dtype", "g_dtype"):
            nullable = name in ("beta_dtype", "g_dtype")
            if name in d and not (isinstance(d[name], str) or (nullable and d[name] is None)):
                raise TypeError(f"case field {name!r} must be a dtype name{' or null' if nullable else ''}, got {d[name]!r}")
        memory = d.get("memory", {})
        if not (isinstance(memory, dict) and all(isinstance(v, str) for v in memory.values())):
            raise TypeError(f"case field 'memory' must be an object of strings, got {memory!r}")
        if not isinstance(d.get("chunk_indices", False), bool):
            raise TypeError(f"case field 'chunk_indices' must be a bool, got {d['chunk_indices']!r}")
        cu = d.get("cu_seqlens")
        if cu is not None and not (isinstance(cu, list) and all(isinstance(x, int) for x in cu)):
            raise TypeError(f"case field 'cu_seqlens' must be a list of ints or null, got {cu!r}")
        before = d.get("before", [])
        if "before" in d and not (isinstance(before, list) and before and all(isinstance(x, dict) for x in before)):
            raise TypeError(f"case field 'before' must be a non-empty list of cases, got {before!r}")
        return cls(**{**d, "cu_seqlens": tuple(cu) if cu is not None else None,
                      "before": tuple(cls.from_dict(x) for x in before)})

    def arguments(self, inputs: Inputs) -> dict[str, torch.Tensor | None]:
        """The ops' tensor arguments for ``inputs`` (Inputs' names, plus ``chunk_indices`` when the
        case passes them, computed from inputs.cu_seqlens), each in the case's memory layout."""
        args: dict[str, torch.Tensor | None] = dict(inputs._asdict())
        if self.chunk_indices and inputs.cu_seqlens is not None:
            args["chunk_indices"] = prepare_chunk_indices(inputs.cu_seqlens, inputs.A.shape[-1]).to(inputs.cu_seqlens.dtype)
        return {n: lay_out(x, self.memory[n], n) if x is not None and n in self.memory else x for n, x in args.items()}

    def chunk_bounds(self) -> list[tuple[int, int, int]]:
        """(batch, first token, end token) of every chunk, in the flattened [B*T] token axis."""
        out: list[tuple[int, int, int]] = []
        starts = [(b, b * self.T, self.T) for b in range(self.B)] if self.cu_seqlens is None else [
            (0, a, b - a) for a, b in zip(self.cu_seqlens[:-1], self.cu_seqlens[1:])
        ]
        for b, bos, n in starts:
            out.extend((b, s, min(s + self.BT, bos + n)) for s in range(bos, bos + n, self.BT))
        return out

    def on(self, backend: str) -> Case:
        """The case on ``backend`` (a replay's, not the one it was found on): without INTERPRETER_KNOBS
        where ``backend`` compiles its kernels, which refuse them and do by their own rule what they ask."""
        knobs = self.knobs if BACKENDS[backend].interpret else {
            k: v for k, v in self.knobs.items() if k not in INTERPRETER_KNOBS}
        return self.replace(backend=backend, knobs=knobs, before=tuple(call.on(backend) for call in self.before))

    def brief(self) -> str:
        """The fields that differ from a default Case's, ``name=value`` (a message's short form of a call)."""
        default = Case()
        return ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self)
                         if f.name != "before" and getattr(self, f.name) != getattr(default, f.name))

    def of(self, subject: str) -> Case:
        """The case, its earlier calls too, run by ``subject`` (a replay's ``--subject``)."""
        return self.replace(subject=subject, before=tuple(call.of(subject) for call in self.before))

    def block(self, start: int, end: int) -> Case:
        """The chunk of tokens ``start .. end - 1`` of the flat [B*T] token axis (one of ``chunk_bounds``)
        as a case of its own size with the same inputs (``offset``): what a failure confined to one
        block shrinks to. Hypothesis cannot get there alone: a shorter T cuts the inputs at the end of
        the streams, so a failing chunk deep in a large case is out of its reach."""
        if not any((start, end) == (t0, t1) for _, t0, t1 in self.chunk_bounds()):
            raise ValueError(f"tokens {start}:{end} are not a chunk of the case (chunk_bounds)")
        n = end - start
        return self.replace(B=1, T=n, cu_seqlens=(0, n) if self.cu_seqlens is not None else None,
                            offset=self.offset + start)

    def token_chunks(self, cu: torch.Tensor) -> tuple[int, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The number of chunks (from the fields: no device read) and, on ``cu``'s device, per token
        of the flattened [B*T] axis, its chunk, its row in that chunk and the chunk's length
        (``chunk_bounds``); ``cu`` holds the sequence bounds (cu_seqlens, or the B rows of T tokens)."""
        t = torch.arange(self.B * self.T, device=cu.device)
        seq = torch.searchsorted(cu, t, right=True) - 1  # an empty sequence repeats a bound: the last one wins
        row = (t - cu[seq]) % self.BT
        length = torch.clamp(cu[seq + 1] - (t - row), max=self.BT)
        return len(self.chunk_bounds()), torch.cumsum(row == 0, 0) - 1, row, length

    def build_inputs(self, device: torch.device | str = "cpu") -> Inputs:
        """The case's tensors on ``device``, deterministic in the case's fields: drawn in float64
        on ``float64_device(device)`` (the GPU itself; the host for an NPU) from ``rng``."""
        dev = torch.device(device)
        work = float64_device(dev)
        B, T, H, HV, K, V = self.B, self.T, self.H, self.HV, self.K, self.V
        f64 = torch.float64
        host_cu = torch.tensor(self.cu_seqlens, dtype=torch.int64) if self.cu_seqlens is not None else None
        cu = torch.arange(B + 1, device=work) * T if host_cu is None else host_cu.to(work)

        def draw(kind: Callable[[int, rng.Draws, torch.device, list[int]], list[torch.Tensor]],
                 **shapes: tuple[int, ...]) -> list[torch.Tensor]:
            """Tensors of the streams named (STREAMS), drawn in one pass, from token ``offset`` on."""
            return kind(self.seed, [(STREAMS.index(name), shape) for name, shape in shapes.items()], work,
                        [self.offset * (math.prod(shape) // (B * T)) if B * T else 0 for shape in shapes.values()])

        k, v, beta, gate, dw, du = draw(rng.normal, k=(B, T, H, K), v=(B, T, HV, V), beta=(B, T, HV),
                                        gate=(B, T, HV), dw=(B, T, HV, K), du=(B, T, HV, V))
        beta = torch.sigmoid(beta)
        steps = torch.log2(torch.sigmoid(gate + 2.0))  # log2 of a forget gate, in (-inf, 0)
        n_chunks, chunk, row, length = self.token_chunks(cu)
        if self.dist == "beta_extremes":
            beta = (draw(rng.uniform, beta_bit=(B, T, HV))[0] < 0.5).to(f64)
        elif self.dist == "repeated_keys":
            # Each token takes the key of its chunk's first or second token (one random bit per token).
            pick = (draw(rng.uniform, key_pick=(B * T,))[0] < 0.5).long()
            src = torch.arange(B * T, device=work) - row + torch.minimum(pick, length - 1)
            k = k.view(B * T, H, K)[src].view(B, T, H, K)
        elif self.dist == "long_gates":
            steps = -8.0 * draw(rng.uniform, long_gate=(B, T, HV))[0]
        elif self.dist == "zeros":  # k, v, dw, du zeroed per token, beta per token and head
            *tokens, heads = draw(rng.uniform, zero_k=(B, T), zero_v=(B, T), zero_dw=(B, T), zero_du=(B, T),
                                  zero_beta=(B, T, HV))
            for x, u in zip((k, v, dw, du), tokens):
                x.masked_fill_((u < 0.3).view(B, T, *[1] * (x.ndim - 2)), 0.0)
            beta.masked_fill_(heads < 0.3, 0.0)
        k = torch.nn.functional.normalize(k, dim=-1) if self.dist != "zeros" else k / math.sqrt(K)
        g = None
        if self.use_g:
            # Chunk-local cumulative sums, all chunks at once: tokens scattered into a zero-padded
            # [chunks, BT, HV] tensor (padding after each chunk's tokens), summed along BT.
            padded = steps.new_zeros(n_chunks, self.BT, HV)
            padded[chunk, row] = steps.view(B * T, HV)
            g = torch.cumsum(padded, 1)[chunk, row].view(B, T, HV)
        dt = self.torch_dtype
        # A is built from the inputs as the op will see them (rounded to dt), so it is the
        # exact M^-1 of those inputs up to A's own rounding (cu_seqlens given on the host, where
        # build_A's layout reads them: no device read).
        beta_dt, g_dt = self.dtype_of("beta"), self.dtype_of("g")
        rk, rb = k.to(dt).to(f64), beta.to(beta_dt).to(f64)
        rg = g.to(g_dt).to(f64) if g is not None else None
        A = build_A(rk, rb, rg, host_cu, chunk_size=self.BT, dtype=f64)
        # A's columns past a partial chunk's end meet no token: NaN there, so an op that reads them shows
        # (zero for a subject that claims to need them so: subjects.Claims.zero_dead_A).
        dead = torch.arange(self.BT, device=work)[None, :] >= length[:, None]
        fill = 0.0 if subjects.get(self.subject).claims.zero_dead_A else float("nan")
        A.view(B * T, HV, self.BT).masked_fill_(dead[:, None, :].to(A.device), fill)
        k, v, A, dw, du = (x.to(dtype=dt, device=dev) for x in (k, v, A, dw, du))
        return Inputs(k, v, beta.to(dtype=beta_dt, device=dev), A, g.to(dtype=g_dt, device=dev) if g is not None else None,
                      dw, du, cu.to(dtype=self.dtype_of("cu_seqlens"), device=dev) if host_cu is not None else None)


def float64_device(device: torch.device) -> torch.device:
    """Where float64 math on tensors of ``device`` runs: a CUDA device itself (IEEE float64
    there too, no host round trip), else the host (Ascend NPUs lack float64 for most operators)."""
    return device if device.type == "cuda" else torch.device("cpu")
