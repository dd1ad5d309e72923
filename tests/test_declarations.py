"""The subject declaration API (wy_ascend.subjects): every field checked with an error naming it, the loader
(built-in names, entry points, import paths, the processes a run starts), known defects as data, the adapter
from the canonical call to a subject's own conventions, and the example outside subject (examples/) against
the oracle. Needs no fla-core."""

from __future__ import annotations

import dataclasses
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from wy_ascend import subjects
from wy_ascend.subjects import (
    GPU,
    Calling,
    Claims,
    DeclarationError,
    Known,
    Subject,
    Target,
)
from wy_ascend.testing.case import Case

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_SRC = ROOT / "examples" / "natural_gate_wy" / "src"
EXAMPLE = "natural_gate_wy.subject:SUBJECT"


def _forward(*a: Any, **kw: Any) -> Any:
    raise AssertionError("not called")


def _subject(**fields: Any) -> Subject:
    return Subject(**{"name": "probe", "forward": _forward, "version": "1", **fields})


# (what is made, the field its error must name); each a declaration wrong in that field alone
MALFORMED = [
    (lambda: Claims(dtypes=("float64",)), "Claims.dtypes"),
    (lambda: Claims(dtypes=()), "Claims.dtypes"),
    (lambda: Claims(chunk_sizes=(48,)), "Claims.chunk_sizes"),
    (lambda: Claims(dims=(0, 64)), "Claims.dims"),
    (lambda: Claims(dims=(64, 32)), "Claims.dims"),
    (lambda: Claims(dims=(17, 31), pow2_dims=True), "Claims.dims"),
    (lambda: Claims(head_ratios=(0,)), "Claims.head_ratios"),
    (lambda: Claims(varlen=False, fixed=False), "Claims.varlen"),
    (lambda: Claims(validates="yes"), "Claims.validates"),  # type: ignore[arg-type]
    (lambda: Claims(knobs=("speed",)), "Claims.knobs"),
    (lambda: Calling(forward=("k", "k", "v", "beta", "A")), "Calling.forward"),
    (lambda: Calling(backward=("k", "q")), "Calling.backward"),
    (lambda: Calling(keywords={"q": "q"}), "Calling.keywords"),
    (lambda: Calling(keywords={"k": "key", "g": "g", "chunk_indices": "ci"}), "Calling.keywords"),  # k positional too
    (lambda: Calling(forward=("k", "v", "beta")), "Calling.forward"),  # no A
    (lambda: Calling(keywords={"cu_seqlens": "cu", "chunk_indices": "ci"}), "Calling.keywords"),  # gated, g not passed
    (lambda: Calling(gate_units="log10"), "Calling.gate_units"),
    (lambda: Calling(gate_layout="diagonal"), "Calling.gate_layout"),
    (lambda: Calling(g_dtype="float64"), "Calling.g_dtype"),
    (lambda: Calling(A_dtype="int8"), "Calling.A_dtype"),
    (lambda: Calling(chunk_indices="sometimes"), "Calling.chunk_indices"),
    (lambda: Calling(chunk_indices="prebuilt"), "Calling.prepare_chunk_indices"),
    (lambda: Calling(prepare_chunk_indices=lambda cu, bt: cu), "Calling.prepare_chunk_indices"),
    (lambda: Calling(chunk_size="chunk size"), "Calling.chunk_size"),
    (lambda: Target(device="tpu"), "Target.device"),
    (lambda: Target(device="gpu", rules=frozenset({"clobber"})), "Target.rules"),
    (lambda: Target(rules=frozenset({"teleport"})), "Target.rules"),
    (lambda: Target(triton_ascend="9.9"), "Target.triton_ascend"),
    (lambda: Target(applied=1), "Target.applied"),  # type: ignore[arg-type]
    (lambda: Known("", "oracle-x.json"), "Known.version"),
    (lambda: Known("1", "oracle-x.txt"), "Known.file"),
    (lambda: Known("1", "oracle-x.json", "K <"), "Known.covers"),
    (lambda: Known("1", "oracle-x.json", "__import__('os').getcwd() == ''"), "Known.covers"),
    (lambda: Known("1", "oracle-x.json", "flavour == 'sour'"), "Known.covers"),
    (lambda: Known("1", "oracle-x.json", "K.real > 1"), "Known.covers"),
    (lambda: Known("1", "oracle-x.json", None, frozenset()), "Known.properties"),
    (lambda: Known("1", "oracle-x.json", None, None, frozenset({"tpu"})), "Known.backends"),
    (lambda: _subject(name="two words"), "Subject.name"),
    (lambda: _subject(name="pkg:name"), "Subject.name"),
    (lambda: _subject(schema=2), "Subject.schema"),
    (lambda: _subject(forward="no_colon"), "Subject.forward"),
    (lambda: _subject(backward=3), "Subject.backward"),
    (lambda: _subject(backends=("tpu",)), "Subject.backends"),
    (lambda: _subject(backends=()), "Subject.backends"),
    (lambda: _subject(calling=Claims()), "Subject.calling"),
    (lambda: _subject(claims=Calling()), "Subject.claims"),
    (lambda: _subject(target="ascend"), "Subject.target"),
    (lambda: _subject(known=(Known("1", "a.json"), Known("1", "a.json"))), "Subject.known"),
    (lambda: _subject(known=["a.json"]), "Subject.known"),
    (lambda: _subject(version=None), "Subject.version"),
    (lambda: _subject(around=3), "Subject.around"),
    (lambda: _subject(calling=Calling(keywords={"g": "g"}, chunk_indices="inside")), "Subject.calling"),  # varlen
    (lambda: Claims(gateless=0), "Claims.gateless"),  # type: ignore[arg-type]
    (lambda: _subject(calling=Calling(gate_units="none", keywords={"cu_seqlens": "cu", "chunk_indices": "ci"}),
                      claims=Claims(gateless=False)), "Subject.claims"),  # a gate required of one taking none
]


