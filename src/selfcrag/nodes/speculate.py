"""Speculative generation (model backend): while `grade_documents` grades the first round's passages, this node
refines all of them (as `refine` would if grading kept every one; `refine_with="scores"` needs no model call) and
drafts the answer from those strips. `adopt_draft` keeps the draft only when grading agrees (`discard_reason`);
then the happy path is two sequential round trips, (grade || generate) -> (both checks), instead of three.

A discarded draft costs its tokens (they count in the run's usage) and nothing else: the normal path runs as if
there had been no draft. Whatever goes wrong here degrades to that path, never fails the run.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from selfcrag.backend import Components, component_for
from selfcrag.context import Context
from selfcrag.contract import Strip
from selfcrag.nodes import model_notes, spent
from selfcrag.nodes.prepare import history_from
from selfcrag.progress import emit
from selfcrag.prompts.evidence import doc_labels
from selfcrag.routing import after_refine
from selfcrag.state import NodeFunction, State
from selfcrag.text.redaction import redact
from selfcrag.trust_boundary import settings_of


def model_backend(components: Components, settings: Context) -> bool:
    """Whether this run writes its answers with a chat model: only the model backend speculates."""
    from selfcrag.llm.generator import LLMGenerator  # lazily, for start-up: an offline run never loads it

    return isinstance(component_for(components, "generator", settings), LLMGenerator)


def strip_keys(strips: list[Strip]) -> list[tuple[str, str]]:
    """A strip is the same strip when it comes from the same passage with the same text (its score follows)."""
    return [(s["id"], s["text"]) for s in strips]


def discard_reason(state: State, refined: list[Strip], settings: Context) -> str:
    """Why the speculative draft in `state` cannot stand for the answer `generate` would write ("" = keep it).
    `state` is after grading; `refined` are the strips `refine` keeps from the passages not graded incorrect (R);
    the draft was written from the strips of all retrieved passages (S). The draft is kept only when:
    1. it was written: its call did not fail or was not skipped (a draft saying the evidence is insufficient counts:
       with no less evidence than generation would get, the model already found too little);
    2. grading agrees: the CRAG action is `correct`, and with R as knowledge the normal path goes straight to
       `generate` (no web search, no rewrite for evidence below the pre-generation gate);
    3. the draft saw all of that evidence: every strip of R is a strip of S (the rest of S comes from passages
       graded incorrect);
    4. it cites only kept documents, each under the label generation and the checks give it in R (labels number
       documents in order, so a dropped document ahead of a cited one would rename it)."""
    draft = state.get("speculation") or {}
    if draft.get("error"):
        return f"the speculative draft failed ({draft['error']})"
    if "strips" not in draft:
        return "no speculative draft"
    if state.get("crag_action") != "correct":
        return f"grading chose {state.get('crag_action')!r}, not 'correct'"
    if after_refine({**state, "knowledge": refined}, settings) != "generate":
        return "the refined evidence would not go straight to generation (web search or a rewrite first)"
    seen = set(strip_keys(draft["strips"]))
    if unseen := [key for key in strip_keys(refined) if key not in seen]:
        return f"{len(unseen)} of the {len(refined)} refined strips were not in the draft's evidence"
    labels = doc_labels(refined)
    if renamed := [c["ref"] for c in draft.get("citations") or [] if labels.get(c["doc_id"]) != c["ref"]]:
        return f"the draft cites {', '.join(renamed)}, which the kept evidence does not have under that label"
    return ""


def make(components: Components) -> NodeFunction:
    def speculate(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        passages = state.get("documents") or []
        emit("speculate", f"drafting an answer from {len(passages)} passages while they are graded")
        try:
            refinement = components.refiner.refine(state["question"], passages, settings)
            draft = components.generator.generate(state["question"], refinement.strips, settings, [],
                                                  history=history_from(state, settings))  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - an optional draft: any fault sends the run down the normal path
            error = f"{type(exc).__name__}: {redact(str(exc))}"
            return {"speculation": {"error": error},
                    "trace": [{"node": "speculate", "decision": "no draft", "reason": "speculation failed",
                               "error": error}]}  # fmt: skip
        strips = refinement.strips
        speculation = {"answer": draft.answer, "citations": draft.citations, "missing": draft.missing,
                       "strips": strips, "error": draft.error}  # fmt: skip
        reason = f"drafted from {len(strips)} strips of all {len(passages)} passages, while grading"
        return {
            "speculation": speculation,
            **spent(refinement, draft),
            "trace": [
                {
                    "node": "speculate",
                    "decision": "draft" if draft.answer else "no answer",
                    "reason": reason if draft.answer else f"{reason}; {draft.missing}",
                    "strips": [s["id"] for s in strips],
                    "citations": [c["ref"] for c in draft.citations],
                    **model_notes(refinement, draft),
                }
            ],
        }

    return speculate
