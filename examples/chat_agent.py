"""A chat agent that uses the compiled selfcrag graph as one of its nodes (a subgraph).

    python examples/chat_agent.py "How many days do I have to return an item?"

The parent is an ordinary `MessagesState` graph with a key of its own (`turns`). selfcrag's input and output
schemas share one key with it, `messages`, and that is how the two talk:
- in: the parent's history; the last user message becomes selfcrag's question;
- out: the same history plus the answer as one AI message, whose `additional_kwargs` carry `citations` and
  `decision`. Both sides merge messages by id (`add_messages`), so the history comes back without duplicates.
selfcrag's other output keys (`answer`, `citations`, `trace`, ...) reach the parent only if it declares them.

Compile the parent with a checkpointer: when selfcrag pauses for human review (`Context(human_review=True)`),
the interrupt surfaces from the parent's `invoke`, and `Command(resume=...)` on the parent thread resumes it.
"""

from __future__ import annotations

import operator
import sys
from typing import Annotated, Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

from selfcrag import Context
from selfcrag import graph as selfcrag_graph

SMALL_TALK = {"hi", "hello", "hey", "thanks", "thank you", "bye"}
GREETING = "Hello! Ask me about orders, returns, shipping, billing or your account."


class ChatState(MessagesState):
    turns: Annotated[int, operator.add]  # the parent's own key and reducer; selfcrag never writes it


def count_turn(state: ChatState) -> dict[str, Any]:
    return {"turns": 1}


def route(state: ChatState) -> str:
    """Small talk is answered here; everything else goes to the knowledge base."""
    last = state["messages"][-1]
    text = str(last.content).lower().strip(" !.?") if isinstance(last, HumanMessage) else ""
    return "small_talk" if text in SMALL_TALK else "knowledge_base"


def small_talk(state: ChatState) -> dict[str, Any]:
    return {"messages": [AIMessage(GREETING)]}


def build_chat_agent(knowledge_base: Any = None, checkpointer: Any = None) -> Any:
    """The parent graph. `knowledge_base` is a compiled selfcrag graph (default: `selfcrag.graph`, offline
    unless a model is configured); pass `build_graph(...)` to use your own components or models."""
    builder = StateGraph(ChatState, context_schema=Context)  # the parent passes its run's Context down
    builder.add_node("count_turn", count_turn)
    builder.add_node("small_talk", small_talk)
    builder.add_node("knowledge_base", knowledge_base or selfcrag_graph)  # the compiled graph is the node
    builder.add_edge(START, "count_turn")
    builder.add_conditional_edges("count_turn", route, ["small_talk", "knowledge_base"])
    builder.add_edge("small_talk", END)
    builder.add_edge("knowledge_base", END)
    return builder.compile(checkpointer=checkpointer)


def main(questions: list[str]) -> None:
    agent = build_chat_agent(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "demo"}}
    for question in questions:
        state = agent.invoke({"messages": [HumanMessage(question)]}, config)
        reply = state["messages"][-1]
        print(f"user: {question}\nagent: {reply.content}")
        for citation in reply.additional_kwargs.get("citations", []):
            print(f"  [{citation['ref']}] {citation['title']} ({citation['source']})")
    print(f"({state['turns']} turns, {len(state['messages'])} messages)")


if __name__ == "__main__":
    main(sys.argv[1:] or ["hi", "How many days do I have to return an item?", "How much does express shipping cost?"])
