"""Self-RAG's groundedness check: is every statement of the draft supported by the evidence? Beside the checker,
two output checks, each an exact finding like the rule checks' that vetoes the draft whatever the checker thought
of it: a sentence that says what only a planted sentence said (one this run's retrieval removed as addressed to
the reader or the assistant: `quality/echoes.py`), and a sentence that another sentence of the draft, or of a
passage it cites, answers differently (`quality/contested.py`: what an obeyed instruction does to an answer,
however the instruction was phrased)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from langgraph.runtime import Runtime

from selfcrag.backend import Components
from selfcrag.context import Context
from selfcrag.contract import GroundednessCheck, Strip
from selfcrag.language import language_of
from selfcrag.nodes import model_notes, spent
from selfcrag.offline.groundedness import instruction_claim
from selfcrag.progress import emit
from selfcrag.prompts import messages
from selfcrag.prompts.evidence import doc_labels
from selfcrag.quality.contested import contested
from selfcrag.quality.directives import directive_sentences
from selfcrag.quality.echoes import echoes, planted_sentences
from selfcrag.state import NodeFunction, State
from selfcrag.text.rules import backed_by, named_in
from selfcrag.trust_boundary import settings_of

_LABEL = re.compile(r"\[(doc_\d+)\]")


def retrieved_text(state: State) -> str:
    """Every passage the run retrieved (kept, set aside, or of this round), titles included."""
    retrieved = [*(state.get("sources") or []), *(state.get("set_aside") or []), *(state.get("documents") or []),
                 *(state.get("knowledge") or [])]  # fmt: skip
    return "\n".join(dict.fromkeys(f"{p['title']}\n{p['text']}" for p in retrieved))


def repeatable(question: str, state: State, settings: Context) -> str:
    """What the rule checks let an answer repeat beyond the strips it cites: the names and identifiers of every
    passage the run retrieved (a multi-hop draft restates its first hop from a passage the refinement left out; its
    numbers are no licence: `rules.named_in`), and of the question (`question_terms`) nothing (`checked`), all of it
    (`given`), or the words a retrieved passage holds too (`backed`; the rest masked)."""
    passages = retrieved_text(state)
    named = named_in(passages)
    if settings.question_terms == "checked":
        return named
    if settings.question_terms == "given":
        return f"{question}\n{named}"
    return f"{backed_by(question, passages)}\n{named}"


def echo_veto(check: GroundednessCheck, answer: str, strips: list[Strip], state: State) -> GroundednessCheck:
    """The check, vetoed when an answer sentence comes only from a sentence the run removed as planted, or from a
    sentence of its evidence that dictates what someone says or holds true (`quality/directives.py`: judged by its
    grammar, so a phrasing the detector never saw is caught by what it does to the answer)."""
    texts = [s["text"] for s in strips]
    planted = [*planted_sentences(state.get("trace") or []), *directive_sentences(texts)]
    echoed = echoes(answer, texts, planted)
    if not echoed:
        return check
    flags = [f"says what only a sentence addressed to the reader or the assistant said: {s[:80]!r}" for s in echoed]
    return replace(check, grounded=False, vetoed=True, flags=[*check.flags, *flags],
                   unsupported=list(dict.fromkeys([*check.unsupported, *map(instruction_claim, echoed)])))


def contested_claim(sentence: str) -> str:
    """How a contested sentence is listed as unsupported: described, not quoted, since it may be a planted claim
    and the abstention may name unsupported statements."""
    return messages.phrase("contested_in_answer", language_of(sentence))


def contest_veto(check: GroundednessCheck, answer: str, strips: list[Strip], question: str) -> GroundednessCheck:
    """The check, vetoed when the draft, or a passage it cites, gives the question two answers."""
    labels = doc_labels(strips)  # as the generators number the strips
    cited = set(_LABEL.findall(answer))
    evidence = [s["text"] for s in strips if labels.get(s["doc_id"]) in cited]
    found = contested(answer, evidence, question)
    if not found:
        return check
    flags = [f"its evidence answers otherwise ({f['why']}): {f['other'][:80]!r}" for f in found]
    return replace(check, grounded=False, vetoed=True, flags=[*check.flags, *flags],
                   unsupported=list(dict.fromkeys([*check.unsupported,
                                                   *(contested_claim(f["answer"]) for f in found)])))


def make(components: Components) -> NodeFunction:
    def check_hallucination(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        settings = settings_of(runtime.context)
        question = state.get("question") or ""
        answer, strips = state.get("answer") or "", state.get("knowledge") or []
        check = components.groundedness.check(answer, strips, settings, question=question,
                                              given=repeatable(question, state, settings))
        check = echo_veto(check, answer, strips, state)
        if settings.contested_check:
            check = contest_veto(check, answer, strips, question)
        # Keep what earlier drafts could not support too, so a second regeneration avoids both.
        unsupported = list(dict.fromkeys([*(state.get("unsupported_claims") or []), *check.unsupported]))
        reason = f"groundedness {check.score:.2f} (threshold {settings.thresholds().groundedness})"
        emit("check_hallucination", f"groundedness {check.score:.2f}: "
             + ("grounded" if check.grounded else f"{len(check.unsupported)} unsupported statements"),
             grounded=check.grounded, unsupported=len(check.unsupported))
        if check.unsupported:
            reason += f"; {len(check.unsupported)} unsupported statements"
        if check.flags:
            reason += "; " + "; ".join(check.flags)
        return {
            "groundedness": check.score,
            "grounded": check.grounded,
            "vetoed": check.vetoed,
            "unsupported_claims": unsupported,
            **spent(check),
            "trace": [
                {
                    "node": "check_hallucination",
                    "decision": "grounded" if check.grounded else "not grounded",
                    "reason": reason,
                    "unsupported": check.unsupported,
                    "findings": check.findings,
                    **model_notes(check),
                }
            ],
        }

    return check_hallucination
