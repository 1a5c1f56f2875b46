"""Every run-time setting in one place: LangGraph's `context_schema`.

Studio shows each field with its description. Defaults come from `SELFCRAG_<FIELD>` environment variables
when set, else from the values below (tuned on the SQuAD 2.0 dev sample that shared/datasets allows).
Pass a `Context(...)` or a plain dict as `context=` to `graph.invoke` to change a run.
"""

from __future__ import annotations

import os
from dataclasses import MISSING, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from selfcrag.quality.thresholds import Thresholds


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


def _choices(annotation: Any) -> tuple[str, ...]:
    """The values of a `Literal[...]` field annotation (a string here: this module postpones annotations)."""
    if isinstance(annotation, str) and annotation.startswith("Literal["):
        return tuple(part.strip().strip("'\"") for part in annotation[len("Literal[") : -1].split(","))
    return ()


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
    # --- embeddings ---------------------------------------------------------------------------------
    embeddings: str = field(
        default="local",
        metadata={
            "description": "`local`: all-MiniLM-L6-v2 on this machine (offline). `openai:<model>`: an "
            "OpenAI-compatible embeddings endpoint (OPENAI_BASE_URL, OPENAI_API_KEY). An index remembers the "
            "embeddings that built it and refuses others. An embedder passed to build_graph takes precedence."
        },
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
    # --- quality bar: domain preset, risk, per-threshold overrides (quality/thresholds.py) ------------
    domain: Literal["general", "customer_service", "financial", "medical", "legal"] = field(
        default="general",
        metadata={"description": "Preset of minimum context relevance / groundedness / answer relevance / "
                  "confidence: general .70/.75/.70/.72, customer_service .75/.80/.75/.77, financial "
                  ".85/.85/.80/.83, medical and legal .90/.90/.85/.88."},
    )
    risk: Literal["low", "normal", "critical"] = field(
        default="normal", metadata={"description": "Moves every preset minimum by -0.05 / 0 / +0.05."}
    )
    min_context_relevance: float = field(
        default=-1.0,
        metadata={"description": "Override: minimum relevance of the evidence used (negative = from the preset); "
                  "weaker evidence is corrected before generating."},
    )
    min_groundedness: float = field(
        default=-1.0,
        metadata={"description": "Override: minimum groundedness (negative = from the preset); below it the "
                  "answer is regenerated, and never shown."},
    )
    min_answer_relevance: float = field(
        default=-1.0,
        metadata={"description": "Override: minimum answer relevance (negative = from the preset); below it the "
                  "query is rewritten."},
    )
    min_confidence: float = field(
        default=-1.0,
        metadata={"description": "Override: minimum confidence for a plain answer (negative = from the preset)."},
    )
    caveat_band: float = field(
        default=0.15,
        metadata={"description": "Scores up to this far below their minimum still answer, with a caveat saying "
                  "what is uncertain; further below, abstain (or human review)."},
    )
    # --- confidence: weights of its four signals (quality/confidence.py) -----------------------------
    weight_retrieval: float = field(
        default=0.30, metadata={"description": "Confidence weight: best evidence relevance and source diversity."}
    )
    weight_coverage: float = field(
        default=0.25, metadata={"description": "Confidence weight: share of the question's terms the evidence covers."}
    )
    weight_faithfulness: float = field(
        default=0.35, metadata={"description": "Confidence weight: groundedness of the answer."}
    )
    weight_coherence: float = field(
        default=0.10,
        metadata={"description": "Confidence weight: the answer addresses the question and agrees with earlier "
                  "answers in the thread."},
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
    # --- models -------------------------------------------------------------------------------------
    backend: Literal["auto", "offline", "model"] = field(
        default="auto",
        metadata={
            "description": "Components of the default graph: `auto` = models when OPENAI_API_KEY or OPENAI_BASE_URL "
            "is set, else offline; `offline`; `model`. A graph built with its own components or models ignores it."
        },
    )
    generator_model: str = field(
        default="openai:gpt-4o-mini",
        metadata={"description": "Chat model that writes answers, as provider:model (e.g. openai:gpt-4o-mini)."},
    )
    grader_model: str = field(
        default="",
        metadata={"description": "Chat model of the graders, refiner and rewriter, as provider:model; "
                  "empty = the generator's model."},
    )
    temperature: float = field(
        default=0.0, metadata={"description": "Generator temperature (graders always run at 0)."}
    )
    base_url: str = field(
        default="",
        metadata={"description": "OpenAI-compatible server (vLLM, Ollama, llama.cpp server, LM Studio), e.g. "
                  "http://localhost:11434/v1; empty = OPENAI_BASE_URL, else OpenAI."},
    )
    llm_timeout: float = field(
        default=30.0,
        metadata={"description": "Seconds one model call may take; a timeout is retried, then the step degrades."},
    )
    structured_output: Literal["auto", "json_schema", "function_calling", "json_mode", "prompt"] = field(
        default="auto",
        metadata={"description": "How graders get JSON: `auto` tries json_schema, then function calling, then "
                  "JSON mode, then a plain prompt, and remembers what the server accepted."},
    )
    grading: Literal["batch", "parallel"] = field(
        default="batch",
        metadata={"description": "Model CRAG evaluator: all passages in one call, or one concurrent call each."},
    )
    refine_with: Literal["scores", "llm"] = field(
        default="scores",
        metadata={"description": "Model backend's knowledge refinement: `scores` = each strip by its passage's "
                  "retrieval score and its question terms (no model call), `llm` = the grader model picks the strips."},
    )
    task: Literal["auto", "qa", "summarize", "compare", "code"] = field(
        default="auto", metadata={"description": "Generator task prompt; `auto` picks it from the question."}
    )
    answer_mode: Literal["auto", "local", "global"] = field(
        default="auto",
        metadata={"description": "`local`: answer one specific point from the best evidence; `global`: "
                  "synthesise across documents; `auto` picks from the question."},
    )
    few_shot: bool = field(
        default=True, metadata={"description": "Show the generator short examples of cited answers."}
    )
    history_turns: int = field(
        default=3, metadata={"description": "Earlier chat turns (user + assistant) from `messages` the generator sees."}
    )
    context_tokens: int = field(
        default=1200,
        metadata={"description": "Token budget (tiktoken) of the evidence in the generator prompt; the "
                  "highest-scoring strips are kept."},
    )
    # --- bounded calls (operator settings: a server client must not choose them per run) ---------------
    run_timeout: float = field(
        default=120.0,
        metadata={"description": "Seconds one run may take: every model call and web search ends by then, and "
                  "once it is spent the remaining steps degrade without calling out."},
    )
    web_timeout: float = field(
        default=15.0,
        metadata={"description": "Seconds one web search may take in all (never past the run's deadline)."},
    )

    def thresholds(self) -> Thresholds:
        """The run's active minimums: domain preset, moved by risk, then the overrides."""
        from selfcrag.quality.thresholds import thresholds_for

        return thresholds_for(self)

    def __post_init__(self) -> None:
        if not 0 <= self.lower_threshold <= self.upper_threshold <= 1:
            raise ValueError("need 0 <= lower_threshold <= upper_threshold <= 1")
        for name in ("min_context_relevance", "min_groundedness", "min_answer_relevance", "min_confidence"):
            if getattr(self, name) > 1:
                raise ValueError(f"{name} must be at most 1 (negative = from the preset)")
        if not 0 <= self.caveat_band <= 1:
            raise ValueError("caveat_band must be in [0, 1]")
        weights = (self.weight_retrieval, self.weight_coverage, self.weight_faithfulness, self.weight_coherence)
        if min(weights) < 0 or sum(weights) <= 0:
            raise ValueError("confidence weights must be >= 0 and not all 0")
        for name in ("k", "max_retrieval_rounds", "max_generations", "max_strips", "web_results"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.max_llm_calls < 0:
            raise ValueError("max_llm_calls must be >= 0")
        spec = self.embeddings.strip()
        if spec != "local" and not (spec.startswith("openai:") and spec.removeprefix("openai:").strip()):
            raise ValueError(f"embeddings must be 'local' or 'openai:<model>', got {self.embeddings!r}")
        for f in fields(self):  # a Literal setting from the environment may be misspelt
            if (choices := _choices(f.type)) and getattr(self, f.name) not in choices:
                raise ValueError(f"{f.name} must be one of {', '.join(choices)}, got {getattr(self, f.name)!r}")
        if self.history_turns < 0 or self.context_tokens < 1 or self.llm_timeout <= 0:
            raise ValueError("need history_turns >= 0, context_tokens >= 1 and llm_timeout > 0")
        if self.run_timeout <= 0 or self.web_timeout <= 0:
            raise ValueError("need run_timeout > 0 and web_timeout > 0")

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
