"""Does the answer keep to the question's constraints: the same entity, number and qualifier as asked?

A sentence about the annual plan does not answer a question about the monthly plan, however similar the two
sentences look. SQuAD 2.0 writes most of its unanswerable questions this way: copy an evidence sentence and swap
one thing (a name, a year, a modifier). The check is kind-based, not a word list: the question's specific words
(names, numbers, the modifiers of its nouns) are its constraints. Each is aligned with the answer through the words
around it, its *frame* ("the _ plan", "helper _ cell", "the king of _"). A constraint is violated when the answer
holds the same frame filled with a *competing value of the same kind*: another name where the question names one,
another number, another modifier on the same head noun, while the asked value is not there. A constraint merely
absent (no competitor in its frame) is no violation: the passage may say it elsewhere, or a pronoun stands for it.

Which word in the slot competes depends on how the frame matched (`MIN_FRAME`, `_competes`):
- a number or an identifier needs one frame word ("nineteen nations" / "nine nations", "error E1042" / "error
  E2001"): they have no synonyms;
- a name or a modifier needs two: both neighbours ("helper B cell" / "helper T cell", "Office of eastern Medicine"
  / "Office of Western Medicine"), or two on one side ("the monthly plan costs" / "the annual plan costs"). A
  modifier must sit in a noun phrase: right before the same head noun after a determiner, preposition or number
  ("the monthly plan"), inside a chain of modifiers ("computational _ theory"), or after the head behind one
  preposition ("the plan for students"); a word after a noun or an auxiliary is as likely a verb, whose synonyms
  abound ("Kublai attacked/besieged Xiangyang").
With one side matched, the asked value anywhere in the answer meets the constraint; with both, only in that frame
("helper T cell ... activates the B cell" still answers about the T cell).

Morphological variants and misspellings (Mongol/Mongolian, plan/plans, indigienous) are the same value, and so are two
names that stand side by side in the answer's passage (an alias: "Beyoncé Knowles"). Chinese is read one character
at a time (a numeral run as one number) with its Latin names and numbers as constraints: "Ultra 会员" answered by
"Pro 会员" is another name in the frame "_会员". A changed Chinese character is not a competitor: without a
segmenter it is as often a synonym (期限/时限) as another qualifier.
Word classes (determiners, prepositions, Chinese particles) are general grammar in data/function_words.txt.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from importlib import resources
from typing import Literal

from selfcrag.language import CJK
from selfcrag.text.text import QUESTION_WORDS, STOPWORDS, numbers, term

Kind = Literal["name", "number", "modifier"]
_Sort = Literal["name", "number", "word"]


@lru_cache(maxsize=1)
def word_classes() -> dict[str, frozenset[str]]:
    """The sections of data/function_words.txt: class name -> its words."""
    text = (resources.files("selfcrag") / "data" / "function_words.txt").read_text(encoding="utf-8")
    classes: dict[str, set[str]] = {}
    current: set[str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = classes.setdefault(line[1:-1], set())
        elif current is None:
            raise ValueError(f"function_words.txt line {number}: words before any [section]")
        else:
            current.update(line.split())
    return {name: frozenset(found) for name, found in classes.items()}


def _classes() -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    found = word_classes()
    return found["determiners"], found["prepositions"], found["chinese_particles"]


# Auxiliaries and light verbs frame a question ("did", "does ... mean"); they are not what it asks about.
_FRAMING = frozenset({"do", "does", "did", "is", "are", "was", "were", "be", "been", "has", "have", "had", "can",
                      "could", "will", "would", "should", "mean", "called", "name", "named", "type", "kind"})
# Question words that open a noun phrase ("which army", "what plan"): the word after them may be a modifier.
_NOUN_QUESTION_WORDS = frozenset({"what", "which", "whose"})
_NUMERAL_ZH = "零〇一二两三四五六七八九十百千万亿"
_CJK_CHAR = re.compile(f"[{CJK}]")
_TOKEN = re.compile(rf"[A-Za-z0-9]+(?:[_.,'-][A-Za-z0-9]+)*|[{_NUMERAL_ZH}]{{2,}}|[{CJK}]")
# Frame words a name or modifier needs around it before another value in its slot counts as a competitor: with one
# ("the _ plan") synonyms compete as often as swapped values do ("the main goal" / "a major goal"), with two
# ("the _ plan costs") a swap is about three times as likely (the other questions of the 8 SQuAD tuning articles
# against their gold sentences). A number or an identifier (E1042) needs one: they have no synonyms.
MIN_FRAME = 2
# ... with the same first letter: "indigienous"/"indigenous" 0.95, "ricing"/"rising" 0.83 ("eastern"/"western" are
# two words)
TYPO_RATIO = 0.8
_SENTENCE_END = set(".!?:;\"'([\n。！？；：“”")


@dataclass(frozen=True)
class Token:
    text: str  # as written
    key: str  # matching key: a stem, a number's value, a Chinese character
    sort: _Sort
    function: bool  # a function word: part of a frame's gap, never a constraint or a competitor
    start: bool  # first word of a sentence (its capital says nothing)
    joined: bool  # only spaces since the previous token: no comma or bracket cuts the phrase


@dataclass(frozen=True)
class Violation:
    kind: Kind
    asked: str  # the constraint in its frame, as the question says it ("monthly plan")
    stated: str  # what the answer has in that frame instead ("annual plan")
    frame: int = 1  # how many frame words matched around it: 2 or more is a sure alignment

    def describe(self) -> str:
        return f"the question asks about {self.asked!r}; the answer is about {self.stated!r}"


def _folded(text: str) -> str:
    """Accents dropped ("Temür" and "Temur" meet) and full-width forms as ASCII."""
    if text.isascii():
        return text
    plain = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return unicodedata.normalize("NFKC", plain)


def tokens(text: str) -> list[Token]:
    """The text's words (English), characters (Chinese) and numbers, each with what the check needs to know."""
    return list(_tokens(text))


