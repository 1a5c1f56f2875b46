"""With human review on, a client's run may raise the operator's quality bar, never lower it (trust_boundary.looser_bar,
applied by selfcrag/auth.py). Each setting that decides whether an answer is shown without a person is tried both
ways, and the domain and risk count through the minimums they make."""

from __future__ import annotations

import pytest

from selfcrag.context import Context
from selfcrag.trust_boundary import looser_bar

OPERATOR = Context(domain="customer_service", caveat_band=0.1, review_band=0.05, review_spread=0.3)
BAR = {"domain", "caveat_band", "review_band", "review_spread"}
PLAIN = OPERATOR.thresholds().overall  # the operator's plain-answer minimum


@pytest.mark.parametrize("asked", [
    {}, {"min_confidence": 0.99}, {"domain": "medical"}, {"risk": "critical"},
    {"min_confidence": 0.99, "caveat_band": 0}, {"review_band": 0.2}, {"review_spread": 0.1},
    {"min_groundedness": 0.95, "domain": "legal"},
])  # fmt: skip
def test_a_stricter_or_equal_bar_is_accepted(asked: dict) -> None:
    assert looser_bar(Context(**{**OPERATOR.model_dump(include=BAR), **asked}), OPERATOR) == []


@pytest.mark.parametrize(("asked", "named"), [
    ({"min_confidence": 0.1}, "min_confidence 0.1 <"),
    ({"min_groundedness": 0.0}, "min_groundedness 0.0 <"),
    ({"min_answer_relevance": 0.2}, "min_answer_relevance 0.2 <"),
    ({"min_context_relevance": 0.2}, "min_context_relevance 0.2 <"),
    ({"domain": "general"}, "min_groundedness 0.75 < 0.8"),
    ({"risk": "low"}, "min_context_relevance 0.7 < 0.75"),
    ({"min_confidence": PLAIN, "caveat_band": 0.5}, "answers shown from confidence"),
    ({"review_band": 0.0}, "review_band 0.0 < 0.05"),
    ({"review_spread": 1.0}, "review_spread 1.0 > 0.3"),
])  # fmt: skip
def test_each_way_to_show_an_answer_without_review_is_named(asked: dict, named: str) -> None:
    found = looser_bar(Context(**{**OPERATOR.model_dump(include=BAR), **asked}), OPERATOR)
    assert any(phrase.startswith(named) for phrase in found), found


def test_a_stricter_override_does_not_hide_a_looser_band() -> None:
    asked = Context(domain="customer_service", min_confidence=0.99, caveat_band=0.9, review_band=0.05)
    (phrase,) = looser_bar(asked, OPERATOR)
    assert phrase.startswith("answers shown from confidence 0.09 <")


def test_the_door_reads_only_the_bar_from_a_runs_context_against_the_assistants(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from selfcrag import auth

    monkeypatch.delenv("SELFCRAG_DOMAIN", raising=False)
    assert auth.loosened({"min_confidence": 0.99, "review_band": 0.5}, {}) == []
    assert auth.loosened({"min_confidence": 0.1}, {})[0].startswith("min_confidence 0.1 <")
    assert auth.loosened({"domain": "general"}, {"domain": "medical"})  # the assistant's bar is the floor
    assert auth.loosened({}, {"domain": "medical", "caveat_band": 0.5}) == []  # the operator's own choice stands
    # A path elsewhere in the context is not the bar's: it is neither validated nor opened here.
    assert auth.loosened({"calibration": "/dev/zero", "min_confidence": 0.99}, {}) == []
    with pytest.raises(auth.Auth.exceptions.HTTPException, match="min_confidence"):
        auth.loosened({"min_confidence": 7}, {})  # a bad value is one line


def test_a_thread_is_unfinished_only_between_prepare_and_finalize() -> None:
    from selfcrag.auth import unfinished

    assert unfinished({"decision": "", "answer": "a draft"})
    assert not any(unfinished(v) for v in (None, {}, {"question": "q"}, {"decision": "human_review"}))
