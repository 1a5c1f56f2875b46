"""The opposite-of-the-question check: each kind of conflict, and the look-alikes it must leave alone."""

import pytest

from selfcrag.text.opposites import Conflict, conflicts


@pytest.mark.parametrize(
    ("question", "answer", "expected"),
    [
        ("What is the least important open question?", "P versus NP is the most important open question.",
         Conflict("opposite", "least", "most")),
        ("What is the second smallest producer of soybeans?", "Brazil is the second-largest producer of soybeans.",
         Conflict("opposite", "smallest", "largest")),
        ("What is the set of all unconnected graphs called?", "The language is the set of all connected graphs.",
         Conflict("opposite", "unconnected", "connected")),
        ("What captures the formal notion of difficulty?", "It captures the informal notion of difficulty.",
         Conflict("opposite", "formal", "informal")),
        ("Nineteen nations have what in this region?", "This region includes territory belonging to nine nations.",
         Conflict("number", "19", "9")),
        ("What was the emperor not known for?", "The emperor is known for his cultural contribution.",
         Conflict("negation", "not", "")),
        ("Where did Kublai refuse to move the capital?", "Kublai moved the capital from Karakorum to Khanbaliq.",
         Conflict("negation", "refuse", "")),
        ("What has been weakly tied with health?", "Income inequality has strongly correlated with health.",
         Conflict("opposite", "weakly", "strongly")),
        ("30天之后还能退货吗？", "收货后 30 天之前可以退货。", Conflict("opposite", "之后", "之前")),
    ],
)
def test_an_answer_about_the_opposite_is_found(question, answer, expected):
    assert expected in conflicts(question, answer)


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("What is the most important open question?", "P versus NP is the most important open question."),
        # "not known" says what "unknown" asks
        ("What is unknown about the classes between L and P?", "It is not known whether L is contained in P."),
        # the asked word in another form
        ("Where did water to the east flow?", "Water on the eastern side flowed to the Atlantic, west to the Pacific."),
        # "one" and "two" are words of the sentence more often than counts
        ("In what two age groups is immunity weaker?", "Immunity is diminished in the young and the elderly."),
        ("What damage is not covered by the warranty?", "Accidental damage is not covered by the warranty."),
        ("When did the dynasty end?", "The dynasty ended in 1368."),
        ("What did the board refuse to fund?", "The board refused funding for the new wing."),
        ("How long do I have to fix a failed payment?", "You have 7 days to update your card."),
        ("Which plan is the cheapest?", "The Basic plan is the cheapest in New York and Old Town."),
        ("能不能退货？", "收货后 30 天内能退货。"),
        # a negation in the premise, not in what is asked
        ("My parcel is marked delivered but it is not at my door. What should I do?",
         "Wait one day, then open a claim from the order page."),
    ],
)
def test_a_matching_answer_has_no_conflict(question, answer):
    assert conflicts(question, answer) == []


def test_numbers_of_different_kinds_do_not_conflict():
    # A rank, a year and an amount count different things: a multi-hop question's number describes the bridge.
    assert conflicts("Who served as the 32nd Attorney General of where?", "He ran for the Senate in 2016.") == []
    assert conflicts("Which album peaked at number six on the chart?", 'It is on the album "Dirt" (1992).') == []
    assert conflicts("Who played Samson in the 1949 film?", "The 1984 television film starred Max von Sydow.") == [
        Conflict("number", "1949", "1984")]
    assert conflicts("Who was the 32nd president?", "The 31st president was Hoover.") == [
        Conflict("number", "32", "31")]


@pytest.mark.parametrize(
    "question",
    ["Which was available first, the No Card or the Octopus card?", 'Who directed "Never Let Me Go"?',
     "Who wrote the novel No Country for Old Men?", "Which band released Without a Sound in 1994?"],
)
def test_a_negation_word_in_a_title_asks_nothing_negated(question):
    assert conflicts(question, "The Octopus card came first; the band wrote it.") == []
    # ... while the same question asking in words still counts
    assert conflicts(question.replace("?", " that was not a hit?"), "The band wrote it.") != []
