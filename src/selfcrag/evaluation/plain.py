"""Plain RAG built from the graph's own parts: retrieve once, generate once, no grading and no loop.

The baseline every figure is measured against (`selfcrag eval --baseline plain`, `benchmarks/question_cpu.py`):
one function, so the baseline an eval reports and the one a benchmark times are the same system."""

from __future__ import annotations

from selfcrag.backend import Components
from selfcrag.context import Context
from selfcrag.contract import Draft, Passage, Strip


def plain_rag(components: Components, question: str, settings: Context) -> tuple[list[Passage], Draft]:
    """The top-k retrieved passages, whole (each one strip), and the one draft generated from them."""
    passages = components.retriever_for(settings).retrieve(question, settings)
    strips = [Strip(id=p["id"], doc_id=p["doc_id"], title=p["title"], source=p["source"], text=p["text"],
                    score=p["score"]) for p in passages]  # fmt: skip
    return passages, components.generator.generate(question, strips, settings)
