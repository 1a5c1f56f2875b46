"""Where the graph goes next: pure functions of (state, settings), no I/O.

Every loop is bounded here by the graph's own counters (retrieval rounds, generations on the same
evidence, the model-call budget), never by LangGraph's recursion limit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.graph import END

from selfcrag.context import Context
from selfcrag.quality.confidence import calibrator
from selfcrag.state import State
from selfcrag.text.sanitize import unreadable
from selfcrag.text.terms import terms_of as query_terms


def rounds_left(state: State, settings: Context) -> bool:
    return state.get("retrieval_rounds", 0) < settings.max_retrieval_rounds


def budget_left(state: State, settings: Context) -> bool:
    return state.get("llm_calls", 0) < settings.max_llm_calls


def can_search_web(state: State) -> bool:
    """Web search is worth a try once per run, when it is configured and has not failed."""
    return bool(state.get("web_available")) and not state.get("web_searched")


def rewrite_for_web(state: State) -> bool:
    """The CRAG `incorrect` action replaces the evidence with web results when web search is possible."""
    return state.get("crag_action") == "incorrect" and can_search_web(state)


def can_retry_retrieval(state: State, settings: Context) -> bool:
    return rounds_left(state, settings) and budget_left(state, settings)


def question_unreadable(state: State) -> str:
    """Why the question cannot be read against the passages just retrieved ("" when it can): no letter or digit,
    or a script that neither the tokenizer nor the passages use. Routing and `finalize` both ask, with the same
    state (`documents` only changes in `retrieve`), so they agree."""
    passages = (p["title"] + "\n" + p["text"] for p in state.get("documents") or [])
    return unreadable(state.get("question") or "", passages)


def after_route(state: State, settings: Context) -> str:
    """Conversation is answered at once (`finalize` closes it with the reply route_question wrote); a question the
    knowledge base cannot cover searches the web first, while web search is still possible; the rest retrieve."""
    route = state.get("route")
    if route == "direct":
        return "finalize"
    return "web_search" if route == "web_search" and can_search_web(state) else "retrieve"


def nothing_new(state: State) -> bool:
    """A correction round retrieved only chunks an earlier round of the run had (kept in the evidence, or
    rejected): it cannot add evidence, and the draft or abstention of the evidence so far stands."""
    return state.get("retrieval_rounds", 0) > 1 and not state.get("documents")


def after_retrieve(state: State, settings: Context) -> str:
    """A question the evidence cannot read abstains at once: grading it would spend model calls on noise. A
    correction round that found nothing new ends the correction (`retrieve` traces why): evidence no draft was
    written from yet (it was too weak while corrections remained) is generated from now, as it would have been
    once the rounds ran out; otherwise the draft or abstention so far stands."""
    if question_unreadable(state):
        return "finalize"
    if nothing_new(state):
        return "generate" if unused_evidence(state) else "finalize"
    return "first_draft" if drafts_first(state) else "grade_documents"


def drafts_first(state: State) -> bool:
    """The run's first retrieval round drafts plain's single-pass answer before any grading: the first candidate
    (nodes/first_draft.py). Later rounds grade first: they exist because the candidates so far scored too low."""
    return state.get("retrieval_rounds", 0) == 1 and bool(state.get("documents")) and not state.get("candidates")


def unused_evidence(state: State) -> bool:
    """The run holds evidence no draft was written from: it was too weak to generate from while corrections
    remained. When the correction ends early it is generated from, as it would have been once the rounds ran
    out, rather than finalising with nothing."""
    return bool(state.get("knowledge")) and not state.get("answer") and not state.get("generations")


def after_grading(state: State, settings: Context) -> str:
    """CRAG action: correct/ambiguous keep (refine) the evidence; incorrect replaces it, unless earlier rounds of
    the run found evidence: then this round only added nothing, and refine decides on what the run has."""
    if state.get("crag_action") in ("correct", "ambiguous") or state.get("evidence"):
        return "refine"
    if rewrite_for_web(state) or can_retry_retrieval(state, settings):
        return "rewrite_query"
    return "finalize"


def evidence_too_weak(state: State, settings: Context) -> bool:
    """Pre-generation gate: the best strip is below the domain's minimum context relevance by more than the
    caveat band, so any answer from it would be withheld; correct the evidence before generating."""
    best = max((s["score"] for s in state.get("knowledge") or []), default=0.0)
    return best < settings.thresholds().context_relevance - settings.caveat_band


def after_refine(state: State, settings: Context) -> str:
    """Ambiguous evidence is supplemented from the web; weak or no surviving knowledge means correct again."""
    if state.get("crag_action") == "ambiguous" and can_search_web(state):
        return "web_search"
    if state.get("knowledge"):
        if evidence_too_weak(state, settings) and can_search_web(state):
            return "web_search"
        if evidence_too_weak(state, settings) and can_retry_retrieval(state, settings):
            return "rewrite_query"
        return "generate"
    if can_search_web(state):
        return "web_search"
    return "rewrite_query" if can_retry_retrieval(state, settings) else "finalize"


def repeats_a_query(state: State) -> bool:
    """The rewrite found nothing new: retrieving the same query again would return the same passages."""
    tried = {" ".join(q.lower().split()) for q in state.get("queries") or []}
    return " ".join((state.get("query") or "").lower().split()) in tried


def adds_no_terms(state: State) -> bool:
    """The rewrite brings no content term the queries so far lacked, and either asks with the very terms of one
    of them (word order and repeats change nothing a retriever reads) or the run has no evidence at all (its
    passages were all rejected: fewer of the same terms find the same ones)."""
    tried = [query_terms(q) for q in state.get("queries") or []]
    asked = query_terms(state.get("query") or "")
    if not tried or not asked <= set().union(*tried):
        return False
    return asked in tried or not state.get("evidence")


def after_rewrite(state: State, settings: Context) -> str:
    """A knowledge-base rewrite retrieves again only when it can find something new (`rewrite_query` traces
    why not); when it cannot, the correction ends on the evidence the run has (see `unused_evidence`)."""
    if rewrite_for_web(state):
        return "web_search"
    if repeats_a_query(state) or adds_no_terms(state):
        return "generate" if unused_evidence(state) else "finalize"
    return "retrieve"


def after_web_search(state: State, settings: Context) -> str:
    """Web evidence is generated from; a search routed before any retrieval that found nothing falls back to the
    knowledge base, else the correction goes on."""
    if state.get("knowledge"):
        return "generate"
    if not state.get("retrieval_rounds") and rounds_left(state, settings):
        return "retrieve"
    return "rewrite_query" if can_retry_retrieval(state, settings) else "finalize"


# The two checks of a draft do not depend on each other: they run concurrently and meet at `judge`. With one
# model call left, the first named gets it, whichever thread asks first (`bounded`): no decision depends on timing.
CHECKS = ["check_hallucination", "grade_answer"]


def after_generate(state: State, settings: Context) -> str | list[str]:
    """A draft goes to both checks at once; no draft (the evidence cannot support an answer) means correct again."""
    if state.get("answer"):
        return CHECKS
    return "rewrite_query" if can_retry_retrieval(state, settings) else "finalize"


def after_first_draft(state: State, settings: Context) -> str | list[str]:
    """Plain's draft goes to both checks; when it wrote nothing, the CRAG correction starts with grading."""
    return CHECKS if state.get("answer") else "grade_documents"


