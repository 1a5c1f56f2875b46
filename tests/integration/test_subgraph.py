"""selfcrag inside a larger agent, as the two examples use it: the compiled graph as a node of a `MessagesState`
chat agent (examples/chat_agent.py), and wrapped as a tool of a tool-calling agent (examples/tool_agent.py).
The real offline graph runs inside real parent graphs; only the tool-calling model is a scripted stand-in."""

from __future__ import annotations

import importlib.util
import sys
import uuid
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

EXAMPLES = Path(__file__).parents[2] / "examples"
RETURNS = "How many days do I have to return an item?"
HEADPHONES = "How long do I have to send back a pair of headphones?"
# Confidence thresholds no answer reaches: a drafted answer goes to human review instead of being shown.
REVIEW_EVERY_ANSWER = {"human_review": True, "min_confidence": 1.0, "caveat_band": 0.0}


def load_example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # LangGraph resolves the state's annotations through the module
    spec.loader.exec_module(module)
    return module


chat_agent = load_example("chat_agent")
tool_agent = load_example("tool_agent")


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": uuid.uuid4().hex}}


# --- the compiled graph as a node of a MessagesState parent -------------------------------------------------


def test_last_user_message_is_the_question_and_the_answer_comes_back_as_a_cited_ai_message():
    agent = chat_agent.build_chat_agent()
    history = [HumanMessage("What are customer service hours on Saturday?"), AIMessage("9:00 to 17:00."),
               HumanMessage(RETURNS)]  # fmt: skip
    state = agent.invoke({"messages": history})

    *before, reply = state["messages"]
    assert [m.content for m in before] == [m.content for m in history]
    assert isinstance(reply, AIMessage) and reply.name == "selfcrag"
    assert "30" in reply.content
    citations = reply.additional_kwargs["citations"]
    assert any(c["doc_id"] == "returns_policy" for c in citations)
    assert all(f"[{c['ref']}]" in reply.content for c in citations)
    assert reply.additional_kwargs["decision"] in ("answer", "answer_with_caveat")


def test_parent_keys_and_reducers_are_untouched_across_turns():
    agent = chat_agent.build_chat_agent(checkpointer=InMemorySaver())
    config = thread()
    first = agent.invoke({"messages": [HumanMessage(RETURNS)]}, config)
    second = agent.invoke({"messages": [HumanMessage("How much does express shipping cost?")]}, config)

    # Only the parent's own keys: selfcrag's other outputs stay in the subgraph.
    assert set(second) == {"messages", "turns"}
    # selfcrag hands back the history it was given plus one message; merged by id, nothing is doubled.
    assert [m.type for m in second["messages"]] == ["human", "ai", "human", "ai"]
    assert len({m.id for m in second["messages"]}) == 4
    assert second["messages"][1] == first["messages"][1]
    assert "14.99" in second["messages"][-1].content
    assert second["turns"] == 2  # the parent's `operator.add` reducer ran once per turn


def test_small_talk_never_reaches_the_knowledge_base():
    state = chat_agent.build_chat_agent().invoke({"messages": [HumanMessage("Thanks!")]})
    assert state["messages"][-1].content == chat_agent.GREETING
    assert "citations" not in state["messages"][-1].additional_kwargs


def test_interrupt_inside_the_subgraph_surfaces_to_the_parent_and_resumes():
    agent = chat_agent.build_chat_agent(checkpointer=InMemorySaver())
    config = thread()
    paused = agent.invoke({"messages": [HumanMessage(HEADPHONES)]}, config, context=REVIEW_EVERY_ANSWER)

    (interrupt,) = paused["__interrupt__"]
    assert interrupt.value["question"] == HEADPHONES
    assert "15 days" in interrupt.value["draft_answer"]
    assert agent.get_state(config).next == ("knowledge_base",)
    assert [m.type for m in paused["messages"]] == ["human"]  # nothing answered yet

    done = agent.invoke(Command(resume={"action": "edit", "answer": "15 days from delivery."}), config,
                        context=REVIEW_EVERY_ANSWER)  # fmt: skip
    assert [m.type for m in done["messages"]] == ["human", "ai"]
    assert done["messages"][-1].content == "15 days from delivery."
    assert done["messages"][-1].additional_kwargs["decision"] == "answer"
    assert done["turns"] == 1  # resuming re-ran the subgraph node only
    assert agent.get_state(config).next == ()


