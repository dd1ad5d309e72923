"""Subjects (wy_ascend.subjects): the registry, the fla-ascend adapter on the cpu's interpreter against
the float64 oracle, its scoped shims, a case's subject in the store (names unchanged for wy_ascend,
subject and version recorded for a foreign one) and the known mark's semantics in replay.

fla-ascend cases here are a chunk or two of one or two heads: ~0.1 s each on the interpreter.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from wy_ascend import builtin_subjects, subjects
from wy_ascend.cli import main
from wy_ascend.testing import store
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import PropertyFailure, run_property
from wy_ascend.testing.store import KnownDefectFixed, case_hash, load, record_failure, replay

if importlib.util.find_spec("fla") is None:  # found, not imported: the adapter imports it under its shims
    pytest.skip("the foreign subjects need fla-core (pip install '.[upstream]')", allow_module_level=True)

FLA = "fla-ascend"


@pytest.fixture(autouse=True)
def _cpu_only(backend: str) -> None:
    if backend != "cpu":
        pytest.skip("fla-ascend runs here on the cpu backend's interpreter")


BUILT_IN = ("wy_ascend", "fla-ascend", "fla")


def test_registry_names_the_subjects_and_refuses_others() -> None:
    assert set(BUILT_IN) <= set(subjects.available())
    assert subjects.get(None) is subjects.get("wy_ascend") and not subjects.get(None).foreign
    assert subjects.get(FLA).foreign and subjects.get(FLA).installed_version == "0.6.0"
    assert subjects.get(FLA).loaded == f"builtin {subjects.BUILTIN[FLA]}"  # through the loader, like anyone's
    with pytest.raises(ValueError, match="subject must be one of"):
        subjects.get("flash")
    with pytest.raises(ValueError, match="runs on the backends"):
        subjects.get("fla-ascend").check("cuda")  # Ascend kernels: npu, and cpu under the interpreter
    with pytest.raises(ValueError, match="subject must be one of"):
        Case(subject="flash")


@pytest.mark.parametrize("case", [Case(T=20, H=1, HV=2, K=24, V=16, use_g=True, subject=FLA),
                                  Case(cu_seqlens=(0, 3, 21), H=2, HV=2, K=16, V=40, BT=16, subject=FLA)],
                         ids=["grouped_gated_partial_chunk", "varlen"])
def test_fla_ascend_matches_the_oracle_through_the_adapter(case: Case) -> None:
    """The adapter hands fla-ascend this project's layouts unchanged: every output within the float32
    bound of the oracle (a transposed or misplaced argument is off by O(1))."""
    metrics = run_property("oracle", case)
    assert all(metrics[name]["rel_rms"] <= 1e-5 for name in ("w", "u", "dk", "dv", "dbeta"))


def _fla_ascend_module() -> Any:
    """fla-core's Ascend module as the subject imports it, under its shims: imported bare on a CPU it finds
    no Triton driver, and a test importing it so failed alone and passed after any test that had imported it
    (a generated-mutant run, running such a test first, credited it with 22 false kills)."""
    with subjects.get(FLA).context("cpu", None):  # where the subject imports it: the interpreter loaded first
        return builtin_subjects._fla_module(builtin_subjects.FLA_ASCEND_MODULE, "cpu")


def test_fla_ascend_outputs_are_fla_ascends_own() -> None:
    """The subject's ops are fla-core's functions: its forward's output equals a direct call's, bit for bit."""
    wy_fast = _fla_ascend_module()
    x = Case(T=16, HV=2, use_g=True, subject=FLA).build_inputs()
    forward, _ = subjects.get(FLA).ops("cpu")
    w, u = forward(x.k, x.v, x.beta, x.A, x.g)
    with builtin_subjects.cpu_shims():
        w2, u2 = wy_fast.recompute_w_u_fwd_npu(x.k, x.v, x.beta, x.A, g=x.g)
    assert torch.equal(w, w2) and torch.equal(u, u2)


def test_the_stub_device_offers_exactly_the_properties_fla_ascend_reads(monkeypatch) -> None:
    """The cpu stub's device properties are what fla-ascend's forward and backward read, no more and no
    less: a key it offers that no launch reads is a setting no test can see (a mutant halving an unread
    ``num_vectorcore`` survived), and a key a new fla reads that the stub lacks fails here by name."""
    read: list[str] = []

    class Recorded(dict):
        def __getitem__(self, key: str) -> int:
            read.append(key)
            return super().__getitem__(key)

    offered = builtin_subjects._STUB._properties(0)
    monkeypatch.setattr(builtin_subjects._STUB.utils, "get_device_properties", lambda device: Recorded(offered))
    run_property("oracle", Case(T=20, H=1, HV=2, K=24, V=16, use_g=True, subject=FLA))
    assert read and set(read) == set(offered), (sorted(set(read)), sorted(offered))


def test_cpu_shims_are_scoped() -> None:
    from triton.runtime import driver

    before, had_npu, ub = driver.active, hasattr(torch, "npu"), os.environ.get("ASCEND_UB_CAPACITY_BITS")
    with builtin_subjects.cpu_shims(num_cores=3):
        assert driver.active.utils.get_device_properties(0)["num_aicore"] == 3
        assert torch.npu.current_device() == 0  # type: ignore[attr-defined]
        assert os.environ["ASCEND_UB_CAPACITY_BITS"] == str(builtin_subjects.UB_CAPACITY_BITS)
    assert driver.active is before and hasattr(torch, "npu") == had_npu
    assert os.environ.get("ASCEND_UB_CAPACITY_BITS") == ub


def test_grid_limit_knob_splits_fla_ascends_launches_and_is_restored() -> None:
    """max_blocks lowers fla-ascend's own grid limit for the call (its backward's host-side split): the
    outputs stay those of one launch, and the module's limit is back after the call."""
    wy_fast = _fla_ascend_module()
    case = Case(T=40, HV=2, use_g=True, subject=FLA, knobs={"max_blocks": 1})
    run_property("launch_invariance", case)
    assert wy_fast.ASCEND_MAX_GRID_DIM == 65535


