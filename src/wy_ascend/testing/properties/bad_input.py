"""The bad_input property (``check_bad_input``): each way of passing the ops a wrong argument
(``CORRUPTIONS``, for every tensor argument in ``ARGUMENTS`` and the shapes, dtypes and cu_seqlens
that are wrong on their own) raises the expected error naming it before any kernel runs. It launches
no kernel."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ...layout import prepare_chunk_indices
from ...validation import MAX_DIM, SUPPORTED_BT, SUPPORTED_DTYPES
from ..case import Case, Inputs
from ..failure import Metrics, PropertyFailure
from ..phases import phase
from .common import backend_name, build_inputs, subject_of

# A corruption maps valid inputs and a position ``at`` (``Case.corrupt_at``, drawn) to the op's
# arguments, the exception expected and a fragment of its message. ``at`` draws the violation from the
# rule's whole invalid region (validation.py names each region beside its rule): at = 0 is the simplest
# (and the value stored files replay), and every value of the region is some ``at``'s.
Corruption = Callable[[Inputs, int], tuple[dict[str, Any], type[Exception], str]]


def _kw(inputs: Inputs, **changes: Any) -> dict[str, Any]:
    d = dict(inputs._asdict())
    d.update(changes)
    return d


def _pick(at: int, options: Sequence[Any]) -> tuple[Any, int]:
    """One of ``options`` chosen by ``at`` (at mod their count) and what is left of ``at`` (at div it)."""
    return options[at % len(options)], at // len(options)


# The ops' tensor arguments, each of which a caller may pass wrongly in the same ways (not a tensor, on
# another device, the float ones in a dtype outside their rule: ``_passed_wrongly``): these corruptions
# exist for every argument by construction.
ARGUMENTS = ("k", "v", "beta", "A", "g", "dw", "du", "cu_seqlens", "chunk_indices")
FLOAT_ARGUMENTS = ARGUMENTS[:7]
# Arguments that may be None (absent); the rest must be tensors.
OPTIONAL = frozenset({"g", "dw", "du", "cu_seqlens", "chunk_indices"})
# Dtypes torch has beside the ops' float ones: integers and bool (int32 first: the stored files' value),
# and the floats and complexes no kernel takes (float64 first).
INT_DTYPES = (torch.int32, torch.int64, torch.int16, torch.int8, torch.uint8, torch.bool)
OTHER_FLOAT_DTYPES = (torch.float64, torch.complex64, torch.complex128,
                      *(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n)))
INDEX_DTYPES = (torch.int64, torch.int32)  # cu_seqlens' and chunk_indices'
NOT_INDEX_DTYPES = tuple(d for d in (*SUPPORTED_DTYPES, *OTHER_FLOAT_DTYPES, *INT_DTYPES) if d not in INDEX_DTYPES)
# Arguments that must have k's dtype (validation._same_dtype); the others' rule is SUPPORTED_DTYPES alone.
K_DTYPE = frozenset({"v", "A", "dw", "du"})


def _not_tensors(t: torch.Tensor, name: str) -> list[Any]:
    """Every kind of non-tensor a caller might pass for ``name`` (a list first; None where it means absent
    is no corruption)."""
    host = t.detach().cpu()
    values = [host.tolist(), tuple(host.tolist()), host.float().numpy(), 1.0, 0, "tensor", object()]
    return values if name in OPTIONAL else [*values, None]


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


def _passed_wrongly(name: str, change: Callable[[torch.Tensor, Inputs, int], Any], error: type[Exception],
                    fragment: str) -> Corruption:
    """The corruption passing argument ``name`` as ``change(tensor, inputs, at)``, the rest valid (``_with``)."""
    def corrupt(x: Inputs, at: int) -> tuple[dict[str, Any], type[Exception], str]:
        kw = _with(x, name)
        return {**kw, name: change(kw[name], x, at)}, error, fragment
    return corrupt


def _non_tensor(name: str) -> Callable[[torch.Tensor, Inputs, int], Any]:
    """Passes ``name`` as any of ``_not_tensors``."""
    return lambda t, x, at: _pick(at, _not_tensors(t, name))[0]


def _float_dtype_outside(name: str) -> Callable[[torch.Tensor, Inputs, int], torch.Tensor]:
    """Passes ``name`` in any float (or complex) dtype of its rule's invalid region: outside SUPPORTED_DTYPES,
    and for the arguments that must match k any supported one but k's too (validation._float_dtype, _same_dtype)."""
    def change(t: torch.Tensor, x: Inputs, at: int) -> torch.Tensor:
        others = [d for d in SUPPORTED_DTYPES if d != x.k.dtype] if name in K_DTYPE else []
        return t.to(_pick(at, (*OTHER_FLOAT_DTYPES, *others))[0])
    return change


