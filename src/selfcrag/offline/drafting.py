"""Drafting an answer beyond the knowledge strips: the generator writes from the strips, then reads more of the
run's passages where the strips fall short.

Strips are a few sentences cut from each relevant passage: a term the question names may sit in a sentence of
the passage that did not make the cut (the first hop's name in its opening sentence, the answer two sentences
on). When the generator declines on the strips, it reads the run's relevant passages whole before the run
gives up on this evidence, as plain retrieve-then-generate would (`whole_passages`). A decline because the
evidence is about another entity or qualifier than asked (`Draft.off_target`) stands: more of the same passage
cannot change it. On the model backend that reading is one more model call, within the run's budget.

A draft of a bridge question quotes the first hop, which names the bridge ("... the third season of House");
the answer is in the bridge's own passage, which the run retrieved but graded off-topic or refined away. The
extractive generator writes again with the run's passages naming the bridge, and the draft grows by the second
hop when its own sentences stay first (`bridge_passages`, `extends`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from selfcrag.contract import Draft, Generator, Grade, Passage, Strip, Turn
from selfcrag.text.rules import names
from selfcrag.text.terms import coverage, key_terms, strip_citations, terms_of
from selfcrag.text.text import STOPWORDS, term, words

if TYPE_CHECKING:
    from selfcrag.context import Context


@dataclass(frozen=True)
class RunEvidence:
    """What the run holds for one question that generation may read (the state keys of the same names)."""

    question: str
    knowledge: list[Strip]  # the strips generation writes from
    evidence: list[Strip] = field(default_factory=list)  # every strip the run refined, one per chunk
    grades: list[Grade] = field(default_factory=list)
    sources: list[Passage] = field(default_factory=list)  # the relevant passages, whole
    set_aside: list[Passage] = field(default_factory=list)  # the passages graded irrelevant


@dataclass
class Drafting:
    """The draft the run goes on with and how it came to be. `first`, `whole` and `extension` are the generator's
    results in call order (None: that call was not made), for the run's usage and the trace."""

    draft: Draft
    first: Draft
    whole: Draft | None = None  # written from the passages whole, after a decline on the strips
    extension: Draft | None = None  # written with the passages naming the draft's bridge
    knowledge: list[Strip] | None = None  # the evidence `draft` was written from, when not the strips
    whole_passages: int = 0  # passages read whole for `draft` (0: it is not written from them)
    second_hop: bool = False  # `draft` is the extension
    notes: list[str] = field(default_factory=list)  # what was read beyond the strips, for the trace's reason


def _as_strip(passage: Passage, score: float) -> Strip:
    return Strip(id=passage["id"], doc_id=passage["doc_id"], title=passage["title"], source=passage["source"],
                 text=passage["text"], score=round(score, 4))  # fmt: skip


def _flat(text: str) -> str:
    return " ".join(text.split())


def whole_passages(run: RunEvidence) -> list[Strip]:
    """The run's relevant passages whole, as strips, best first, each scored as its best strip in the evidence
    (its grade otherwise), so the confidence reads one scale whichever of the two generation used; then the
    passages set aside as irrelevant that name a key term of the question (a name, a number) the relevant ones
    lack: a question naming two things is graded against the one it says most about, and the other thing's own
    passage is the second hop. Empty when they hold no more than the knowledge already does."""
    best: dict[str, float] = {}
    for strip in run.evidence:
        best[strip["id"]] = max(best.get(strip["id"], 0.0), float(strip["score"]))
    grades = {g["id"]: float(g["score"]) for g in run.grades}
    whole = sorted((_as_strip(p, best.get(p["id"], grades.get(p["id"], float(p["score"])))) for p in run.sources),
                   key=lambda s: -s["score"])  # fmt: skip
    keys = key_terms(run.question)
    _, lacking = coverage(keys, "\n".join(f"{p['title']}\n{p['text']}" for p in run.sources))
    for passage in run.set_aside:
        if lacking and coverage({k: w for k, w in keys.items() if w in lacking}, passage["text"])[0] > 0:
            whole.append(_as_strip(passage, grades.get(passage["id"], float(passage["score"]))))
            _, lacking = coverage({k: w for k, w in keys.items() if w in lacking}, passage["text"])
    knowledge = {_flat(s["text"]) for s in run.knowledge}
    return [] if all(_flat(s["text"]) in knowledge for s in whole) else whole


def bridge_passages(run: RunEvidence, draft: Draft, knowledge: list[Strip]) -> list[Strip]:
    """Passages the run retrieved whose text is not in `knowledge` and that name a name the draft gives and the
    question lacks (the bridge: "... of the third season of House"): where a bridge question's answer is ("House
    ... ran on the Fox network"). Graded against the question's words, such a passage reads as off-topic, or its
    strips fall below the refiner's floor."""
    asked = {term(w) for w in words(run.question)}
    wanted = [keys for name in dict.fromkeys(names(strip_citations(draft.answer)))
              if (keys := {term(w) for w in words(name) if w not in STOPWORDS}) and keys - asked]  # fmt: skip
    held = {_flat(s["text"]) for s in knowledge}
    found = []
    for passage in [*run.sources, *run.set_aside]:
        if _flat(passage["text"]) in held:
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


def quotes_evidence(generator: Generator) -> bool:
    """Whether `generator` answers by copying whole evidence sentences: the offline extractive generator.

    Only such an answer can be extended by a bridge's passage: it grows by whole sentences, so "the same answer
    plus the second hop" is a test it can pass, while a model rewrites its answer on new evidence (it is given the
    passages it needs up front instead). This asks the generator's kind, where a draft's `llm_calls == 0` only
    hinted at it: a model draft that cost no call (a cached or faked model) would have passed for a quoted one."""
    from selfcrag.offline.extractive import ExtractiveGenerator  # lazily, for start-up: loaded when a run needs it

    return isinstance(generator, ExtractiveGenerator)


def write_draft(generator: Generator, run: RunEvidence, settings: Context, avoid: list[str], history: list[Turn],
                *, budget_left: bool) -> Drafting:  # fmt: skip
    """A draft from the strips; after a decline on them (not off target, with calls left), one from the run's
    passages whole; then, from an extractive generator, the draft extended by the passages naming its bridge."""
    first = draft = generator.generate(run.question, run.knowledge, settings, avoid, history=history)
    made = Drafting(draft=first, first=first)
    knowledge = run.knowledge
    if not first.answer and not first.error and not first.off_target and budget_left and (
            whole := whole_passages(run)):  # fmt: skip
        made.whole = generator.generate(run.question, whole, settings, avoid, history=history)
        made.notes.append(f"declined on the strips ({first.missing}), so read {len(whole)} relevant passages whole")
        if made.whole.answer:  # the checks read the evidence the draft was written from
            draft, made.knowledge, knowledge, made.whole_passages = made.whole, whole, whole, len(whole)
        elif made.whole.error:
            draft = made.whole
    if draft.answer and quotes_evidence(generator) and (bridges := bridge_passages(run, draft, knowledge)):
        made.extension = generator.generate(run.question, [*knowledge, *bridges], settings, avoid, history=history)
        if extends(draft, made.extension):
            draft, made.knowledge, made.second_hop = made.extension, [*knowledge, *bridges], True
            made.notes.append(f"added the second hop from {len(bridges)} passages naming the bridge")
    made.draft = draft
    return made
