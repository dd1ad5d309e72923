"""The float64 oracle on exactly the inputs a kernel saw (``oracle_outputs``), on the GPU where there is
one (``case.float64_device``). Out of device memory there is raised, never answered on the host: the case
runner reruns such a case alone on the device (device_memory.run_within_memory); a host fallback took the
oracle's tens of GiB outside every budget, and beside other workers' the host's out-of-memory killer ended
an H200 nightly's case with SIGKILL. Its own module because both the
bounds (the exact outputs of nudged inputs, ``bounds.nudged_outputs``) and the oracle property
(``oracle.compare_to_oracle``) evaluate it."""

from __future__ import annotations

import torch

from ... import reference
from ..case import Inputs, float64_device
from ..phases import phase


def oracle_outputs(inputs: Inputs) -> dict[str, torch.Tensor | None]:
    """The float64 oracle on exactly the kernel's inputs (given A), by output name.

    It runs on ``float64_device`` (on a GPU, so that GPU runs do not wait on a host oracle
    for every large case)."""
    return _oracle_on(inputs, float64_device(inputs.k.device))


@phase("oracle")
def _oracle_on(inputs: Inputs, device: torch.device) -> dict[str, torch.Tensor | None]:
    def f64(x: torch.Tensor) -> torch.Tensor:
        return x.to(device=device, dtype=torch.float64)

    k, v, beta, A, dw, du = (f64(x) for x in (inputs.k, inputs.v, inputs.beta, inputs.A, inputs.dw, inputs.du))
    g = f64(inputs.g) if inputs.g is not None else None
    # cu_seqlens as given: the oracle's layout reads them on the host (no device read if given there).
    w, u = reference.wy_fwd(k, v, beta, A, g, inputs.cu_seqlens)
    dk, dv, dbeta, dg = reference.wy_bwd_given_A(k, v, beta, A, dw, du, g, inputs.cu_seqlens)
    return dict(w=w, u=u, dk=dk, dv=dv, dbeta=dbeta, dg=dg)
