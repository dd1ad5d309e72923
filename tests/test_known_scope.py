"""A known mark's scope (``wy_ascend.subjects.Known``, declared with its subject): it covers cases of its own
subject at its own version only, for its properties on its backends, where its predicate holds. Every other
test runs the one installed version, where all marks' versions match, so a mark that leaked across a version, a
subject, a property or a backend changed no verdict there; this draws the installed version too."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz.strategies import CPU_SIZES, cases, known_defect, known_everywhere
from wy_ascend import subjects
from wy_ascend.subjects import Known
from wy_ascend.testing.case import Case
from wy_ascend.testing.properties import PROPERTIES, backend_name

FOREIGN = sorted(name for name in subjects.BUILTIN if subjects.get(name).foreign)
MARKS = [(name, k) for name in FOREIGN for k in subjects.get(name).known]  # (its subject, the mark)
# the marks' own versions, others beside them, and a subject not installed (no version)
VERSIONS = sorted({k.version for _, k in MARKS}) + ["0.5.0", "0.6.1", "1.0.0", None]


def _in_scope(subject: str, k: Known, prop: str, case: Case, version: str | None) -> bool:
    """Whether mark ``k`` of ``subject`` covers ``case`` under ``prop`` with its subject at ``version``
    (Known's doc); its predicate alone is asked of the mark, with its scope lifted."""
    return (subject == case.subject and k.version == version
            and (k.properties is None or prop in k.properties)
            and (k.backends is None or backend_name(case) in k.backends)
            and dataclasses.replace(k, properties=None, backends=None).matches(prop, case))


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
    with pytest.MonkeyPatch.context() as mp:  # every subject installed at the drawn version
        mp.setattr(subjects.Subject, "installed_version", property(lambda self: version))
        mark, everywhere = known_defect(prop, case), known_everywhere(prop, case.subject)
    in_scope = [k for name, k in MARKS if _in_scope(name, k, prop, case, version)]
    if not subjects.get(case.subject).foreign:
        assert mark is None, mark  # this project's defects are never known
    elif in_scope:
        assert mark in in_scope, (mark, in_scope)
    else:
        assert mark is None, (mark, prop, case.subject, version)
    assert everywhere == next((k for name, k in MARKS if name == case.subject and k.version == version
                               and k.covers is None and k.backends is None and k.properties is not None
                               and prop in k.properties), None)
