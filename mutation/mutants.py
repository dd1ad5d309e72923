"""Mutation score of the fuzz suite: plant known bugs, one at a time, and check the suite fails.

    python -m mutation                 # every mutant the ci profile can catch, one at a time
    python -m mutation --jobs 2        # two mutants in parallel
    python -m mutation --only bwd_row_mask_dropped --only fwd_gate_sign
    python -m mutation --check         # only check that every snippet occurs exactly once
    python -m mutation --list
    nox -s mutants -- --jobs 2
    nox -s mutants -- --generated 150 [--seed S] [--jobs J]   # AST-generated mutants: mutation/generated.py
    nox -s mutants -- --blind-spots    # statements inside functions that no test executes (the --select map)

For each mutant: copy ``src/`` to a temp dir, replace one exact snippet (it must occur
exactly once in the current source, else the catalog is stale and the run stops), and run
``python -m pytest fuzz/test_fuzz.py -x -q -p no:cacheprovider`` in a subprocess with the
mutated copy first on PYTHONPATH, ``WY_ASCEND_PROFILE=ci``, and a temp Hypothesis database,
``WY_ASCEND_REGRESSIONS`` and fuzz report, so mutants never touch the real store, database or report.
A guard plugin checks inside that pytest process that every ``wy_ascend`` module came
from the mutated copy (not the editable install); if not, the run fails loudly.

Verdicts: ``caught`` (pytest exit 1, or the suite crashed with SIGSEGV/SIGABRT, e.g. an
out-of-bounds access in the interpreter), ``missed`` (exit 0: the mutant survived),
``timeout``, ``error`` (anything else: SIGKILL, usage error, no tests collected, the
guard). The exit status is 0 only if the baseline (unmutated copy) passes and every
mutant run is caught.

Mutants marked ``needs="large"`` (int32 index arithmetic) change results only once an
element offset passes 2**31, i.e. for a tensor of more than 2**31 elements. No CPU profile
can build one, and neither can the fuzz suite's ``large`` profile as configured: its host
byte budget (``WY_ASCEND_LARGE_BYTES``, 96 GiB) over the ~96 host bytes each element of the
largest tensor costs (float64 inputs, casts, oracle) caps a case near 2**30 elements. What
catches them is ``tests/test_large.py`` on a CUDA device (4.5M tokens, offsets to 2.3e9):
``python -m mutation --include-large --only int32_row_base --tests tests/test_large.py``.
They are listed but not run by default.

Equivalent mutants are not in the catalog, e.g. dropping the ``tl.minimum(.., BT)`` of
the valid-row count (rows are ``tl.arange(0, BT)`` anyway) or launching more core-grid
programs than tasks (the extra programs get no task).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PACKAGE = SRC / "wy_ascend"
DEFAULT_TESTS = "fuzz/test_fuzz.py"
DEFAULT_TIMEOUT = 1200


@dataclass(frozen=True)
class Mutant:
    """One planted bug: replace ``snippet`` (exactly one occurrence) in ``file`` (under src/wy_ascend)."""

    id: str
    file: str
    snippet: str
    replacement: str
    description: str
    needs: str = "ci"  # "ci": the ci fuzz run can catch it; "large": only tensors past 2**31 elements
    # Ascend dot guards: value-preserving wherever a dot never clobbers its operands, so only the
    # cpu backend's Ascend emulation (wy_ascend.interpreter) can catch them; with
    # WY_ASCEND_EMULATION=0 they survive (tests/test_interpreter.py checks both).
    emulated: bool = False


MUTANTS: tuple[Mutant, ...] = (
    # --- masks
    Mutant("bwd_row_mask_dropped", "kernels.py",
           "    m_t = o_t < n\n    # A^T read directly",
           "    m_t = o_t < BT\n    # A^T read directly",
           "backward row mask dropped: a tail chunk reads the next sequence's rows into dA and A^T"),
    Mutant("bwd_k_column_mask_dropped", "kernels.py",
           "    o_w, m_k = _tile(o_t, m_t, i, BK, K, HV * K)\n    return _load_operand(",
           "    o_w, m_k = _tile(o_t, m_t, i, BK, BK * (i + 1), HV * K)\n    return _load_operand(",
           "backward k and dw tiles' K column mask dropped: K not a multiple of BK pulls the next head's keys into "
           "dA and k k^T"),
    Mutant("bwd_v_column_mask_dropped", "kernels.py",
           "o_x, m_v = _tile(o_t, m_t, i_v, BV, V, HV * V)\n            b_v, b_du",
           "o_x, m_v = _tile(o_t, m_t, i_v, BV, BV * NV, HV * V)\n            b_v, b_du",
           "backward V column mask dropped: V not a multiple of BV pulls neighbouring values into dA"),
    Mutant("A_dead_columns_read", "kernels.py",
           "    return tl.where(m_cols, x, 0.0).to(x.dtype)",
           "    return x",
           "A's columns past a partial chunk's end read as given (they meet no token; the cases hold NaN there)"),
    Mutant("strict_lower_includes_diagonal", "kernels.py",
           "m_L = (o_t[:, None] > o_t[None, :]) & m_A",
           "m_L = (o_t[:, None] >= o_t[None, :]) & m_A",
           "strict-lower mask of dA/dL includes the diagonal (M's unit diagonal is not a function of k)"),
    # --- head mapping
    Mutant("fwd_head_map_modulo", "kernels.py",
           "    i_hk = i_h // (HV // H)\n    o_t = tl.arange(0, BT)\n    m_t = o_t < n\n    p_A = A",
           "    i_hk = i_h % H\n    o_t = tl.arange(0, BT)\n    m_t = o_t < n\n    p_A = A",
           "forward value head -> key head as i_h % H instead of i_h // (HV // H) (grouped heads, H >= 2)"),
    Mutant("bwd_head_map_modulo", "kernels.py",
           "    i_hk = i_h // (HV // H)\n    o_t = tl.arange(0, BT)\n    m_t = o_t < n\n    # A^T",
           "    i_hk = i_h % H\n    o_t = tl.arange(0, BT)\n    m_t = o_t < n\n    # A^T",
           "backward value head -> key head as i_h % H (grouped heads, H >= 2)"),
    Mutant("dk_group_sum_wrong_axis", "ops.py",
           "return dk_heads.view(p.B, p.T, p.H, G, p.K).sum(3)",
           "return dk_heads.view(p.B, p.T, G, p.H, p.K).sum(2)",
           "grouped dk summed over strided value heads {h, h+H, ..} instead of each key head's group"),
    Mutant("dk_sum_kernel_drops_tail_rows", "ops.py",
           "grid = (cdiv(rows, DK_SUM_ROWS),)",
           "grid = (max(1, rows // DK_SUM_ROWS),)",
           "cuda's dk sum launches too few programs: rows past the last full block of DK_SUM_ROWS keep no dk"),
    Mutant("group_dk_barrier_dropped", "kernels.py",
           "        tl.debug_barrier()  # the group's previous task",
           "        pass  # the group's previous task",
           "the grouped backward reads the dk partial sum its previous value head stored with no barrier between "
           "(exact on the interpreter alone; its read-after-write check names it)"),
    # --- varlen offsets and chunk bounds
    Mutant("chunk_start_ignores_bos", "kernels.py",
           "    row0 = bos + i_c * BT\n",
           "    row0 = i_c * BT\n",
           "chunk start forgets the sequence start bos (every sequence but the first, every batch but 0)"),
    Mutant("chunk_rows_off_by_one", "kernels.py",
           "n = tl.minimum(eos - row0, BT)",
           "n = tl.minimum(eos - row0 + 1, BT)",
           "valid rows of a tail chunk off by one: one row of the next sequence leaks in"),
    Mutant("varlen_tail_chunks_floor_div", "layout.py",
           "counts = (lens + chunk_size - 1) // chunk_size",
           "counts = lens // chunk_size",
           "varlen chunk count floor(len / BT) instead of cdiv: tail chunks never launched"),
    Mutant("fixed_tail_chunks_floor_div", "validation.py",
           "NT = -(-T // BT)",
           "NT = T // BT",
           "fixed-length chunk count floor(T / BT) instead of cdiv: the tail chunk never launched"),
    Mutant("v_tiles_floor_div", "specialization.py",
           "NV=cdiv(V, plan.BV)",
           "NV=V // plan.BV",
           "V tile loops run floor(V / BV) times: the last partial tile of u and dv never written"),
    # --- launch offsets, core grid, task mapping
    Mutant("persistent_fwd_t_offset_dropped", "kernels.py",
           "            _fwd_task(t_offset + f // bh_count, bh_offset + f % bh_count,",
           "            _fwd_task(f // bh_count, bh_offset + f % bh_count,",
           "core-grid forward ignores the launch's chunk offset (host-side chunking over max_tasks)"),
    Mutant("persistent_bwd_bh_offset_dropped", "kernels.py",
           "            _bwd_group(t_offset + f // bh_count, bh_offset + f % bh_count,",
           "            _bwd_group(t_offset + f // bh_count, f % bh_count,",
           "core-grid backward ignores the launch's batch-head offset (launches split the head axis)"),
    Mutant("grid_t_offset_dropped", "kernels.py",
           "        i_t = t_offset + tl.program_id(0)",
           "        i_t = tl.program_id(0)",
           "grid-mode launches in chunks-first order ignore the launch's chunk offset (grids split under max_blocks)"),
    Mutant("grid_heads_first_wrong_axis", "kernels.py",
           "        i_t = t_offset + flat // tl.num_programs(1)",
           "        i_t = t_offset + flat // tl.num_programs(0)",
           "heads-first grid launches split the flat program index by the chunk count: tasks missed and run twice"),
    Mutant("core_grid_stride_plus_one", "kernels.py",
           "        for f in tl.range(tl.program_id(0), num_tasks, num_programs, num_stages=1):\n            _fwd_task(",
           "        for f in tl.range(tl.program_id(0), num_tasks, num_programs + 1, num_stages=1):\n            _fwd_task(",
           "core-grid forward strides by num_programs + 1: every (P+1)-th task skipped"),
    Mutant("core_grid_task_order_swapped", "kernels.py",
           "            _bwd_group(t_offset + f // bh_count, bh_offset + f % bh_count,",
           "            _bwd_group(t_offset + f % bh_count, bh_offset + f // bh_count,",
           "core-grid backward decodes flat task ids head-major instead of chunk-major"),
    Mutant("gate_head_major_batch_offset", "kernels.py",
           "        return (b_start * HV + tl.cast(i_h, tl.int64) * T) + (row0 - b_start)",
           "        return b_start * HV + tl.cast(i_h, tl.int64) * T + row0",
           "head-major beta/g offsets count the batch start twice (B >= 2 with HV >= 2)"),
    # --- gate
    Mutant("fwd_gate_sign", "kernels.py",
           "b_kscale = b_beta * tl.exp2(tl.load(g + gate_base + o_gate",
           "b_kscale = b_beta * tl.exp2(-tl.load(g + gate_base + o_gate",
           "forward gate exp2(-g) instead of exp2(g)"),
    Mutant("bwd_gate_natural_exp", "kernels.py",
           "b_eg = tl.exp2(b_g)",
           "b_eg = tl.exp(b_g)",
           "backward gate exp(g) instead of exp2(g) (g is in log2 units)"),
    Mutant("bwd_gate_difference_reversed", "kernels.py",
           "tl.exp2(tl.where(m_L, b_g[:, None] - b_g[None, :], 0.0))",
           "tl.exp2(tl.where(m_L, b_g[None, :] - b_g[:, None], 0.0))",
           "backward pairwise gate exp2(g_j - g_i) instead of exp2(g_i - g_j)"),
    # --- transposes and gradient terms
    Mutant("bwd_A_instead_of_A_transpose", "kernels.py",
           "p_At = A + (row0 * HV + i_h) * BT + o_t[None, :] * (HV * BT) + o_t[:, None]",
           "p_At = A + (row0 * HV + i_h) * BT + o_t[:, None] * (HV * BT) + o_t[None, :]",
           "backward loads A where A^T is needed"),
    Mutant("dg_column_sum_sign", "kernels.py",
           "b_dg += tl.sum(b_Q, 1) - tl.sum(b_Q, 0)",
           "b_dg += tl.sum(b_Q, 1) + tl.sum(b_Q, 0)",
           "dg adds the column sums of Q instead of subtracting them"),
    Mutant("dbeta_kk_term_column_sum", "kernels.py",
           "    b_db += tl.sum(b_P, 1)\n",
           "    b_db += tl.sum(b_P, 0)\n",
           "dbeta's term through A sums dL * kk^T along the wrong axis (column sums, not row sums)"),
    # --- launch planning
    Mutant("split_rectangle_unclipped", "planning.py",
           "(t_off, min(t_len, NT - t_off), bh_off, min(bh_len, BH - bh_off))",
           "(t_off, t_len, bh_off, bh_len)",
           "split_rectangle's last pieces not clipped: launches run tasks past NT / BH"),
    Mutant("split_rectangle_area_exceeded", "planning.py",
           "t_len = min(NT, max_t, max(1, area // bh_len))",
           "t_len = min(NT, max_t, max(1, area // bh_len) + 1)",
           "split_rectangle's chunk rows per piece one too many: launches exceed max_blocks / max_tasks"),
    Mutant("split_rectangle_bh_ignores_area", "planning.py",
           "bh_len = min(BH, max_bh, area)",
           "bh_len = min(BH, max_bh)",
           "split_rectangle cuts the head axis without the area limit: one chunk row of BH > limit tasks"),
    Mutant("persistent_cap_ignores_block_limit", "planning.py",
           "cap = min(spec.num_cores, spec.max_grid[0], spec.max_blocks or spec.num_cores)",
           "cap = min(spec.num_cores, spec.max_grid[0])",
           "core grid sized by num_cores alone: more programs than max_blocks allows"),
    Mutant("ub_model_margin_ignored", "planning.py",
           "ub_footprint(kernel, BT, tile) > ub_bytes * UB_SAFETY_MARGIN:",
           "ub_footprint(kernel, BT, tile) > ub_bytes:",
           "tile sizing ignores the UB safety margin: tiles the NPU compiler cannot fit"),
    Mutant("halve_padded_on_ties", "planning.py",
           "_padded(dim, tile // 2) < _padded(dim, tile):",
           "_padded(dim, tile // 2) <= _padded(dim, tile):",
           "cuda's forward halves its tiles where that pads no less (K=100: two 64-wide tiles, not one 128-wide): "
           "narrower tiles than the rule asks for"),
    # --- the ops' arguments are read-only
    Mutant("A_dead_columns_zeroed_in_place", "ops.py",
           "g=_gate_layout(g, self.head_major), A=A.contiguous(),",
           "g=_gate_layout(g, self.head_major), A=A.contiguous().nan_to_num_(0.0),",
           "the launch zeroes A's dead columns in place: the caller's A changes (where it is contiguous, "
           "so .contiguous() is no copy), and no output does"),
    Mutant("dg_allocated_in_k_dtype", "ops.py",
           "dg = call.new(gate_shape, g.dtype) if g is not None else None",
           "dg = call.new(gate_shape, p.dtype) if g is not None else None",
           "dg allocated in k's dtype instead of g's: a float32 g with bfloat16 k (flash-linear-attention's call) "
           "gets a bfloat16 dg"),
    # --- arithmetic in float32 whatever the gates' dtype
    Mutant("fwd_kscale_rounded_to_beta_dtype", "kernels.py",
           "        b_kscale = b_beta * tl.exp2(tl.load(g + gate_base + o_gate, mask=m_t, other=0.0).to(tl.float32))\n",
           "        b_kscale = (b_beta * tl.exp2(tl.load(g + gate_base + o_gate, mask=m_t, other=0.0).to(tl.float32)))"
           ".to(beta.dtype.element_ty).to(tl.float32)\n",
           "the forward's key scale beta * exp2(g) rounded to beta's dtype (a bf16 beta: an error of its unit "
           "roundoff in w, within the oracle's bf16 bound)"),
    # --- validation: every argument passed wrongly in every way (properties.CORRUPTIONS' families)
    Mutant("g_tensor_check_dropped", "validation.py",
           '        g = _tensor("g", g)\n',
           "        pass\n",
           "g is not checked to be a tensor: a list g fails deep in the op with an AttributeError (survivor of the "
           "generated sample at seed 11; the corruptions covered k alone)"),
    # --- knobs: a launch knob that does not reach the launch leaves every output right (each plan and
    # variant is correct) and makes the properties that vary knobs compare a launch with itself
    Mutant("call_memo_ignores_config", "ops.py",
           "key = (kernel, problem, backend_name, merged, beta.dtype,",
           "key = (kernel, problem, backend_name, beta.dtype,",
           "the memo of planned calls ignores the launch config: a call with other knobs reuses the first call's "
           "plan and variant"),
    Mutant("spec_ignores_max_blocks_knob", "backends.py",
           "max_blocks=_given(config.max_blocks, self.max_blocks),",
           "max_blocks=self.max_blocks,",
           "the device spec ignores config.max_blocks: no launch is split under a smaller block limit"),
    Mutant("variant_ignores_gate_layout_knob", "backends.py",
           "return dot_guard, _given(config.gate_head_major, self.gate_head_major), emulate",
           "return dot_guard, self.gate_head_major, emulate",
           "config.gate_head_major is ignored: beta/g always in the backend's own layout"),
    # --- Ascend dot guards (DOT_GUARD): each reload, the rebuild and the copy
    Mutant("dot_guard_switched_off", "ops.py",
           "DOT_GUARD=sp.DOT_GUARD,",
           "DOT_GUARD=False,",
           "kernels launched without the dot guard: A held and reused as a left operand across tiles",
           emulated=True),
    Mutant("fwd_A_reload_dropped", "kernels.py",
           "b_o = _mm(_A_for_dot(b_A, p_A, m_Ar, m_Ac, LOWP_DOT, DOT_GUARD), b_x",
           "b_o = _mm(b_A, b_x",
           "forward tile loops reuse the held A as the left operand of every tile's dot",
           emulated=True),
    Mutant("fwd_v_tiles_to_k_count", "kernels.py",
           "\n    for i_v in tl.range(NF, NV, num_stages=1):",
           "\n    for i_v in tl.range(NF, NK, num_stages=1):",
           "the forward's v tiles after the fused pairs run to the k tiles' count: where V needs more tiles than K, "
           "u's last tiles are never written"),
    # --- the cuda variant's bf16 operands (LOWP_DOT), run on the cpu backend through the lowp_dot knob
    Mutant("bwd_fused_loop_v_under_k_mask", "kernels.py",
           "            o_x, m_v = _tile(o_t, m_t, i, BV, V, HV * V)\n            if PREFETCH",
           "            o_x, m_v = _tile(o_t, m_t, i, BV, K, HV * V)\n            if PREFETCH",
           "the backward's fused first loop (LOWP_DOT, as many K as V tiles) stores dv under K's column bound"),
    Mutant("bwd_v_loop_At_reload_dropped", "kernels.py",
           "b_dvb = _mm(_A_for_dot(b_At, p_At, m_Ar, m_Ac, LOWP_DOT, DOT_GUARD), b_du",
           "b_dvb = _mm(b_At, b_du",
           "backward V loop reuses the held A^T as a left operand (clobbered before dA and dM read it)",
           emulated=True),
    Mutant("bwd_dk_loop_At_reload_dropped", "kernels.py",
           "        b_dkb = _mm(_A_for_dot(b_At, p_At, m_Ar, m_Ac, LOWP_DOT, DOT_GUARD), b_dw, LOWP_DOT)\n        b_dkk",
           "        b_dkb = _mm(b_At, b_dw, LOWP_DOT)\n        b_dkk",
           "backward dk loop reuses A^T after the dM dot clobbered it",
           emulated=True),
    Mutant("bwd_symmetric_dL_rebuild_dropped", "kernels.py",
           "            b_Si = b_dLb + tl.trans(b_dLb)  # rebuilt per tile",
           "            b_Si = b_S  # rebuilt per tile",
           "backward dk loop builds the symmetric dL term once and reuses it as every tile's left operand",
           emulated=True),
    Mutant("bwd_kk_copy_dropped", "kernels.py",
           "b_kt = tl.trans(b_k + 0.0)",
           "b_kt = tl.trans(b_k)",
           "k k^T takes one tile as both operands of one dot",
           emulated=True),
    # --- index widths: only tensors past 2**31 elements can tell
    Mutant("int32_row_base", "kernels.py",
           "    return i_b, i_h, row0, n",
           "    return i_b, i_h, row0.to(tl.int32), n",
           "task base offsets (row0 * HV + h) * dim in int32: wrong once an element offset passes 2**31",
           needs="large"),
)


class CatalogError(RuntimeError):
    """A mutant's snippet does not occur exactly once in the current source: update the catalog."""