@pytest.mark.parametrize(("make", "field"), MALFORMED, ids=[f"{f}-{i}" for i, (_, f) in enumerate(MALFORMED)])
def test_each_field_of_a_declaration_is_checked_with_an_error_naming_it(make: Any, field: str) -> None:
    with pytest.raises(DeclarationError, match=f"^{field} must be"):
        make()


def test_a_well_formed_declaration_of_other_conventions_is_accepted() -> None:
    calling = Calling(forward=("k", "v", "g", "A", "beta"), backward=(), keywords={"cu_seqlens": "offsets",
                      "chunk_indices": "chunks"}, gate_units="ln", gate_layout="head", g_dtype="float32",
                      A_dtype="float32", chunk_indices="prebuilt", prepare_chunk_indices="pkg.mod:prepare")
    s = _subject(calling=calling, claims=Claims(chunk_sizes=(64,), dtypes=("bfloat16",), fixed=False),
                 target=Target.for_triton_ascend("3.2"), known=(Known("1", "oracle-a.json", "min(K, V) < 16"),))
    assert s.ops_implemented == ("fwd",) and s.gated and s.schema == subjects.SCHEMA
    assert s.target.rules == subjects.ASCEND_RULES and not GPU.rules


def test_known_defects_are_data_matched_on_every_call_of_a_case() -> None:
    """A known defect covers the cases its expression holds for, under its properties and backends, at its
    version only; a history case is covered where any of its calls is."""
    k = Known("1", "oracle-a.json", "min(K, V) < 16 and not varlen", frozenset({"oracle"}))
    s = _subject(known=(k,))
    narrow = Case(K=8, T=5)
    assert s.known_defect("oracle", narrow) is k
    assert s.known_defect("linearity", narrow) is None  # another property
    assert s.known_defect("oracle", narrow.replace(K=16)) is None
    assert s.known_defect("oracle", narrow.replace(cu_seqlens=(0, 5))) is None  # packed: not covered
    assert s.known_defect("oracle", Case(T=5).replace(before=(narrow,))) is k  # an earlier call is
    assert dataclasses.replace(s, version="2").known_defect("oracle", narrow) is None  # another version
    on_cuda = Known("1", "oracle-b.json", "dtype == 'float32'", None, frozenset({"cuda"}))
    assert _subject(known=(on_cuda,)).known_defect("oracle", Case(T=5, backend="cuda")) is on_cuda
    assert _subject(known=(on_cuda,)).known_defect("oracle", Case(T=5)) is None
    everywhere = Known("1", "bad_input-c.json", None, frozenset({"bad_input"}))
    assert _subject(known=(everywhere,)).known_everywhere("bad_input") is everywhere
    # what a covers expression reads of a call (every name of FEATURES)
    features = subjects.features(Case(T=5, use_g=True, g_dtype="float32", dtype="bfloat16"), Case(T=5))
    assert set(features) == set(subjects.FEATURES) and features["g_dtype"] == "float32" and features["max_blocks"] == 65535
    partial = Known("1", "oracle-d.json", "partial_chunk")  # some sequence ends in a chunk of fewer than BT tokens
    for cu, covered in (((0, 64, 128), False), ((0, 63, 128), True), ((0, 128, 130), True)):
        assert (_subject(known=(partial,)).known_defect("oracle", Case(T=cu[-1], BT=64, cu_seqlens=cu)) is partial) \
            == covered, cu
    assert subjects.features(Case(T=100, BT=64), Case(T=100))["partial_chunk"]


