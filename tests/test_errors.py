"""The project's exceptions carry their message as their one argument, whatever extras they take.

A case runner's child sends the exception it raised to its parent by pickle, which rebuilds it from
``args``; the report and the regression store read ``str(error)``. So for every exception class that
takes more than a message (the backend that cannot run, a failure's metrics, a lost case's detail),
``args == (message,)`` and ``str(error) == message`` with the extras passed by position or by keyword,
and the classes that cross the pipe come back from a pickle with their message and extras."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wy_ascend.errors import BackendUnavailableError, RegressionFileError
from wy_ascend.planning import UnsupportedProblemError
from wy_ascend.testing.failure import PropertyFailure
from wy_ascend.testing.runner import CaseCrashed, CaseTimeout

# (class, its extra argument's name, a value of it, whether it crosses the runner's pipe)
WITH_EXTRAS: list[tuple[type[BaseException], str, Any, bool]] = [
    (BackendUnavailableError, "backend", "cpu", True),
    (PropertyFailure, "metrics", {"w": {"rel_rms": 0.5}}, True),
    (CaseCrashed, "detail", {"signal": "SIGKILL", "exitcode": -9}, False),
    (CaseTimeout, "detail", {"limit_s": 1.0}, False),
]
MESSAGE_ONLY = [RegressionFileError, UnsupportedProblemError]


@pytest.mark.parametrize(("cls", "name", "value", "pickled"), WITH_EXTRAS, ids=lambda x: getattr(x, "__name__", None))
@given(message=st.text(min_size=1, max_size=40), positional=st.booleans())
def test_an_error_with_extras_is_its_message(cls: Any, name: str, value: Any, pickled: bool, message: str,
                                             positional: bool) -> None:
    error = cls(message, value) if positional else cls(message, **{name: value})
    assert error.args == (message,) and str(error) == message
    assert getattr(error, name) == value
    if pickled:
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is cls and str(back) == message and getattr(back, name) == value


@pytest.mark.parametrize("cls", MESSAGE_ONLY, ids=lambda c: c.__name__)
@given(message=st.text(min_size=1, max_size=40))
def test_a_message_only_error_round_trips(cls: Any, message: str) -> None:
    back = pickle.loads(pickle.dumps(cls(message)))
    assert type(back) is cls and back.args == (message,) and str(back) == message
