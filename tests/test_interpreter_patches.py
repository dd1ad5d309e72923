"""The cpu backend's speed-ups of triton's interpreter change no result (backends.py)."""

from __future__ import annotations

import pytest


def test_memoized_np_dtypes_are_the_interpreters(backend) -> None:
    """Every scalar, pointer and block type maps to the dtype the unpatched function gives,
    on the first call (memo filled) and the second (memo hit)."""
    if backend != "cpu":
        pytest.skip("patches the interpreter, which only the cpu backend runs")
    import triton.language as tl
    from triton.runtime import interpreter

    from wy_ascend import backends

    backends.kernel_for(backends.BACKENDS["cpu"], "fwd")  # loads the kernels and applies the patches
    patched = interpreter._get_np_dtype
    original = patched.__wrapped__
    scalars = [tl.int1, tl.int8, tl.uint8, tl.int16, tl.uint16, tl.int32, tl.uint32, tl.int64, tl.uint64,
               tl.float16, tl.bfloat16, tl.float32, tl.float64, tl.float8e5, tl.float8e4nv]
    types = [*scalars, *(tl.pointer_type(t) for t in scalars), *(tl.block_type(t, [2, 4]) for t in scalars),
             tl.block_type(tl.pointer_type(tl.bfloat16), [4])]
    for _ in range(2):
        assert [patched(t) for t in types] == [original(t) for t in types]
