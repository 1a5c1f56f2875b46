"""Rule checks for the hallucinations embeddings miss: a changed number, an invented name, an absolute claim.

Embedding similarity barely moves when "30 days" becomes "45 days" or "support" becomes "Dr. Smith's team",
so these cheap exact checks run beside it, in English and Chinese alike ("三十天" is 30 days, "总是" is "always").
Each finding is a short human string.
"""

from __future__ import annotations

import re

from selfcrag.text.text import STOPWORDS, numbers, split_sentences, words

# A document label, bracketed as a citation or named in prose ("the evidence labeled doc_1"): the prompt's own
# name for a document, never an identifier the answer invents.
_LABEL = re.compile(r"\[(?:doc|web)_\d+\]|\b(?:doc|web)_\d+\b")
# A capitalised word or phrase ("Richard Nixon", "Account Settings", "McDonald's").
_NAME = re.compile(r"\b[A-Z][\w'&-]*(?:\s+(?:of\s+|de\s+|the\s+)?[A-Z][\w'&-]*)*")
# Tokens as text.words() sees them, case kept: identifiers such as user_123 or v2.3 stay whole.
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:[_.][A-Za-z0-9]+)*")
# A possessive ending: "Kublai Khan's" names Kublai Khan, "the Khans'" the Khans (O'Brien keeps its apostrophe).
_POSSESSIVE = re.compile(r"(?<=[A-Za-z])'s?(?=\s|$)")
ABSOLUTE_WORDS = frozenset({
    "always", "never", "all", "every", "everyone", "everything", "none", "nobody", "nothing", "guaranteed",
    "guarantee", "guarantees", "only", "completely", "entirely", "totally", "forever", "unlimited", "certainly",
    "definitely", "impossible", "instantly", "anytime", "absolutely",
})
# Chinese absolutes are matched in the text itself: a word may be cut into character pairs either way.
ABSOLUTE_WORDS_ZH = (
    "总是", "从不", "从来", "永远", "所有", "全部", "一切", "任何", "必须", "一定", "肯定", "绝对", "保证", "完全",
    "始终", "无限", "随时", "立即", "立刻", "百分之百",
)
# A lone 一 is as often "a"/"once" as a count (一次, 一下): like "one", only digits count for 1.
LONE_ONE = re.compile("(?<![零〇一二两三四五六七八九十百千万亿])一(?![零〇一二两三四五六七八九十百千万亿])")
_CONNECTORS = frozenset({"of", "the", "and", "de", "for", "in", "on", "at", "&"})


def is_identifier(token: str) -> bool:
    """E1042, user_123, v2.3: a letter first and a digit inside, or words joined by underscores."""
    return "_" in token or (token[0].isalpha() and any(c.isdigit() for c in token))


def names(sentence: str) -> list[str]:
    """Capitalised words/phrases, except a sentence's ordinary first word ("Returns are ..." is no name).
    A bare name as the whole answer ("Mumbai", "President Richard Nixon") keeps its first word."""
    tokens = _TOKEN.findall(sentence)
    bare = len(tokens) <= 6 and all(t[0].isupper() or t.isdigit() or t.lower() in _CONNECTORS for t in tokens)
    found = []
    for match in _NAME.finditer(sentence):
        phrase = match.group(0)
        if not bare and not sentence[: match.start()].strip(" \"'([*-"):
            phrase = " ".join(phrase.split()[1:])  # drop the sentence-initial word, keep the rest of the phrase
        phrase = _POSSESSIVE.sub("", phrase)
        if phrase.lower() in STOPWORDS or phrase.lower() in {"yes", "no"}:
            continue
        if phrase and not all(is_identifier(t) for t in _TOKEN.findall(phrase)):
            found.append(phrase)
    return found


def named_in(text: str) -> str:
    """The names and identifiers `text` holds, one a line, without its numbers: what the rule checks may let a
    draft repeat from the run's other passages. A name there is the knowledge base's word (a multi-hop draft restates
    its first hop); a number there is no licence, since a value belongs to the claim it was stated for (365 days
    for gift cards is no return window)."""
    found = [_POSSESSIVE.sub("", match.group(0)) for match in _NAME.finditer(text)]  # sentence openers too
    found += [token for token in _TOKEN.findall(text) if is_identifier(token)]
    return "\n".join(dict.fromkeys(re.sub(r"\b\d+(?:[.,]\d+)*\b", " ", name) for name in found))