def _recorder(seen: dict[str, Any]) -> Any:
    def forward(k: Any, v: Any, g: Any, A: Any, beta: Any, *, offsets: Any = None, chunks: Any = None) -> Any:
        seen.update(k=k, v=v, g=g, A=A, beta=beta, offsets=offsets, chunks=chunks)
        return k, v
    return forward


def test_the_adapter_calls_a_subject_in_its_own_conventions() -> None:
    """Argument order and names, keyword-only arguments, head-major beta and g, natural-log g in float32, A in
    float32, chunk indices prebuilt in its format: what the subject receives is the canonical call converted,
    exactly (a wrong conversion or order fails here; the oracle property then finds what it breaks)."""
    seen: dict[str, Any] = {}
    prepare = lambda cu, BT: torch.stack((cu[:-1], cu[1:]), 1) * 0 + BT  # noqa: E731 - its own format
    calling = Calling(forward=("k", "v", "g", "A", "beta"), backward=(), keywords={"cu_seqlens": "offsets",
                      "chunk_indices": "chunks"}, gate_units="ln", gate_layout="head", g_dtype="float32",
                      A_dtype="float32", chunk_indices="prebuilt", prepare_chunk_indices=prepare)
    s = _subject(forward=_recorder(seen), calling=calling, target=subjects.HOST)
    x = Case(cu_seqlens=(0, 3, 21), HV=2, BT=16, use_g=True, dtype="bfloat16", g_dtype="float32").build_inputs()
    forward, backward = s.ops("cpu")
    assert backward is None
    forward(x.k, x.v, x.beta, x.A, x.g, x.cu_seqlens, None)
    assert seen["k"] is x.k and seen["v"] is x.v and seen["offsets"] is x.cu_seqlens
    assert torch.equal(seen["beta"], x.beta.transpose(1, 2)) and seen["beta"].shape == (1, 2, 21)
    assert seen["g"].dtype == torch.float32 and seen["g"].shape == (1, 2, 21)
    assert torch.allclose(seen["g"].double(), x.g.transpose(1, 2).double() * math.log(2), rtol=1e-6)
    assert seen["A"].dtype == torch.float32  # its dead columns NaN (the suite's fill), compared too
    torch.testing.assert_close(seen["A"], x.A.float(), rtol=0, atol=0, equal_nan=True)
    assert torch.equal(seen["chunks"], prepare(x.cu_seqlens, 16))


# what a canonical call may pass as beta or g (bad_input passes malformed ones): a tensor of any rank, or no tensor
GATE_ARGS = st.one_of(
    st.lists(st.integers(1, 3), min_size=0, max_size=5).map(lambda shape: torch.rand(shape)),
    st.sampled_from([None, 0.5, "beta", [[1.0, 2.0]]]))


