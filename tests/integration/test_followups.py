"""Follow-up questions on a real thread: offline through `ask(..., thread_id=...)` and the store's checkpointer,
and on the model backend through the real `ChatOpenAI` client against the local OpenAI-compatible server."""

from __future__ import annotations

import uuid

from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI
from support.openai_server import OpenAIServer, Reply, Request
from support.replies import Plausible

from selfcrag import ask, build_graph
from selfcrag.backend import model_components

EXPRESS = "How much does express shipping cost?"
FOLLOW_UP = "And how long does it take to arrive?"
CONTEXTUALIZE = "rewrite the last question of a conversation"


def contextualize_step(result: dict) -> dict:
    [step] = [s for s in result["trace"] if s["node"] == "contextualize"]
    return step


def test_a_follow_up_on_a_thread_is_answered_about_the_earlier_subject_offline():
    thread = uuid.uuid4().hex
    first = ask(EXPRESS, thread_id=thread)
    second = ask(FOLLOW_UP, thread_id=thread)

    assert "$14.99" in first["answer"] and second["turn"] == 2
    assert "Express shipping" in second["answer"] and "2 business days" in second["answer"]
    assert "Standard shipping" not in second["answer"]
    assert second["contradictions"] == [] and second["decision"] == "answer"
    step = contextualize_step(second)
    assert step["asked"] == FOLLOW_UP and step["question"] == f"{FOLLOW_UP} (express shipping cost)"
    assert second["trace"][0]["question"] == FOLLOW_UP  # prepare saw the user's words
    users = [m.content for m in second["messages"] if isinstance(m, HumanMessage)]
    assert users == [EXPRESS, FOLLOW_UP]  # the history keeps what the user said


def test_a_chinese_follow_up_on_a_thread_offline():
    thread = uuid.uuid4().hex
    ask("加急配送多少钱？", thread_id=thread)
    second = ask("那需要几天？", thread_id=thread)
    assert contextualize_step(second)["question"] == "那需要几天？（加急配送）"
    assert "加急配送" in second["answer"] and "2 个工作日" in second["answer"]


def test_the_model_backend_makes_one_rewrite_call_for_a_follow_up_and_none_for_a_standalone_question():
    plausible = Plausible()
    standalone = "How long does express shipping take to arrive?"

    def respond(request: Request) -> Reply:
        if CONTEXTUALIZE in request.system:
            assert "Assistant:" in request.user and FOLLOW_UP in request.user
            return Reply.json({"question": standalone})
        return plausible.responder()(request)

    with OpenAIServer(respond) as server:
        llm = ChatOpenAI(base_url=server.base_url, api_key="test", model="test-model", max_retries=0, timeout=10)
        graph = build_graph(model_components(llm))
        earlier = [HumanMessage(EXPRESS), AIMessage("Express shipping costs $14.99. [doc_1]")]
        followed = graph.invoke({"messages": [*earlier, HumanMessage(FOLLOW_UP)]})
        assert len(server.asking(CONTEXTUALIZE)) == 1
        step = contextualize_step(followed)
        assert step["question"] == standalone and step["prompt"] == "contextualize/2" and not step.get("error")
        [retrieved] = [s for s in followed["trace"] if s["node"] == "retrieve"][:1]
        assert standalone in retrieved["reason"]  # retrieval used the standalone question
        assert "2 business days" in followed["answer"]

        graph.invoke({"messages": [*earlier, HumanMessage("How many days do I have to return an item?")]})
        graph.invoke({"question": FOLLOW_UP})  # a first question: nothing to lean on
        assert len(server.asking(CONTEXTUALIZE)) == 1