_WORD = re.compile(r"[^\W_]+(?:[_.][^\W_]+)*")  # a word of any script, identifiers whole
_CJK = re.compile(r"[\u3400-\u9fff]")


def backed_by(question: str, passages: str) -> str:
    """The question with every word the passages do not hold masked: what `question_terms="backed"` lets an answer
    repeat. A name the question gives and a retrieved passage also holds (a multi-hop question's first hop) is
    the knowledge base's, not the answer's invention; one only the question holds may be a false premise."""
    held = word_set(passages)

    def kept(match: re.Match[str]) -> str:
        token = match.group(0)
        if _CJK.search(token):  # a Chinese run has no spaces: keep its longest stretches the passages hold
            return _held_stretches(token, passages)
        return token if token.lower() in held else "·"

    return _WORD.sub(kept, question)


def _held_stretches(run: str, passages: str) -> str:
    """`run` with what `passages` does not hold masked, matching greedily from the left, two characters or more (a
    lone character is too common to say the passages name the same thing)."""
    out, start = [], 0
    while start < len(run):
        end = next((e for e in range(len(run), start + 1, -1) if run[start:e] in passages), start)
        out.append(run[start:end] if end > start else "·")
        start = max(end, start + 1)
    return "".join(out)


def _plain(text: str) -> str:
    """Lower-case letters and digits between single spaces, for whole-word phrase lookups."""
    return " " + " ".join(re.findall(r"[a-z0-9]+", text.lower())) + " "


def word_set(text: str) -> set[str]:
    """Every word `text` holds, as `words` reads them and split apart at punctuation too ("player.Mary" holds
    "mary" as well as the identifier), for a word-by-word lookup."""
    return set(words(text)) | set(_plain(text).split())


def rule_flags(answer: str, evidence_text: str, given: str = "") -> list[str]:
    """Findings in `answer` that `evidence_text` does not back: numbers, names/identifiers, absolute words.
    Numbers, names and identifiers that `given` holds (what `question_terms` lets an answer repeat) pass too:
    the answer repeats them, it does not invent them. An absolute word must be in the evidence either way."""
    answer = _LABEL.sub(" ", answer)
    evidence_plain = _plain(evidence_text)
    evidence_words = word_set(evidence_text)
    known_text = f"{evidence_text}\n{given}" if given else evidence_text  # a number, name or identifier's sources
    known_plain = _plain(known_text) if given else evidence_plain
    known_words = evidence_words | word_set(given)
    flags: list[str] = []

    # "one" is as often a pronoun or article ("in one household") as a count: only digits count for 1.
    answer_numbers = numbers(LONE_ONE.sub(" ", re.sub(r"\bone\b", " ", answer, flags=re.IGNORECASE)))
    for value in sorted(answer_numbers - numbers(known_text)):
        shown = int(value) if value.is_integer() else value
        flags.append(f"number {shown} not in the evidence")

    seen: set[str] = set()
    for sentence in split_sentences(answer):
        for name in names(sentence):
            key = name.lower()
            if key in seen:
                continue
            seen.add(key)
            name_words = words(name)
            # A phrase passes when it appears as written, or all its words appear (reordered phrasing).
            if _plain(name) not in known_plain and not all(w in known_words for w in name_words):
                flags.append(f"name {name!r} not in the evidence")
    for token in dict.fromkeys(_TOKEN.findall(answer)):
        if is_identifier(token) and token.lower() not in known_words:
            flags.append(f"identifier {token} not in the evidence")

    answer_words = words(answer)
    absolute = [w for w in dict.fromkeys(answer_words) if w in ABSOLUTE_WORDS and w not in evidence_words]
    absolute += [w for w in ABSOLUTE_WORDS_ZH if w in answer and w not in evidence_text]
    if "100%" in answer and "100%" not in evidence_text and " 100 percent " not in evidence_plain:
        absolute.append("100%")
    flags.extend(f"absolute word {w!r} not in the evidence" for w in absolute)
    return flags
