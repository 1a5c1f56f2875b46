"""The model generator: answers from the evidence only, with [doc_N] citations, and says what is missing.

It calls the chat model inside the node with the node's callbacks, so `graph.stream(..., stream_mode="messages")`
streams its tokens (LangChain streams a chat model by itself when a streaming handler listens). A draft the
model cannot write ("INSUFFICIENT: ...") or a failed call becomes no draft, with `missing` saying why: in the
model's words, or, for a failed call, a plain phrase in the question's language (the fault is in `error`).
"""

from __future__ import annotations

import html
import re
from dataclasses import replace
from typing import TYPE_CHECKING

from selfcrag.contract import Citation, Draft, Strip, Turn
from selfcrag.language import language_of
from selfcrag.llm.calls import MAX_TOKENS, call, reply_chars
from selfcrag.llm.declines import banning, doubted_decline, token_probability, with_probabilities
from selfcrag.llm.structured import text_of, usage_tokens
from selfcrag.prompts.generation import GenerationPrompt, generation_prompt
from selfcrag.prompts.messages import phrase
from selfcrag.quality.echoes import echoes
from selfcrag.text.terms import strip_citations, terms_of
from selfcrag.text.text import split_sentences

if TYPE_CHECKING:
    from selfcrag.context import Context
    from selfcrag.llm.models import ChatModels

_INSUFFICIENT = re.compile(r"^\W*INSUFFICIENT\b\W*(.*)", re.I | re.S)
_MISSING_LINE = re.compile(r"^\W*Missing\s*:\s*(.+)$", re.I | re.M)
_REF = re.compile(r"\[(doc_\d+)\]")
# The prompt's own evidence markup pasted back, with the clause that introduces it ("The most relevant evidence is:
# <evidence id="doc_1" ...>"): a 0.5B model answered so, and the checker rightly found the markup in no document.
_PASTED = re.compile(r'(?:[^\n.:<>]*:\s*)?<evidence(?:-[0-9a-f]+)? id="(doc_\d+)"[^>]*>\s*(.*?)\s*'
                     r'(?:</evidence(?:-[0-9a-f]+)?>|\Z)', re.S)


class LLMGenerator:
    def __init__(self, models: ChatModels) -> None:
        self.models = models

    def generate(self, question: str, strips: list[Strip], settings: Context, avoid: list[str] | None = None,
                 history: list[Turn] | None = None) -> Draft:  # fmt: skip
        if not strips:
            return Draft(answer="", citations=[], missing="no evidence to answer from")
        model = self.models.generator(settings)
        prompt = generation_prompt(question, strips, settings, avoid, history)
        # Invoked inside the node with the node's callbacks, so stream_mode="messages" gets its tokens.
        asked = with_probabilities(self.models.capped(model, MAX_TOKENS[prompt.role]))
        outcome = call(asked, prompt.messages, settings)
        if outcome.error is not None:  # no draft: the graph rewrites or abstains, it does not crash
            said = phrase("model_limit" if outcome.skipped else "model_unreachable", language_of(question))
            return Draft(answer="", citations=[], missing=said, llm_calls=outcome.calls, prompt=prompt.name,
                         error=outcome.reason)  # fmt: skip
        message = outcome.output
        draft = draft_from(_cut(text_of(message), reply_chars(prompt.role)), prompt)
        calls, tokens = outcome.calls, usage_tokens(message, prompt.messages)
        draft.probability = token_probability(message)
        if not draft.answer and (bias := doubted_decline(message)) is not None:  # declines.py: asked once more
            again = call(banning(asked, bias), prompt.messages, settings)
            calls += again.calls
            if again.error is None:
                tokens += usage_tokens(again.output, prompt.messages)
                second = draft_from(_cut(text_of(again.output), reply_chars(prompt.role)), prompt)
                second.probability = token_probability(again.output)
                draft = second if second.answer else draft
        kept = _without_instructions(draft, prompt)
        if kept is not draft:
            # The reply repeated its instructions (a 0.5B model echoed the focus line, then named the document it
            # meant): asked once more without the task and focus lines, the reply is judged the same way.
            plainer = generation_prompt(question, strips, settings, avoid, history, guided=False)
            again = call(asked, plainer.messages, settings)
            calls += again.calls
            if again.error is None:
                tokens += usage_tokens(again.output, plainer.messages)
                second = draft_from(_cut(text_of(again.output), reply_chars(prompt.role)), plainer)
                second.probability = token_probability(again.output)
                second = _without_instructions(second, prompt)
                kept = second if second.answer else kept
        kept.llm_calls, kept.tokens, kept.prompt = calls, tokens, prompt.name
        return kept