@given(beta=GATE_ARGS, g=GATE_ARGS)
@settings(max_examples=60, deadline=None, derandomize=True, database=None)
def test_a_head_major_subject_gets_only_3d_gates_transposed_and_any_other_as_given(beta: Any, g: Any) -> None:
    """For a subject taking beta and g head-major, over every beta and g a call may pass: a 3-D tensor [B,T,HV]
    reaches it as the [B,HV,T] view; a tensor of any other rank and a non-tensor reach it as given (the
    adapter converts only well-formed tensors: a malformed argument is the subject's to refuse, bad_input)."""
    seen: dict[str, Any] = {}

    def forward(k: Any, v: Any, beta: Any, A: Any, *, g: Any = None, cu_seqlens: Any = None, chunk_indices: Any = None) -> None:
        seen.update(beta=beta, g=g)

    s = _subject(forward=forward, calling=Calling(gate_layout="head"), target=subjects.HOST)
    x = Case(T=5, HV=2, BT=16).build_inputs()
    s.ops("cpu")[0](x.k, x.v, beta, x.A, g)
    for name, given_ in (("beta", beta), ("g", g)):
        if isinstance(given_, torch.Tensor) and given_.dim() == 3:
            assert torch.equal(seen[name], given_.transpose(1, 2)), name
        else:
            assert seen[name] is given_, name


def test_a_large_conversion_of_the_audits_zeros_stays_virtual() -> None:
    """The index-width audit passes zeros at real sizes: the adapter's conversion (units, dtype) of such an
    argument is a virtual tensor in the argument's memory order, not GiBs written (a foreign subject's audit
    was killed out of memory before)."""
    import resource

    from wy_ascend.testing.index_audit import virtual_empty

    big = virtual_empty((1, 4, 2**28), torch.bfloat16).transpose(1, 2)  # 2 GiB of head-major gates as [B,T,HV]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with subjects.zeros_converted(virtual_empty, 2**28):
        out = subjects._convert(big, torch.float32, math.log(2))
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert out.shape == big.shape and out.dtype == torch.float32 and out.stride() == (2**30, 1, 2**28)
    assert grown_kib < 256 * 1024, f"the conversion took {grown_kib} KiB"
    assert not bool(out[0, -5:].any())


def test_a_subject_loads_by_import_path_in_this_process_and_the_ones_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """An import path registers the subject under its name and notes the path for the processes this one
    starts (case runners, history servers), which resolve the name alike; an unknown name lists the known."""
    monkeypatch.syspath_prepend(str(EXAMPLE_SRC))
    monkeypatch.setenv(subjects.PATHS_ENV, "")  # restored after the test (load sets it)
    monkeypatch.delitem(subjects.SUBJECTS, "natural-gate-wy", raising=False)
    s = subjects.get(EXAMPLE)
    assert s.name == "natural-gate-wy" and s.loaded == f"import path {EXAMPLE}" and subjects.get(s.name) is s
    assert os.environ[subjects.PATHS_ENV] == EXAMPLE
    child = subprocess.run([sys.executable, "-c", "from wy_ascend import subjects; print(subjects.get("
                            "'natural-gate-wy').loaded)"], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, check=True)
    assert child.stdout.strip() == f"import path {EXAMPLE}"
    with pytest.raises(ValueError, match="subject must be one of .*'fla'.*or an import path"):
        subjects.get("no-such-subject")
    with pytest.raises(ValueError, match="cannot import it"):
        subjects.get("no_such_package.module:SUBJECT")


