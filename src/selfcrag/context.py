"""Every run-time setting in one place: LangGraph's `context_schema`.

Studio shows each field with its description. Defaults come from `SELFCRAG_<FIELD>` environment variables
when set, else from the values below (tuned on the SQuAD 2.0 dev sample that shared/datasets allows).
Pass a `Context(...)` or a plain dict as `context=` to `graph.invoke` to change a run.
"""

from __future__ import annotations

import os
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Literal


def _env(name: str, default: Any) -> Any:
    """Default for a field from SELFCRAG_<NAME>, cast to the default's type."""
    raw = os.environ.get(f"SELFCRAG_{name.upper()}")
    if raw is None or raw == "":
        return default
    if isinstance(default, bool):
        return raw.strip().lower() in {"1", "true", "yes", "on"}
    try:
        return type(default)(raw)
    except ValueError as exc:
        raise ValueError(f"SELFCRAG_{name.upper()}={raw!r} is not a valid {type(default).__name__}") from exc


@dataclass(kw_only=True)
class Context:
    # --- knowledge base -----------------------------------------------------------------------------
    index_dir: str = field(
        default="",
        metadata={"description": "Directory of an index built by `selfcrag ingest`; empty = the bundled sample."},
    )
    k: int = field(default=5, metadata={"description": "Passages retrieved per round."})
    vector_weight: float = field(
        default=0.6, metadata={"description": "Weight of the normalised FAISS (semantic) score in fusion."}
    )
    keyword_weight: float = field(
        default=0.4, metadata={"description": "Weight of the normalised BM25 (keyword) score in fusion."}
    )
    agreement_bonus: float = field(
        default=0.1, metadata={"description": "Added to a chunk's fused score when both retrievers find it."}
    )
    min_similarity: float = field(
        default=0.2,
        metadata={"description": "Quality gate: drop chunks whose cosine similarity to the query is below this."},
    )
    # --- CRAG evaluation ----------------------------------------------------------------------------
    upper_threshold: float = field(
        default=0.55, metadata={"description": "Relevance at or above this grades a passage `correct`."}
    )
    lower_threshold: float = field(
        default=0.35, metadata={"description": "Relevance below this grades a passage `incorrect`."}
    )
    crag_policy: Literal["any", "ratio"] = field(
        default="any",
        metadata={
            "description": "`any` (the paper): correct if any passage is correct, incorrect if all are. "
            "`ratio`: correct if >=60% correct, incorrect if >=80% incorrect, else ambiguous."
        },
    )
    # --- knowledge refinement ----------------------------------------------------------------------
    strip_sentences: int = field(default=2, metadata={"description": "Sentences per knowledge strip."})
    max_strips: int = field(default=6, metadata={"description": "Most strips kept for generation."})
    strip_token_budget: int = field(
        default=600, metadata={"description": "Most (whitespace) tokens of strips kept for generation."}
    )
    # --- generation and checks ---------------------------------------------------------------------
    max_answer_sentences: int = field(
        default=2, metadata={"description": "Offline generator: most evidence sentences in an answer."}
    )
    groundedness_threshold: float = field(
        default=0.75, metadata={"description": "An answer with groundedness below this is regenerated."}
    )
    answer_relevance_threshold: float = field(
        default=0.7, metadata={"description": "An answer scoring below this triggers a query rewrite."}
    )
    # --- decision ----------------------------------------------------------------------------------
    answer_confidence: float = field(
        default=0.72, metadata={"description": "Confidence at or above this: answer without caveat."}
    )
    caveat_confidence: float = field(
        default=0.5,
        metadata={"description": "Confidence at or above this (and below answer_confidence): answer with a caveat."},
    )
    # --- bounds (the graph's own counters; never LangGraph's recursion limit) -----------------------
    max_retrieval_rounds: int = field(default=3, metadata={"description": "Most retrieval rounds per run."})
    max_generations: int = field(
        default=2, metadata={"description": "Most generations on the same evidence (1 = no regeneration)."}
    )
    max_llm_calls: int = field(
        default=20, metadata={"description": "Model-call budget per run; corrections stop when it is spent."}
    )
    # --- optional steps -----------------------------------------------------------------------------
    web_search: bool = field(
        default=True, metadata={"description": "Use web search (Tavily) when TAVILY_API_KEY is set."}
    )
    web_results: int = field(default=5, metadata={"description": "Web results per search."})
    human_review: bool = field(
        default=False,
        metadata={"description": "Low-confidence answers pause for a person (interrupt) instead of abstaining."},
    )

    def __post_init__(self) -> None:
        if not 0 <= self.lower_threshold <= self.upper_threshold <= 1:
            raise ValueError("need 0 <= lower_threshold <= upper_threshold <= 1")
        if not 0 <= self.caveat_confidence <= self.answer_confidence <= 1:
            raise ValueError("need 0 <= caveat_confidence <= answer_confidence <= 1")
        for name in ("k", "max_retrieval_rounds", "max_generations", "max_strips", "web_results"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.max_llm_calls < 0:
            raise ValueError("max_llm_calls must be >= 0")

    @classmethod
    def from_env(cls, **overrides: Any) -> Context:
        """Defaults from SELFCRAG_<FIELD> environment variables, then `overrides`."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            default = f.default if f.default is not MISSING else None
            values[f.name] = _env(f.name, default)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def settings_of(runtime_context: Context | dict[str, Any] | None) -> Context:
    """The run's settings: what the caller passed, else defaults from the environment."""
    if runtime_context is None:
        return Context.from_env()
    if isinstance(runtime_context, dict):
        return Context.from_env(**runtime_context)
    return runtime_context