def _without_instructions(draft: Draft, prompt: GenerationPrompt) -> Draft:
    """The draft less its sentences that say what only the prompt's own instructions said: a 0.5B model answered
    "The question asks for one specific point: state it, citing the document that gives it." and nothing else. Judged
    as the output check judges a planted sentence (quality/echoes.py), with the instructions in its place. Once a
    reply has echoed its instructions, the rest of it counts only where it says something of the evidence: each
    sentence kept shares MIN_SHARED_TERMS terms with one document ("The document that gives this information is
    [doc_1]." shares none)."""
    instructions = split_sentences(str(prompt.messages[0].content))
    parroted = set(echoes(draft.answer, [s["text"] for s in prompt.strips], instructions))
    if not parroted:
        return draft
    documents = [terms_of(s["text"]) for s in prompt.strips]
    kept = " ".join(s for s in split_sentences(draft.answer) if strip_citations(s) not in parroted
                    and max((len(terms_of(s) & d) for d in documents), default=0) >= MIN_SHARED_TERMS)  # fmt: skip
    rest = draft_from(kept, prompt) if kept.strip() else Draft(answer="", citations=[], missing="")
    said = rest.missing or draft.missing or "the model repeated its instructions, no answer"
    return replace(rest, missing=said, probability=draft.probability)


def _cut(text: str, limit: int) -> str:
    """A runaway answer cut at the last sentence end (else space) before `limit` characters; the checks that
    follow judge what is left."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    end = max(head.rfind(mark) for mark in (". ", "。", "! ", "? ", "\n"))
    return head[: end + 1] if end > limit // 2 else head[: head.rfind(" ") if " " in head else limit]


def draft_from(text: str, prompt: GenerationPrompt) -> Draft:
    """The model's reply as a draft: an INSUFFICIENT reply or an empty one is no draft; a "Missing:" line moves
    to `missing`; citation labels the evidence never showed are dropped; each kept label gets a citation."""
    text = _PASTED.sub(_pasted, text)
    if match := _INSUFFICIENT.match(text):
        return Draft(answer="", citations=[], missing=match.group(1).strip() or "the evidence does not answer this")
    missing = "; ".join(m.strip().rstrip(".") for m in _MISSING_LINE.findall(text))
    answer = _MISSING_LINE.sub("", text)
    docs = {label: doc_id for doc_id, label in prompt.labels.items()}
    answer = _REF.sub(lambda m: m.group(0) if m.group(1) in docs else "", answer)
    answer = re.sub(r"[ \t]{2,}", " ", re.sub(r"[ \t]+([.,;:!?])", r"\1", answer)).strip()
    if not answer:
        return Draft(answer="", citations=[], missing=missing or "the model returned no answer")
    if not _REF.search(answer):
        answer = _attributed(answer, prompt)
    citations = []
    for ref in dict.fromkeys(_REF.findall(answer)):
        own = [s for s in prompt.strips if s["doc_id"] == docs[ref]]
        claims = " ".join(s for s in split_sentences(answer) if f"[{ref}]" in s)
        citations.append(Citation(ref=ref, doc_id=docs[ref], title=own[0]["title"], source=own[0]["source"],
                                  quote=_quote(claims, own)))  # fmt: skip
    return Draft(answer=answer, citations=citations, missing=missing)


def _pasted(match: re.Match[str]) -> str:
    """A pasted evidence block as what it is: that document's text, cited by its label (the checks that follow
    judge it as any answer; only the markup and its introduction go)."""
    text = html.unescape(match.group(2)).replace("\n...\n", " ")
    return f"{' '.join(text.split())} [{match.group(1)}]"


MIN_SHARED_TERMS = 2  # an uncited sentence is attributed only to a document it shares this many terms with


def _attributed(answer: str, prompt: GenerationPrompt) -> str:
    """An answer written without citation labels, each sentence labelled with the evidence document it shares the
    most terms with (none when it shares fewer than MIN_SHARED_TERMS with every one). Small models often answer
    right but drop the labels; the groundedness check that follows still judges every labelled sentence against
    its document, so a wrong attribution is caught there, not trusted."""
    texts: dict[str, set[str]] = {}
    for strip in prompt.strips:
        label = prompt.labels.get(strip["doc_id"])
        if label:
            texts.setdefault(label, set()).update(terms_of(strip["text"]))
    if not texts:
        return answer
    sentences = []
    for sentence in split_sentences(answer):
        words = terms_of(sentence)
        label, shared = max(((lab, len(words & terms)) for lab, terms in texts.items()), key=lambda x: x[1])
        if shared >= MIN_SHARED_TERMS:
            body = sentence.rstrip()
            end = len(body.rstrip(".!?。"))
            sentence = f"{body[:end]} [{label}]{body[end:]}"
        sentences.append(sentence)
    return " ".join(sentences)


def _quote(claims: str, strips: list[Strip]) -> str:
    """The evidence sentence that shares the most words with the statements citing it."""
    wanted = terms_of(claims)
    sentences = [s for strip in strips for s in split_sentences(strip["text"])] or [strips[0]["text"]]
    return max(sentences, key=lambda s: len(wanted & terms_of(s)))  # max keeps the first of equals