def test_subgraph_progress_streams_through_the_parent():
    agent = chat_agent.build_chat_agent()
    events = list(agent.stream({"messages": [HumanMessage(RETURNS)]}, stream_mode="custom", subgraphs=True))
    assert events and all(namespace[0].startswith("knowledge_base:") for namespace, _ in events)
    assert any(event["text"].startswith("drafting an answer") for _, event in events)


# --- wrapped as a tool of a tool-calling agent --------------------------------------------------------------


class ScriptedToolCaller(BaseChatModel):
    """Stands in for a tool-calling chat model: asks the tool the user's last question, then answers with
    what the tool returned."""

    @property
    def _llm_type(self) -> str:
        return "scripted-tool-caller"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedToolCaller:
        assert [t.name for t in tools] == ["search_help_center"]
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:  # fmt: skip
        last = messages[-1]
        if isinstance(last, ToolMessage):
            reply = AIMessage(content=f"From the help center: {last.content}")
        else:
            call = {"name": "search_help_center", "args": {"question": last.content}, "id": uuid.uuid4().hex}
            reply = AIMessage(content="", tool_calls=[call])
        return ChatResult(generations=[ChatGeneration(message=reply)])


def test_tool_agent_asks_selfcrag_and_answers_with_its_citations():
    agent = tool_agent.build_tool_agent(ScriptedToolCaller())
    state = agent.invoke({"messages": [HumanMessage(RETURNS)]})

    human, call, result, answer = state["messages"]
    assert call.tool_calls[0]["args"] == {"question": RETURNS}
    assert isinstance(result, ToolMessage) and "30" in result.content
    assert "Sources:\n[doc_1] Returns Policy (sample_kb/returns_policy.md)" in result.content
    assert result.artifact["decision"] in ("answer", "answer_with_caveat")
    assert any(c["doc_id"] == "returns_policy" for c in result.artifact["citations"])
    assert answer.content.startswith("From the help center:") and "30" in answer.content


def test_interrupt_inside_the_tool_surfaces_to_the_agent_and_resumes():
    agent = tool_agent.build_tool_agent(ScriptedToolCaller(), checkpointer=InMemorySaver())
    config = thread()
    paused = agent.invoke({"messages": [HumanMessage(HEADPHONES)]}, config, context=REVIEW_EVERY_ANSWER)

    (interrupt,) = paused["__interrupt__"]
    assert interrupt.value["question"] == HEADPHONES
    assert agent.get_state(config).next == ("tools",)

    done = agent.invoke(Command(resume={"action": "approve"}), config, context=REVIEW_EVERY_ANSWER)
    tool_message = done["messages"][-2]
    assert tool_message.artifact["decision"] == "answer"
    assert tool_message.content.startswith(interrupt.value["draft_answer"])


def test_a_rejected_review_inside_the_tool_gives_the_model_an_abstention():
    agent = tool_agent.build_tool_agent(ScriptedToolCaller(), checkpointer=InMemorySaver())
    config = thread()
    agent.invoke({"messages": [HumanMessage(HEADPHONES)]}, config, context=REVIEW_EVERY_ANSWER)
    done = agent.invoke(Command(resume={"action": "reject"}), config, context=REVIEW_EVERY_ANSWER)
    tool_message = done["messages"][-2]
    assert tool_message.artifact["decision"] == "abstain"
    assert tool_message.content.startswith("I don't know")
