"""Follow-up questions: which lean on the conversation, their subject terms, the offline standalone form, and the
contextualize node (no call for a first or self-contained question)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from selfcrag.contract import Turn
from selfcrag.offline.contextualize import carry_subject, depends_on_thread, subject_terms
from selfcrag.testing import FakeChatModel

SHIPPING: list[Turn] = [Turn(role="user", content="How much does express shipping cost?"),
                        Turn(role="assistant", content="Express shipping costs $14.99. [doc_1]")]  # fmt: skip
SHIPPING_ZH: list[Turn] = [Turn(role="user", content="加急配送多少钱？"),
                           Turn(role="assistant", content="14.99 美元。")]  # fmt: skip


@pytest.mark.parametrize(
    "question",
    ["And how long does it take to arrive?", "What about Canada?", "How do I cancel it?", "Why?",
     "Is that included?", "How much is it?"],
)  # fmt: skip
def test_a_question_leaning_on_the_conversation_is_detected(question: str):
    assert depends_on_thread(question, SHIPPING)


@pytest.mark.parametrize(
    "question",
    ["How long does it take to get a refund?", "How do I reset my password if I forgot it?",
     "What does error E1042 mean?", "What does it cost to ship to Canada?",
     "How many days do I have to return an item?"],
)  # fmt: skip
def test_a_question_with_a_subject_of_its_own_stands_alone(question: str):
    assert depends_on_thread(question, SHIPPING) == ""


def test_a_first_question_never_depends_on_anything():
    assert depends_on_thread("And how long does it take to arrive?", []) == ""


@pytest.mark.parametrize("question", ["它多久能到？", "那需要几天？", "还有别的配送方式吗？", "这个可以退吗？"])
def test_chinese_follow_ups_are_detected(question: str):
    assert depends_on_thread(question, SHIPPING_ZH)


@pytest.mark.parametrize("question", ["加急配送多少钱？", "还款要多久？", "错误代码 E1042 是什么意思？",
                                      "你们提供礼品包装服务吗？"])  # fmt: skip
def test_chinese_questions_with_a_subject_stand_alone(question: str):
    assert depends_on_thread(question, SHIPPING_ZH) == ""


def test_subject_terms_leave_out_verbs_after_pronouns_and_nouns_pointed_back_to():
    assert subject_terms("How much does express shipping cost?") == ["express", "shipping", "cost"]
    assert subject_terms("And how long does it take to arrive?") == []
    assert subject_terms("Is this plan refundable?") == ["refundable"]
    assert subject_terms("加急配送需要几天？") == ["加急配送"]


def test_offline_the_earlier_subject_is_carried_into_the_question():
    rewrite = carry_subject("And how long does it take to arrive?", SHIPPING)
    assert rewrite.query == "And how long does it take to arrive? (express shipping cost)"
    assert rewrite.llm_calls == 0 and "express" in rewrite.reason
    assert carry_subject("它多久能到？", SHIPPING_ZH).query == "它多久能到？（加急配送）"


def test_a_chain_of_follow_ups_keeps_its_subject():
    chain = [*SHIPPING, Turn(role="user", content="And how long does it take?"),
             Turn(role="assistant", content="2 days.")]  # fmt: skip
    assert carry_subject("Is it tracked?", chain).query == "Is it tracked? (express shipping cost)"


def test_a_turn_that_was_conversation_names_no_subject_the_one_before_it_carries_on():
    thanked = [*SHIPPING, Turn(role="user", content="Thanks!"), Turn(role="assistant", content="Hello! I answer ...")]
    assert carry_subject("And how long does it take to arrive?", thanked).query == \
        carry_subject("And how long does it take to arrive?", SHIPPING).query


def test_nothing_to_carry_leaves_the_question_as_asked():
    rewrite = carry_subject("Why?", [Turn(role="assistant", content="Hello.")])
    assert rewrite.query == "Why?" and rewrite.reason == "no earlier subject to carry into it"


# --- the node, in the graph, on an in-process model ------------------------------------------------------------


def run(model: FakeChatModel, messages: list) -> dict:  # noqa: ANN001
    from selfcrag import build_graph

    return build_graph(llm=model).invoke({"messages": messages})


def test_the_node_rewrites_a_follow_up_with_one_call_and_the_trace_shows_both():
    model = FakeChatModel()
    history = [HumanMessage("How much does express shipping cost?"), AIMessage("Express shipping costs $14.99."),
               HumanMessage("And how long does it take to arrive?")]  # fmt: skip
    result = run(model, history)
    [step] = [s for s in result["trace"] if s["node"] == "contextualize"]
    assert step["decision"] == "standalone question" and step["asked"] == "And how long does it take to arrive?"
    assert "express shipping" in step["question"] and step["prompt"] == "contextualize/2"
    assert model.calls.count("contextualize") == 1
    assert [m.content for m in result["messages"][:3]] == [m.content for m in history]  # the user's words stay
    assert "2 business days" in result["answer"]


def test_a_first_or_self_contained_question_makes_no_call():
    model = FakeChatModel()
    run(model, [HumanMessage("How much does express shipping cost?")])
    run(model, [HumanMessage("How much does express shipping cost?"), AIMessage("$14.99."),
                HumanMessage("How many days do I have to return an item?")])  # fmt: skip
    assert "contextualize" not in model.calls


def test_a_failed_call_falls_back_to_carrying_the_subject():
    model = FakeChatModel(fail={"contextualize"})
    result = run(model, [HumanMessage("How much does express shipping cost?"), AIMessage("$14.99."),
                         HumanMessage("And how long does it take to arrive?")])  # fmt: skip
    [step] = [s for s in result["trace"] if s["node"] == "contextualize"]
    assert "FakeModelError" in step["error"] and step["question"].endswith("(express shipping cost)")
