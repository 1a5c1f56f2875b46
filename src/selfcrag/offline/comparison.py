"""Yes/no and comparison answers, offline: the verdict the evidence decides, then the sentences that decide it.

An extractive answer copies sentences, and a sentence never contains "yes", "no", or which of two named options
the question picks. Multi-hop questions ask these often: "Were X and Y of the same nationality?", "Who was born
first, X or Y?". Here the evidence decides them with general rules, and only when it does:

- comparison ("Which ..., X or Y?", "Is X or Y older?"): each option's own sentences (its article's strips, or
  sentences naming it) give a date or a number; the comparative in the question ("older", "more", "first")
  says which wins. Without a comparative, the option whose sentences state the asked property, when the other's
  do not.
- yes/no about two named things ("Are X and Y both ...?", "... the same ...?"): both things' sentences state
  the asked property (yes), or one does and the other's defining sentence does not (no); "the same" compares
  the first capitalised word that follows the copula in each defining sentence ("is an American director").
- yes/no about one thing: a sentence that states every word of the question answers yes, or no when it is
  negated.

Anything else returns None, and the generator answers with sentences as before: never a guess. The words that
decide (comparatives and their direction, verdicts, negations) live in `data/comparison.txt`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from selfcrag.contract import Strip
from selfcrag.data_sections import read_sections
from selfcrag.language import language_of
from selfcrag.text.terms import coverage, question_terms
from selfcrag.text.text import STOPWORDS, fold, split_sentences, term, words

_AUXILIARIES = frozenset("is are was were do does did can could has have had will would should".split())
_YEAR = re.compile(r"(?<![\d,.])(1\d{3}|20\d{2})(?![\d,])")
_NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.,])\d+(?:\.\d+)?(?![\w,]*\d)")
# "..., X or Y?" (options after the last comma or colon), else "... X or Y?" with capitalised options.
_OPTIONS = re.compile(r"[,:]\s*(?P<a>[^,:?]+?)\s+or\s+(?P<b>[^,:?]+?)\s*[?？]?\s*$", re.I)
_CAPITALISED_OPTIONS = re.compile(r"(?P<a>(?:[A-Z0-9][\w'&.-]*\s+)*[A-Z0-9][\w'&.-]*)\s+or\s+(?P<b>(?:the\s+)?[A-Z0-9]"
                                  r"[\w'&.-]*(?:\s+(?:of\s+|the\s+|and\s+|for\s+)?[A-Z0-9][\w'&.-]*)*)")
_PAIR = re.compile(r"(?P<a>[A-Z][\w'&.-]*(?:\s+(?:of\s+|the\s+|de\s+)?[A-Z0-9][\w'&.-]*)*)\s+and\s+"
                   r"(?P<b>(?:the\s+)?[A-Z][\w'&.-]*(?:\s+(?:of\s+|the\s+|de\s+)?[A-Z0-9][\w'&.-]*)*)")
_COPULA_NAME = re.compile(r"\b(?:is|was|are|were)\s+(?:an?|the)\s+(?:[a-z-]+\s+){0,2}?([A-Z][\w-]*)")
_ZH_NOT_NEGATION = re.compile("不(?=[同过但论管断错如足久少])")


@cache
def words_for() -> dict[str, list[str]]:
    """The sections of `data/comparison.txt`. A malformed file is a packaging error: it fails loudly."""
    return read_sections("comparison.txt")


def verdict_word(answer: bool, language: str) -> str:
    pairs = words_for()["yes" if answer else "no"]
    table = dict(zip(pairs[::2], pairs[1::2], strict=True))
    return table.get(language, table["en"])


def is_verdict(sentence: str) -> bool:
    """A sentence that is only a yes/no verdict ("Yes.", "不是。"): it claims what the sentences after it state."""
    bare = sentence.strip().rstrip(".!。！,，:：").strip()
    return any(bare.lower() == w.lower() for section in ("yes", "no") for w in words_for()[section][1::2])


def negated(sentence: str) -> bool:
    found = set(words(sentence.lower()))
    listed = words_for()["negation"]
    if found & {w for w in listed if w.isascii()} or "n't" in sentence.lower():
        return True
    chinese = _ZH_NOT_NEGATION.sub("", sentence)
    return any(w in chinese for w in listed if not w.isascii())


@dataclass
class Decision:
    verdict: str  # "Yes", "No" (in the question's language), or the option picked, as the question names it
    support: list[tuple[str, Strip]]  # the sentences that decide it, each with its strip (for the citation)
    kind: str  # "yesno" or "comparison": the trace says which rule answered


def _content(text: str) -> list[str]:
    return [term(w) for w in words(fold(text)) if w not in STOPWORDS]


def _about(entity: str, strips: list[Strip]) -> list[tuple[str, Strip]]:
    """The entity's own sentences: every sentence of a strip from its article (the title names it), then the
    sentences of other strips that name it; in evidence order."""
    keys = set(_content(entity))
    if not keys:
        return []
    own, named = [], []
    for strip in strips:
        title = set(_content(re.sub(r"\(.*?\)", "", strip["title"])))
        from_article = bool(title) and (keys <= title or title <= keys)
        for sentence in split_sentences(strip["text"]):
            if from_article:
                own.append((sentence, strip))
            elif keys <= set(_content(sentence)):
                named.append((sentence, strip))
    return own + named


def _options(question: str) -> tuple[str, str] | None:
    asked = question.strip()
    match = _OPTIONS.search(asked) or _CAPITALISED_OPTIONS.search(asked)
    if not match:
        return None
    a, b = (match.group(g).strip(" \"'") for g in ("a", "b"))
    return (a, b) if _content(a) and _content(b) and a.lower() != b.lower() else None


def _direction(question: str) -> str:
    asked = set(words(question.lower()))
    for section in ("earlier", "later", "larger", "smaller"):
        listed = words_for()[section]
        if asked & {w for w in listed if w.isascii()} or any(w in question for w in listed if not w.isascii()):
            return section
    return ""


def _measures(sentences: list[tuple[str, Strip]], wanted: set[str]) -> list[tuple[float, str, int]]:
    """(number, the word after it, sentence index) in the option's sentences, those naming what the question
    asks about (population, height ...) first; years are dates, not amounts."""
    ranked = sorted(range(len(sentences)), key=lambda i: not (wanted & set(_content(sentences[i][0]))))
    found = []
    for i in ranked:
        text = _YEAR.sub(" ", sentences[i][0])
        for match in _NUMBER.finditer(text):
            unit = words(text[match.end():].lower())[:1]
            found.append((float(match.group(0).replace(",", "")), unit[0] if unit else "", i))
    return found


def _values(about: list[list[tuple[str, Strip]]], direction: str, wanted: set[str]) -> list[tuple[float, int]] | None:
    """Each option's date (its first year) or amount, with the sentence it is from. Amounts compare like with
    like: the first unit both options give a number in ("4,000 copies" and "12,500 copies"), else nothing."""
    if direction in ("earlier", "later"):
        dated = [next(((float(y[0]), i) for i, (s, _) in enumerate(sentences) if (y := _YEAR.findall(s))), None)
                 for sentences in about]  # fmt: skip
        return None if None in dated else dated  # type: ignore[return-value]
    first, second = (_measures(sentences, wanted) for sentences in about)
    for value, unit, i in first:
        match = next(((v, j) for v, u, j in second if u == unit and unit), None)
        if match:
            return [(value, i), match]
    return None


def _first_with(sentences: list[tuple[str, Strip]], pattern: re.Pattern[str]) -> tuple[str, Strip] | None:
    return next((item for item in sentences if pattern.search(item[0])), None)


def compare(question: str, strips: list[Strip]) -> Decision | None:
    options = _options(question)
    if not options:
        return None
    about = [_about(option, strips) for option in options]
    if not all(about):
        return None
    direction = _direction(question)
    if direction:
        wanted = set(_content(question)) - set(_content(" ".join(options)))
        values = _values(about, direction, wanted)
        if not values or values[0][0] == values[1][0]:
            return None
        first_wins = (values[0][0] < values[1][0]) == (direction in ("earlier", "smaller"))
        support = [about[k][i] for k, (_, i) in enumerate(values)]
        return Decision(options[0 if first_wins else 1], support, "comparison")
    # No comparative: the option whose sentences state the asked property, when the other's state none of it.
    asked = {k: v for k, v in question_terms(question).items() if k not in set(_content(" ".join(options)))}
    if not asked:
        return None
    shares = [max((coverage(asked, s)[0] for s, _ in sentences), default=0.0) for sentences in about]
    if max(shares) < 1.0 or min(shares) > 0.0:
        return None
    pick = shares.index(max(shares))
    best = max(about[pick], key=lambda item: coverage(asked, item[0])[0])
    return Decision(options[pick], [best], "comparison")


def _defining(sentences: list[tuple[str, Strip]]) -> tuple[str, Strip] | None:
    """The sentence that says what the thing is ("X is an American film director")."""
    return _first_with(sentences, re.compile(r"\b(?:is|was|are|were)\s+(?:an?|the|one)\b"))


def yes_or_no(question: str, strips: list[Strip], language: str) -> Decision | None:
    asked = question.strip()
    lowered = words(asked.lower())
    english = language == "en" and bool(lowered) and lowered[0] in _AUXILIARIES
    chinese = language == "zh" and ("是否" in asked or asked.rstrip("?？ ").endswith("吗"))
    if not (english or chinese) or negated(asked):
        return None  # "Isn't X ...?" is answered by sentences: a yes to it reads both ways
    pair = _PAIR.search(asked) if english else None
    if pair:
        return _both(asked, (pair.group("a"), re.sub(r"^the\s+", "", pair.group("b"))), strips, language)
    terms = question_terms(asked)
    for strip in strips:  # strips arrive best first
        for sentence in split_sentences(strip["text"]):
            covered, _ = coverage(terms, f"{strip['title']}\n{sentence}")
            if covered == 1.0:
                return Decision(verdict_word(not negated(sentence), language), [(sentence, strip)], "yesno")
    return None


def _both(question: str, entities: tuple[str, str], strips: list[Strip], language: str) -> Decision | None:
    about = [_about(entity, strips) for entity in entities]
    if not all(about):
        return None
    defining = [_defining(sentences) for sentences in about]
    same = set(words(question.lower())) & set(words_for()["same"])
    if same:  # "the same nationality": the word that follows the copula, one per thing
        kinds = [_COPULA_NAME.search(d[0]) if d else None for d in defining]
        if not (kinds[0] and kinds[1] and defining[0] and defining[1]):
            return None
        agree = kinds[0].group(1).lower() == kinds[1].group(1).lower()
        return Decision(verdict_word(agree, language), [defining[0], defining[1]], "yesno")
    asked = {k: v for k, v in question_terms(question).items() if k not in set(_content(" ".join(entities)))}
    asked = {k: v for k, v in asked.items() if v not in ("both", "also", "either")}
    if not asked:
        return None
    stating = [next((item for item in sentences if coverage(asked, item[0])[0] == 1.0
                     and not negated(item[0])), None) for sentences in about]  # fmt: skip
    if stating[0] and stating[1]:
        return Decision(verdict_word(True, language), [stating[0], stating[1]], "yesno")
    for i in (0, 1):  # one states it; the other's defining sentence says what it is, and it is not that
        states, other = stating[i], defining[1 - i]
        if states and other and coverage(asked, other[0])[0] == 0.0:
            return Decision(verdict_word(False, language), [states, other], "yesno")
    return None


def decide(question: str, strips: list[Strip]) -> Decision | None:
    """The verdict the evidence decides for a yes/no or comparison question, with its sentences; else None."""
    if not strips:
        return None
    language = language_of(question)
    if language == "en" and (found := compare(question, strips)):
        return found
    return yes_or_no(question, strips, language)
