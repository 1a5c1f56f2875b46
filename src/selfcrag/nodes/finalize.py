"""Scores the run (RAG triad), computes confidence and decides: answer, answer with a caveat, abstain
("I don't know", with what was missing), or hand the case to a person."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from selfcrag import review_case, routing
from selfcrag.backend import Components
from selfcrag.chat import close_run
from selfcrag.context import Context
from selfcrag.language import Language, language_of
from selfcrag.ledger import forget, ledger_of
from selfcrag.nodes.prepare import recent_messages
from selfcrag.prompts import messages
from selfcrag.quality.confidence import confidence, triad
from selfcrag.quality.consistency import contradictions
from selfcrag.quality.drafts import as_judged, showable
from selfcrag.routing import question_unreadable
from selfcrag.state import NodeFunction, State
from selfcrag.store import runs
from selfcrag.text.terms import coverage, join_pairs, question_terms, strip_citations
from selfcrag.trust_boundary import settings_of


def degraded(state: State, node: str) -> bool:
    """The last `node` step ran on a model fault (its trace step has `error`). What such a step wrote about the
    evidence (`missing`, the answer grader's `feedback`) says nothing about the evidence and may carry the
    fault's own text, which is no user's business: it stays in the trace."""
    steps = [step for step in state.get("trace") or [] if step.get("node") == node]
    return bool(steps and steps[-1].get("error"))


def unreadable_reason(state: State, language: Language) -> str:
    """Why the question cannot be read against the evidence, as a phrase for `missing` ("" when it can)."""
    script = question_unreadable(state)
    if not script:
        return ""
    return messages.phrase("no_words", language) if script == "empty" else \
        messages.phrase("script_not_covered", language, script)


def missing_evidence(state: State, withheld: str = "") -> str:
    """What the evidence lacked, from the most specific signal available, in the question's language; never
    empty (the last resort says the answer found was unclear, or `withheld` when the floor withheld it, or that
    none was found)."""
    language = language_of(state.get("question", ""))
    if unreadable := unreadable_reason(state, language):
        return unreadable
    if state.get("missing") and not degraded(state, "generate"):
        return state["missing"]
    if state.get("feedback") and not degraded(state, "grade_answer"):
        return state["feedback"]
    if state.get("unsupported_claims"):
        return messages.phrase("unsupported", language, messages.separate(state["unsupported_claims"][:2], language))
    if not state.get("knowledge"):
        terms = question_terms(state.get("question", ""))
        passages = "\n".join(p["title"] + "\n" + p["text"] for p in state.get("documents") or [])
        _, absent = coverage(terms, passages)
        if passages and absent:
            return messages.phrase("not_retrieved", language, messages.listing(absent, language))
        if asked := join_pairs(list(terms.values())):  # Chinese as asked (手机应用), not as pairs
            return messages.phrase("not_in_kb", language, messages.listing(asked, language))
    # No signal names a gap, yet the run trusts no answer: an abstention or a hand-off still says why.
    if withheld and state.get("answer"):
        return withheld
    return messages.phrase("unclear_answer" if state.get("answer") else "no_supported_answer", language)


TRIAD = ("context_relevance", "groundedness", "answer_relevance")
CLOSE_CALL = 0.1  # two documents this close in relevance: the question may mean either


def earlier_answers(state: State, settings: Context) -> list[str]:
    """What the assistant answered before in this thread (abstentions and direct replies claim nothing), oldest
    first, within the history's bounds (`recent_messages`)."""
    found = []
    for message, text in recent_messages(state, settings):
        kind = message.get("type") if isinstance(message, dict) else getattr(message, "type", "")
        extra = message.get("additional_kwargs", {}) if isinstance(message, dict) else message.additional_kwargs
        content = message.get("content") if isinstance(message, dict) else message.content
        if kind == "ai" and isinstance(content, str) and (extra or {}).get("decision") not in ("abstain", "direct"):
            found.append(text)
    return found[::-1]


def clarifying_question(state: State, settings: Context, language: str) -> str:
    """When the two best documents are about different things and equally relevant, ask which one is meant."""
    by_id = {p["id"]: p for p in state.get("documents") or []}
    best: dict[str, tuple[float, str]] = {}
    for grade in state.get("grades") or []:
        passage = by_id.get(grade["id"])
        if passage and grade["score"] >= settings.lower_threshold:
            title = passage["title"] or passage["doc_id"]
            best[passage["doc_id"]] = max(best.get(passage["doc_id"], (0.0, title)), (grade["score"], title))
    ranked = sorted(best.values(), reverse=True)
    if len(ranked) >= 2 and ranked[0][0] - ranked[1][0] <= CLOSE_CALL and ranked[0][1] != ranked[1][1]:
        return messages.phrase("clarify", language, ranked[0][1], ranked[1][1])  # type: ignore[arg-type]
    return ""


Measured = tuple[dict[str, float], frozenset[str]]  # a candidate's features, and the ones nothing measured


def scored_again(state: State, candidate: dict[str, Any], earlier: list[str],
                 settings: Context) -> tuple[State, str, bool, Measured]:
    """A candidate as finalize scores it: the run's state as the draft was judged, its text, whether it contradicts
    an earlier answer of the thread, and the features `judge` read where it was written, with what only the end of
    the run knows (that contradiction, and the local verifier's score when it measured this draft)."""
    view, answer = as_judged(state, candidate), str(candidate.get("answer") or "")
    contradicted = bool(contradictions(answer, earlier))
    values = {**candidate.get("features", {}), "contradiction": float(contradicted)}
    missing = set(candidate.get("unmeasured") or [])
    steps: list[dict[str, Any]] = [dict(s) for s in state.get("trace") or [] if s.get("node") == "verify"]
    verified = steps[-1] if steps else {}
    if isinstance(verified.get("score"), int | float) and verified.get("verified") == strip_citations(answer):
        values["verifier"] = float(verified["score"])
        missing.discard("verifier")
    return view, answer, contradicted, (values, frozenset(missing))


def most_confident(state: State, settings: Context) -> tuple[State, list[dict[str, Any]], Measured | None]:
    """The state as the run's most confident showable candidate was judged (the earlier one on a tie: plain's draft
    first), each candidate's round, generation, confidence and text for the trace, and the features the shown one
    is scored with. The state as it is (and no features) when the run has no candidate it may show."""
    kept = state.get("candidates") or []
    earlier = earlier_answers(state, settings)
    scored, features = [], []
    for candidate in kept:
        view, answer, contradicted, measured = scored_again(state, candidate, earlier, settings)
        value = confidence(view, answer, contradicted, settings, measured)["value"] if candidate.get("showable") \
            else 0.0
        scored.append({"round": candidate.get("round", 0), "generation": candidate.get("generation", 0),
                       "plain": bool(candidate.get("plain")), "showable": bool(candidate.get("showable")),
                       "grounded": bool(candidate.get("grounded")), "vetoed": bool(candidate.get("vetoed")),
                       "confidence": value, "answer": answer, "features": measured[0],
                       "unmeasured": sorted(measured[1])})  # fmt: skip
        features.append(measured)
    showable = [i for i, c in enumerate(kept) if c.get("showable")]
    if not showable:
        return state, scored, None
    best = max(showable, key=lambda i: (scored[i]["confidence"], -i))
    scored[best]["shown"] = True
    return as_judged(state, kept[best]), scored, features[best]


def direct(state: State) -> dict[str, Any]:
    """The close of a run route_question answered directly: its reply, no citations, no scores (nothing was looked
    up, so nothing is measured; the previous turn's scores of a thread must not show beside it)."""
    scores = {name: 0.0 for name in TRIAD}
    return {"answer": state.get("answer") or "", "citations": [], "decision": "direct", "scores": scores,
            "confidence": 0.0, "confidence_explanation": {}, "quality": {"thresholds": {}, "passed": True, "below": []},
            "contradictions": [], "clarifying_question": "", "missing": "",
            "trace": [{"node": "finalize", "decision": "direct", "reason": "a reply to conversation, not an answer "
                       "from the knowledge base", "scores": scores, "draft": "", "candidates": []}]}  # fmt: skip


def make(components: Components) -> NodeFunction:
    def finalize(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        if state.get("route") == "direct":
            return closed(state, runtime, settings, direct(state))
        trace = list(state.get("trace") or [])
        state, considered, measured_best = most_confident(state, settings)
        language = language_of(state.get("question", ""))
        minimum, band = settings.thresholds(), settings.caveat_band
        scores = triad(state)
        conflicts = contradictions(state.get("answer") or "", earlier_answers(state, settings))
        unreadable = unreadable_reason(state, language)
        # A draft the groundedness check failed is shown only where the calibration scores such drafts, and then
        # with a caveat at most; a vetoed one never (quality/drafts.py); nor an answer to a question the evidence
        # cannot read.
        draft = (state.get("answer") or "") if showable(state, settings) and not unreadable else ""
        doubted = bool(draft) and not state.get("grounded")
        explained = confidence(state, draft, bool(conflicts), settings, measured_best if draft else None)
        value = explained["value"]
        measured = {**scores, "confidence": value}
        floors = {"context_relevance": minimum.context_relevance, "groundedness": minimum.groundedness,
                  "answer_relevance": minimum.answer_relevance, "confidence": minimum.overall}
        # The decision acts on the probability alone; the triad minima drive the graders' loops and are reported
        # here. Gating on them too withheld more right answers for the same wrong ones caught (SQuAD tuning sets;
        # docs/DESIGN.md, Confidence).
        below = [name for name in floors if measured[name] < floors[name]]
        quality = {"thresholds": floors, "passed": not below, "below": below}
        update: dict[str, Any] = {"answer": state.get("answer") or "", "citations": state.get("citations") or [],
                                  "scores": scores, "confidence": value, "confidence_explanation": explained,
                                  "quality": quality, "contradictions": conflicts, "clarifying_question": ""}
        triggers = routing.review_triggers(measured, floors["confidence"], settings) if draft else []
        if draft and value >= minimum.overall and not conflicts and not triggers and not doubted:
            decision, reason = "answer", f"confidence meets the {settings.domain} minimum; {explained['summary']}"
        elif draft and value >= minimum.overall - band and not triggers:
            decision = "answer_with_caveat"
            reasons = [f"{messages.signal(n, language)} {measured[n]:.2f}" for n in below]
            reasons += [messages.phrase("contradicts", language, c["earlier"]) for c in conflicts[:1]]
            if state.get("feedback") and not degraded(state, "grade_answer"):  # what the answer leaves out
                reasons.append(state["feedback"])
            weak = ", ".join(below) or "contradiction"
            reason = f"within {band} of the minimum confidence {minimum.overall}: {weak}; {explained['summary']}"
            update["answer"] = f"{draft}\n\n" + messages.caveat(reasons, language)
        elif state.get("answer") and settings.human_review and not unreadable:
            why = "; ".join(triggers) or "below the caveat band or ungrounded"
            decision, reason = "human_review", f"{why}; {explained['summary']}"
            # The case waits for a person (in state, or sealed in the review store: review_case.py); whoever
            # reads the paused output learns only that it awaits review.
            case = {"question": state.get("question"), "draft_answer": state["answer"], "reason": reason,
                    "citations": state.get("citations") or [], "scores": dict(scores), "confidence": value,
                    "evidence": [{"id": s["id"], "text": s["text"]} for s in state.get("knowledge") or []],
                    "missing": missing_evidence(state)}  # fmt: skip
            update |= {"answer": messages.phrase("awaits_review", language), "citations": [],
                       "draft": review_case.hold(case)}
        else:
            decision = "abstain"
            # An answer found but withheld by the confidence floor says so, not that the evidence lacked it.
            # (The floor is the cost's, below the plain-answer minimum by the caveat band: docs/quality.md.)
            floor = (messages.below_floor(value, settings.domain, minimum.overall - band, language)
                     if draft and value < minimum.overall - band else "")
            missing = missing_evidence(state, floor)
            if unreadable:
                reason = f"the question cannot be read against the evidence: {missing}"
            elif not state.get("answer"):
                reason = f"no answer the evidence supports; missing: {missing}"
            elif not draft:
                reason = ("the groundedness check vetoed the answer (a rule finding, or no check)"
                          if state.get("vetoed") else
                          f"the answer stayed ungrounded after {state.get('generations', 0)} generation(s)")
            else:
                reason = f"confidence more than {band} below the minimum {minimum.overall}; {explained['summary']}"
            text = messages.withheld(floor, missing, language) if floor else messages.abstain(missing, language)
            if not unreadable and (question := clarifying_question(state, settings, language)):
                text, update["clarifying_question"] = f"{text} {question}", question
            update |= {"answer": text, "citations": [], "missing": missing}
        update["decision"] = decision
        update["trace"] = [
            # A held draft waits in the interrupt for the reviewer; the output (its trace included) never shows it.
            {"node": "finalize", "decision": decision, "reason": reason, "scores": dict(scores),
             "draft": "" if decision == "human_review" else draft,
             "candidates": [{k: v for k, v in c.items() if k != "answer"} for c in considered]
             if decision == "human_review" else considered}
        ]
        if decision == "human_review" and update["draft"].get("sealed"):
            update |= review_case.sealed_state(trace + update["trace"])
        elif review_case.must_seal():
            review_case.release()  # an earlier run of this thread held a draft; this one did not
        return closed(state, runtime, settings, update)

    return finalize


def closed(state: State, runtime: Runtime[Context], settings: Context, update: dict[str, Any]) -> dict[str, Any]:
    """The update with the run's counts as its ledger kept them (whatever a client wrote to the thread's state),
    recorded for the quality monitor; a case for human review ends in human_review, once a person has decided."""
    ledger = ledger_of(state, runtime, settings)
    counts = {"llm_calls": ledger.calls, "tokens": ledger.tokens}
    update |= {name: Overwrite(value) for name, value in counts.items()}
    runs.record({**state, **counts}, update, settings.domain)  # the quality monitor; never fails the run
    forget(state, runtime)  # no node of this run counts any more
    return update if update["decision"] == "human_review" else close_run(state, update)
