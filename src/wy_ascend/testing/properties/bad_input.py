"""The bad_input property (``check_bad_input``): each way of passing the ops a wrong argument
(``CORRUPTIONS``, for every tensor argument in ``ARGUMENTS`` and the shapes, dtypes and cu_seqlens
that are wrong on their own) raises the expected error naming it before any kernel runs. It launches
no kernel."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ...layout import prepare_chunk_indices
from ..case import Case, Inputs
from ..failure import Metrics, PropertyFailure
from ..phases import phase
from .common import backend_name, build_inputs, subject_of

# A corruption maps valid inputs and a position (``Case.corrupt_at``, taken modulo the places
# the corruption can land) to the op's arguments, the exception expected and a fragment of its message.
Corruption = Callable[[Inputs, int], tuple[dict[str, Any], type[Exception], str]]


def _kw(inputs: Inputs, **changes: Any) -> dict[str, Any]:
    d = dict(inputs._asdict())
    d.update(changes)
    return d



# The ops' tensor arguments, each of which a caller may pass wrongly in the same ways (not a tensor, on
# another device, the float ones in an integer dtype: ``_passed_wrongly``): these corruptions exist for
# every argument by construction.
ARGUMENTS = ("k", "v", "beta", "A", "g", "dw", "du", "cu_seqlens", "chunk_indices")


def _with(inputs: Inputs, name: str) -> dict[str, Any]:
    """The valid arguments of ``inputs`` with ``name`` passed: a zero gate where the case has none,
    cu_seqlens (of the fixed batch where it has none) for cu_seqlens and chunk_indices."""
    kw = _kw(inputs)
    if name in ("cu_seqlens", "chunk_indices"):
        kw["cu_seqlens"] = _cu_tensor(inputs).to(inputs.cu_seqlens.dtype if inputs.cu_seqlens is not None else torch.int64)
    if name == "chunk_indices":
        kw["chunk_indices"] = prepare_chunk_indices(kw["cu_seqlens"], inputs.A.shape[-1])
    if name == "g" and inputs.g is None:
        kw["g"] = torch.zeros_like(inputs.beta)
    return kw


def _passed_wrongly(name: str, change: Callable[[torch.Tensor, Inputs], Any], error: type[Exception],
                    fragment: str) -> Corruption:
    """The corruption passing argument ``name`` as ``change(tensor, inputs)``, the rest valid (``_with``)."""
    def corrupt(x: Inputs, at: int) -> tuple[dict[str, Any], type[Exception], str]:
        kw = _with(x, name)
        return {**kw, name: change(kw[name], x)}, error, fragment
    return corrupt


CORRUPTIONS: dict[str, Corruption] = {
    **{f"{name}_not_tensor": _passed_wrongly(name, lambda t, x: t.tolist(), TypeError, f"{name} must be a torch.Tensor")
       for name in ARGUMENTS},
    **{f"{name}_other_device": _passed_wrongly(name, lambda t, x: t.to("meta" if x.k.device.type == "cpu" else "cpu"),
                                               ValueError, f"{name} must be on k's device")
       for name in ARGUMENTS if name != "k"},  # k's device is the one
    **{f"{name}_int_dtype": _passed_wrongly(name, lambda t, x: t.to(torch.int32), TypeError, f"{name} must have")
       for name in ARGUMENTS[:7]},  # the float ones
    "k_3d": lambda x, at: (_kw(x, k=x.k[0]), ValueError, "k must be 4-D"),
    "v_wrong_T": lambda x, at: (_kw(x, v=x.v[:, :-1]), ValueError, "v must share"),
    "hv_not_multiple": lambda x, at: (_kw(x, k=x.k.repeat(1, 1, x.v.shape[2] + 1, 1), v=x.v), ValueError, "multiple"),
    "bt_not_power_of_2": lambda x, at: (_kw(x, A=torch.cat([x.A, x.A[..., :8]], -1)), ValueError, "BT"),
    "beta_wrong_shape": lambda x, at: (_kw(x, beta=x.beta[..., None]), ValueError, "beta"),
    "g_wrong_shape": lambda x, at: (_kw(x, g=x.beta[:, :, :1].expand(-1, -1, 2).contiguous()
                                    if x.beta.shape[2] == 1 else x.beta[:, :, :1]), ValueError, "g must have shape"),
    "A_wrong_dtype": lambda x, at: (_kw(x, A=x.A.to(torch.float64)), TypeError, "A must have the dtype"),
    "dw_wrong_shape": lambda x, at: (_kw(x, dw=x.dw[..., :-1]), ValueError, "dw must have shape"),
    # A first entry of 1, -1, 2, -2, 3 or -3 (by position).
    "cu_not_starting_at_0": lambda x, at: (_kw(x, cu_seqlens=_cu_tensor(x, lambda c: c.__setitem__(
        0, (1 + at // 2 % 3) * (-1) ** at))), ValueError, "cu_seqlens must start at 0"),
    "cu_decreasing": lambda x, at: (_kw(x, cu_seqlens=_cu_tensor(x, lambda c: _decrease_pair(c, at))), ValueError,
                                    "cu_seqlens must be non-decreasing"),
    "cu_not_ending_at_T": lambda x, at: (_kw(x, cu_seqlens=_cu_tensor(x, lambda c: c.__setitem__(-1, c[-1] + 1))), ValueError,
                                     "cu_seqlens must end at T"),
    "cu_float": lambda x, at: (_kw(x, cu_seqlens=_cu_tensor(x).float()), TypeError, "cu_seqlens must have"),
    "cu_2d": lambda x, at: (_kw(x, cu_seqlens=_cu_tensor(x)[None]), ValueError,
                        "cu_seqlens must be 1-D"),
    "cu_with_batch_2": lambda x, at: (_kw(x, k=torch.cat([x.k, x.k]), v=torch.cat([x.v, x.v]),
                                      beta=torch.cat([x.beta, x.beta]), A=torch.cat([x.A, x.A]),
                                      g=torch.cat([x.g, x.g]) if x.g is not None else None,
                                      dw=torch.cat([x.dw, x.dw]), du=torch.cat([x.du, x.du]),
                                      cu_seqlens=_cu_tensor(x)),
                                  ValueError, "B == 1"),
    "chunk_indices_wrong": lambda x, at: (_kw(x, cu_seqlens=_cu_tensor(x), chunk_indices=_wrong_chunk_indices(x, at)),
                                          ValueError, "chunk_indices must equal"),
    "chunk_indices_without_cu": lambda x, at: (_kw(x, cu_seqlens=None, chunk_indices=torch.zeros(1, 2, dtype=torch.int64)),
                                           ValueError, "chunk_indices was given without cu_seqlens"),
}



# Corruptions of arguments only the backward takes.
BACKWARD_ONLY = frozenset(name for name in CORRUPTIONS if name.startswith(("dw_", "du_")))


def _cu(inputs: Inputs, edit: Callable[[list[int]], None]) -> list[int]:
    """The case's cu_seqlens (or [0, T] for a fixed batch of one) as a list, edited in place."""
    c = inputs.cu_seqlens.tolist() if inputs.cu_seqlens is not None else [0, int(inputs.k.shape[1])]
    edit(c)
    return c


