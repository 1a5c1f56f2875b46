"""Every client-controlled text is bounded (issue 23): the chat history a run reads, not only its question. A
20 MB earlier message became a 20-million-character contextualize prompt; now every message is cut to
`max_turn_chars` and the conversation to `max_history_chars`, newest first, before any cleaning or prompt sees it.
Through the real `ChatOpenAI` client against the local OpenAI-compatible server, and offline."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI
from support.openai_server import OpenAIServer
from support.replies import Plausible
from support.shelf import Shelf

from selfcrag import Context, build_graph
from selfcrag.backend import model_components
from selfcrag.nodes.prepare import history_from

EXPRESS = "How much does express shipping cost?"
FOLLOW_UP = "And how long does it take to arrive?"
HUGE = "shipping " * (20_000_000 // 9)  # 20 MB of one earlier message
CONTEXTUALIZE, GENERATE = "rewrite the last question of a conversation", "You answer questions using only the evidence"


def conversation() -> list:
    return [HumanMessage(HUGE), AIMessage("Express shipping costs $14.99."), HumanMessage(EXPRESS),
            AIMessage("Express shipping costs $14.99 [doc_1]."), HumanMessage(FOLLOW_UP)]  # fmt: skip


def test_a_20_mb_earlier_message_reaches_no_prompt_beyond_the_history_bound():
    settings = Context()
    with OpenAIServer(Plausible().responder()) as server:
        llm = ChatOpenAI(base_url=server.base_url, api_key="test", model="test-model", max_retries=0)
        result = build_graph(model_components(llm, retriever=Shelf())).invoke({"messages": conversation()})
    assert result["decision"] and server.asking(CONTEXTUALIZE) and server.asking(GENERATE)
    for request in server.requests:  # every prompt the model got, the contextualize one first
        sent = sum(len(str(m.get("content") or "")) for m in request.body["messages"])
        assert sent < settings.max_history_chars + 10_000, f"{sent:,} characters sent"
    shown = server.asking(CONTEXTUALIZE)[0].user
    assert "Express shipping costs $14.99" in shown  # the newest turns whole
    oldest = shown.split("\n")[1]
    assert oldest.startswith("User: shipping shipping") and oldest.endswith(" …")  # the 20 MB one cut, and says so
    assert len(oldest) <= Context().max_turn_chars + 10


def test_offline_a_20_mb_history_is_read_within_its_bounds():
    result = build_graph().invoke({"messages": conversation()})
    assert result["decision"] and result["messages"][-1].type == "ai"


def test_the_truncation_rule_newest_first_each_message_cut_then_the_total():
    settings = Context.from_env(max_turn_chars=10, max_history_chars=25)
    state = {"question": "q4", "messages": [HumanMessage("oldest"), AIMessage("a" * 30), HumanMessage("q2"),
                                            AIMessage("b" * 12), HumanMessage("q4")]}  # fmt: skip
    turns = history_from(state, settings)  # q4 is the question itself: read (2 characters), not history
    assert [t["content"] for t in turns] == ["o …", "a" * 10 + " …", "q2", "b" * 10 + " …"]  # 2 + 10 + 2 + 10 + 1
