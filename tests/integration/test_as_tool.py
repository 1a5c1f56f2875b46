"""`graph.as_tool()`: the compiled graph as a LangChain tool, made by langchain_core from its input schema, with
`{"question": ...}` alone, called directly and from a ToolNode in a small LangGraph agent (offline)."""

from __future__ import annotations

import warnings

import pytest
from langchain_core._api import LangChainBetaWarning
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from pydantic import ValidationError

from selfcrag import build_graph

RETURNS = "How many days do I have to return an item?"


@pytest.fixture(scope="module")
def kb_tool():  # noqa: ANN201
    with warnings.catch_warnings():  # as_tool is marked beta in langchain_core; what it builds is what we test
        warnings.simplefilter("ignore", LangChainBetaWarning)
        return build_graph().as_tool(name="search_help_center", description="Answer from the help center, cited.")


def test_the_tool_takes_a_question_alone_and_both_arguments_are_optional(kb_tool):
    assert set(kb_tool.args) == {"question", "messages"}
    assert not kb_tool.args_schema.model_json_schema().get("required")
    result = kb_tool.invoke({"question": RETURNS})
    assert "30" in result["answer"] and result["decision"] in ("answer", "answer_with_caveat")
    assert any(c["doc_id"] == "returns_policy" for c in result["citations"])


def test_the_tool_takes_chat_messages_instead(kb_tool):
    result = kb_tool.invoke({"messages": [HumanMessage(RETURNS)]})
    assert "30" in result["answer"]
    assert result["messages"][-1].name == "selfcrag"


def test_arguments_of_the_wrong_type_are_refused_by_the_tool_schema(kb_tool):
    with pytest.raises(ValidationError, match="question"):
        kb_tool.invoke({"question": ["not", "text"]})


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