def mutate(mutant: Mutant, package: Path) -> None:
    """Apply ``mutant`` to the package copy at ``package`` (in place)."""
    path = package / mutant.file
    text = path.read_text()
    count = text.count(mutant.snippet)
    if count != 1:
        raise CatalogError(f"mutant {mutant.id}: snippet occurs {count} times in {mutant.file} (must be once):\n"
                           + textwrap.indent(mutant.snippet, "    | "))
    path.write_text(text.replace(mutant.snippet, mutant.replacement))


def check_catalog(package: Path = PACKAGE) -> list[str]:
    """Problems of the catalog against ``package``: snippets not found exactly once, duplicate ids."""
    problems = []
    ids = [m.id for m in MUTANTS]
    problems += [f"duplicate mutant id {i}" for i in sorted({i for i in ids if ids.count(i) > 1})]
    for m in MUTANTS:
        count = (package / m.file).read_text().count(m.snippet)
        if count != 1:
            problems.append(f"{m.id}: snippet occurs {count} times in {m.file}")
        if m.snippet == m.replacement:
            problems.append(f"{m.id}: replacement equals the snippet")
    return problems


GUARD = '''\
"""pytest plugin of mutation/mutants.py: every wy_ascend module must come from the mutated copy."""
import json, os, sys
from pathlib import Path

import pytest

SRC = Path(os.environ["WY_MUTANT_SRC"]).resolve()


def _modules():
    return {name: str(Path(m.__file__).resolve()) for name, m in list(sys.modules.items())
            if (name == "wy_ascend" or name.startswith("wy_ascend.")) and getattr(m, "__file__", None)}


def _outside():
    return {n: f for n, f in _modules().items() if not Path(f).is_relative_to(SRC)}


def pytest_configure(config):
    import wy_ascend  # noqa: F401

    if _outside():
        raise pytest.UsageError(f"mutant guard: wy_ascend not loaded from the mutated copy {SRC}: {_outside()}")


def pytest_sessionfinish(session, exitstatus):
    Path(os.environ["WY_MUTANT_REPORT"]).write_text(json.dumps({"modules": _modules(), "outside": _outside()}))
'''


