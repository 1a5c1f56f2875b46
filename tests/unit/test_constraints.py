"""The constraint check (quality/constraints.py) on hand-written sentences: customer service, history, science.

Each kind of violation (another name, number or modifier in the asked one's frame), and the many ways an answer
keeps to the question while wording it differently: paraphrases, pronouns, a name given in the passage, word
order, plural and singular, misspellings, Chinese."""

from __future__ import annotations

import pytest

from selfcrag.context import Context
from selfcrag.contract import Strip
from selfcrag.evaluation.signals import graph_signals
from selfcrag.knowledge.embeddings import default_embedder
from selfcrag.offline.extractive import ExtractiveGenerator
from selfcrag.offline.offline_grading import OfflineAnswerGrader
from selfcrag.quality.constraints import tokens, violations, word_classes

VIOLATIONS = [
    # customer service
    ("How much does the monthly plan cost?", "The annual plan costs $99 per year.", "modifier", "monthly", "annual"),
    ("What does error E1042 mean?", "Error E2001 means your shipping address could not be verified.", "name",
     "E1042", "E2001"),
    ("How long is the warranty for Pro headphones?", "The warranty for Max headphones lasts two years.", "name",
     "Pro", "Max"),
    ("Ultra 会员每个月多少钱？", "Pro 会员每月 30 元。", "name", "Ultra", "Pro"),
    ("2023 年的年费是多少？", "2022 年的年费是 99 元。", "number", "2023", "2022"),
    # history
    ("Who founded the Office of Eastern Medicine?", "Jesus the Interpreter founded the Office of Western Medicine.",
     "name", "Eastern", "Western"),
    ("What happened to the 12 ships of the fleet?", "The 40 ships of the fleet were lost in a storm.", "number",
     "12", "40"),
    ("Who was the northern army commander in 1812?", "The southern army commander was Kutuzov.", "modifier",
     "northern", "southern"),
    # science
    ("What attracts a matching helper B cell?",
     "Antigen attracts a matching helper T cell, which activates the B cell.", "name", "B", "T"),
    ("What triggers a slow killing response?", "This recognition signal triggers a rapid killing response.",
     "modifier", "slow", "rapid"),
    ("What vitamin do T cells have a parasitic relationship with?", "T cells have a symbiotic relationship with "
     "vitamin D.", "modifier", "parasitic", "symbiotic"),
    ("What is the speed of sound in water?", "The speed of light in water is about 225,000 km/s.", "modifier",
     "sound", "light"),
]


@pytest.mark.parametrize(("question", "answer", "kind", "asked", "stated"), VIOLATIONS)
def test_another_value_in_the_asked_frame_is_a_violation(question, answer, kind, asked, stated):
    found = violations(question, answer)
    assert [v.kind for v in found] == [kind]
    assert asked in found[0].asked and stated in found[0].stated
    assert found[0].describe() == f"the question asks about {found[0].asked!r}; the answer is about {found[0].stated!r}"


KEPT = [
    # the same words, or the asked value also in the frame
    ("How much does the monthly plan cost?", "The monthly plan costs $10 and the annual plan costs $99."),
    ("How much does the monthly plan cost?", "The monthly plan costs $10 per month."),
    # paraphrase: another verb, another word order
    ("When was the annual report published?", "The company released its annual report in March."),
    ("Who besieged Xiangyang?", "Xiangyang was besieged by Kublai's army for five years."),
    ("When did Kublai attack Xiangyang?", "Kublai besieged Xiangyang between 1268 and 1273."),
    ("What fee applies to express shipping?", "Express shipping carries a fee of $15."),
    # pronouns and a name given only in the passage
    ("When did Tesla move to New York?", "He moved to New York in 1884."),
    ("When did Beyoncé release Dangerously in Love?", "Knowles released Dangerously in Love in 2003."),
    # plural and singular, misspellings, morphological variants
    ("How long do refunds take?", "A refund takes 5-7 business days."),
    ("What is the average plant biosmass?", "The average plant biomass is estimated at 356 tonnes per hectare."),
    ("How did the Mongol emperors rule?", "The Mongolian emperors ruled through a civilian bureaucracy."),
    # a constraint merely absent: no competitor in its frame
    ("How much does the monthly plan cost in Canada?", "The plan costs $10."),
    ("What year did the Yuan dynasty end?", "The dynasty ended in 1368."),
    # a verb's synonym is no competitor: its slot is not a noun phrase's
    ("What do clinical pharmacists often participate in?", "Clinical pharmacists often collaborate with physicians."),
    ("What is used to estimate emissions?", "Default factors are used to derive emissions estimates."),
    # one frame word is not enough for a modifier: synonyms compete as often as swaps
    ("What is the main goal of punishment?", "Deterrence is a major goal of punishment."),
    # a comma ends the phrase: no frame across it
    ("What are two examples of Frank Burnet's theory?", "On the basis of CST, Burnet developed a theory."),
    # Chinese: the same name, a synonym character, an error code asked and answered
    ("Ultra 会员每个月多少钱？", "Ultra 会员每月 30 元。"),
    ("退货期限是多少天？", "退货时限为 30 天。"),
    ("E1042 是什么意思？", "E1042 表示您的银行拒绝了这笔付款。"),
]