def _other_size(size: int, at: int) -> int:
    """A size other than ``size`` (size + 1 first, then the others by distance, up to size + 8)."""
    return _pick(at, sorted((s for s in range(size + 9) if s != size), key=lambda s: (abs(s - size), s < size)))[0]


def _other_shape(shape: tuple[int, ...], at: int, same_ndim: bool = True) -> tuple[int, ...]:
    """A shape other than ``shape``: any nonempty set of its sizes changed (``_other_size``), or, unless
    ``same_ndim``, any other number of dims (0 to ndim + 2: fewer keep its first dims, more add dims of
    one size, 1, 2 or 3)."""
    n = len(shape)
    if not same_ndim:
        ndim, at = _pick(at, [n, *(d for d in range(n + 3) if d != n)])
        if ndim != n:
            return (*shape, *(1 + at % 3 for _ in range(ndim - n)))[:ndim]
    mask, at = _pick(at, range(1, 2**n))
    out = list(shape)
    for i in range(n):
        if mask >> i & 1:
            out[i], at = _other_size(shape[i], at), at // 8
    return tuple(out)


def _reshaped(t: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """A tensor of ``shape`` holding ``t``'s first values (zeros past them), in its dtype and device."""
    out = t.new_zeros(shape)
    n = min(out.numel(), t.numel())
    out.view(-1)[:n] = t.reshape(-1)[:n]
    return out


def _other_ndim(t: torch.Tensor, at: int) -> torch.Tensor:
    """``t`` with any other number of dims, 0 to ndim + 2 (one fewer first: its leading two merged)."""
    ndim, at = _pick(at, [t.ndim - 1, *(d for d in range(t.ndim + 3) if d not in (t.ndim, t.ndim - 1))])
    if ndim < t.ndim:
        return t.flatten()[0] if ndim == 0 else t.flatten(0, t.ndim - ndim)
    return t.reshape(*t.shape, *[1] * (ndim - t.ndim)) if at % 2 == 0 else t.reshape(*[1] * (ndim - t.ndim), *t.shape)


def _with_dim(t: torch.Tensor, dim: int, size: int) -> torch.Tensor:
    shape = list(t.shape)
    shape[dim] = size
    return _reshaped(t, tuple(shape))


def _other_tokens(x: Inputs, at: int) -> torch.Tensor:
    """v with any other token count T' >= 0 (T - 1 first: v[:, :-1], the stored files' value)."""
    T = x.v.shape[1]
    return _with_dim(x.v, 1, _pick(at, [*range(T - 1, -1, -1), *range(T + 1, T + 9)])[0])


def _bad_key_heads(x: Inputs, at: int) -> torch.Tensor:
    """k with a key head count H' that is 0 or no divisor of HV (H * (HV + 1) first, the stored files' value)."""
    HV = x.v.shape[2]
    first = x.k.shape[2] * (HV + 1)
    heads = [first, *(h for h in range(2 * HV + 2) if h != first and (h == 0 or HV % h))]
    return _with_dim(x.k.repeat(1, 1, HV + 1, 1), 2, _pick(at, heads)[0])


def _dim_out_of_range(t: torch.Tensor, at: int) -> torch.Tensor:
    """``t`` with a last dim outside [1, MAX_DIM]: MAX_DIM + 1 first, then 0 and MAX_DIM + 2 up to 2 * MAX_DIM."""
    return _with_dim(t, -1, _pick(at, [MAX_DIM + 1, 0, *range(MAX_DIM + 2, 2 * MAX_DIM + 1)])[0])


def _unsupported_bt(A: torch.Tensor, at: int) -> torch.Tensor:
    """A with a last dim (the chunk size) outside SUPPORTED_BT: BT + 8 first, then any from 0 to 256, the
    multiples of 16 first (0, 48, 80, ..., 256: a rule by divisibility or by a power of two misses one)."""
    first = A.shape[-1] + 8
    sizes = sorted((b for b in range(257) if b != first and b not in SUPPORTED_BT), key=lambda b: (b % 16 != 0, b))
    return _with_dim(A, -1, _pick(at, [first, *sizes])[0])


def _batch_of(x: Inputs, copies: int) -> dict[str, Any]:
    """Every per-batch argument of ``x`` (a packed batch of one) repeated ``copies`` times along B."""
    return {n: getattr(x, n).repeat(copies, *[1] * (getattr(x, n).ndim - 1)) if getattr(x, n) is not None else None
            for n in ("k", "v", "beta", "A", "g", "dw", "du")}


CORRUPTIONS: dict[str, Corruption] = {
    **{f"{name}_not_tensor": _passed_wrongly(name, _non_tensor(name), TypeError, f"{name} must be a torch.Tensor")
       for name in ARGUMENTS},
    # every other device this machine has: meta where it has no accelerator
    **{f"{name}_other_device": _passed_wrongly(
        name, lambda t, x, at: t.to(_pick(at, ["meta"] if x.k.device.type == "cpu" else ["cpu", "meta"])[0]),
        ValueError, f"{name} must be on k's device")
       for name in ARGUMENTS if name != "k"},  # k's device is the one
    **{f"{name}_int_dtype": _passed_wrongly(name, lambda t, x, at: t.to(_pick(at, INT_DTYPES)[0]), TypeError,
                                            f"{name} must have")
       for name in FLOAT_ARGUMENTS},
    **{f"{name}_float_dtype": _passed_wrongly(name, _float_dtype_outside(name), TypeError, f"{name} must have")
       for name in FLOAT_ARGUMENTS},
    **{f"{name}_wrong_ndim": _passed_wrongly(name, lambda t, x, at: _other_ndim(t, at), ValueError,
                                             f"{name} must be {ndim}-D")
       for name, ndim in (("k", 4), ("v", 4), ("beta", 3), ("A", 4))},
    "v_wrong_T": lambda x, at: (_kw(x, v=_other_tokens(x, at)), ValueError, "v must share"),
    "v_wrong_B": lambda x, at: (_kw(x, v=_with_dim(x.v, 0, _other_size(x.v.shape[0], at))),
                                ValueError, "v must share"),
    "hv_not_multiple": lambda x, at: (_kw(x, k=_bad_key_heads(x, at)), ValueError, "multiple"),
    "k_dim_out_of_range": lambda x, at: (_kw(x, k=_dim_out_of_range(x.k, at)), ValueError, "K (k.shape[3]) must be in"),
    "v_dim_out_of_range": lambda x, at: (_kw(x, v=_dim_out_of_range(x.v, at)), ValueError, "V (v.shape[3]) must be in"),
    "bt_unsupported": lambda x, at: (_kw(x, A=_unsupported_bt(x.A, at)), ValueError, "BT"),
    "beta_wrong_shape": lambda x, at: (_kw(x, beta=_reshaped(x.beta, _other_shape(tuple(x.beta.shape), at))),
                                       ValueError, "beta must have shape"),
    "A_wrong_shape": lambda x, at: (_kw(x, A=_reshaped(x.A, (*_other_shape(tuple(x.A.shape[:3]), at), x.A.shape[3]))),
                                    ValueError, "A must have shape"),
    **{f"{name}_wrong_shape": _passed_wrongly(name, lambda t, x, at: _reshaped(t, _other_shape(tuple(t.shape), at, False)),
                                              ValueError, f"{name} must have shape")
       for name in ("g", "dw", "du")},
    "dw_du_not_together": lambda x, at: (_kw(x, **{_pick(at, ("du", "dw"))[0]: None}), ValueError,
                                         "dw and du must be given together"),
    # A first entry of 1, -1, 2, -2, 3, -3, ... (by position).
    "cu_not_starting_at_0": lambda x, at: (_kw(x, cu_seqlens=_cu_tensor(x, lambda c: c.__setitem__(
        0, (1 + at // 2) * (-1) ** at))), ValueError, "cu_seqlens must start at 0"),
    "cu_decreasing": lambda x, at: (_kw(x, cu_seqlens=_cu_tensor(x, lambda c: _decrease_pair(c, at))), ValueError,
                                    "cu_seqlens must be non-decreasing"),
    "cu_not_ending_at_T": lambda x, at: (_kw(x, cu_seqlens=_cu_tensor(x, lambda c: _end_elsewhere(c, at))), ValueError,
                                         "cu_seqlens must end at T"),
    "cu_wrong_dtype": lambda x, at: (_kw(x, cu_seqlens=_cu_tensor(x).to(_pick(at, NOT_INDEX_DTYPES)[0])), TypeError,
                                     "cu_seqlens must have"),
    "cu_wrong_ndim": lambda x, at: (_kw(x, cu_seqlens=_other_ndim(_cu_tensor(x), at)), ValueError,
                                    "cu_seqlens must be 1-D"),
    "cu_too_short": lambda x, at: (_kw(x, cu_seqlens=_cu_tensor(x)[:0] if at % 2 == 0 else torch.tensor(
        [at // 2 - 2**14], device=x.k.device)), ValueError, "cu_seqlens must hold at least 2 entries"),
    # B = 2 first (the name's, which stored files hold), then any B up to 5
    "cu_with_batch_2": lambda x, at: (_kw(x, **_batch_of(x, 2 + at % 4), cu_seqlens=_cu_tensor(x)), ValueError, "B == 1"),
    "chunk_indices_wrong": lambda x, at: (_kw(x, cu_seqlens=_cu_tensor(x), chunk_indices=_wrong_chunk_indices(x, at)),
                                          ValueError, "chunk_indices must equal"),
    "chunk_indices_float_dtype": _passed_wrongly("chunk_indices", lambda t, x, at: t.to(_pick(at, NOT_INDEX_DTYPES)[0]),
                                                 TypeError, "chunk_indices must have an integer dtype"),
    # any chunk_indices at all: a varlen batch's description passed for a fixed one
    "chunk_indices_without_cu": lambda x, at: (_kw(x, cu_seqlens=None, chunk_indices=torch.zeros(
        1 + at % 4, 2, dtype=_pick(at // 4, INDEX_DTYPES)[0])), ValueError, "chunk_indices was given without cu_seqlens"),
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
    """Make pair ``at`` (mod the pairs) of ``cu`` decrease by any amount: cu[i + 1] = cu[i] - d with
    d = 1 + at div the pairs (i = 0: a negative first length; the last pair: an end below its start)."""
    i, rest = _pick(at, range(len(cu) - 1))
    cu[i + 1] = cu[i] - 1 - rest


def _end_elsewhere(cu: list[int], at: int) -> None:
    """End ``cu`` anywhere but at T that keeps it non-decreasing (else the decrease is the first error):
    T + 1 first, then every end from cu[-2] to T - 1, then T + 2 up."""
    T = cu[-1]
    cu[-1] = _pick(at, [T + 1, *range(cu[-2] if len(cu) > 1 else 0, T), *range(T + 2, T + 2**10)])[0]


def _wrong_chunk_indices(inputs: Inputs, at: int) -> torch.Tensor:
    """The chunk_indices of the inputs' cu_seqlens with any entry (``at`` mod their count, row-major) off by
    any amount (+1 first, then -1, +2, ...), or a row added or dropped; an extra row when there are none."""
    ci = prepare_chunk_indices(_cu_tensor(inputs), inputs.A.shape[-1])
    if ci.numel() == 0:
        return torch.tensor([[0, 0]], device=ci.device)
    i, rest = _pick(at, range(ci.numel() + 1))
    if i == ci.numel():
        return torch.cat([ci, ci[-1:]]) if rest % 2 == 0 else ci[:-1]
    ci.view(-1)[i] += (1 + rest // 2) * (-1) ** rest
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
