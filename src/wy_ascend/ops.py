"""Public ops: validate, describe the problem, pick the backend, plan, launch, return.

Argument names, layouts and return conventions follow the seed and flash-linear-attention
(``fla.ops.gated_delta_rule.wy_fast``), so a caller can switch by changing an import.
"""

from __future__ import annotations

import contextlib

import torch

from .backends import Backend, LaunchConfig, current_config, kernel_for, resolve_backend
from .planning import LaunchPlan, plan
from .specialization import Specialization, of_launch
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


class _Call:
    """What every launch of one op call shares: problem, backend, plan, common kwargs."""

    def __init__(self, kernel: str, problem: Problem, backend_name: str | None, config: LaunchConfig | None,
                 cu_seqlens: torch.Tensor | None, gate_dtype: torch.dtype) -> None:
        self.problem = problem
        self.backend: Backend = resolve_backend(backend_name, problem.device)
        self.config = current_config(config)
        spec = self.backend.spec(problem.device, self.config)
        self.plan: LaunchPlan = plan(kernel, NT=problem.NT, BH=problem.BH, BT=problem.BT, K=problem.K,
                                     V=problem.V, spec=spec)
        self.kernel = kernel_for(self.backend, kernel)
        # The compiled kernel this call launches (every launch of the plan shares it); its flags
        # are the launch's: head-major beta/g only with several value heads, and so on.
        self.specialization: Specialization = of_launch(
            self.backend, self.config, self.plan, BT=problem.BT, K=problem.K, V=problem.V, H=problem.H, HV=problem.HV,
            dtype=problem.dtype, gate_dtype=gate_dtype, index_dtype=cu_seqlens.dtype if cu_seqlens is not None else None,
            use_g=problem.use_g, varlen=problem.varlen)
        self.emulate = self.backend.variant(self.config)[2]
        self.head_major = self.specialization.GATE_HEAD_MAJOR
        self.varlen_args = dict(
            cu_seqlens=cu_seqlens.contiguous() if cu_seqlens is not None else None,
            chunk_indices=problem.chunk_indices,
        )

    def new(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return _new(shape, dtype, self.problem.device, bool(self.config.poison_outputs))

    def launch(self, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, g: torch.Tensor | None, A: torch.Tensor,
               **tensors: torch.Tensor | None) -> None:
        """Run every launch of the plan on the op's inputs (made contiguous and 16-byte aligned,
        beta/g in the backend's layout) and ``tensors``; offsets and sizes are runtime arguments."""
        p = self.problem
        inputs = dict(k=k.contiguous(), v=v.contiguous(), beta=_gate_layout(beta, self.head_major),
                      g=_gate_layout(g, self.head_major), A=A.contiguous(), **tensors, **self.varlen_args)
        args = {name: _aligned(x) for name, x in inputs.items()}
        with self._semantics():
            for launch in self.plan.launches:
                self.kernel[launch.grid](  # type: ignore[index]
                    **args,
                    T=p.T, t_offset=launch.t_offset, bh_offset=launch.bh_offset, bh_count=launch.bh_count,
                    num_tasks=launch.tasks, num_programs=launch.grid[0],
                    H=p.H, HV=p.HV, K=p.K, V=p.V, BT=p.BT, BK=self.plan.BK, BV=self.plan.BV,
                    NK=self.specialization.NK, NV=self.specialization.NV,
                    K_CONST=self.specialization.K_CONST, V_CONST=self.specialization.V_CONST,
                    USE_G=p.use_g, IS_VARLEN=p.varlen, GATE_HEAD_MAJOR=self.head_major,
                    LOWP_DOT=self.specialization.LOWP_DOT, DOT_GUARD=self.specialization.DOT_GUARD,
                    PERSISTENT=self.specialization.PERSISTENT,
                )

    def _semantics(self) -> contextlib.AbstractContextManager[None]:
        """The interpreter's Ascend emulation around the launches (cpu backend), else nothing."""
        if not self.backend.interpret:
            return contextlib.nullcontext()
        from .interpreter import ascend_semantics

        return ascend_semantics(self.emulate)


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
    call = _Call("fwd", p, backend, config, cu_seqlens, beta.dtype)
    w = call.new((p.B, p.T, p.HV, p.K), p.dtype)
    u = call.new((p.B, p.T, p.HV, p.V), p.dtype)
    call.launch(k, v, beta, g, A, w=w, u=u)
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
    call = _Call("bwd", p, backend, config, cu_seqlens, beta.dtype)
    grouped = p.HV != p.H
    # With grouped heads each value head writes its own dk slice in fp32, summed below.
    dk_hv = call.new((p.B, p.T, p.HV, p.K), torch.float32 if grouped else p.dtype)
    dv = call.new((p.B, p.T, p.HV, p.V), p.dtype)
    gate_shape = (p.B, p.HV, p.T) if call.head_major else (p.B, p.T, p.HV)
    dbeta = call.new(gate_shape, beta.dtype)
    dg = call.new(gate_shape, g.dtype) if g is not None else None
    call.launch(k, v, beta, g, A, dw=dw.contiguous(), du=du.contiguous(), dk=dk_hv, dv=dv, dbeta=dbeta, dg=dg)
    dk = dk_hv.view(p.B, p.T, p.H, p.HV // p.H, p.K).sum(3).to(p.dtype) if grouped else dk_hv
    dbeta = _from_gate_layout(dbeta, call.head_major)
    if dg is not None:
        dg = _from_gate_layout(dg, call.head_major)
    return dk, dv, dbeta, dg