@lru_cache(maxsize=4096)  # one question is checked against many sentences, one sentence against a few questions
def _tokens(text: str) -> tuple[Token, ...]:
    determiners, prepositions, particles = _classes()
    text = _folded(text)
    chinese = bool(_CJK_CHAR.search(text))  # Chinese has no capitals of its own: a capitalised word is a name
    out: list[Token] = []
    end = 0
    for match in _TOKEN.finditer(text):
        between = text[end : match.start()]
        end = match.end()
        raw = match.group(0).removesuffix("'s")
        lower = raw.lower()
        value = numbers(raw) if (raw[0].isdigit() or raw[0] in _NUMERAL_ZH) and raw != "一" else set()
        if not value and lower.isalpha() and lower.isascii():
            value = numbers(lower) if lower not in {"one", "a"} else set()
        start = not out or bool(_SENTENCE_END & set(between))
        if value:
            sort: _Sort = "number"
            key = str(min(value))
        elif raw[0].isupper() and (not start or chinese or raw.isupper() and len(raw) > 1):
            sort, key = "name", term(lower)
        else:
            sort, key = "word", term(lower) if raw.isascii() else raw
        # A capital letter alone names something ("B cell", "vitamin D"), though "t" and "d" are stop words.
        letter = len(raw) == 1 and raw.isupper() and raw not in "AI"
        function = sort != "number" and not letter and (
            lower in STOPWORDS or lower.endswith("n't") or lower in QUESTION_WORDS or lower in _FRAMING
            or lower in determiners or lower in prepositions or raw in particles)
        out.append(Token(raw, key, sort, function, start, not between.strip()))
    # A capitalised first word followed by another capitalised word is the start of a name ("Möngke Khan ...").
    return tuple(Token(t.text, t.key, "name", t.function, t.start, t.joined)
                 if t.start and t.sort == "word" and t.text[0].isupper() and not t.function and i + 1 < len(out)
                 and out[i + 1].sort == "name" and out[i + 1].joined else t for i, t in enumerate(out))


def same(a: Token, b: Token) -> bool:
    """The same value: equal keys, or one a variant of the other (Mongol/Mongolian, forest/rainforest,
    complete/NP-complete)."""
    if a.key == b.key:
        return True
    if a.sort == "number" or b.sort == "number" or not a.key.isascii() or not b.key.isascii():
        return False
    short, long_ = sorted((a.key, b.key), key=len)
    if len(short) >= 4 and (long_.startswith(short) or long_.endswith(short)):
        return True
    # A misspelling is the same word ("indigienous"): long words at most a letter or two apart.
    return (len(short) >= 6 and short[0] == long_[0]
            and SequenceMatcher(None, short, long_).ratio() >= TYPO_RATIO)


@dataclass(frozen=True)
class _Side:
    """A neighbour of a content word: the nearest content word on one side, and the function words between."""

    word: Token | None
    gap: tuple[str, ...]
    further: Token | None  # the next content word beyond it
    determiner: bool  # a determiner stands between ("defend the Song": "defend" modifies nothing)