def test_a_subject_loads_by_entry_point_and_its_name_must_match(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import EntryPoint

    monkeypatch.syspath_prepend(str(EXAMPLE_SRC))
    monkeypatch.setenv(subjects.PATHS_ENV, "")
    # the subjects this test loads are forgotten after it: a later test's import-path load of the example
    # met this entry-point one and failed, run after it alone (the mutation runner's order did that)
    monkeypatch.setattr(subjects, "SUBJECTS", {n: s for n, s in subjects.SUBJECTS.items() if n != "natural-gate-wy"})
    points = {"natural-gate-wy": EntryPoint("natural-gate-wy", EXAMPLE, subjects.ENTRY_POINT_GROUP),
              "renamed": EntryPoint("renamed", EXAMPLE, subjects.ENTRY_POINT_GROUP)}
    monkeypatch.setattr(subjects, "_entry_points", lambda: points)
    s = subjects.get("natural-gate-wy")
    assert s.loaded.startswith(f"entry point {subjects.ENTRY_POINT_GROUP}:natural-gate-wy")
    assert "natural-gate-wy" in subjects.available()
    with pytest.raises(DeclarationError, match="declares subject 'natural-gate-wy'"):
        subjects.get("renamed")


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> Subject:
    monkeypatch.syspath_prepend(str(EXAMPLE_SRC))
    monkeypatch.setenv(subjects.PATHS_ENV, "")
    return subjects.get(EXAMPLE)


@pytest.mark.parametrize("case", [
    Case(T=40, H=1, HV=2, K=24, V=16, BT=16, use_g=True, g_dtype="float32"),
    Case(cu_seqlens=(0, 3, 70, 70, 75), H=2, HV=4, K=32, V=48, BT=64, use_g=True, dtype="bfloat16", g_dtype="float32"),
    Case(B=2, T=17, H=1, HV=1, BT=16)], ids=["grouped_gated", "packed_bf16", "no_gate"])
def test_the_example_subject_holds_the_oracle_and_a_planted_unit_error_fails_it(example: Subject, case: Case,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """examples/natural_gate_wy against the float64 oracle through its declaration (natural-log head-major
    gates, float32 A, prebuilt chunks): w and u within float32's bound. The same kernel told the wrong gate
    units (log2, so it takes exp of the canonical g) fails on a gated case."""
    from wy_ascend.testing.properties import PropertyFailure, run_property

    case = case.replace(subject=example.name)
    metrics = run_property("oracle", case)
    assert set(metrics) == {"w", "u"}  # forward only
    if case.dtype == "float32":
        assert metrics["w"]["rel_rms"] < 1e-5 and metrics["u"]["rel_rms"] < 1e-5
    wrong = dataclasses.replace(example, calling=dataclasses.replace(example.calling, gate_units="log2"))
    monkeypatch.setitem(subjects.SUBJECTS, example.name, wrong)
    if case.use_g:
        with pytest.raises(PropertyFailure, match="w: rel_rms"):
            run_property("oracle", case)


class _Uninstalled:
    """A meta path finder before every other: ``package`` and its modules are not installed."""

    def __init__(self, package: str) -> None:
        self.package = package

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.split(".")[0] == self.package:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def test_a_file_of_a_subject_not_installed_is_missing_with_how_to_install(tmp_path: Path, example: Subject,
                                                                            monkeypatch: pytest.MonkeyPatch,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A stored file names its subject, how it was loaded and its version; where the subject cannot be loaded
    the replay says MISSING and how to install it (not MALFORMED, not a failure)."""
    import json

    from wy_ascend.cli import main
    from wy_ascend.errors import SubjectUnavailableError
    from wy_ascend.testing.properties import PropertyFailure
    from wy_ascend.testing.store import load, record_failure

    path = record_failure("oracle", Case(T=20, subject=example.name), PropertyFailure("recorded", {}), tmp_path)
    record = json.loads(path.read_text())["subject"]
    assert record == {"name": "natural-gate-wy", "version": "0.1.0", "loaded": f"import path {EXAMPLE}",
                      "distribution": "natural-gate-wy"}
    assert load(path).case.subject == example.name
    monkeypatch.delitem(subjects.SUBJECTS, example.name)
    monkeypatch.setenv(subjects.PATHS_ENV, "")  # restored after the test (load sets it)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(EXAMPLE_SRC)])
    # not installed here, even where ``nox -s example`` installed it into this environment (its editable
    # finder would find it whatever sys.path says)
    monkeypatch.setattr(sys, "meta_path", [_Uninstalled("natural_gate_wy"), *sys.meta_path])
    sys.modules.pop("natural_gate_wy.subject", None)
    sys.modules.pop("natural_gate_wy", None)
    with pytest.raises(SubjectUnavailableError, match="pip install 'natural-gate-wy==0.1.0'"):
        load(path)
    assert main(["replay", str(path), "--in-process"]) == 2
    assert "MISSING: " in capsys.readouterr().out


def test_wy_ascends_own_launches_choose_their_emulation() -> None:
    """wy_ascend's target is applied by its launches (``Target.applied`` False): its cuda-only dk-sum kernel,
    run on the interpreter by the dk_sum_kernel knob, runs without the Ascend rules as on cuda, where an outer
    emulation around the whole call made it fail the folded-program-id rule."""
    from wy_ascend.testing.properties import run_property

    assert not subjects.get("wy_ascend").target.applied
    run_property("oracle", Case(T=20, H=1, HV=2, use_g=True, knobs={"group_dk": False, "dk_sum_kernel": True}))


def test_the_subjects_command_lists_each_subjects_ops_and_the_properties_that_apply(
        example: Subject, capsys: pytest.CaptureFixture[str]) -> None:
    from wy_ascend.cli import main

    assert main(["subjects", "wy_ascend", EXAMPLE]) == 0
    out = capsys.readouterr().out
    own, other = out.split("\n\n")
    assert "ops         fwd, bwd" in own and re.search(r"plan_coverage +runs", own) and "skipped" not in own
    assert "natural-gate-wy 0.1.0" in other and "ops         fwd; backends cpu; target host" in other
    assert re.search(r"oracle +runs", other) and re.search(r"differential +runs", other)
    assert re.search(r"bad_input +skipped: it claims no validation", other)
    assert re.search(r"index_width +skipped: it launches no Triton kernel", other)
    assert main(["subjects", "no-such-subject"]) == 2


VALID_KEYWORDS = {"g": "g", "cu_seqlens": "cu_seqlens", "chunk_indices": "chunk_indices"}


@st.composite
def _invalid_keywords(draw: st.DrawFn) -> Any:
    """A value from anywhere in Calling.keywords' invalid region: not a mapping; a mapping with one or more names
    that are no argument (beside valid ones); or a mapping with a value that is no identifier."""
    how = draw(st.sampled_from(["not_a_mapping", "unknown_name", "not_an_identifier"]))
    base = {name: VALID_KEYWORDS[name] for name in draw(st.sets(st.sampled_from(sorted(VALID_KEYWORDS))))}
    if how == "not_a_mapping":
        return draw(st.one_of(st.none(), st.integers(), st.text(max_size=5), st.lists(st.sampled_from(sorted(VALID_KEYWORDS)))))
    if how == "unknown_name":
        extra = draw(st.dictionaries(st.text(min_size=1, max_size=8).filter(lambda s: s not in subjects.BWD_ARGS),
                                     st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True), min_size=1, max_size=3))
        return {**base, **extra}
    name = draw(st.sampled_from(sorted(VALID_KEYWORDS)))
    return {**base, name: draw(st.text(max_size=6).filter(lambda s: not s.isidentifier()))}


@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(_invalid_keywords())
def test_calling_keywords_are_refused_over_their_whole_invalid_region(keywords: Any) -> None:
    """Calling.keywords: a mapping of argument names (BWD_ARGS) to identifiers. Every drawn violation is refused by
    that rule itself (its own message), not by a later rule that happens to fire on the same field."""
    with pytest.raises(DeclarationError, match=r"^Calling\.keywords must be a mapping of names of \["):
        Calling(keywords=keywords)


@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(head_ratios=st.none() | st.lists(st.integers(1, 8), min_size=1, max_size=4, unique=True).map(tuple),
       varlen=st.booleans(), gate_dtypes=st.booleans(), validates=st.booleans())
def test_a_property_is_left_out_exactly_where_the_claims_leave_it_nothing_to_draw(
        head_ratios: tuple[int, ...] | None, varlen: bool, gate_dtypes: bool, validates: bool) -> None:
    """properties.applies_to over the claims it reads: grouped_heads runs unless every claimed head ratio is 1,
    varlen_split where packed batches are claimed, widened_gates where gate dtypes are, bad_input where the
    subject validates (each left out with a reason that names its claim)."""
    from wy_ascend.testing.properties import applies_to

    claims = Claims(head_ratios=head_ratios, varlen=varlen, fixed=True, gate_dtypes=gate_dtypes, validates=validates)
    subject = _subject(claims=claims)
    expected = {"grouped_heads": head_ratios is None or max(head_ratios) > 1, "varlen_split": varlen,
                "widened_gates": gate_dtypes, "bad_input": validates}
    for name, runs in expected.items():
        why = applies_to(name, subject)
        assert (why is None) == runs, (name, why)
        assert runs or "Claims." in why


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(mode=st.sampled_from(["optional", "prebuilt"]), gate_units=st.sampled_from(["log2", "ln", "none"]),
       cu=st.booleans(), positional=st.booleans())
def test_chunk_indices_not_computed_inside_must_be_passed(mode: str, gate_units: str, cu: bool,
                                                         positional: bool) -> None:
    """Calling.chunk_indices other than 'inside' needs chunk_indices passed, positionally or by keyword: over
    both such modes, every gate and cu_seqlens passing, a declaration passing none is refused naming keywords,
    and the same with chunk_indices passed (positionally or by keyword) is accepted."""
    keywords = {**({"g": "g"} if gate_units != "none" else {}), **({"cu_seqlens": "cu"} if cu else {})}
    fields = dict(gate_units=gate_units, chunk_indices=mode,
                  prepare_chunk_indices=(lambda c, bt: c) if mode == "prebuilt" else None)
    with pytest.raises(DeclarationError, match=rf"^Calling\.keywords must be a mapping that passes 'chunk_indices' "
                                               rf"\(chunk_indices is '{mode}'\)"):
        Calling(keywords=keywords, **fields)
    if positional:
        Calling(forward=("k", "v", "beta", "A", "chunk_indices"), keywords=keywords, **fields)
    else:
        Calling(keywords={**keywords, "chunk_indices": "ci"}, **fields)


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(version=st.text(max_size=6).filter(lambda v: v not in subjects.TRITON_ASCEND_RULES))
def test_a_target_of_an_unknown_triton_ascend_version_is_refused(version: str) -> None:
    """Target.for_triton_ascend: a version with no rules recorded (any drawn string but the known ones) is a
    DeclarationError naming Target.triton_ascend; each known one gives the Ascend target of its rules."""
    with pytest.raises(DeclarationError, match=r"^Target\.triton_ascend must be one of \["):
        Target.for_triton_ascend(version)
    for known, rules in subjects.TRITON_ASCEND_RULES.items():
        assert Target.for_triton_ascend(known) == Target("ascend", rules, known)


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(covers=st.one_of(st.integers(), st.floats(), st.booleans(), st.binary(max_size=4),
                        st.lists(st.text(max_size=3), max_size=2), st.dictionaries(st.text(max_size=2), st.integers())))
def test_a_known_defect_s_covers_must_be_a_string(covers: Any) -> None:
    """Known.covers: None or an expression; any other type (drawn: numbers, bytes, lists, mappings) is refused
    by that rule, naming Known.covers."""
    with pytest.raises(DeclarationError, match=r"^Known\.covers must be None or an expression \(a string\)"):
        Known("1", "oracle-x.json", covers)


def _echo(seen: dict[str, Any], out: Any = None) -> Any:
    def op(*args: Any, **kw: Any) -> Any:
        seen.update(args=args, kw=kw)
        return out
    return op


@settings(max_examples=40, derandomize=True, database=None, deadline=None)
@given(BT=st.sampled_from([16, 32, 64]), chunk_size=st.one_of(st.none(), st.sampled_from(["chunk_size", "BT"])),
       inside=st.booleans(), passed_ci=st.booleans())
def test_the_adapter_passes_bt_by_its_keyword_and_no_chunk_indices_to_a_subject_computing_them(
        BT: int, chunk_size: str | None, inside: bool, passed_ci: bool) -> None:
    """Over chunk sizes and chunk-size keywords: a subject taking BT by keyword gets A's last dim there (none
    otherwise); one computing chunk indices inside never gets the caller's, even naming a keyword for them."""
    seen: dict[str, Any] = {}
    calling = Calling(chunk_size=chunk_size, chunk_indices="inside" if inside else "optional")
    s = _subject(forward=_echo(seen), calling=calling, target=subjects.HOST)
    x = Case(cu_seqlens=(0, 5, 40), BT=BT).build_inputs()
    ci = torch.tensor([[0, 0], [1, 0]]) if passed_ci else None  # the caller's (their values are not read)
    s.ops("cpu")[0](x.k, x.v, x.beta, x.A, x.g, x.cu_seqlens, ci)
    assert seen["kw"].get(chunk_size) == (BT if chunk_size else None)
    assert seen["kw"].get("chunk_indices") is (None if inside else ci)


@settings(max_examples=20, derandomize=True, database=None, deadline=None)
@given(use_g=st.booleans(), layout=st.sampled_from(["token", "head"]))
def test_a_gateless_subject_is_passed_no_g_and_refuses_one(use_g: bool, layout: str) -> None:
    """A subject of gate_units 'none' (declared with the default keywords, g among them) is called without a g
    keyword when the call passes none, and a call passing a g tensor is a ValueError naming the subject."""
    seen: dict[str, Any] = {}
    calling = Calling(gate_units="none", gate_layout=layout)
    s = _subject(forward=_echo(seen), calling=calling, target=subjects.HOST)
    x = Case(T=20, BT=16, use_g=use_g).build_inputs()
    if use_g:
        with pytest.raises(ValueError, match="subject 'probe' takes no gate"):
            s.ops("cpu")[0](x.k, x.v, x.beta, x.A, x.g)
        assert not seen
    else:
        s.ops("cpu")[0](x.k, x.v, x.beta, x.A, None)
        assert "g" not in seen["kw"]


@settings(max_examples=30, derandomize=True, database=None, deadline=None)
@given(layout=st.sampled_from(["token", "head"]), gated=st.booleans(), HV=st.integers(1, 3), T=st.integers(2, 5))
def test_a_head_major_backward_s_dbeta_and_dg_come_back_token_major(layout: str, gated: bool, HV: int,
                                                                    T: int) -> None:
    """The backward's (dk, dv, dbeta, dg) of a head-major subject ([B,HV,T] gates) come back [B,T,HV]: dbeta
    always, dg where the call passed g (an ungated dg is returned as given); a token-major subject's as given."""
    dbeta, dg = torch.rand(1, HV, T), torch.rand(1, HV, T)
    out = (torch.rand(1), torch.rand(2), dbeta, dg)
    s = _subject(backward=_echo({}, out), calling=Calling(gate_layout=layout), target=subjects.HOST)
    x = Case(T=T, HV=HV, BT=16, use_g=gated).build_inputs()
    got = s.ops("cpu")[1](x.k, x.v, x.beta, x.A, x.k, x.v, x.g if gated else None)
    assert got[0] is out[0] and got[1] is out[1]
    head = layout == "head"
    assert torch.equal(got[2], dbeta.transpose(1, 2) if head else dbeta)
    assert torch.equal(got[3], dg.transpose(1, 2) if head and gated else dg)


def test_registering_what_is_no_subject_or_another_under_a_taken_name_is_refused(monkeypatch) -> None:
    """_register: a non-Subject is refused naming its type; a different subject of a loaded name from another
    source is refused naming both sources; a loaded name loads as the subject registered; is_known says
    whether a name loads (an unknown one: False)."""
    monkeypatch.setattr(subjects, "SUBJECTS", {})
    with pytest.raises(DeclarationError, match="import path a:b must name a wy_ascend.subjects.Subject, got dict"):
        subjects._register({}, "import path a:b")
    first = subjects._register(_subject(), "import path a:b")
    assert subjects.load("probe") is first and subjects.is_known("probe")
    assert subjects._register(_subject(), "import path a:b") is first  # the same source again
    with pytest.raises(DeclarationError, match="import path c:d declares subject 'probe', already loaded from "
                                               "import path a:b"):
        subjects._register(_subject(version="2"), "import path c:d")
    assert not subjects.is_known("no-such-subject") and not subjects.is_known("no_such_package.module:SUBJECT")
