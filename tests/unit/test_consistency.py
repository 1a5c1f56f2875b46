"""The multi-turn consistency check: quantities with their real units, two kinds of one thing, named statements."""

from __future__ import annotations

import pytest

from selfcrag.quality.consistency import contradictions, quantities

EXPRESS = "Express shipping costs $14.99 and arrives in 2 business days."
STANDARD = "Standard shipping costs $5.99 and arrives in 4 to 6 business days."


def written(sentence: str) -> list[tuple[str, str]]:
    return [(q.dimension, q.written) for q in quantities(sentence)]


def test_the_issue_example_is_no_contradiction_and_no_word_after_a_number_is_a_unit():
    # The issue: "different numbers of ands: 14.99 vs 5.99". Standard and express shipping are two services.
    assert contradictions(f"{STANDARD} [doc_1]", [EXPRESS]) == []
    assert written(EXPRESS) == [("USD", "$14.99"), ("business day", "2 business days")]
    assert written("It costs 14.99 and ships in 5 and a half.") == []


def test_a_different_price_of_the_same_thing_contradicts_and_names_both_statements():
    [found] = contradictions("Express shipping costs $16.99. [doc_2]", [EXPRESS])
    assert found == {"earlier": EXPRESS, "now": "Express shipping costs $16.99.",
                     "why": 'different quantities: "$14.99" earlier, "$16.99" now'}  # fmt: skip


@pytest.mark.parametrize(
    ("earlier", "now"),
    [
        ("Items can be returned within 15 days.", "Items can be returned within 30 days."),
        ("Items can be returned within thirty days.", "Items can be returned within 2 weeks."),
        ("The Plus plan costs USD 9.99 per month.", "The Plus plan costs 12.99 dollars per month."),
        ("Members save 10% on every order.", "Members save 15 percent on every order."),
        ("The parcel may weigh up to 20 kg.", "The parcel may weigh up to 30 kilograms."),
        ("退货期限为 30 天。", "退货期限为十五天。"),
        ("会员享受百分之十的折扣。", "会员享受 20% 的折扣。"),
    ],
)
def test_true_contradictions_in_any_unit_form(earlier: str, now: str):
    [found] = contradictions(now, [earlier])
    assert found["earlier"] == earlier and found["now"] == now
    assert found["why"].startswith("different quantities:")


@pytest.mark.parametrize(
    ("earlier", "now"),
    [
        ("Items can be returned within 14 days.", "Items can be returned within 2 weeks."),  # the same duration
        ("Refunds arrive in 5 days.", "Refunds arrive in 5 business days."),  # not one dimension: no comparison
        ("Delivery takes 4 to 6 business days.", "Delivery takes 5 business days."),  # inside the range
        ("Express shipping costs $14.99.", "Express shipping costs 14.99 euros."),  # no exchange rates
        ("Items can be returned within 30 days.", "Refunds are not supported."),  # another topic
    ],
)
def test_agreeing_or_incomparable_quantities_are_no_contradiction(earlier: str, now: str):
    assert contradictions(now, [earlier]) == []


def test_a_negation_still_contradicts_but_not_across_two_kinds_of_one_thing():
    [found] = contradictions("Standard shipping is not free.", ["Standard shipping is free on every order."])
    assert found["why"] == "one says no where the other says yes"
    assert contradictions("Express shipping is not free.", ["Standard shipping is free on every order."]) == []


def test_ranges_units_before_and_after_and_chinese_measure_words():
    assert written("4 到 6 个工作日，运费 5.99 美元") == [("business day", "4 到 6 个工作日"), ("USD", "5.99 美元")]
    assert written("€5 or 3 lbs or 2 hrs") == [("EUR", "€5"), ("weight", "3 lbs"), ("time", "2 hrs")]
    [two_weeks] = quantities("within 2 weeks")
    assert (two_weeks.low, two_weeks.high) == (14.0, 14.0)