def _side(seq: Sequence[Token], i: int, step: int) -> _Side:
    """The frame of word i on one side (step -1: left, 1: right), within its phrase (a comma or bracket ends it)."""
    determiners = _classes()[0]
    gap: list[str] = []
    found: list[Token] = []
    determiner = False
    j = i + step
    while 0 <= j < len(seq) and len(found) < 2 and (seq[j] if step > 0 else seq[j + 1]).joined:
        token = seq[j]
        if not token.function:
            found.append(token)
        elif found:
            break  # only a content word right beyond the first counts as the frame's further word
        elif token.text.lower() in determiners:
            determiner = True
        else:
            gap.append(token.text.lower())
        j += step
    return _Side(found[0] if found else None, tuple(gap), found[1] if len(found) > 1 else None, determiner)


def _anchor(asked: Token | None, stated: Token | None) -> bool:
    """Frame words must match as written (singular/plural aside): "invade" and "invaded" share a stem but a
    question's verb and an answer's differ in form where a noun stays the same, so a stem is not enough."""
    if asked is None or stated is None:
        return False
    a, s = asked.text.lower(), stated.text.lower()
    return a == s or a.rstrip("s") == s.rstrip("s") or (asked.sort == "number" and asked.key == stated.key)


@dataclass(frozen=True)
class _Frame:
    """How question word i and answer word p sit in the same frame."""

    left: bool  # the left neighbour matches, with the same function words between
    right: bool
    strength: int  # frame words matched: the neighbours, and the words beyond them

    @property
    def sure(self) -> bool:
        """Matched on both sides: the slot between is the same slot whatever the words are."""
        return self.left and self.right


def _frame(asked: tuple[_Side, _Side], stated: tuple[_Side, _Side]) -> _Frame:
    """How two words' (left, right) sides match."""
    (ql, qr), (al, ar) = asked, stated
    left = _anchor(ql.word, al.word) and ql.gap == al.gap and ql.determiner == al.determiner
    right = _anchor(qr.word, ar.word) and qr.gap == ar.gap and qr.determiner == ar.determiner
    further = (left and _anchor(ql.further, al.further)) + (right and _anchor(qr.further, ar.further))
    return _Frame(left, right, left + right + further)


@lru_cache(maxsize=256)  # the extractive generator checks many sentences of the same passage
def _aliases(context: str) -> set[frozenset[str]]:
    """Pairs of names standing side by side in the context ("Beyoncé Knowles"): one entity, two names."""
    found = tokens(context)
    return {frozenset((x.key, y.key)) for x, y in zip(found, found[1:], strict=False)
            if x.sort == y.sort == "name" and y.joined}


def violations(question: str, answer: str, context: str = "") -> list[Violation]:
    """The question's constraints the answer replaces with another value of the same kind in the same frame.
    `context` is the answer's passage and title, read for aliases only: the answer sentence is what must match."""
    return list(_violations(question, answer, context))


@lru_cache(maxsize=2048)  # a run checks the same sentence again: each generation round, then the answer grader
def _violations(question: str, answer: str, context: str) -> tuple[Violation, ...]:
    q, a = _tokens(question), _tokens(answer)
    q_sides, a_sides = _sides(question), _sides(answer)
    asked_words = [t for t in q if not t.function]
    aliases = _aliases(context) if context else set()
    reused: dict[int, bool] = {}  # answer word p is a word the question uses (whichever word is asked)
    found: list[Violation] = []
    for i, asked in enumerate(q):
        if asked.function:
            continue
        anywhere = any(same(asked, t) for t in a)
        best: tuple[int, int] | None = None  # (frame strength, answer position) of the best competitor
        filled = 0  # the strongest frame in which the answer holds the asked value itself
        for p, stated in enumerate(a):
            if stated.function:
                continue
            frame = _frame(q_sides[i], a_sides[p])
            if not frame.strength:
                continue
            if same(asked, stated):
                filled = max(filled, frame.strength)
                continue
            if p not in reused:
                reused[p] = any(same(stated, k) for k in asked_words)
            if reused[p] or frozenset((asked.key, stated.key)) in aliases:
                continue  # a word the question uses elsewhere (reordered), or another name of the same thing
            if (anywhere and not frame.sure) or (frame.strength < MIN_FRAME and not _exact(asked)):
                continue
            if not _competes(q, i, a, p, frame):
                continue
            if best is None or frame.strength > best[0]:
                best = (frame.strength, p)
        # "helper T cell ... activates the B cell": the asked value elsewhere, in a looser frame, is not an answer.
        if best is not None and best[0] > filled:
            found.append(Violation(_kind(asked), _phrase(q, i), _phrase(a, best[1]), best[0]))
    return tuple(found)


