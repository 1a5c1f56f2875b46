"""The graph as `langgraph.json` serves it: the real `langgraph dev` server (in-memory runtime), started on a
free port and driven with `langgraph_sdk`, as a deployment or LangGraph Studio drives it."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from langgraph_sdk import get_client, get_sync_client
from support.langgraph_server import ROOT, langgraph_dev

from selfcrag import Context
from selfcrag.context import ASSISTANT_SETTINGS, OPERATOR_SETTINGS
from selfcrag.graph import NODES, graph

pytestmark = pytest.mark.system  # a langgraph dev server

QUESTIONS = [json.loads(line) for line in (ROOT / "tests" / "data" / "sample_questions.jsonl")
             .read_text(encoding="utf-8").splitlines() if line.strip()]  # fmt: skip
RETURNS = "How many days do I have to return an item?"
DECISIONS = {"answer", "answer_with_caveat", "abstain"}
# Confidence thresholds no answer reaches: a drafted answer goes to human review instead of being shown.
REVIEW_EVERY_ANSWER = {"human_review": True, "min_confidence": 1.0, "caveat_band": 0.0}


@pytest.fixture(scope="module")
def server_url():
    with langgraph_dev() as url:
        yield url


@pytest.fixture(scope="module")
def client(server_url):
    return get_sync_client(url=server_url)


@pytest.fixture(scope="module")
def assistant_id(client):
    (assistant,) = client.assistants.search(graph_id="selfcrag")
    return assistant["assistant_id"]


def test_schemas_publish_input_output_and_every_setting_once_with_its_description(client, assistant_id):
    schemas = client.assistants.get_schemas(assistant_id)

    assert set(schemas["input_schema"]["properties"]) == {"question", "messages"}
    assert {"answer", "citations", "decision", "confidence", "scores", "missing", "trace", "llm_calls",
            "messages"} <= set(schemas["output_schema"]["properties"])  # fmt: skip
    # What a run or an assistant may set, each with its description, once (not again as config_schema): run
    # settings and the system prompts; the operator's other settings are not offered (selfcrag/auth.py refuses a
    # run that sends one, test_server_trust.py).
    published = schemas["context_schema"]["properties"]
    assert set(published) == set(Context.model_fields) - (OPERATOR_SETTINGS - ASSISTANT_SETTINGS)
    assert {"k", "domain", "generate_prompt"} <= set(published) and not {"base_url", "index_dir"} & set(published)
    for name in published:
        assert published[name]["description"] == Context.model_fields[name].description, name
        assert "readOnly" not in published[name], name
    assert schemas["config_schema"]["properties"] == {}


def test_graph_drawing_has_every_node_and_marks_conditional_edges(client, assistant_id):
    drawing = client.assistants.get_graph(assistant_id)

    names = {node.__name__.rsplit(".", 1)[-1] for node in NODES}
    assert {n["id"] for n in drawing["nodes"]} == names | {"__start__", "__end__"}
    edges = {(e["source"], e["target"], bool(e.get("conditional"))) for e in drawing["edges"]}
    # The same drawing as the graph built here, conditional flags included ...
    assert edges == {(e.source, e.target, e.conditional) for e in graph.get_graph().edges}
    # ... where CRAG's action, the retrieval loop and the closing decision are conditional edges.
    branches = {(source, target) for source, target, conditional in edges if conditional}
    assert {("grade_documents", "refine"), ("grade_documents", "rewrite_query"), ("refine", "web_search"),
            ("rewrite_query", "retrieve"), ("generate", "check_hallucination"), ("finalize", "human_review"),
            ("finalize", "__end__"), ("retrieve", "finalize"), ("human_review", "human_review"),
            ("human_review", "__end__"), ("route_question", "retrieve"), ("route_question", "finalize"),
            ("route_question", "web_search")} <= branches  # fmt: skip
    assert ("__start__", "prepare", False) in edges


def test_thread_run_returns_answer_citations_and_decision(client, assistant_id):
    thread = client.threads.create()
    result = client.runs.wait(thread["thread_id"], assistant_id, input={"question": RETURNS})

    assert result["decision"] in ("answer", "answer_with_caveat")
    assert "30" in result["answer"]
    assert result["citations"] and all(f"[{c['ref']}]" in result["answer"] for c in result["citations"])
    assert any(c["doc_id"] == "returns_policy" for c in result["citations"])
    assert [s["node"] for s in result["trace"]][0] == "prepare"
    # The answer closes the thread's chat history as an AI message carrying its citations, after the question.
    assert [(m["type"], m["content"]) for m in result["messages"]] == [("human", RETURNS), ("ai", result["answer"])]
    message = result["messages"][-1]
    assert message["type"] == "ai" and message["content"] == result["answer"]
    assert message["additional_kwargs"]["citations"] == result["citations"]
    assert client.threads.get_state(thread["thread_id"])["values"]["decision"] == result["decision"]


def test_chat_turns_on_one_thread_each_answer_their_own_question(client, assistant_id):
    thread = client.threads.create()["thread_id"]
    first = client.runs.wait(thread, assistant_id, input={"messages": [{"role": "user", "content": RETURNS}]})
    second = client.runs.wait(thread, assistant_id,
                              input={"messages": [{"role": "user", "content": "How much does express shipping cost?"}]})

    assert "30" in first["answer"]
    assert "14.99" in second["answer"]
    assert [m["type"] for m in second["messages"]] == ["human", "ai", "human", "ai"]
    assert second["trace"][0]["question"] == "How much does express shipping cost?"


def test_updates_messages_and_custom_modes_all_stream(client, assistant_id):
    events: dict[str, list] = {}
    for part in client.runs.stream(None, assistant_id, input={"question": RETURNS},
                                   stream_mode=["updates", "messages", "custom"]):  # fmt: skip
        events.setdefault(part.event, []).append(part.data)

    updated = [node for update in events["updates"] for node in update]
    assert updated[:5] == ["prepare", "contextualize", "route_question", "retrieve",
                           "first_draft"] and updated[-1] == "finalize"
    progress = [e["text"] for e in events["custom"]]
    assert any(t.startswith("drafting an answer from the 5 retrieved passages") for t in progress), progress
    assert {e["node"] for e in events["custom"]} >= {"retrieve", "first_draft", "check_hallucination"}
    # The offline generator copies sentences, so there are no tokens: `messages` carries model output only, the
    # answer message, and no echo of the question, which enters the thread's history all the same.
    (complete,) = events["messages/complete"]
    assert [m["type"] for m in complete] == ["ai"]
    asked = events["updates"][0]["prepare"]["messages"]
    assert [(m["role"], m["content"]) for m in asked] == [("user", RETURNS)]
    final = events["updates"][-1]["finalize"]
    assert complete[-1]["type"] == "ai" and complete[-1]["content"] == final["messages"][-1]["content"]
    assert "[doc_" in complete[-1]["content"]


def test_human_review_pauses_the_run_and_resumes_through_the_sdk(client, assistant_id):
    thread = client.threads.create()["thread_id"]
    question = "How long do I have to send back a pair of headphones?"
    paused = client.runs.wait(thread, assistant_id, input={"question": question}, context=REVIEW_EVERY_ANSWER)

    assert paused["decision"] == "human_review"
    state = client.threads.get_state(thread)
    assert state["next"] == ["human_review"]
    (interrupt,) = state["interrupts"]
    assert interrupt["value"]["question"] == question
    assert "15 days" in interrupt["value"]["draft_answer"]
    assert interrupt["value"]["actions"] == ["approve", "edit", "reject"]

    resumed = client.runs.wait(thread, assistant_id, command={"resume": {"action": "edit", "answer": "15 days."}})
    assert resumed["decision"] == "answer" and resumed["answer"] == "15 days."
    assert resumed["trace"][-1] == {"node": "human_review", "decision": "answer", "reason": "reviewer: edit",
                                    "reviewer": "developer"}  # auth off: every client is the operator `developer`
    assert resumed["messages"][-1]["content"] == "15 days."
    assert client.threads.get_state(thread)["next"] == []


def test_twenty_concurrent_runs_all_finish_with_valid_outputs(server_url, assistant_id):
    questions = [q["question"] for q in QUESTIONS[:20]]

    async def run_all() -> list[dict]:
        client = get_client(url=server_url)
        return await asyncio.gather(*(client.runs.wait(None, assistant_id, input={"question": q}) for q in questions))

    started = time.perf_counter()
    results = asyncio.run(run_all())
    seconds = time.perf_counter() - started
    print(f"\n20 concurrent runs: {seconds:.1f}s wall time")

    for question, result in zip(questions, results, strict=True):
        assert result["decision"] in DECISIONS, (question, result)
        assert result["trace"][0]["question"] == question  # no run saw another run's state
        assert result["answer"]
        if result["decision"] != "abstain":
            assert result["citations"] and "[doc_" in result["answer"]
    answered = sum(r["decision"] != "abstain" for r in results)
    assert answered >= 16, f"{answered}/20 answerable sample questions answered"
