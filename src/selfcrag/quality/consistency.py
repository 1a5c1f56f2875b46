"""Multi-turn consistency: does the new answer contradict what the assistant said earlier in the thread?

Earlier "refunds are not supported", now "refunds are accepted within 7 days": each answer may be grounded in
its own evidence, yet the user now holds two claims that cannot both be true. Two sentences about the same
thing contradict when exactly one of them is negated, or when they give different quantities of one dimension
("30 days" / "15 days", "$14.99" / "$16.99", "2 weeks" / "10 days").

About the same thing: they share most of the shorter one's content words, and neither names another kind of the
same thing in the same place ("Express shipping costs $14.99" / "Standard shipping costs $5.99" are two prices of
two services, not one price said twice). A quantity is a number with a unit from `data/units.txt` (currency
symbols and codes, %, durations, lengths, weights, sizes; singular and plural); the word after a number is no
unit unless the table says so, so "14.99 and" is no quantity of "and"s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from importlib import resources

from selfcrag.text.terms import strip_citations, terms_of
from selfcrag.text.text import STOPWORDS, normalise, numbers, split_sentences, term, words

SAME_TOPIC = 0.5  # share of the shorter sentence's content words the two must share to be about one thing
TOLERANCE = 1e-6  # relative: 2 weeks and 14 days are one duration, whatever the float rounding

_NEGATION = re.compile(r"\b(?:not|no|never|cannot|none|nothing|neither|nor)\b|n't\b", re.I)
# Digits, Chinese numerals, or a word (kept only when it is a number word: "thirty days", not "business days").
_AMOUNT = r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|[零〇一二两三四五六七八九十百千万]+|\b[a-z]+\b)"
_ZH_NUMERAL = "[零〇一二两三四五六七八九十百千万]+"


def _range(name: str) -> str:
    """A number or a range of two ("4 to 6", "4-6", "4 到 6"), its ends in groups `<name>_low`, `<name>_high`."""
    return rf"(?P<{name}_low>{_AMOUNT})(?:\s*(?:-|–|—|to|到|至|~)\s*(?P<{name}_high>{_AMOUNT}))?"


@dataclass(frozen=True)
class Unit:
    dimension: str  # quantities compare only within one dimension
    factor: float  # to the dimension's base (days for time)


@dataclass(frozen=True)
class Quantity:
    dimension: str
    low: float  # scaled to the dimension's base
    high: float
    written: str  # as the sentence wrote it, for the finding

    def overlaps(self, other: Quantity) -> bool:
        slack = TOLERANCE * max(abs(self.high), abs(other.high), 1.0)
        return self.low <= other.high + slack and other.low <= self.high + slack


@lru_cache(maxsize=1)
def _table() -> tuple[dict[str, Unit], dict[str, Unit], re.Pattern[str]]:
    """Units written after a number and symbols written before it (lower-cased forms), and one pattern for both."""
    after: dict[str, Unit] = {}
    before: dict[str, Unit] = {}
    text = (resources.files("selfcrag") / "data" / "units.txt").read_text(encoding="utf-8")
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cells = [c.strip() for c in line.split("|")]
        if len(cells) != 4:
            raise ValueError(f"units.txt line {number}: expected 4 cells separated by |, got {len(cells)}")
        unit = Unit(cells[0], float(cells[1]))
        after |= {f.lower(): unit for f in _forms(cells[2])}
        before |= {f.lower(): unit for f in _forms(cells[3])}

    def alternatives(forms: dict[str, Unit]) -> str:
        # Longest first, so "business days" wins over "days"; a unit in letters ends where the word ends.
        return "|".join(re.escape(f) + (r"(?![a-z0-9])" if f[-1].isalnum() and f.isascii() else "")
                        for f in sorted(forms, key=len, reverse=True))  # fmt: skip

    pattern = re.compile(
        rf"(?<![a-z0-9])(?P<symbol>{alternatives(before)})\s*{_range('before')}"  # $14.99, usd 5
        rf"|(?<![\d.,]){_range('after')}\s*(?:个\s*)?(?P<unit>{alternatives(after)})"  # 30 days, 4 到 6 个工作日
        rf"|百分之(?P<percent>{_ZH_NUMERAL})",  # 百分之十: 10 %
        re.IGNORECASE,
    )
    return after, before, pattern


def _forms(cell: str) -> list[str]:
    return [f.strip() for f in cell.split(",") if f.strip()]


def _value(amount: str) -> float | None:
    found = numbers(amount)
    return max(found) if found else None


def quantities(sentence: str) -> list[Quantity]:
    """The quantities a sentence states: "$14.99" -> USD 14.99; "4 to 6 business days" -> business days 4-6;
    "2 weeks" -> 14 days. Numbers without a unit of the table are left out."""
    after, before, pattern = _table()
    found: list[Quantity] = []
    text, position = normalise(sentence), 0
    while match := pattern.search(text, position):
        position = match.end()
        if match.group("percent"):
            unit, low, high = after["%"], match.group("percent"), None
        elif symbol := match.group("symbol"):
            unit, low, high = before[symbol.lower()], match.group("before_low"), match.group("before_high")
        else:
            unit, low, high = after[match.group("unit").lower()], match.group("after_low"), match.group("after_high")
        first, last = _value(low), _value(high) if high else None
        if first is None:  # a word that is no number ("costs USD 9.99", "up to 30 kg"): look again after it
            position = next((match.start(g) for g in ("after_high", "unit") if match.group(g)), position)
            continue
        last = first if last is None else last
        found.append(Quantity(unit.dimension, min(first, last) * unit.factor, max(first, last) * unit.factor,
                              " ".join(match.group(0).split())))  # fmt: skip
    return found


def _content(sentence: str) -> list[str]:
    return [term(w) for w in words(sentence) if w not in STOPWORDS]


def _another_kind(earlier: str, now: str) -> str:
    """The two words that make two sentences about two kinds of one thing ("express" / "standard" before
    "shipping"), or "" when there are none. A swapped word counts only right before a word both share, and
    never a number or a unit: those are what the sentences may disagree on."""
    a, b = _content(earlier), _content(now)
    after, _, _ = _table()
    for op, _, i2, _, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op != "replace" or i2 >= len(a) or j2 >= len(b) or a[i2] != b[j2]:
            continue
        swapped = a[i2 - 1], b[j2 - 1]
        if not any(numbers(w) or w in after for w in swapped):
            return f"{swapped[0]} / {swapped[1]}"
    return ""


def _conflict(earlier: str, now: str) -> str:
    """Why two sentences contradict, or "" when they do not."""
    a, b = terms_of(earlier), terms_of(now)
    shorter = min(len(a), len(b))
    if not shorter or len(a & b) / shorter < SAME_TOPIC or _another_kind(earlier, now):
        return ""
    if bool(_NEGATION.search(earlier)) != bool(_NEGATION.search(now)):
        return "one says no where the other says yes"
    qa, qb = quantities(earlier), quantities(now)
    for dimension in dict.fromkeys(q.dimension for q in qa):
        old = [q for q in qa if q.dimension == dimension]
        new = [q for q in qb if q.dimension == dimension]
        if new and not any(x.overlaps(y) for x in old for y in new):
            return f'different quantities: {_listed(old)} earlier, {_listed(new)} now'
    return ""


def _listed(found: list[Quantity]) -> str:
    return ", ".join(dict.fromkeys(f'"{q.written}"' for q in found))


def contradictions(answer: str, earlier_answers: list[str]) -> list[dict[str, str]]:
    """Pairs of (earlier sentence, new sentence) that cannot both be true, with the reason."""
    found: list[dict[str, str]] = []
    new_sentences = split_sentences(strip_citations(answer))
    for earlier in earlier_answers:
        for old in split_sentences(strip_citations(earlier)):
            for new in new_sentences:
                if why := _conflict(old, new):
                    found.append({"earlier": old, "now": new, "why": why})
    return found
