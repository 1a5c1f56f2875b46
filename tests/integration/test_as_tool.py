"""`graph.as_tool()`: the compiled graph as a tool a model calls with a question, getting back the answer, the
decision and the sources. Called directly, from a ToolNode, and by the real `ChatOpenAI` client in a small agent
loop against the local OpenAI-compatible server (offline graph)."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import ValidationError
from support.openai_server import OpenAIServer, Reply, Request

from selfcrag import build_graph

RETURNS = "How many days do I have to return an item?"
# What a model is sent per tool, and reads back per call. The schema is a name, a description and one string
# argument (about 300 bytes; 23.7 KB when it was the graph's input schema, `messages` listing 12 message classes).
# The result is the answer and one short line per source (about 300 bytes for this question; the whole output,
# trace and history included, was 4.8 KB).
MOST_SCHEMA_BYTES = 1_000
MOST_RESULT_BYTES = 1_000


@pytest.fixture(scope="module")
def kb_tool():  # noqa: ANN201
    return build_graph().as_tool(name="search_help_center", description="Answer from the help center, cited.")


def test_the_tool_takes_one_question_and_its_schema_is_small(kb_tool):
    assert set(kb_tool.args) == {"question"}
    assert kb_tool.args_schema.model_json_schema()["required"] == ["question"]
    assert len(json.dumps(convert_to_openai_tool(kb_tool))) < MOST_SCHEMA_BYTES


def test_the_tool_returns_the_answer_the_decision_and_the_sources_only(kb_tool):
    result = kb_tool.invoke({"question": RETURNS})
    assert set(result) == {"answer", "decision", "citations"} and len(json.dumps(result)) < MOST_RESULT_BYTES
    assert "30" in result["answer"] and result["decision"] in ("answer", "answer_with_caveat")
    assert all(set(c) == {"ref", "doc_id", "title", "source"} for c in result["citations"])
    assert any(c["doc_id"] == "returns_policy" and f"[{c['ref']}]" in result["answer"] for c in result["citations"])


def test_arguments_of_the_wrong_type_or_another_schema_are_refused(kb_tool):
    with pytest.raises(ValidationError, match="question"):
        kb_tool.invoke({"question": ["not", "text"]})
    with pytest.raises(ValidationError, match="question"):
        kb_tool.invoke({"messages": [HumanMessage(RETURNS)]})
    with pytest.raises(TypeError, match="only argument is `question`"):
        build_graph().as_tool(arg_types={"messages": list})


def test_a_langgraph_agent_calls_it_through_a_tool_node(kb_tool):
    builder = StateGraph(MessagesState)
    builder.add_node("tools", ToolNode([kb_tool]))
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    call = {"name": "search_help_center", "args": {"question": RETURNS}, "id": "call_1", "type": "tool_call"}
    state = builder.compile().invoke({"messages": [HumanMessage(RETURNS), AIMessage("", tool_calls=[call])]})

    reply = state["messages"][-1]
    assert isinstance(reply, ToolMessage) and reply.tool_call_id == "call_1" and reply.status == "success"
    assert "30" in str(reply.content) and "returns_policy" in str(reply.content)
    assert len(str(reply.content)) < MOST_RESULT_BYTES


def test_a_chat_openai_agent_calls_it_and_answers_from_what_it_returned(kb_tool):
    def respond(request: Request) -> Reply:
        tool_results = [m for m in request.body["messages"] if m["role"] == "tool"]
        if not tool_results:
            return Reply.json({"question": RETURNS})  # a tool call: the server sends it as the request's tool
        found = json.loads(tool_results[-1]["content"])
        return Reply.content(f"{found['answer']} (decision: {found['decision']})")

    with OpenAIServer(respond) as server:
        model = ChatOpenAI(base_url=server.base_url, api_key="test", model="test-model").bind_tools([kb_tool])
        builder = StateGraph(MessagesState)
        builder.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
        builder.add_node("tools", ToolNode([kb_tool]))
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", tools_condition)
        builder.add_edge("tools", "agent")
        state = builder.compile().invoke({"messages": [HumanMessage(RETURNS)]})

    first, second = server.requests
    assert len(json.dumps(first.body["tools"])) < MOST_SCHEMA_BYTES  # what the model was sent, every call
    (sent,) = [m["content"] for m in second.body["messages"] if m["role"] == "tool"]
    assert len(sent) < MOST_RESULT_BYTES and "returns_policy" in sent
    call, result, answer = state["messages"][1:]
    assert call.tool_calls[0]["args"] == {"question": RETURNS} and isinstance(result, ToolMessage)
    assert "30" in answer.content and "decision: answer" in answer.content