def best_confidence(state: State) -> float:
    """The highest calibrated probability among the run's candidates that may be shown (`judge` scored each)."""
    return max((float(c["confidence"]) for c in state.get("candidates") or [] if c.get("showable")), default=0.0)


def after_judge(state: State, settings: Context) -> str:
    """Correct only when it can pay: the best candidate at or above the floor ends the run. Below it, plain's
    draft is followed by the CRAG correction (grading, refinement, web); a draft the check found ungrounded is
    regenerated while generations and budget remain (told what was unsupported); otherwise the query is
    rewritten while rounds remain. No correction starts once the call budget is spent, nor where the run's
    calibration says corrections did not pay for its model (`corrections.pay`, quality/calibration.py). A
    correction's drafts join the candidates, never replace them."""
    if best_confidence(state) >= settings.thresholds().overall or not budget_left(state, settings):
        return "finalize"
    if not calibrator(settings)[0].corrections_pay:
        return "finalize"
    latest = (state.get("candidates") or [{}])[-1]
    if latest.get("plain") and not state.get("grades"):
        return "grade_documents"
    if not state.get("grounded") and state.get("generations", 0) < settings.max_generations:
        return "generate"
    return "rewrite_query" if can_retry_retrieval(state, settings) else "finalize"


def verifying(state: State, settings: Context) -> bool:
    """The local verifier (off by default) looks at the draft to show before `finalize` decides: when the
    `verifier` setting names a model and the run kept a draft it may show."""
    return bool(settings.verifier) and bool(state.get("candidates"))


def through_verify(decide: Callable[[State, Context], Any]) -> Callable[[State, Context], Any]:
    """`decide`, with its way to `finalize` going through `verify` first when `verifying`."""

    def decide_here(state: State, settings: Context) -> Any:
        target = decide(state, settings)
        return "verify" if target == "finalize" and verifying(state, settings) else target

    decide_here.__name__ = decide.__name__
    return decide_here


def after_finalize(state: State, settings: Context) -> str:
    return "human_review" if state.get("decision") == "human_review" else END


def after_review(state: State, settings: Context) -> str:
    """A reply the reviewer must correct leaves the decision at human_review: ask again (each round waits for a
    person, so the loop needs no counter); a valid reply decided, and the run ends."""
    return "human_review" if state.get("decision") == "human_review" else END


def review_triggers(measured: dict[str, float], minimum_confidence: float, settings: Context) -> list[str]:
    """Why a drafted answer goes to a person although it could be shown (only with `human_review` on): its
    confidence is within `review_band` of the minimum (either side: a close call), or the three triad scores
    disagree by more than `review_spread` (one check passed what another doubts)."""
    if not settings.human_review:
        return []
    reasons = []
    if abs(measured["confidence"] - minimum_confidence) <= settings.review_band:
        reasons.append(f"confidence {measured['confidence']:.2f} within {settings.review_band} of {minimum_confidence}")
    triad = [measured[name] for name in ("context_relevance", "groundedness", "answer_relevance")]
    if max(triad) - min(triad) > settings.review_spread:
        reasons.append(f"triad scores spread by {max(triad) - min(triad):.2f} (> {settings.review_spread})")
    return reasons
