"""A known mark's scope (fuzz/strategies.py ``Known``): it covers cases of its own subject at its own
version only, for its properties on its backends, where its predicate holds. Every other test runs the one
installed version, where all marks' versions match, so a mark that leaked across a version, a subject, a
property or a backend changed no verdict there; this draws the installed version too."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz.strategies import CPU_SIZES, KNOWN, Known, cases, known_defect, known_everywhere
from wy_ascend import subjects
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import PROPERTIES, backend_name

FOREIGN = sorted(name for name, s in subjects.SUBJECTS.items() if s.foreign)
# the marks' own versions, others beside them, and a subject not installed (no version)
VERSIONS = sorted({k.version for k in KNOWN}) + ["0.5.0", "0.6.1", "1.0.0", None]


def _in_scope(k: Known, prop: str, case: Case, version: str | None) -> bool:
    """Whether mark ``k`` covers ``case`` under ``prop`` with its subject at ``version`` (Known's doc)."""
    return (k.subject == case.subject and k.version == version
            and (k.properties is None or prop in k.properties)
            and (k.backends is None or backend_name(case) in k.backends)
            and (k.covers is None or any(k.covers(call) for call in (*case.before, case))))


@st.composite
def marked_calls(draw: st.DrawFn) -> tuple[str, Case, str | None]:
    """(property, case, installed version): a case of any subject on any of its backends, in any memory
    layout, sometimes after earlier calls (a history's), and the version its subject is installed at."""
    subject = draw(st.sampled_from([subjects.DEFAULT, *FOREIGN]))
    backend = draw(st.sampled_from(subjects.get(subject).backends))  # the case is drawn on the cpu, then moved
    case = draw(cases(CPU_SIZES, "cpu", subject=subject, memory=draw(st.booleans())))
    before = tuple(c.replace(backend=backend) for c in draw(st.lists(cases(CPU_SIZES, "cpu", subject=subject), max_size=2)))
    return draw(st.sampled_from(sorted(PROPERTIES))), case.replace(backend=backend, before=before), \
        draw(st.sampled_from(VERSIONS))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(call=marked_calls())
def test_a_mark_covers_its_subject_version_properties_and_backends_only(call) -> None:
    prop, case, version = call
    with pytest.MonkeyPatch.context() as mp:
        for name in FOREIGN:
            mp.setitem(subjects.SUBJECTS, name, dataclasses.replace(subjects.SUBJECTS[name], _version=lambda: version))
        mark, everywhere = known_defect(prop, case), known_everywhere(prop, case.subject)
    in_scope = [k for k in KNOWN if _in_scope(k, prop, case, version)]
    if not subjects.get(case.subject).foreign:
        assert mark is None, mark  # this project's defects are never known
    elif in_scope:
        assert mark in in_scope, (mark, in_scope)
    else:
        assert mark is None, (mark, prop, case.subject, version)
    assert everywhere == next((k for k in KNOWN if k.subject == case.subject and k.version == version
                               and k.covers is None and k.properties is not None and prop in k.properties), None)