def test_the_grid_limit_knob_on_a_module_without_the_limit_is_a_clear_error() -> None:
    """An fla-ascend build whose module has no grid limit to lower: max_blocks is refused by name, before any
    launch, and a call without the knob leaves the module alone."""
    import types

    from wy_ascend.backends import LaunchConfig

    module = types.ModuleType("fla_without_a_limit")
    with pytest.raises(ValueError, match="knob max_blocks: fla_without_a_limit has no grid limit"):
        with builtin_subjects._grid_limit(module, LaunchConfig(max_blocks=8)):
            raise AssertionError("the block ran")
    with builtin_subjects._grid_limit(module, None):
        pass
    assert not hasattr(module, builtin_subjects.GRID_LIMIT)


def test_a_default_subject_keeps_stored_names_and_a_foreign_one_is_recorded(tmp_path: Path) -> None:
    case = Case(T=20, HV=2)
    assert "subject" not in case.to_dict()
    assert case_hash("oracle", case) == case_hash("oracle", {k: v for k, v in case.to_dict().items()})
    foreign = case.replace(subject=FLA)
    assert case_hash("oracle", foreign) != case_hash("oracle", case)
    path = record_failure("oracle", foreign, PropertyFailure("recorded", {}), tmp_path)
    data = json.loads(path.read_text())
    assert data["subject"] == {"name": FLA, "version": "0.6.0", "loaded": subjects.get(FLA).loaded,
                               "distribution": "fla-core"}
    assert load(path).case == foreign
    plain = json.loads(record_failure("oracle", case, PropertyFailure("recorded", {}), tmp_path).read_text())
    assert "subject" not in plain and "fla-core" not in plain["versions"]


def _known(tmp_path: Path, case: Case, failure: BaseException, reason: str = "upstream's") -> Path:
    path = record_failure("oracle", case, failure, tmp_path)
    data = json.loads(path.read_text())
    data["known"] = {"reason": reason}
    path.write_text(json.dumps(data))
    return path


