"""Knowledge refinement (decompose-then-recompose): keeps the question-relevant strips of the passages
graded correct or ambiguous; citations still point at the original documents. The strips join the run's
evidence (`offline/refine.py accumulate`), so what earlier rounds found stays available to generation."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from selfcrag.backend import Components
from selfcrag.context import Context
from selfcrag.nodes import model_notes, spent
from selfcrag.offline.refine import accumulate
from selfcrag.state import NodeFunction, State
from selfcrag.text.terms import terms_of
from selfcrag.text.text import STOPWORDS, term, words
from selfcrag.trust_boundary import settings_of


def second_hops(state: State, kept: set[str]) -> dict[str, str]:
    """Passages of this round graded incorrect that name a bridge the rewrite carried (passage id -> the name).
    A bridge question ("the series House of Anubis was based on first aired when?") is graded against its own
    words, and the bridge's passage ("Het Huis Anubis ... first aired in 2006") shares few of them: it is the
    second hop all the same, so it joins the evidence like a relevant passage."""
    names = {name: {term(w) for w in words(name) if w not in STOPWORDS} for name in state.get("bridges") or []}
    found: dict[str, str] = {}
    for passage in state.get("documents") or []:
        if passage["id"] in kept:
            continue
        present = terms_of(f"{passage['title']}\n{passage['text']}")
        if named := next((name for name, keys in names.items() if keys and keys <= present), None):
            found[passage["id"]] = named
    return found


def make(components: Components) -> NodeFunction:
    def refine(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        kept = {g["id"] for g in state.get("grades") or [] if g["label"] != "incorrect"}
        hops = second_hops(state, kept)
        kept |= set(hops)
        passages = [p for p in state.get("documents") or [] if p["id"] in kept]
        refinement = components.refiner.refine(state["question"], passages, settings)
        strips = refinement.strips
        before = state.get("evidence") or []
        evidence, knowledge = accumulate(before, strips, settings)
        added = len(evidence) - len(before)
        known = {p["id"] for p in [*(state.get("sources") or []), *(state.get("set_aside") or [])]}
        rejected = [p for p in state.get("documents") or [] if p["id"] not in kept and p["id"] not in known]
        return {
            "knowledge": knowledge,
            "evidence": evidence,
            # The whole passages behind the evidence: generation reads them when the strips alone cannot answer.
            "sources": [*(state.get("sources") or []), *(p for p in passages if p["id"] not in known)],
            "set_aside": [*(state.get("set_aside") or []), *rejected],
            **spent(refinement),
            "trace": [
                {
                    "node": "refine",
                    "decision": f"{len(knowledge)} strips",
                    "reason": f"kept {len(strips)} strips from {len(passages)} passages not graded incorrect"
                    + (f"; {added} new to the run's evidence ({len(evidence)} strips in all)" if before else "")
                    + (f"; kept {len(hops)} graded incorrect that name the bridge {', '.join(hops.values())}"
                       if hops else ""),
                    "strips": [s["id"] for s in knowledge],
                    "evidence_added": added,  # what this round added that earlier rounds had not found
                    **model_notes(refinement),
                }
            ],
        }

    return refine