@dataclass
class Result:
    mutant: Mutant | None  # None: the baseline
    verdict: str
    seconds: float
    detail: str

    @property
    def name(self) -> str:
        return self.mutant.id if self.mutant else "(baseline)"


def _first_failure(output: str) -> str:
    for line in output.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line[:200]
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def run_one(mutant: Mutant | None, args: argparse.Namespace) -> Result:
    """Run the suite on a copy of src/ with ``mutant`` applied (None: unmutated baseline)."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"wy-mutant-{mutant.id if mutant else 'baseline'}-") as tmp_name:
        tmp = Path(tmp_name)
        src = tmp / "src"
        shutil.copytree(SRC, src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc"))
        if mutant is not None:
            mutate(mutant, src / "wy_ascend")
        guard = tmp / "guard"
        guard.mkdir()
        (guard / "_wy_mutant_guard.py").write_text(GUARD)
        report = tmp / "guard-report.json"
        env = dict(os.environ)
        env.update(
            PYTHONPATH=os.pathsep.join([str(src), str(guard), *filter(None, [env.get("PYTHONPATH")])]),
            PYTHONDONTWRITEBYTECODE="1",
            WY_ASCEND_PROFILE=args.profile,
            WY_ASCEND_REGRESSIONS=str(tmp / "regressions"),
            HYPOTHESIS_STORAGE_DIRECTORY=str(tmp / "hypothesis"),
            WY_ASCEND_HYPOTHESIS_DB=str(tmp / "hypothesis" / "examples"),  # fuzz/profiles.py's database
            WY_ASCEND_FUZZ_REPORT=str(tmp / "fuzz-report.json"),  # fuzz/conftest.py's run report
            WY_MUTANT_SRC=str(src),
            WY_MUTANT_REPORT=str(report),
        )
        if args.backend:
            env["WY_ASCEND_BACKEND"] = args.backend
        if args.jobs > 1 and "OMP_NUM_THREADS" not in os.environ:
            env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // args.jobs))
        cmd = [sys.executable, "-m", "pytest", *args.tests, "-x", "-q", "-p", "no:cacheprovider",
               "-p", "_wy_mutant_guard", *args.pytest_args]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            output, _ = proc.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the pytest process group this function started
            proc.communicate()
            return Result(mutant, "timeout", time.monotonic() - start, f"no verdict within {args.timeout} s")
        seconds = time.monotonic() - start
        if args.verbose:
            print(f"--- {mutant.id if mutant else 'baseline'} (exit {proc.returncode})\n{output}", flush=True)
        rc = proc.returncode
        if rc == -signal.SIGKILL:  # not a crash of the code under test: the OOM killer or a person
            return Result(mutant, "error", seconds, "killed by SIGKILL (out of memory?): no verdict")
        if rc < 0:  # SIGSEGV, SIGABRT, SIGBUS: the mutant made the suite crash (e.g. out-of-bounds access)
            return Result(mutant, "caught", seconds, f"suite crashed with {signal.Signals(-rc).name}")
        if "mutant guard" in output:
            return Result(mutant, "error", seconds, _first_failure(output))
        if rc in (0, 1):
            try:
                loaded = json.loads(report.read_text())
            except (OSError, ValueError):
                return Result(mutant, "error", seconds, "guard report missing: cannot tell which wy_ascend ran")
            if loaded["outside"] or "wy_ascend" not in loaded["modules"]:
                return Result(mutant, "error", seconds, f"mutated copy not (fully) loaded: {loaded}")
        if rc == 1:
            return Result(mutant, "caught", seconds, _first_failure(output))
        if rc == 0:
            return Result(mutant, "missed", seconds, _first_failure(output))
        return Result(mutant, "error", seconds, f"pytest exit {rc}: {_first_failure(output)}")


def _store_snapshot() -> list[str]:
    store = ROOT / "regressions"
    return sorted(p.name for p in store.glob("*.json")) if store.is_dir() else []


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--only", action="append", default=[], metavar="ID", help="run only these mutants (repeatable)")
    p.add_argument("--jobs", type=int, default=1, help="mutants run in parallel (default 1)")
    p.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT, help="seconds per mutant run")
    p.add_argument("--profile", default="ci", help="WY_ASCEND_PROFILE of the fuzz runs (default ci)")
    p.add_argument("--backend", help="WY_ASCEND_BACKEND of the fuzz runs (default: the environment's, else cpu)")
    p.add_argument("--tests", action="append", default=None, metavar="PATH",
                   help=f"pytest targets (repeatable; default {DEFAULT_TESTS})")
    p.add_argument("--include-large", action="store_true", help="also run the mutants only a large profile can catch")
    p.add_argument("--no-baseline", action="store_true", help="skip the unmutated baseline run")
    p.add_argument("--check", action="store_true", help="only check that every snippet applies exactly once")
    p.add_argument("--list", action="store_true", help="list the catalog and exit")
    p.add_argument("--json", type=Path, help="also write the results to this JSON file")
    p.add_argument("-v", "--verbose", action="store_true", help="print each run's pytest output")
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = p.parse_args(argv)
    args.tests = args.tests or [DEFAULT_TESTS]
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a.split("=")[0] in ("--generated", "--recheck", "--merge", "--blind-spots") for a in argv):  # AST mutants
        from .generated import main as generated

        return generated(argv)
    args = parse_args(argv)
    if args.list:
        for m in MUTANTS:
            print(f"{m.id:38s} {m.file:14s} needs {m.needs:5s} {m.description}")
        return 0
    problems = check_catalog()
    if problems:
        print("mutant catalog does not match the source:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    if args.check:
        print(f"all {len(MUTANTS)} mutants apply exactly once")
        return 0
    known = {m.id for m in MUTANTS}
    unknown = [i for i in args.only if i not in known]
    if unknown:
        print(f"unknown mutant ids {unknown}; known: {sorted(known)}", file=sys.stderr)
        return 2
    selected = [m for m in MUTANTS if (m.id in args.only if args.only else (m.needs == "ci" or args.include_large))]
    skipped = [m for m in MUTANTS if m not in selected and not args.only]
    for target in args.tests:
        if not (ROOT / target.split("::")[0]).exists():
            print(f"test target {target} does not exist", file=sys.stderr)
            return 2
    print(f"mutation run: {len(selected)} mutants, profile {args.profile}, tests {' '.join(args.tests)}, "
          f"jobs {args.jobs}, timeout {args.timeout} s", flush=True)
    before = _store_snapshot()
    t0 = time.monotonic()
    if not args.no_baseline:
        base = run_one(None, args)
        verdict = {"missed": "pass", "caught": "FAIL"}.get(base.verdict, base.verdict)
        print(f"baseline: {verdict} ({base.seconds:.0f} s) {base.detail}", flush=True)
        if base.verdict != "missed":
            print("the unmutated suite must pass before mutants mean anything; stopping", file=sys.stderr)
            return 2
    results: list[Result] = []

    def one(m: Mutant) -> Result:
        r = run_one(m, args)
        print(f"  {r.verdict:8s} {m.id:38s} {r.seconds:6.0f} s  {r.detail}", flush=True)
        return r

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(one, selected))
    elapsed = time.monotonic() - t0
    caught = [r for r in results if r.verdict == "caught"]
    print(f"\n{'mutant':38s} {'file':14s} {'verdict':8s} {'time':>6s}  first failure")
    for r in results:
        assert r.mutant is not None
        print(f"{r.name:38s} {r.mutant.file:14s} {r.verdict:8s} {r.seconds:5.0f}s  {r.detail}")
    for m in skipped:
        print(f"{m.id:38s} {m.file:14s} {'not run':8s} {'':>6s}  needs tensors past 2**31 elements "
              f"(tests/test_large.py on CUDA, see --help): {m.description}")
    rate = len(caught) / len(results) if results else 1.0
    print(f"\nkill rate: {len(caught)}/{len(results)} = {rate:.0%} in {elapsed:.0f} s"
          + (f"; {len(skipped)} large-only mutants not run" if skipped else ""))
    survivors = [r.name for r in results if r.verdict != "caught"]
    if survivors:
        print(f"not caught: {', '.join(survivors)}")
    if _store_snapshot() != before:
        print("error: the real regressions/ changed during the mutation run", file=sys.stderr)
        survivors.append("(store changed)")
    if args.json:
        args.json.write_text(json.dumps({
            "profile": args.profile, "tests": args.tests, "seconds": elapsed, "kill_rate": rate,
            "results": [{"id": r.name, "file": r.mutant.file if r.mutant else None, "verdict": r.verdict,
                         "seconds": round(r.seconds, 1), "detail": r.detail} for r in results],
            "not_run": [m.id for m in skipped],
        }, indent=2) + "\n")
    # Re-check at the end: kernels.py may have changed while the run went on.
    late = check_catalog()
    if late:
        print("warning: the catalog no longer matches the source:\n  " + "\n  ".join(late), file=sys.stderr)
        survivors.append("(stale catalog)")
    return 1 if survivors else 0