@lru_cache(maxsize=4096)  # a question's frames are read against every sentence, a sentence's on every check
def _sides(text: str) -> tuple[tuple[_Side, _Side], ...]:
    """Every token's (left, right) frame sides."""
    seq = _tokens(text)
    return tuple((_side(seq, i, -1), _side(seq, i, 1)) for i in range(len(seq)))


def _competes(q: Sequence[Token], i: int, a: Sequence[Token], p: int, frame: _Frame) -> bool:
    """Whether answer word p is a competing value for question word i in the frame they share (see the module
    docstring): a number for a number, an identifier for an identifier, a name for a name; otherwise a word of a
    noun phrase in the same slot, as a modifier before the same head noun, or as a qualifier after it behind the same
    preposition."""
    asked, stated = q[i], a[p]
    prepositions = _classes()[1]
    if asked.sort == "number" or stated.sort == "number":
        return asked.sort == stated.sort
    if _exact(asked) or _exact(stated):  # an identifier competes with another identifier: E1042 / E2001
        return _exact(asked) and _exact(stated)
    if asked.sort == stated.sort == "name":
        return True
    # Chinese is read by the character: without a segmenter a changed character is as often a synonym (期限/时限)
    # as another qualifier, so in Chinese only names and numbers compete.
    if stated.start or not asked.key.isascii() or not stated.key.isascii():
        return False
    after, before = _side(q, i, 1), _side(q, i, -1)
    if frame.right and not after.gap and not after.determiner:  # the monthly plan / the annual plan
        if asked.sort != stated.sort and not frame.sure:
            return False
        # Inside a chain of modifiers ("computational _ theory"); between two names the slot is a verb's
        # ("Kublai _ Xiangyang").
        chained = (frame.left and not before.gap and before.word is not None and after.word is not None
                   and "name" not in (before.word.sort, after.word.sort))
        return chained or (_opens_noun_phrase(q, i) and _opens_noun_phrase(a, p))
    # the plan for students / for families; "given by the Navy" / "by the protesters" with a longer frame. "to" is
    # as often a verb's infinitive as a preposition.
    qualifier = frame.left and len(before.gap) == 1 and before.gap[0] in prepositions and before.gap[0] != "to"
    return qualifier and (asked.sort == stated.sort or frame.strength >= 2)


def _opens_noun_phrase(seq: Sequence[Token], i: int) -> bool:
    """Word i follows a determiner, a preposition, a number or a noun-asking question word ("which"): it opens a
    noun phrase, so it modifies the noun after it. After a noun or an adverb ("pharmacists often participate")
    it is as likely a verb; after an auxiliary or a conjunction ("did ... build", "but encourage") more so."""
    if i == 0 or not seq[i].joined:
        return False
    word = seq[i - 1].text.lower()
    determiners, prepositions, _ = _classes()
    return (word in determiners or (word in prepositions and word != "to") or word in _NOUN_QUESTION_WORDS
            or seq[i - 1].sort == "number")


def _exact(token: Token) -> bool:
    """A number or an identifier (E1042, v2): a value without synonyms, so one frame word aligns it."""
    return token.sort == "number" or any(c.isdigit() for c in token.text)


def _kind(token: Token) -> Kind:
    return "modifier" if token.sort == "word" else token.sort


def _phrase(seq: Sequence[Token], i: int) -> str:
    """The word with the frame word after it (or before it, with the gap), as written: how a violation reads."""
    nxt, prev = _side(seq, i, 1), _side(seq, i, -1)
    chinese = not seq[i].text.isascii()
    if nxt.word is not None and not nxt.gap:
        if not nxt.word.text.isascii():  # a Chinese head reads as its two characters: "Ultra 会员"
            head = "".join(t.text for t in seq[i + 1 : i + 3] if not t.text.isascii())
            return seq[i].text + " " * (not chinese) + head
        return seq[i].text + ("" if chinese else " ") + nxt.word.text
    if prev.word is not None:
        return " ".join([prev.word.text, *prev.gap[::-1], seq[i].text]) if not chinese else prev.word.text + seq[i].text
    return seq[i].text
