"""A component the graph cannot call is refused when the components are put together, with one line that says
which role and method, instead of failing inside every run where it would be read as a model fault."""

from __future__ import annotations

from dataclasses import replace

import pytest

from selfcrag import ComponentError, SelfcragError, offline_components
from selfcrag.contract import GroundednessCheck


class OldChecker:
    """A checker written to the contract before `check` took `given`."""

    def check(self, answer, strips, settings, question=""):
        return GroundednessCheck(score=1.0, grounded=True)


class KeywordsChecker:
    def check(self, answer, strips, settings, **options):
        return GroundednessCheck(score=1.0, grounded=True)


class NoCheck:
    def grade(self, question, answer, settings):
        return None


def test_a_checker_missing_a_keyword_the_node_passes_is_refused_by_name():
    with pytest.raises(ComponentError) as raised:
        replace(offline_components(), groundedness=OldChecker())
    message = str(raised.value)
    assert "groundedness component OldChecker" in message and "given" in message and "\n" not in message
    assert isinstance(raised.value, SelfcragError) and isinstance(raised.value, TypeError)


def test_a_component_without_its_method_is_refused():
    with pytest.raises(ComponentError, match="has no method check"):
        replace(offline_components(), groundedness=NoCheck())


def test_keyword_catch_alls_and_the_shipped_components_are_accepted():
    parts = replace(offline_components(), groundedness=KeywordsChecker())
    assert isinstance(parts.groundedness, KeywordsChecker)
