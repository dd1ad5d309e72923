"""Public ops: validate, describe the problem, pick the backend, plan, launch, return.

Argument names, layouts and return conventions follow the seed and flash-linear-attention
(``fla.ops.gated_delta_rule.wy_fast``), so a caller can switch by changing an import.
"""

from __future__ import annotations

import contextlib
import os
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import torch

from .backends import (
    AUTOTUNE_ENV,
    BACKEND_ENV,
    FP32_DOT_ENV,
    FP32_WARPS_ENV,
    LOWP_ENV,
    NARROW_TILES_ENV,
    RUNTIME_DIMS_ENV,
    Backend,
    LaunchConfig,
    current_config,
    dk_sum_kernel,
    kernel_for,
    launch_warps,
    ptxas_deadline,
    resolve_backend,
)
from .interpreter import EMULATION_ENV
from .planning import LaunchPlan, batch_heads, next_power_of_2, plan
from .specialization import Specialization, cdiv, of_launch
from .validation import Problem, validate


def _new(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, poison: bool) -> torch.Tensor:
    if poison:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.empty(shape, dtype=dtype, device=device)


def _gate_layout(x: torch.Tensor | None, head_major: bool) -> torch.Tensor | None:
    """[B,T,HV] -> [B,HV,T] contiguous when the backend wants head-major beta/g."""
    if x is None:
        return None
    return x.transpose(1, 2).contiguous() if head_major else x.contiguous()


def _aligned(x: torch.Tensor | None) -> torch.Tensor | None:
    """``x``, or a copy of it where its data does not start on a 16-byte boundary: Triton
    specializes pointer arguments on that alignment, so an offset view (``x[1:]`` is contiguous)
    would compile a second kernel, without vector loads."""
    return x.clone() if x is not None and x.data_ptr() % 16 else x


def _from_gate_layout(x: torch.Tensor, head_major: bool) -> torch.Tensor:
    return x.transpose(1, 2).contiguous() if head_major else x


# Rows of the dk sum per program (kernels.wy_dk_group_sum_kernel): on the H200, 16 to 64 rows timed within
# 2% on four grouped shapes, 128 up to 12% slower (docs/ledger.md session 12).
DK_SUM_ROWS = 32


