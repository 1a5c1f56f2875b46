"""Graph state. Input and output schemas are small and explicit so a parent graph's keys never clash.

`typing_extensions.TypedDict` (not `typing`) because the LangGraph server needs it on Python 3.11 to
publish the schemas. The input schema is a pydantic model instead: see `InputState`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from selfcrag.contract import Citation, Grade, Label, Passage, Strip

# `direct`: a reply to conversation (a greeting, a question about the assistant) that claims no knowledge.
Decision = Literal["answer", "answer_with_caveat", "abstain", "human_review", "direct"]


class Step(TypedDict, total=False):
    """One trace entry: which node ran, what it decided and why (more keys per node)."""

    node: str
    decision: str
    reason: str


def add_steps(existing: list[Step] | None, new: list[Step] | None) -> list[Step]:
    """Trace reducer: append steps. A `prepare` step opens a new run, so it starts a fresh trace
    (a thread with a checkpointer keeps state between runs; old traces must not leak into new ones)."""
    new = list(new or [])
    if new and new[0].get("node") == "prepare":
        return new
    return list(existing or []) + new


def running_total(existing: Any, new: Any) -> int:
    """The larger of two totals; a value that is no count (a client may write anything to state) counts 0."""
    return max(_count(existing), _count(new))


def _count(value: Any) -> int:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class Scores(TypedDict):
    context_relevance: float
    groundedness: float
    answer_relevance: float


# Chat history, merged by message id (LangGraph's `add_messages`, as in `MessagesState`): the run appends its
# answer as an AI message (and, when the question came as `question`, the question first as a human message), so
# Studio's chat view, a parent `MessagesState` graph and stream_mode="messages" all see it, and a parent that
# passes its history in gets back the same messages plus the new ones, never duplicates.
Messages = Annotated[list[AnyMessage], add_messages]


class InputState(BaseModel):
    """What a run takes: `question`, or chat `messages` whose last user message is the question; either may be
    left out. A pydantic model with defaults, not a TypedDict: langchain_core turns a TypedDict's keys into required
    arguments whatever its totality (so `{"question": ...}` once failed as a tool call for want of `messages`).
    The graph's tool no longer takes this schema (it takes `question` alone: tool.py). LangGraph writes only the
    keys a caller sends, and validates none: a question that is not text still meets `prepare`'s one-line error."""

    question: str = Field(default="", description="The question. Empty: the last user message in `messages`.")
    messages: Messages = Field(default_factory=list, description="Chat history; the answer is appended to it.")


class OutputState(TypedDict, total=False):
    answer: str
    citations: list[Citation]
    decision: Decision  # "" while a turn runs: prepare clears it, finalize sets it
    confidence: float
    confidence_explanation: dict[str, Any]  # the calibrated features, their pushes, and which pulled confidence down
    quality: dict[str, Any]  # the active minimums, pass/fail, and which scores fell below
    contradictions: list[dict[str, str]]  # earlier answers in the thread that this answer contradicts
    clarifying_question: str  # when abstaining on an ambiguous question: which meaning?
    scores: Scores
    missing: str  # what the evidence lacked, when the agent abstains or adds a caveat
    trace: Annotated[list[Step], add_steps]
    # Model calls and tokens of this run, as its ledger counted them (selfcrag/ledger.py): model nodes write the
    # run's totals, and the two checks of a draft run concurrently, so the larger (the later) is kept; `prepare`
    # resets them with Overwrite(0) and `finalize` writes the ledger's final counts the same way.
    llm_calls: Annotated[int, running_total]
    tokens: Annotated[int, running_total]
    messages: Messages  # the input history plus the answer as an AI message (citations in additional_kwargs)


class State(OutputState, total=False):
    question: str  # the question every step answers: the user's, or its standalone form (`contextualize`)
    asked: str  # the user's own words, when `contextualize` rewrote a follow-up into `question`; else ""
    route: str  # where route_question sent the question: direct, web_search or retrieve
    query: str  # the current retrieval query (the question, then rewrites)
    web_query: str
    queries: list[str]  # every query retrieved with so far: a rewrite that repeats one ends the search
    documents: list[Passage]  # retrieved this round and not seen in an earlier round of the run
    seen: list[str]  # ids of every chunk retrieved in this run: a round that finds only these can add nothing
    grades: list[Grade]
    crag_action: Label
    knowledge: list[Strip]  # what generation may use: the best of `evidence`, within the strip budget
    evidence: list[Strip]  # every strip judged relevant in any round of this run (web included), one per text
    sources: list[Passage]  # the whole passages those strips were cut from (not graded incorrect), one per chunk
    # Every draft of the run, as judge saw and scored it (quality/drafts.py): plain's single-pass draft first, then
    # each correction's; none is ever removed, and finalize shows the most confident one that may be shown.
    candidates: list[dict[str, Any]]
    bridges: list[str]  # names the rewrites carried from the evidence into the query (the bridge of a multi-hop)
    set_aside: list[Passage]  # the passages refine saw graded incorrect: one may hold the other hop's name
    web_available: bool
    web_searched: bool
    unsupported_claims: list[str]
    groundedness: float
    grounded: bool
    vetoed: bool  # the draft may never be shown, whatever its confidence (contract.GroundednessCheck)
    answer_relevance: float
    answer_useful: bool
    feedback: str  # what the answer grade said was missing; feeds the rewrite
    retrieval_rounds: int
    generations: int  # generations on the current evidence; reset when the evidence changes
    review: dict[str, Any]  # what a person decided in human_review
    run_ledger: str  # which ledger (selfcrag/ledger.py) counts this run: an id `prepare` writes
    draft: dict[str, Any]  # answer + citations held for review; the paused output's `answer` says it awaits it


# What a node module's `make(components)` returns: LangGraph calls it with (state, runtime) or (state).
NodeFunction = Callable[..., Any]
