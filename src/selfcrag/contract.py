"""What nodes exchange with components: plain data types and one small Protocol per job.

Every component has an offline implementation (no model, deterministic) and, where a model helps, an
LLM-backed one. Results carry `llm_calls` so the graph can count model calls against its budget.
Passages, grades and strips are plain dicts (TypedDicts) so they serialise through checkpoints, the
LangGraph server and Studio without custom encoders.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, NotRequired, Protocol, runtime_checkable

import numpy as np
from typing_extensions import TypedDict

if TYPE_CHECKING:
    from selfcrag.context import Context

Label = Literal["correct", "ambiguous", "incorrect"]


class Passage(TypedDict):
    """One retrieved chunk (or web result). `id` is unique per chunk: `doc_id#chunk_index`."""

    id: str
    doc_id: str
    chunk_index: int
    title: str
    source: str  # file path, JSONL name or URL
    text: str
    score: float  # retrieval score in [0, 1] (fused for the built-in index)
    origin: Literal["kb", "web"]
    # The built-in index's view of how the two retrievers agree (0 = each one's best; absent = that retriever did
    # not propose the chunk): a calibration signal, read from the retrieve step of the trace.
    vector_rank: NotRequired[int]
    keyword_rank: NotRequired[int]


class Grade(TypedDict):
    """The CRAG evaluator's verdict on one passage."""

    id: str
    label: Label
    score: float  # relevance in [0, 1]
    reason: str


class Strip(TypedDict):
    """A knowledge strip: a few sentences from one passage that generation may use."""

    id: str  # the passage id it came from
    doc_id: str
    title: str
    source: str
    text: str
    score: float  # relevance of the strip to the question, [0, 1]
    # Where it sits in its passage, in sentences (end exclusive), so prompts can show a document's strips in
    # reading order; absent for a whole passage or a web result.
    start: NotRequired[int]
    end: NotRequired[int]


class Turn(TypedDict):
    """One earlier chat message, as the generator sees it."""

    role: Literal["user", "assistant"]
    content: str


class Citation(TypedDict):
    ref: str  # the label used in the answer text, e.g. "doc_1"
    doc_id: str
    title: str
    source: str
    quote: str


@dataclass(kw_only=True)
class ModelUse:
    """What a result cost and noted in model terms; offline components leave it empty. Keyword-only, so each
    result below keeps its own fields first."""

    llm_calls: int = 0
    tokens: int = 0  # prompt + completion tokens of those calls
    prompt: str = ""  # name/version of the prompt used, e.g. "grade_documents/1"; the trace records it
    error: str = ""  # the model fault this result degraded from (failing open or closed); the trace records it


@dataclass
class Grading(ModelUse):
    grades: list[Grade]


@dataclass
class Refinement(ModelUse):
    strips: list[Strip]


@dataclass
class Draft(ModelUse):
    """A generated answer. An empty `answer` means the evidence could not support one; `missing` says why."""

    answer: str
    citations: list[Citation]
    missing: str = ""
    # Declined because the evidence is about another entity, number or qualifier than the question asks
    # (quality.constraints): reading more of the same passages must not override that.
    off_target: bool = False
    # The geometric mean of the reply's token probabilities, where the server returned them (llm/generator.py): how
    # sure the generator was of what it wrote, a feature of the draft's score (quality/calibration.py). None offline.
    probability: float | None = None


@dataclass
class GroundednessCheck(ModelUse):
    score: float  # share of the answer supported by the evidence, [0, 1]
    grounded: bool
    unsupported: list[str] = field(default_factory=list)  # answer sentences / claims without support
    flags: list[str] = field(default_factory=list)  # rule-check findings, e.g. "number 45 not in evidence"
    # Names, numbers, identifiers and absolute words of the answer that no text the rules read holds: a feature of
    # the draft's score (quality/calibration.py `rule_findings`), not a veto.
    findings: int = 0
    # Never shown, whatever the confidence: a finding that is certain (a citation to a document the evidence does
    # not have; text that addresses the assistant), or nothing could check the draft. A calibration that scores
    # ungrounded drafts weighs a checker's opinion and the rule findings, never these.
    vetoed: bool = False


@dataclass
class AnswerGrade(ModelUse):
    score: float  # how well the answer addresses the question, [0, 1]
    useful: bool
    missing: str = ""  # what the question asks that the answer does not give; feeds the rewrite
    reason: str = ""
    violations: int = 0  # the question's constraints the answer replaces with another value (quality.constraints)
    term_coverage: float | None = None  # share of the question's terms in the answer; None: not measured


