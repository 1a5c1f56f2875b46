"""A tool-calling agent that asks selfcrag through a tool: the model decides when the knowledge base is needed.

    OPENAI_API_KEY=... python examples/tool_agent.py "Can I return headphones after three weeks?"
    OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_API_KEY=unused SELFCRAG_AGENT_MODEL=llama3.1 python ...

The tool runs the whole self-corrective loop and returns the answer with its sources as text for the model;
the citations, decision and confidence travel as the ToolMessage's `artifact`, for the application, not the
model. Compile with a checkpointer: a human-review interrupt inside the tool surfaces from the agent's
`invoke`, and `Command(resume=...)` on the agent's thread resumes it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from selfcrag import Context
from selfcrag import graph as selfcrag_graph

SYSTEM = (
    "You are Parcelly's support assistant. For any question about orders, returns, shipping, billing, accounts "
    "or policies, call search_help_center and answer only from what it returns, keeping its [doc_N] citations."
)


def knowledge_base_tool(knowledge_base: Any = None) -> BaseTool:
    """selfcrag as a LangChain tool. `knowledge_base` is a compiled selfcrag graph (default: `selfcrag.graph`)."""
    rag = knowledge_base or selfcrag_graph

    @tool(response_format="content_and_artifact")
    def search_help_center(question: str) -> tuple[str, dict[str, Any]]:
        """Answer a customer question from the Parcelly help center, with cited sources. Ask one self-contained
        question in full sentences. Says "I don't know" when the help center does not cover it."""
        # Called inside the agent's run, the graph shares its config: the agent's Context, checkpointer
        # and stream reach it, so progress events and interrupts come through.
        result = rag.invoke({"question": question})
        sources = [f"[{c['ref']}] {c['title']} ({c['source']})" for c in result.get("citations") or []]
        content = result["answer"] + ("\n\nSources:\n" + "\n".join(sources) if sources else "")
        artifact = {key: result.get(key) for key in ("citations", "decision", "confidence", "scores")}
        return content, artifact

    return search_help_center


def build_tool_agent(model: BaseChatModel, knowledge_base: Any = None, checkpointer: Any = None) -> Any:
    """A minimal tool-calling loop: the model answers, or calls the tool and reads its result."""
    tools = [knowledge_base_tool(knowledge_base)]
    llm = model.bind_tools(tools)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke([SystemMessage(SYSTEM), *state["messages"]])]}

    builder = StateGraph(MessagesState, context_schema=Context)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)  # a tool call -> "tools", else the end
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def main(question: str) -> None:
    if not (os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")):
        sys.exit("set OPENAI_API_KEY (or OPENAI_BASE_URL for a local OpenAI-compatible server) for the agent's model")
    from langchain_openai import ChatOpenAI

    agent = build_tool_agent(ChatOpenAI(model=os.environ.get("SELFCRAG_AGENT_MODEL", "gpt-4o-mini"), temperature=0),
                             checkpointer=InMemorySaver())  # fmt: skip
    state = agent.invoke({"messages": [HumanMessage(question)]}, {"configurable": {"thread_id": "demo"}})
    print(state["messages"][-1].content)


if __name__ == "__main__":
    main(" ".join(sys.argv[1:]) or "Can I return headphones after three weeks?")
