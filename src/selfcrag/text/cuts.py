"""How the offline reasoner cuts a passage into the texts it embeds: the relevance grader's passage and sentences,
the refiner's strips, the extractive generator's candidate sentences, the groundedness checker's evidence
sentences. An index stores the vectors of exactly these texts (knowledge/vector_store.py `evidence_texts`), so the
index and the graders both read the cuts from here, and the index never imports a grader (changed: out of
offline/extractive.py, groundedness.py, offline_grading.py and refine.py).
"""

from __future__ import annotations

import re

from selfcrag.text.text import split_sentences

_LIST_MARKER = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")


def clean(sentence: str) -> str:
    """A sentence as it reads in an answer: without a leading list marker (still a substring of the evidence)."""
    return _LIST_MARKER.sub("", sentence).strip()


GLUED = re.compile(r"(?<=[a-z)\"])\.(?=[A-Z])")  # "player.Mary": scraped text often loses the space


def evidence_sentences(text: str) -> list[str]:
    """The sentences of one evidence text, as the check compares them (an index stores their vectors)."""
    return split_sentences(GLUED.sub(". ", text))


def passage_texts(text: str) -> list[str]:
    """What the relevance grader embeds of a passage: the whole text, then each sentence."""
    return [text, *(split_sentences(text) or [text])]


def strips_of(text: str, size: int) -> list[tuple[str, list[str]]]:
    """(strip text, its sentences) per group of `size` sentences of a passage's text. The text is cut from the
    passage as written, line breaks included, so list items and headings still split into the same sentences
    downstream (and an index can store the vectors of both: vector_store)."""
    sentences = split_sentences(text) or [text]
    strips, cursor = [], 0
    for i in range(0, len(sentences), max(1, size)):
        group = sentences[i : i + size]
        start = text.find(group[0], cursor)
        end = text.find(group[-1], max(start, cursor)) + len(group[-1])
        if start < 0 or end < len(group[-1]):  # a sentence re-joined after an abbreviation: no exact span
            strips.append(("\n".join(group), group))
            continue
        strips.append((text[start:end], group))
        cursor = end
    return strips