@dataclass
class Rewrite(ModelUse):
    query: str
    reason: str = ""
    # Names the evidence gave that the question lacks, carried into the query: a passage naming one is the second
    # hop of a bridge question even when it reads as off-topic to the question (nodes/refine.py).
    bridges: list[str] = field(default_factory=list)


RouteName = Literal["direct", "web_search", "retrieve"]


@dataclass
class Route(ModelUse):
    """Where a question goes before retrieval (offline/router.py), and why."""

    route: RouteName
    reason: str = ""


@dataclass
class Verification(ModelUse):
    """The local verifier's judgement of the draft to show: P(the cited passage answers the question with it)."""

    score: float | None  # None: not measured (no verifier reply it could read); the calibrator then ignores it
    reply: str = ""  # the first words of the reply, for the trace


@dataclass
class Screening(ModelUse):
    """What the model-judged injection screen found in retrieved passages: (passage id, sentence) pairs to remove
    as addressed to the reader or the assistant; a passage id with sentence "" is removed whole."""

    removed: list[tuple[str, str]] = field(default_factory=list)


class InjectionScreen(Protocol):
    def screen(self, passages: list[Passage], settings: Context) -> Screening: ...


class Retriever(Protocol):
    def retrieve(self, query: str, settings: Context) -> list[Passage]: ...


@runtime_checkable
class Vocabulary(Protocol):
    """What an index tells the router (offline/router.py) of its coverage without a search: both built-in indexes
    (the directory's and PostgreSQL's) have it; an index without it (a LangChain retriever) never routes to the web
    and its direct reply names no topics."""

    def knows(self, token: str) -> bool:
        """Whether any chunk has this keyword token (text.keyword_tokens)."""
        ...

    def titles(self, limit: int) -> list[str]:
        """The first `limit` documents' titles, in index order, each once."""
        ...


class AnswerVerifier(Protocol):
    def verify(self, question: str, answer: str, strips: list[Strip], settings: Context) -> Verification: ...


class RelevanceGrader(Protocol):
    def grade(self, question: str, passages: list[Passage], settings: Context) -> Grading: ...


class Refiner(Protocol):
    def refine(self, question: str, passages: list[Passage], settings: Context) -> Refinement: ...


class Generator(Protocol):
    def generate(
        self,
        question: str,
        strips: list[Strip],
        settings: Context,
        avoid: list[str] | None = None,
        history: list[Turn] | None = None,
    ) -> Draft:
        """Answer from `strips` only; `avoid` lists statements a previous draft could not support; `history` is
        the conversation before the question (oldest first)."""
        ...


class GroundednessChecker(Protocol):
    def check(self, answer: str, strips: list[Strip], settings: Context, question: str = "",
              given: str = "") -> GroundednessCheck:
        """How far `strips` support `answer`; `question` is what the answer replies to, `given` the text whose
        names, numbers and identifiers the rule checks let the answer repeat (the node chooses it by
        `question_terms`: nothing, the question, or the part of it a retrieved passage holds)."""
        ...


class AnswerGrader(Protocol):
    def grade(self, question: str, answer: str, settings: Context) -> AnswerGrade: ...


class QueryRewriter(Protocol):
    def rewrite(
        self, question: str, query: str, evidence: list[Strip], feedback: str, for_web: bool, settings: Context
    ) -> Rewrite:
        """A better query: for the knowledge base, or (for_web) a short keyword query for web search."""
        ...


class QuestionRouter(Protocol):
    def route(self, question: str, index: Retriever, web: bool, settings: Context) -> Route:
        """Where the question goes before retrieval (offline/router.py): `direct`, `web_search` (only when
        `web`) or `retrieve`; `index` is the knowledge base the run searches."""
        ...



class WebSearch(Protocol):
    @property
    def available(self) -> bool: ...

    def search(self, query: str, settings: Context) -> list[Passage]: ...


class Embedder(Protocol):
    """Sentence embeddings, L2-normalised, so a dot product is the cosine similarity."""

    @property
    def name(self) -> str: ...  # identifies the model/runtime; an index records it

    def embed_documents(self, texts: list[str]) -> np.ndarray: ...  # shape (n, dim), float32

    def embed_query(self, text: str) -> np.ndarray: ...  # shape (dim,), float32