def _cu_tensor(inputs: Inputs, edit: Callable[[list[int]], None] = lambda c: None) -> torch.Tensor:
    return torch.tensor(_cu(inputs, edit), device=inputs.k.device)


def _decrease_pair(cu: list[int], at: int) -> None:
    """Make pair ``at`` (mod the pairs) of ``cu`` decrease: cu[i + 1] = cu[i] - 1 (i = 0: a negative
    first length; the last pair: an end below its start)."""
    i = at % (len(cu) - 1)
    cu[i + 1] = cu[i] - 1


def _wrong_chunk_indices(inputs: Inputs, at: int) -> torch.Tensor:
    """The chunk_indices of the inputs' cu_seqlens with entry ``at`` (mod their count, row-major)
    one too large, or an extra row when there are none."""
    ci = prepare_chunk_indices(_cu_tensor(inputs), inputs.A.shape[-1])
    if ci.numel() == 0:
        return torch.tensor([[0, 0]], device=ci.device)
    ci.view(-1)[at % ci.numel()] += 1
    return ci


def _in_a_kernel(error: BaseException) -> bool:
    """Whether ``error`` was raised inside a Triton launch (a frame of the triton package on its way)."""
    tb = error.__traceback__
    while tb is not None:
        if "/triton/" in tb.tb_frame.f_code.co_filename.replace("\\", "/"):
            return True
        tb = tb.tb_next
    return False


def check_bad_input(case: Case) -> Metrics:
    """A corrupted input raises the expected TypeError/ValueError naming the argument, from both ops,
    before any kernel runs; never another exception or a result. A foreign subject that claims no
    validation (``subjects.Claims.validates``) is held to less: some exception before any kernel runs.
    A result (a malformed call accepted: its output is garbage, silently) or an error from inside a
    launch (on a device: a fault, or worse, a read of other memory) fails."""
    if case.corruption not in CORRUPTIONS:
        raise PropertyFailure(f"bad_input needs corruption in {sorted(CORRUPTIONS)}, got {case.corruption!r}")
    inputs = build_inputs(case)
    with phase("inputs"):
        kwargs, exc_type, fragment = CORRUPTIONS[case.corruption](inputs, case.corrupt_at)
    config = case.config()
    forward, backward = subject_of(case).ops(backend_name(case))
    calls: dict[str, Callable[[], object]] = {
        "recompute_w_u_fwd": lambda: forward(kwargs["k"], kwargs["v"], kwargs["beta"], kwargs["A"], kwargs["g"],
                                             kwargs["cu_seqlens"], kwargs.get("chunk_indices"), config=config)}
    if backward is not None:  # else a forward-only subject
        calls["prepare_wy_repr_bwd"] = lambda: backward(kwargs["k"], kwargs["v"], kwargs["beta"], kwargs["A"],
                                                        kwargs["dw"], kwargs["du"], kwargs["g"], kwargs["cu_seqlens"],
                                                        kwargs.get("chunk_indices"), config=config)
    if case.corruption in BACKWARD_ONLY:
        del calls["recompute_w_u_fwd"]
    if not calls:
        raise ValueError(f"bad_input: corruption {case.corruption!r} is of an argument subject {case.subject!r} "
                         "does not take")
    if not subject_of(case).claims.validates:
        exc_type, fragment = Exception, ""
    metrics: Metrics = {}
    for name, call in calls.items():
        try:
            with phase("kernel"):
                call()
        except exc_type as e:
            if _in_a_kernel(e):
                raise PropertyFailure(f"{name}: corruption {case.corruption!r} reached a kernel, which raised "
                                      f"{type(e).__name__}: {str(e)[:300]}") from e
            if fragment not in str(e):
                raise PropertyFailure(f"{name}: {exc_type.__name__} without {fragment!r}: {e}") from e
            metrics[name] = str(e)
            continue
        except Exception as e:  # noqa: BLE001 - any other exception is the failure being checked
            raise PropertyFailure(f"{name}: expected {exc_type.__name__}, got {type(e).__name__}: {e}") from e
        raise PropertyFailure(f"{name}: corruption {case.corruption!r} was accepted (expected {exc_type.__name__})")
    return metrics
