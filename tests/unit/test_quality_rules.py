"""Domain presets, risk shifts, overrides and the multi-turn consistency check."""

from __future__ import annotations

import pytest

from selfcrag.context import Context
from selfcrag.quality.consistency import contradictions
from selfcrag.quality.thresholds import PRESETS, Thresholds, show_floor, thresholds_for


@pytest.mark.parametrize(
    ("domain", "expected", "floor"),
    [
        ("general", (0.70, 0.75, 0.70), 0.4286),
        ("customer_service", (0.75, 0.80, 0.75), 0.6),
        ("financial", (0.85, 0.85, 0.80), 0.6667),
        ("medical", (0.90, 0.90, 0.85), 0.75),
        ("legal", (0.90, 0.90, 0.85), 0.75),
    ],
)
def test_presets_match_the_specification(domain, expected, floor):
    # Each domain's cost sets its floor, p >= cost / (1 + cost); a plain answer needs the caveat band above it.
    assert show_floor(PRESETS[domain].cost) == floor
    assert thresholds_for(Context(domain=domain)) == Thresholds(*expected, round(floor + 0.15, 4))
    assert PRESETS["general"].cost < PRESETS["customer_service"].cost < PRESETS["financial"].cost


def test_the_cost_of_a_wrong_answer_sets_the_floor_and_can_be_overridden():
    # Showing an answer right with probability p earns p - cost * (1 - p): zero at p = cost / (1 + cost).
    assert [show_floor(c) for c in (0, 0.5, 1, 3, 4)] == [0.0, 0.3333, 0.5, 0.75, 0.8]
    cautious = thresholds_for(Context(wrong_answer_cost=3))
    assert cautious.overall == round(0.75 + 0.15, 4)
    # The band lies above the floor: a narrower band lowers the plain-answer minimum, never the floor.
    assert thresholds_for(Context(wrong_answer_cost=3, caveat_band=0.05)).overall == 0.8
    assert thresholds_for(Context(domain="medical", wrong_answer_cost=1)).overall == 0.65  # the cost wins
    assert thresholds_for(Context(wrong_answer_cost=3, min_confidence=0.4)).overall == 0.4  # an explicit minimum wins
    with pytest.raises(ValueError, match="wrong_answer_cost"):
        Context(wrong_answer_cost=5)


def test_risk_moves_every_threshold_and_stays_in_range():
    normal = PRESETS["financial"]
    low = thresholds_for(Context(domain="financial", risk="low"))
    critical = thresholds_for(Context(domain="financial", risk="critical"))
    overall = thresholds_for(Context(domain="financial")).overall
    assert low == Thresholds(0.80, 0.80, 0.75, round(overall - 0.05, 4))
    assert critical == Thresholds(0.90, 0.90, 0.85, round(overall + 0.05, 4))
    assert normal.cost == 2
    assert Thresholds(0.98, 0.5, 0.5, 0.5).shifted(0.05).context_relevance == 1.0


def test_each_threshold_can_be_overridden_alone():
    active = thresholds_for(Context(domain="medical", risk="critical", min_groundedness=0.6))
    assert active == Thresholds(0.95, 0.6, 0.90, round(0.75 + 0.15 + 0.05, 4))
    with pytest.raises(ValueError, match="min_confidence"):
        Context(min_confidence=1.5)
    with pytest.raises(ValueError, match="domain"):
        Context(domain="astrology")  # type: ignore[arg-type]


def test_a_flipped_claim_about_the_same_thing_is_a_contradiction():
    [found] = contradictions("Refunds are accepted within 7 days of delivery. [doc_1]", ["Refunds are not supported."])
    assert found["earlier"] == "Refunds are not supported."
    assert found["now"] == "Refunds are accepted within 7 days of delivery."
    assert "no" in found["why"]


def test_different_numbers_for_the_same_unit_contradict_but_repeats_and_other_topics_do_not():
    [found] = contradictions("Most items can be returned within 30 days.", ["Items can be returned within 15 days."])
    assert found["why"] == "different quantities: \"15 days\" earlier, \"30 days\" now"
    assert contradictions("Most items can be returned within 30 days.", ["Items can be returned within 30 days."]) == []
    assert contradictions("Express shipping costs $12.", ["Refunds are not supported."]) == []
    assert contradictions("Standard shipping takes 5 days.", []) == []