class _Call:
    """What every call of one op with one problem shape, dtypes, backend and config shares:
    the plan, the kernel, its specialization and the launch arguments that are not tensors.
    Built once per such call signature (``_call``): rebuilding it cost more host time per call
    than the small problems' kernels take on an H200 (docs/ledger.md session 8)."""

    def __init__(self, kernel: str, problem: Problem, backend_name: str | None, config: LaunchConfig,
                 index_dtype: torch.dtype | None, gate_dtype: torch.dtype, g_dtype: torch.dtype | None) -> None:
        self.problem = problem
        self.backend: Backend = resolve_backend(backend_name, problem.device)
        self.config = config
        spec = self.backend.spec(problem.device, self.config)
        self.group_dk = kernel == "bwd" and self.backend.groups_dk(self.config, problem.H, problem.HV,
                                                                   problem.NT * problem.B * problem.H)
        BH = batch_heads(kernel, problem.B, problem.H, problem.HV, self.group_dk)
        self.plan: LaunchPlan = plan(kernel, NT=problem.NT, BH=BH, BT=problem.BT, K=problem.K, V=problem.V, spec=spec)
        # The compiled kernel this call launches (every launch of the plan shares it); its flags
        # are the launch's: head-major beta/g only with several value heads, and so on.
        self.specialization: Specialization = of_launch(
            self.backend, self.config, self.plan, BT=problem.BT, K=problem.K, V=problem.V, H=problem.H, HV=problem.HV,
            dtype=problem.dtype, gate_dtype=gate_dtype, g_dtype=g_dtype, index_dtype=index_dtype,
            use_g=problem.use_g, varlen=problem.varlen, group_dk=self.group_dk)
        sp = self.specialization
        self.kernel = kernel_for(self.backend, kernel, launch_warps(kernel, problem.BT, sp.BK, sp.BV, sp.LOWP_DOT))
        sums = self.backend.sums_dk_in_kernel(self.config) and kernel == "bwd" and problem.HV != problem.H and not self.group_dk
        self.dk_sum = dk_sum_kernel(self.backend) if sums else None
        self.emulate = self.backend.variant(self.config)[2]
        self.head_major = self.specialization.GATE_HEAD_MAJOR
        p = problem
        self.scalars = dict(T=p.T, H=p.H, HV=p.HV, K=p.K, V=p.V, BT=p.BT, BK=self.plan.BK, BV=self.plan.BV,
                            NK=sp.NK, NV=sp.NV, K_CONST=sp.K_CONST, V_CONST=sp.V_CONST, USE_G=p.use_g,
                            IS_VARLEN=p.varlen, GATE_HEAD_MAJOR=self.head_major, LOWP_DOT=sp.LOWP_DOT,
                            DOT_GUARD=sp.DOT_GUARD, PERSISTENT=sp.PERSISTENT)
        if kernel == "bwd":
            self.scalars["GROUP_DK"] = sp.GROUP_DK
        self.per_launch = [dict(t_offset=launch.t_offset, bh_offset=launch.bh_offset, bh_count=launch.bh_count,
                                num_tasks=launch.tasks, num_programs=launch.grid[0]) for launch in self.plan.launches]
        # On the cuda backend (upstream Triton) a call after the first launches the kernel the first
        # one compiled (and autotuned) directly, without Triton's argument binding: the same compiled
        # kernel and arguments, which the specialization key of this call fixes (``_call``). Only cuda
        # ran it on a device (session 8); npu-cuda and npu keep Triton's own launch path.
        self.direct = self.backend.name == "cuda"
        self.compiled: list[object | None] = [None] * len(self.plan.launches)
        self.arg_names: list[str] = _arg_names(self.kernel) if self.direct else []

    def new(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return _new(shape, dtype, self.problem.device, bool(self.config.poison_outputs))

    def sum_value_heads(self, dk_heads: torch.Tensor) -> torch.Tensor:
        """The per-value-head fp32 dk [B,T,HV,K] summed over each key head's value heads, rounded once
        into k's dtype: one launch of the sum kernel where the backend takes it, else torch's sum and cast."""
        p = self.problem
        G = p.HV // p.H
        if self.dk_sum is None:
            return dk_heads.view(p.B, p.T, p.H, G, p.K).sum(3).to(p.dtype)
        dk = self.new((p.B, p.T, p.H, p.K), p.dtype)
        rows = p.B * p.T * p.H
        grid = (cdiv(rows, DK_SUM_ROWS),)
        self.dk_sum[grid](dk_heads, dk, rows, G, p.K, next_power_of_2(p.K), DK_SUM_ROWS)  # type: ignore[index]
        return dk

    def launch(self, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, g: torch.Tensor | None, A: torch.Tensor,
               cu_seqlens: torch.Tensor | None, chunk_indices: torch.Tensor | None,
               **tensors: torch.Tensor | None) -> None:
        """Run every launch of the plan on the op's inputs (made contiguous and 16-byte aligned,
        beta/g in the backend's layout) and ``tensors``; offsets and sizes are runtime arguments."""
        p = self.problem
        inputs = dict(k=k.contiguous(), v=v.contiguous(), beta=_gate_layout(beta, self.head_major),
                      g=_gate_layout(g, self.head_major), A=A.contiguous(), **tensors,
                      cu_seqlens=cu_seqlens.contiguous() if cu_seqlens is not None else None,
                      chunk_indices=chunk_indices if p.varlen else None)
        args = {name: _aligned(x) for name, x in inputs.items()}
        with self._semantics():
            for i, launch in enumerate(self.plan.launches):
                kwargs = {**args, **self.scalars, **self.per_launch[i]}
                for observer in _OBSERVERS:
                    observer(self, launch.grid, kwargs)
                compiled = self.compiled[i]
                if compiled is not None:
                    grid = (*launch.grid, 1, 1)[:3]
                    compiled[grid](*(kwargs[name] for name in self.arg_names))  # type: ignore[index]
                    continue
                with ptxas_deadline(self.kernel) if self.direct else contextlib.nullcontext():
                    ran = self.kernel[launch.grid](**kwargs)  # type: ignore[index]
                if self.direct:
                    self.compiled[i] = ran

    def _semantics(self) -> contextlib.AbstractContextManager[None]:
        """The interpreter's Ascend emulation around the launches (cpu backend), else nothing."""
        if not self.backend.interpret:
            return contextlib.nullcontext()
        from .interpreter import ascend_semantics

        return ascend_semantics(self.emulate)


# Called with each launch's _Call, grid and kernel arguments right before it runs: the fuzz properties
# check through one (``observed``) that every launch is the one the call's case and knobs ask for.
Observer = Callable[[_Call, tuple[int, ...], dict[str, Any]], None]
_OBSERVERS: list[Observer] = []


@contextlib.contextmanager
def observed(observer: Observer) -> Iterator[None]:
    """Call ``observer`` on every launch made inside the ``with`` block."""
    _OBSERVERS.append(observer)
    try:
        yield
    finally:
        _OBSERVERS.remove(observer)


def _arg_names(kernel: object) -> list[str]:
    """The entry kernel's parameters in order (the autotuner wraps the jit function as ``fn``)."""
    return getattr(kernel, "fn", kernel).arg_names  # type: ignore[attr-defined]


# Environment variables a _Call's construction reads (backend choice, dot operands, runtime dims,
# Ascend emulation, fp32-dot warps, shared narrow tiles, the cuda autotuner's configs): part of its memo
# key, so changing one takes effect at the next call.
_CALL_ENV = (BACKEND_ENV, LOWP_ENV, RUNTIME_DIMS_ENV, EMULATION_ENV, FP32_DOT_ENV, FP32_WARPS_ENV, NARROW_TILES_ENV,
             AUTOTUNE_ENV)
_CALLS: OrderedDict[tuple, _Call] = OrderedDict()
_CALLS_SIZE = 64


def _call(kernel: str, problem: Problem, backend_name: str | None, config: LaunchConfig | None,
          beta: torch.Tensor, g: torch.Tensor | None, cu_seqlens: torch.Tensor | None) -> _Call:
    """The memoized _Call of this call signature: op, problem (sizes, flags, dtype, device), the
    dtypes of beta, g and cu_seqlens, backend name, launch config (context and call merged) and
    the environment variables it reads. The last ``_CALLS_SIZE`` signatures used are kept."""
    merged = current_config(config)
    index_dtype = cu_seqlens.dtype if cu_seqlens is not None else None
    key = (kernel, problem, backend_name, merged, beta.dtype, g.dtype if g is not None else None, index_dtype,
           tuple(os.environ.get(name) for name in _CALL_ENV))
    call = _CALLS.get(key)
    if call is not None:
        _CALLS.move_to_end(key)  # least recently used first out
    else:
        call = _Call(kernel, problem, backend_name, merged, index_dtype, beta.dtype, g.dtype if g is not None else None)
        _CALLS[key] = call
        if len(_CALLS) > _CALLS_SIZE:
            _CALLS.popitem(last=False)
    return call


def recompute_w_u_fwd(
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    A: torch.Tensor,
    g: torch.Tensor | None = None,
    cu_seqlens: torch.Tensor | None = None,
    chunk_indices: torch.Tensor | None = None,
    *,
    backend: str | None = None,
    config: LaunchConfig | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """w = A @ (k * beta * exp2(g)) and u = A @ (v * beta) per chunk and value head.

    k [B,T,H,K], v [B,T,HV,V], beta/g [B,T,HV], A [B,T,HV,BT] -> w [B,T,HV,K], u [B,T,HV,V]
    in k's dtype. ``cu_seqlens`` packs sequences into B == 1; ``chunk_indices`` may be
    passed precomputed (it is checked against ``cu_seqlens``).
    """
    p = validate(k, v, beta, A, g, cu_seqlens, chunk_indices)
    call = _call("fwd", p, backend, config, beta, g, cu_seqlens)
    w = call.new((p.B, p.T, p.HV, p.K), p.dtype)
    u = call.new((p.B, p.T, p.HV, p.V), p.dtype)
    call.launch(k, v, beta, g, A, cu_seqlens, p.chunk_indices, w=w, u=u)
    return w, u


def prepare_wy_repr_bwd(
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    A: torch.Tensor,
    dw: torch.Tensor,
    du: torch.Tensor,
    g: torch.Tensor | None = None,
    cu_seqlens: torch.Tensor | None = None,
    chunk_indices: torch.Tensor | None = None,
    *,
    backend: str | None = None,
    config: LaunchConfig | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Gradients (dk, dv, dbeta, dg) of the forward with A = M^-1 a function of (k, beta, g).

    dk [B,T,H,K] is summed over the value heads of each key head; dg is None without g
    and omits the ln 2 of d exp2(x)/dx (the seed's and fla's convention).
    """
    p = validate(k, v, beta, A, g, cu_seqlens, chunk_indices, dw=dw, du=du)
    call = _call("bwd", p, backend, config, beta, g, cu_seqlens)
    grouped = p.HV != p.H
    if call.group_dk:  # the kernel sums each key head's dk (fp32 partial sums in dk_acc)
        dk_out, dk_acc = call.new((p.B, p.T, p.H, p.K), p.dtype), call.new((p.B, p.T, p.H, p.K), torch.float32)
    else:  # with grouped heads each value head writes its own dk slice in fp32, summed below
        dk_out, dk_acc = call.new((p.B, p.T, p.HV, p.K), torch.float32 if grouped else p.dtype), None
    dv = call.new((p.B, p.T, p.HV, p.V), p.dtype)
    gate_shape = (p.B, p.HV, p.T) if call.head_major else (p.B, p.T, p.HV)
    dbeta = call.new(gate_shape, beta.dtype)
    dg = call.new(gate_shape, g.dtype) if g is not None else None
    call.launch(k, v, beta, g, A, cu_seqlens, p.chunk_indices, dw=dw.contiguous(), du=du.contiguous(), dk=dk_out,
                dk_acc=dk_acc, dv=dv, dbeta=dbeta, dg=dg)
    dk = call.sum_value_heads(dk_out) if grouped and not call.group_dk else dk_out
    dbeta = _from_gate_layout(dbeta, call.head_major)
    if dg is not None:
        dg = _from_gate_layout(dg, call.head_major)
    return dk, dv, dbeta, dg