def test_known_mark_passes_while_the_defect_reproduces_and_fails_loudly_when_it_does_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    case = Case(T=20, subject=FLA)
    path = _known(tmp_path, case, PropertyFailure("recorded", {}))
    stored = load(path)
    assert stored.known == {"reason": "upstream's"} and stored.path == path  # loaded: the mark is not hashed

    def failing(prop: str, c: Case) -> dict:
        raise PropertyFailure("still wrong", {})
    monkeypatch.setattr(store, "run_property", failing)
    assert replay(stored)["known"]["still_fails"].startswith("PropertyFailure: still wrong")
    assert main(["replay", str(path), "--in-process"]) == 0
    assert "KNOWN: still fails as recorded" in capsys.readouterr().out

    def crashing(prop: str, c: Case) -> dict:
        raise RuntimeError("another failure")
    monkeypatch.setattr(store, "run_property", crashing)
    with pytest.raises(RuntimeError, match="another failure"):  # not the recorded failure: not covered by the mark
        replay(stored)

    monkeypatch.setattr(store, "run_property", lambda prop, c: {"w": {"rel_rms": 0.0}})
    with pytest.raises(KnownDefectFixed, match="no longer fails.*remove the file's 'known' mark"):
        replay(stored)
    assert main(["replay", str(path), "--in-process"]) == 1
    assert "FIXED:" in capsys.readouterr().out
    # Replayed on another subject, the mark (the file's subject's defect) does not apply.
    assert replay(stored, subject="wy_ascend") == {"w": {"rel_rms": 0.0}}


