"""Generates a cited answer from the knowledge strips; a regeneration is told which statements the last
draft could not support, so it does not repeat them.

Strips are a few sentences cut from each relevant passage: a term the question names may sit in a sentence of
the passage that did not make the cut (the first hop's name in its opening sentence, the answer two sentences
on). When the generator declines on the strips, it reads the run's relevant passages whole before the run
gives up on this evidence, as plain retrieve-then-generate would. A decline because the evidence is about
another entity or qualifier than asked (`Draft.off_target`) stands: more of the same passage cannot change it.
On the model backend that reading is one more model call, within the run's budget.

A draft of a bridge question quotes the first hop, which names the bridge ("... the third season of House");
the answer is in the bridge's own passage, which the run retrieved but graded off-topic or refined away. The
offline generator writes again with the run's passages naming the bridge, and the draft grows by the second hop
when its own sentences stay first (`bridge_passages`, `extends`)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from selfcrag.components.backend import Components
from selfcrag.components.base import Draft, Passage, Strip
from selfcrag.components.terms import coverage, key_terms, strip_citations, terms_of
from selfcrag.components.text import STOPWORDS, term, words
from selfcrag.context import Context, settings_of
from selfcrag.nodes import model_notes, spent
from selfcrag.nodes.prepare import history_from
from selfcrag.progress import emit
from selfcrag.quality.rules import names
from selfcrag.routing import budget_left
from selfcrag.state import NodeFunction, State


def _as_strip(passage: Passage, score: float) -> Strip:
    return Strip(id=passage["id"], doc_id=passage["doc_id"], title=passage["title"], source=passage["source"],
                 text=passage["text"], score=round(score, 4))


def whole_passages(state: State) -> list[Strip]:
    """The run's relevant passages whole, as strips, best first, each scored as its best strip in the evidence
    (its grade otherwise), so the confidence reads one scale whichever of the two generation used; then the
    passages set aside as irrelevant that name a key term of the question (a name, a number) the relevant ones
    lack: a question naming two things is graded against the one it says most about, and the other thing's own
    passage is the second hop. Empty when they hold no more than the knowledge already does."""
    best: dict[str, float] = {}
    for strip in state.get("evidence") or []:
        best[strip["id"]] = max(best.get(strip["id"], 0.0), float(strip["score"]))
    grades = {g["id"]: float(g["score"]) for g in state.get("grades") or []}
    relevant = state.get("sources") or []
    whole = sorted((_as_strip(p, best.get(p["id"], grades.get(p["id"], float(p["score"])))) for p in relevant),
                   key=lambda s: -s["score"])  # fmt: skip
    keys = key_terms(state.get("question", ""))
    _, lacking = coverage(keys, "\n".join(f"{p['title']}\n{p['text']}" for p in relevant))
    for passage in state.get("set_aside") or []:
        if lacking and coverage({k: w for k, w in keys.items() if w in lacking}, passage["text"])[0] > 0:
            whole.append(_as_strip(passage, grades.get(passage["id"], float(passage["score"]))))
            _, lacking = coverage({k: w for k, w in keys.items() if w in lacking}, passage["text"])
    knowledge = {" ".join(s["text"].split()) for s in state.get("knowledge") or []}
    return [] if all(" ".join(s["text"].split()) in knowledge for s in whole) else whole


def bridge_passages(state: State, draft: Draft, knowledge: list[Strip]) -> list[Strip]:
    """Passages the run retrieved whose text is not in `knowledge` and that name a name the draft gives and the
    question lacks (the bridge: "... of the third season of House"): where a bridge question's answer is ("House
    ... ran on the Fox network"). Graded against the question's words, such a passage reads as off-topic, or its
    strips fall below the refiner's floor."""
    asked = {term(w) for w in words(state.get("question", ""))}
    wanted = [keys for name in dict.fromkeys(names(strip_citations(draft.answer)))
              if (keys := {term(w) for w in words(name) if w not in STOPWORDS}) and keys - asked]
    held = {" ".join(s["text"].split()) for s in knowledge}
    found = []
    for passage in [*(state.get("sources") or []), *(state.get("set_aside") or [])]:
        if " ".join(passage["text"].split()) in held:
            continue
        present = terms_of(f"{passage['title']}\n{passage['text']}")
        if any(keys <= present for keys in wanted):
            found.append(_as_strip(passage, 0.0))
    return found


def extends(draft: Draft, extended: Draft) -> bool:
    """`extended` (written with the bridge passages too) keeps the draft's sentences and adds one: the bridge
    passages may add the second hop, never replace the first."""
    first, more = strip_citations(draft.answer).strip(), strip_citations(extended.answer).strip()
    return bool(first) and more.startswith(first) and len(more) > len(first)


def make(components: Components) -> NodeFunction:
    def generate(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        generation = state.get("generations", 0) + 1
        avoid = list(state.get("unsupported_claims") or []) if generation > 1 else []
        knowledge = state.get("knowledge") or []
        if avoid:
            emit("generate", f"regenerating: {len(avoid)} unsupported statements", generation=generation)
        else:
            emit("generate", f"generating an answer from {len(knowledge)} strips", generation=generation)
        draft = components.generator.generate(state["question"], knowledge, settings, avoid,
                                              history=history_from(state))  # fmt: skip
        reason = f"generation {generation}/{settings.max_generations} from {len(knowledge)} strips"
        update: dict[str, Any] = {}
        first, retry, whole = draft, None, []
        if not draft.answer and not draft.error and not draft.off_target and budget_left(state, settings) and (
                whole := whole_passages(state)):
            retry = components.generator.generate(state["question"], whole, settings, avoid,
                                                  history=history_from(state))  # fmt: skip
            reason += f"; declined on the strips ({first.missing}), so read {len(whole)} relevant passages whole"
            if retry.answer:  # the checks read the evidence the draft was written from
                draft, update["knowledge"], knowledge = retry, whole, whole
            elif retry.error:
                draft = retry
        extension = None
        # Offline only: the extractive generator's answer grows by whole sentences, so "the same answer plus the
        # second hop" is a test it can pass; a model rewrites its answer on new evidence (it is given the passages
        # it needs up front instead).
        if draft.answer and not draft.llm_calls and (bridges := bridge_passages(state, draft, knowledge)):
            extension = components.generator.generate(state["question"], [*knowledge, *bridges], settings, avoid,
                                                      history=history_from(state))  # fmt: skip
            if extends(draft, extension):
                draft, update["knowledge"], knowledge = extension, [*knowledge, *bridges], [*knowledge, *bridges]
                reason += f"; added the second hop from {len(bridges)} passages naming the bridge"
        if avoid:
            reason += f", avoiding {len(avoid)} unsupported statements"
        return {
            **update,
            "answer": draft.answer,
            "citations": draft.citations,
            "missing": draft.missing,
            "generations": generation,
            "unsupported_claims": [] if generation == 1 else avoid,
            **spent(first, retry, extension),
            "trace": [
                {
                    "node": "generate",
                    "decision": "draft" if draft.answer else "no answer",
                    "reason": reason if draft.answer else f"{reason}; {draft.missing}",
                    "citations": [c["ref"] for c in draft.citations],
                    "whole_passages": len(whole) if retry is not None and retry.answer else 0,
                    "second_hop": extension is not None and draft is extension,
                    **model_notes(first, retry, extension),
                }
            ],
        }

    return generate
