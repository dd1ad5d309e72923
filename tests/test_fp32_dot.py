"""The WY_ASCEND_FP32_DOT switch (kernels.FP32_DOT_TF32X3): read when the kernels are imported,
valid values only, the cuda backend only, and never changed under kernels already imported."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from wy_ascend.backends import BACKENDS, FP32_DOT_ENV, check_fp32_dot


@pytest.mark.parametrize("mode,want", [("tf32x3", True), ("ieee", False), ("", False)])
def test_the_kernels_read_the_switch_when_imported(mode: str, want: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k != FP32_DOT_ENV} | ({FP32_DOT_ENV: mode} if mode else {})
    out = subprocess.run([sys.executable, "-c", "import wy_ascend.kernels as k; print(bool(k.FP32_DOT_TF32X3))"],
                         env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert out == str(want)


def test_the_switch_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FP32_DOT_ENV, raising=False)
    import wy_ascend.kernels as kernels  # imported with the switch as this process had it first

    imported = "tf32x3" if kernels.FP32_DOT_TF32X3 else "ieee"
    monkeypatch.setenv(FP32_DOT_ENV, "tf32")
    with pytest.raises(ValueError, match=r"WY_ASCEND_FP32_DOT must be one of \('ieee', 'tf32x3'\), got 'tf32'"):
        check_fp32_dot(BACKENDS["cuda"])
    monkeypatch.setenv(FP32_DOT_ENV, "tf32x3")
    for name in ("npu", "npu-cuda", "cpu"):
        with pytest.raises(ValueError, match=f"tf32x3 is for the cuda backend, not '{name}'"):
            check_fp32_dot(BACKENDS[name])
    monkeypatch.setenv(FP32_DOT_ENV, "ieee" if imported == "tf32x3" else "tf32x3")
    with pytest.raises(ValueError, match="was set after the kernels were imported"):
        check_fp32_dot(BACKENDS["cuda"])
    monkeypatch.setenv(FP32_DOT_ENV, imported)
    check_fp32_dot(BACKENDS["cuda"])