@pytest.mark.parametrize(("question", "answer"), KEPT)
def test_answers_that_keep_to_the_question_have_no_violation(question, answer):
    assert violations(question, answer) == []


def test_an_alias_in_the_passage_is_the_same_entity():
    question, answer = "Who managed the Knowles family band?", "The Beyonce family band was managed by Mathew."
    assert violations(question, answer)  # without the passage: another name in the frame
    assert violations(question, answer, "Beyonce Knowles and her sister Solange sang together.") == []


def test_words_the_question_uses_elsewhere_are_word_order_not_competitors():
    # "annual" is in the question too: the answer only orders the words differently.
    assert violations("Is the annual fee of the monthly plan refundable?", "The monthly fee of the annual plan is "
                      "refundable.") == []


def test_tokens_read_names_numbers_and_function_words():
    read = {t.text: (t.sort, t.function) for t in tokens("In 1812 the French army of Napoleon, a B cell.")}
    assert read["1812"] == ("number", False)
    assert read["French"] == ("name", False) and read["Napoleon"] == ("name", False)
    assert read["In"] == ("word", True)  # a sentence's first word: its capital says nothing
    assert read["the"][1] and read["of"][1] and read["a"][1]
    assert read["B"] == ("name", False)  # a capital letter alone names something
    assert [t.text for t in tokens("Möngke Khan")] == ["Mongke", "Khan"]  # accents dropped


def test_word_classes_are_general_grammar_from_the_data_file():
    classes = word_classes()
    assert {"determiners", "prepositions", "chinese_particles"} <= set(classes)
    assert "the" in classes["determiners"] and "of" in classes["prepositions"] and "的" in classes["chinese_particles"]


# --- where the check is used: the offline answer grader and the extractive generator ------------------------------

PLANS = Strip(id="plans#0", doc_id="plans", title="Plans", source="plans.md", score=0.8,
              text="The annual plan costs $99 per year and includes priority support. Every plan can be cancelled "
                   "at any time from Account > Billing.")


@pytest.fixture(scope="module")
def embedder():
    return default_embedder()


def test_the_answer_grader_marks_an_answer_about_another_plan_not_useful_and_says_why(embedder):
    grader, question = OfflineAnswerGrader(embedder), "How much does the monthly plan cost per year?"
    grade = grader.grade(question, "The annual plan costs $99 per year and includes priority support. [doc_1]",
                         Context())
    assert not grade.useful and grade.violations == 1
    assert 'asks about "monthly plan"; the answer says "annual plan"' in grade.missing  # feeds the rewrite
    assert "the answer is about 'annual plan'" in grade.reason
    assert grade.term_coverage is not None and 0 < grade.term_coverage < 1
    kept = grader.grade(question, "The monthly plan costs $120 per year. [doc_1]", Context())
    assert kept.violations == 0 and kept.useful and kept.score > grade.score


def test_the_answer_grader_says_it_in_chinese_for_a_chinese_question(embedder):
    grade = OfflineAnswerGrader(embedder).grade("Ultra 会员每个月多少钱？", "Pro 会员每月 30 元。[doc_1]", Context())
    assert not grade.useful and grade.violations == 1
    assert "问题问的是“Ultra 会员”，回答说的却是“Pro 会员”" in grade.missing


def test_the_extractive_generator_skips_a_sentence_about_another_plan(embedder):
    generator = ExtractiveGenerator(embedder)
    draft = generator.generate("How much does the monthly plan cost per year?", [PLANS], Context())
    assert "annual plan" not in draft.answer  # the best-scoring sentence answers another question
    assert draft.answer == "" and draft.missing == 'the evidence is about "annual plan", not "monthly plan"'
    asked = generator.generate("How much does the annual plan cost per year?", [PLANS], Context())
    assert asked.answer.startswith("The annual plan costs $99 per year")


def test_the_signals_carry_the_violations_and_the_coverage_of_the_last_answer_grade():
    trace = [{"node": "grade_answer", "decision": "not useful", "violations": 1, "term_coverage": 0.5}]
    found = graph_signals({"trace": trace})
    assert found["constraint_violations"] == 1 and found["answer_term_coverage"] == 0.5
    assert graph_signals({"trace": []})["constraint_violations"] is None


def test_an_identifier_competes_only_with_another_identifier():
    question = "What does error E1042 mean?"
    assert violations(question, "Checkout and Account Error Codes: Parcelly shows a short error code.") == []
    assert violations(question, "Error E2001 means the address could not be verified.")


def test_a_remembered_check_gives_the_same_violations_and_a_list_of_its_own():
    question = "How much does the monthly plan cost?"
    answer = "The annual plan costs 100 dollars."
    first = violations(question, answer, "Pricing\nThe annual plan costs 100 dollars.")
    assert [v.stated for v in first] == ["annual plan"]
    first.clear()  # the caller's list: the remembered result is not changed through it
    again = violations(question, answer, "Pricing\nThe annual plan costs 100 dollars.")
    assert [v.stated for v in again] == ["annual plan"] and again is not first