def test_a_known_device_fault_is_told_wherever_the_device_reports_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A recorded fault (Triton's RuntimeError from a launch) that comes back as torch's AcceleratorError from
    a synchronize, or the other way round, still fails as recorded; so does a subclass of the recorded type;
    another error of the same base type with no fault in it does not."""
    import torch

    from wy_ascend.testing.store import fails_as_recorded

    launch = {"type": "RuntimeError", "message": "Triton Error [CUDA]: an illegal memory access was encountered"}
    synchronize = torch.AcceleratorError("CUDA error: an illegal memory access was encountered")
    assert fails_as_recorded(launch, synchronize)
    assert fails_as_recorded({"type": "AcceleratorError", "message": ""}, RuntimeError("unspecified launch failure"))
    assert fails_as_recorded({"type": "PropertyFailure", "message": "x"}, PropertyFailure("y", {}))
    assert fails_as_recorded({"type": "ValueError", "message": "x"}, UnicodeError("y"))  # a subclass
    assert not fails_as_recorded({"type": "ValueError", "message": "x"}, TypeError("y"))
    assert not fails_as_recorded({"type": "OSError", "message": "no fault"}, RuntimeError("illegal memory access"))
    assert not fails_as_recorded({"type": "AcceleratorError", "message": ""}, RuntimeError("out of memory"))
    path = _known(tmp_path, Case(T=20, subject=FLA), RuntimeError(launch["message"]))

    def faulting(prop: str, c: Case) -> dict:
        raise synchronize
    monkeypatch.setattr(store, "run_property", faulting)
    assert replay(load(path))["known"]["still_fails"].startswith("AcceleratorError: CUDA error: an illegal")


def test_a_known_defect_passing_on_another_backend_than_its_own_is_not_fixed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A defect found on cuda (fla's TF32 dots) passes on the cpu, where no dot is TF32: that says nothing
    of the defect (no KnownDefectFixed); the metrics name the backend it is known on."""
    path = _known(tmp_path, Case(T=20, subject=FLA, backend="cuda"), PropertyFailure("recorded", {}))
    stored = load(path)
    assert stored.backend == "cuda"
    monkeypatch.setattr(store, "run_property", lambda prop, c: {"w": {"rel_rms": 0.0}})
    metrics = replay(stored, backend="cpu")
    assert metrics["known_elsewhere"]["found_on"] == "cuda" and metrics["w"] == {"rel_rms": 0.0}


def test_a_malformed_known_mark_is_refused(tmp_path: Path) -> None:
    path = _known(tmp_path, Case(T=20, subject=FLA), PropertyFailure("recorded", {}), reason="")
    with pytest.raises(Exception, match="field 'known"):
        load(path)


def test_properties_of_wy_ascends_machinery_do_not_apply_to_a_foreign_subject() -> None:
    with pytest.raises(ValueError, match="does not apply to subject 'fla-ascend'"):
        run_property("plan_coverage", Case(T=20, subject=FLA))


def test_a_foreign_subjects_draws_stay_within_its_claims_and_reach_small_dims() -> None:
    """fla-ascend's cases carry its name, draw only its knobs, and reach K below 16 (its claims take
    1..256); the known defect that covers such a case is named for the properties it fails."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from fuzz.strategies import CPU_SIZES, SMALL_DIMS, cases, known_defect

    seen: list[Case] = []

    @settings(max_examples=60, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def draw(data: st.DataObject) -> None:
        case = data.draw(cases(CPU_SIZES.scaled(small_dims=SMALL_DIMS), "cpu", partition_knobs=True, subject=FLA))
        assert case.subject == FLA and set(case.knobs) <= {"max_blocks", "num_cores"} and case.knobs
        assert case.BT in subjects.get(FLA).claims.chunk_sizes
        seen.append(case)
    draw()
    small = [c for c in seen if min(c.K, c.V) < 16]
    assert small and all(known_defect("oracle", c) is not None for c in small)
    assert known_defect("oracle", small[0].replace(subject="wy_ascend")) is None  # wy_ascend's are never known


def test_a_known_defect_of_one_backend_covers_its_cases_there_only() -> None:
    """fla's illegal memory access with narrow dims is triton 3.6's on sm_90: its cuda cases are left out of the
    draws (and of the differential's peer cases), the same cases on the interpreter are not."""
    from fuzz.strategies import known_defect

    narrow = Case(K=16, V=16, BT=64, T=1, dtype="float16", subject="fla", backend="cuda")
    assert known_defect("oracle", narrow).file == "oracle-351afae366d1.json"
    assert known_defect("differential", narrow) is not None
    assert known_defect("oracle", narrow.replace(backend="cpu")) is None
    assert known_defect("oracle", narrow.replace(K=64, V=64)) is None
    wide = narrow.replace(K=64, V=80, H=2, HV=6, BT=16)  # fla's grid (NT, B * HV) past CUDA's 65,535 in y
    assert known_defect("differential", wide.replace(B=10923)).file == "oracle-b3dc7546df6d.json"  # 65,538
    assert known_defect("oracle", wide.replace(B=10922)) is None  # 65,532 blocks launch
    packed = wide.replace(B=1, T=10923, cu_seqlens=tuple(range(10924)))  # a packed batch's grid is (chunks, HV)
    assert known_defect("oracle", packed) is None
    assert known_defect("oracle", wide.replace(B=10923, backend="cpu")).file == "oracle-b3dc7546df6d.json"  # the rule


def test_flas_gpu_kernels_launch_past_a_gpus_grid_on_a_large_fixed_batch() -> None:
    """docs/findings-fla.md 15 on the cpu, with fla-core's own code: its GPU forward launches a grid of
    (chunks, B * HV), and with B * HV = 65,536 the interpreter's GPU grid rule refuses the launch before any
    program runs (CUDA's y axis holds 65,535); a packed batch of the same tokens launches (chunks, HV)
    and is not refused (run here at a few sequences: its rule holds at any size)."""
    from wy_ascend.interpreter import AscendSemanticsError
    from wy_ascend.testing.properties.common import subject_of

    case = Case(B=16384, T=1, H=1, HV=4, K=16, V=16, BT=16, dtype="float32", subject="fla", backend="cpu")
    args = case.arguments(case.build_inputs())
    args.pop("dw"), args.pop("du")
    forward, _ = subject_of(case).ops("cpu")
    with pytest.raises(Exception) as info:
        forward(**args)
    cause: BaseException | None = info.value
    while cause is not None and not isinstance(cause, AscendSemanticsError):
        cause = cause.__cause__ or cause.__context__
    assert cause is not None and "grid axis 1 of 65536 programs" in str(cause), info.value
    packed = Case(B=1, T=3, H=1, HV=4, K=16, V=16, BT=16, dtype="float32", cu_seqlens=(0, 1, 2, 3), subject="fla",
                  backend="cpu")
    packed_args = packed.arguments(packed.build_inputs())
    packed_args.pop("dw"), packed_args.pop("du")
    w, u = forward(**packed_args)
    assert w.shape == (1, 3, 4, 16) and bool(torch.isfinite(w).all())


@pytest.mark.parametrize("name", sorted(set(BUILT_IN) - {subjects.DEFAULT}))
def test_a_foreign_subjects_scaled_ops_say_its_gates_are_token_major(name: str) -> None:
    """The scaling properties lay out their virtual beta and g as the ops say the kernels read them: fla's read
    [B,T,HV] on every backend, whatever this project's kernels read there (head-major on the cpu), so a
    foreign subject's ops must never take the backend's rule (its zeros would hide a wrong layout)."""
    from wy_ascend.testing.scaling import subject_ops

    ops = subject_ops(Case(T=16, HV=2, use_g=True, subject=name))
    own = subject_ops(Case(T=16, HV=2, use_g=True))
    assert own.gates_head_major and not ops.gates_head_major


@pytest.mark.parametrize("name", sorted(set(BUILT_IN) - {subjects.DEFAULT}))
def test_known_marks_leave_every_property_of_a_foreign_subject_cases_to_draw(name: str) -> None:
    """The known marks of a subject, together, leave each property cases to draw, unless one mark covers all of
    the property's (``known_everywhere``: its test is skipped naming the file). Marks that each cover a class
    (float32 at TF32, bfloat16's dA) can jointly cover every case, and the property's test then fails as
    Unsatisfiable instead of fuzzing anything (a bfloat16-and-float16 mark beside the float32 one once did)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from fuzz.strategies import CPU_SIZES, SMALL_DIMS, cases, known_defect, known_everywhere
    from wy_ascend.testing.properties import PROPERTIES

    seen: list[Case] = []

    @settings(max_examples=100, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def draw(data: st.DataObject) -> None:
        seen.append(data.draw(cases(CPU_SIZES.scaled(small_dims=SMALL_DIMS), "cpu", partition_knobs=True, subject=name)))
    draw()
    muted = [prop for prop in PROPERTIES if known_everywhere(prop, name) is None
             and all(known_defect(prop, case) is not None for case in seen)]
    assert not muted, f"{name}'s known marks cover every drawn case of {muted}"


@settings(max_examples=10, derandomize=True, database=None, deadline=None)
@given(backend=st.sampled_from(["cuda", "npu"]), name=st.sampled_from(["fla.ops.gated_delta_rule.wy_fast", "fla.x"]),
       why=st.sampled_from(["No module named 'fla'", "cannot import name 'wy_fast'"]))
def test_a_fla_subject_without_fla_core_says_how_to_install_it(backend: str, name: str, why: str) -> None:
    """_fla_module where importing fla-core fails (a stand-in import_module raising ImportError): an ImportError
    naming the backend, the original error and the pinned install command, chained to the original."""
    def missing(module: str) -> Any:
        assert module == name
        raise ImportError(why)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(builtin_subjects.importlib, "import_module", missing)
        with pytest.raises(ImportError) as e:
            builtin_subjects._fla_module.__wrapped__(name, backend)
    assert str(e.value) == (f"subject on {backend!r} needs fla-core ({why}); install it with pip install "
                            f"'.[upstream]' (fla-core=={builtin_subjects._FLA_VERSION})")
    assert isinstance(e.value.__cause__, ImportError) and str(e.value.__cause__) == why
