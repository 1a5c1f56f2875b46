"""The compiled graph as a tool a model calls: a question in; the answer, the decision and the sources out.

langchain_core's own `Runnable.as_tool()` made the tool from the graph's input schema, whose `messages` field lists
every LangChain message class (a 23.7 KB schema sent with every model call), and returned the whole output (trace,
scores, the chat history: some 5 KB per call) as the tool message. A tool is called with a standalone question
and read by a model, so both are cut to what it needs: `SelfCragGraph.as_tool` (the class `build_graph` returns).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import Callbacks
from langgraph.graph.state import CompiledStateGraph
from pydantic import BaseModel, Field

if TYPE_CHECKING:  # langchain_core.tools loads when a tool is made: ~15 ms of every graph's start, tool or not
    from langchain_core.tools import BaseTool

DESCRIPTION = "Answer a question from the knowledge base, with the sources the answer cites."


class Question(BaseModel):
    """The tool's one argument. No `messages`: the tool sees no conversation, so a follow-up must stand alone."""

    question: str = Field(description="The question, standing alone (the tool does not see the conversation).")


def compact(output: dict[str, Any]) -> dict[str, Any]:
    """What a calling model reads: the answer (with its [doc_N] markers; an abstention says what was missing), the
    decision, and per citation its marker, document id, title and source. Quotes are left out: the answer says it."""
    citations = [{key: c.get(key, "") for key in ("ref", "doc_id", "title", "source")}
                 for c in output.get("citations") or []]
    return {"answer": output.get("answer", ""), "decision": output.get("decision", ""), "citations": citations}


class SelfCragGraph(CompiledStateGraph[Any, Any, Any, Any]):
    """The compiled graph, with a tool made for models (`as_tool`). LangGraph's `copy` and `with_config` keep
    the class, so every copy has it too."""

    @classmethod
    def of(cls, compiled: CompiledStateGraph[Any, Any, Any, Any]) -> SelfCragGraph:
        # As LangGraph's own `copy` rebuilds a compiled graph: its attributes are its constructor's arguments.
        return cls(**{k: v for k, v in compiled.__dict__.items() if k != "__orig_class__"})

    def as_tool(self, args_schema: type[BaseModel] | None = None, *, name: str | None = None,
                description: str | None = None, arg_types: dict[str, type] | None = None) -> BaseTool:
        """A tool that takes `question` and returns `compact(output)`. The arguments are fixed: `args_schema` and
        `arg_types` (langchain_core's ways to change them) are refused."""
        if args_schema is not None or arg_types is not None:
            raise TypeError("the tool's only argument is `question`; args_schema and arg_types cannot change it")
        from langchain_core.tools import StructuredTool

        graph = self

        def ask(question: str, callbacks: Callbacks = None) -> dict[str, Any]:
            return compact(graph.invoke({"question": question}, config={"callbacks": callbacks}))

        async def aask(question: str, callbacks: Callbacks = None) -> dict[str, Any]:
            return compact(await graph.ainvoke({"question": question}, config={"callbacks": callbacks}))

        return StructuredTool.from_function(func=ask, coroutine=aask, name=name or self.get_name(),
                                            description=description or DESCRIPTION, args_schema=Question)
