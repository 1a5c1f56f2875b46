"""What a question asks for and what a text covers, without a model: the question's content terms and key terms
(names, identifiers, numbers), their coverage by a text, and the kind of answer a question expects.

Pure functions of text, shared by the offline graders, the refiner, the extractive generator, the groundedness
checker, routing and the calibration features (the model backend's rule checks too), so they live below all of
them rather than inside one grader.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

from selfcrag.data_sections import read_sections
from selfcrag.language import has_cjk, language_of
from selfcrag.text.opposites import asked_sentence
from selfcrag.text.rules import LONE_ONE, names
from selfcrag.text.text import (
    LIGHT_VERBS_ZH,
    QUESTION_WORDS,
    STOPWORDS,
    fold,
    numbers,
    split_sentences,
    term,
    words,
)

_CITATION = re.compile(r"\s*\[(?:doc|web)_\d+\](?:\s*\[(?:doc|web)_\d+\])*")


def strip_citations(text: str) -> str:
    """The text without citation markers such as [doc_1]."""
    return _CITATION.sub("", text).strip()


# --- question terms -----------------------------------------------------------------------------------------


def terms_of(text: str) -> set[str]:
    return set(_terms(text))


@lru_cache(maxsize=8192)  # every grader reads the same passages and sentences: tokenise each once (a warm question
def _terms(text: str) -> frozenset[str]:  # spent a fifth of its CPU here, benchmarks/question_cpu.py)
    return frozenset(term(w) for w in words(fold(text)) if w not in STOPWORDS)


# Light verbs of questions carry no topic ("what does E1042 mean", "how do I get ...", "E1042 是什么意思").
_QUESTION_VERBS = frozenset({"mean", "get", "got", "happen", "happens", "tell", "know", "need", "want", "use"})
_QUESTION_VERBS |= LIGHT_VERBS_ZH


def question_terms(question: str) -> dict[str, str]:
    """The question's content words: matching key -> the word as asked (for messages like 'missing: refund').
    The word after "how" (how long, how soon, how old) asks for the answer type, it is not a topic."""
    tokens = words(fold(question))
    terms: dict[str, str] = {}
    for i, w in enumerate(tokens):
        if w in STOPWORDS or w in QUESTION_WORDS or w in _QUESTION_VERBS or (i and tokens[i - 1] == "how"):
            continue
        terms.setdefault(term(w), w)
    return terms


def key_terms(question: str) -> dict[str, str]:
    """Terms the evidence must contain for any answer: identifiers (E1042), numbers, and names capitalised
    mid-question (Antarctica, CEO). An on-topic passage without them answers a different question. Chinese
    does not capitalise its first word, so in a Chinese question a capitalised word anywhere is a name
    ("Ultra 会员每个月多少钱？")."""
    key: dict[str, str] = {}
    tokens = re.findall(r"[A-Za-z0-9]+(?:[_.][A-Za-z0-9]+)*", fold(question))
    chinese = language_of(question) == "zh"
    for position, token in enumerate(tokens):
        lowered = token.lower()
        identifier = any(c.isdigit() for c in token) or "_" in token
        name = (position > 0 or chinese) and token[0].isupper()
        if (identifier or name) and len(lowered) > 1 and lowered not in STOPWORDS and lowered not in QUESTION_WORDS:
            key.setdefault(term(lowered), lowered)
    return key


def coverage(terms: dict[str, str], text: str) -> tuple[float, list[str]]:
    """Share of the question terms present in `text`, and the missing ones (as asked).

    A Chinese term is present wherever the text contains it: the text's own pairs may be cut differently ("天" in
    "30 天内"). A Chinese word cut into pairs (客服电话号码: 客服 服电 电话 话号 号码) counts by its characters, each
    covered when a pair holding it is present, and two characters weigh as much as one English word: pairs that
    straddle two words (服电) then cost nothing when both words are found, and the missing part reads as asked
    (号码), not as pairs. A noun naming a span of time (window, deadline) is present where the text states one
    ("within 45 days"): it names what the answer is, not a topic the answer must repeat."""
    if not terms:
        return 1.0, []
    present = terms_of(text)
    folded = fold(text) if any(has_cjk(key) for key in terms) else ""
    span = any(key in _span_keys() for key in terms) and bool(_SPAN_STATED.search(text))
    found = {word: key in present or (has_cjk(key) and key in folded) or (span and key in _span_keys())
             for key, word in terms.items()}
    units = covered = 0.0
    missing: list[str] = []
    for chain in _chains(list(terms.values())):
        if len(chain) == 1:
            units, covered = units + 1, covered + found[chain[0]]
            missing += [] if found[chain[0]] else chain
            continue
        chars = chain[0] + "".join(pair[1] for pair in chain[1:])
        hit = [False] * len(chars)
        for i, pair in enumerate(chain):
            if found[pair]:
                hit[i] = hit[i + 1] = True
        units, covered = units + len(chars) / 2, covered + sum(hit) / 2
        spans = "".join(" " if h else c for c, h in zip(chars, hit, strict=True)).split()  # uncovered characters
        missing += [span for span in spans if span not in STOPWORDS]  # "有" alone names nothing missing
    return covered / units, missing


def join_pairs(tokens: list[str]) -> list[str]:
    """Tokens with the overlapping Chinese pairs of one run joined back into it (银行 行卡 -> 银行卡)."""
    return [chain[0] + "".join(pair[1] for pair in chain[1:]) for chain in _chains(tokens)]


def _chains(asked: list[str]) -> list[list[str]]:
    """The terms in order, overlapping Chinese pairs from one run grouped (退货 货期 期限), every other alone."""
    chains: list[list[str]] = []
    for word in asked:
        last = chains[-1][-1] if chains else ""
        if len(word) == len(last) == 2 and has_cjk(word + last) and last[1] == word[0]:
            chains[-1].append(word)
        else:
            chains.append([word])
    return chains


# --- expected answer type ------------------------------------------------------------------------------------

AnswerType = Literal["number", "date", "person", "place", "yesno", "reason", "generic"]

_AUXILIARIES = {"is", "are", "was", "were", "do", "does", "did", "can", "could", "will", "would", "should",
                "has", "have", "had", "may", "must", "shall", "am", "isn't", "aren't", "don't", "doesn't"}
_ANSWER_NOUNS = read_sections("answer_nouns.txt")
_QUANTITY_NOUNS, _TIME_NOUNS = set(_ANSWER_NOUNS["quantity"]), set(_ANSWER_NOUNS["time"])
_SPAN_NOUNS = frozenset(_ANSWER_NOUNS["span"])
_SPAN_STATED = re.compile(r"\b\d+(?:\.\d+)?\s*(?:-|to)?\s*(?:\d+\s*)?(?:business |working |calendar )?"
                          r"(?:second|minute|hour|day|week|month|year)s?\b", re.IGNORECASE)


@lru_cache(maxsize=1)
def _span_keys() -> frozenset[str]:
    return frozenset(term(w) for w in _SPAN_NOUNS)


# Cues of the expected answer; the earliest in the question decides ("What happens when ..." is no date).
_TYPE_CUES: list[tuple[re.Pattern[str], AnswerType]] = [
    (re.compile(r"\bhow (?:many|much|long|old|far|big|large|tall|high|often|fast|deep|wide|heavy|soon)\b"), "number"),
    (re.compile(r"\b(?:what|which) (?:year|date|day|month|time|century|decade)\b|\bwhen\b"), "date"),
    (re.compile(r"\b(?:who|whom|whose)\b"), "person"),
    (re.compile(r"\bwhere\b"), "place"),
    (re.compile(r"\bwhy\b"), "reason"),
    (re.compile(r"\b(?:what|which|how)\b"), "generic"),
]
_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december|"
           "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
_DATE = re.compile(
    rf"\b(?:{_MONTHS}|monday|tuesday|wednesday|thursday|friday|saturday|sunday|today|tomorrow|yesterday|"
    r"century|centuries|decade|decades|daily|weekly|monthly|annually|yearly|midnight|noon)\b|"
    r"\b\d{1,2}(?:st|nd|rd|th)\b|\b\d{1,2}(?::\d{2})?\s*(?:a\.?m\.?|p\.?m\.?)|\b1\d{3}s?\b|\b20\d{2}s?\b|"
    r"\b\d+\s*(?:second|minute|hour|day|week|month|year)s?\b",
    re.IGNORECASE,
)
_REASON = re.compile(r"\b(?:because|since|due to|so that|in order to|as a result|caused|reason|to)\b", re.I)
_POLARITY = re.compile(r"\b(?:yes|no|not|never|cannot|can|only|must|may|will|always)\b|n't\b", re.I)
_PLACE = re.compile(r"\b(?:in|at|from|near|inside|outside|across|throughout|within|on)\s+(?:the\s+)?([A-Z][\w'-]*)")

# The same cues in Chinese. At one position the earlier cue wins: 几点 (what time) is a date, not a number,
# and 哪里出了问题 (what went wrong) asks for no place.
_TYPE_CUES_ZH: list[tuple[re.Pattern[str], AnswerType]] = [
    (re.compile("什么时候|何时|哪天|哪一天|几点|几号|几月|几时|日期|时间"), "date"),
    (re.compile("多少|几|多久|多长|多大|多高|多重|多远|多快|多贵"), "number"),
    (re.compile("哪里出了?问题|哪里不对|哪里错|出了什么问题|怎么回事"), "generic"),
    (re.compile("谁|哪位|什么名字|叫什么"), "person"),
    (re.compile("哪里|哪儿|在哪|什么地方|何处"), "place"),
    (re.compile("为什么|为何|什么原因|怎么会"), "reason"),
    (re.compile("吗[？?]?$|是否|能不能|可不可以|有没有|是不是|会不会"), "yesno"),
    (re.compile("什么|哪|怎么|如何"), "generic"),
]
_QUANTITY_NOUNS_ZH = re.compile("价格|费用|金额|运费|数量|期限|上限|限额")
_DATE_ZH = re.compile(
    "[0-9零一二两三四五六七八九十]+ *(?:年|月|日|号|点|小时|分钟|天|周|个月|个工作日)|周[一二三四五六日末]|"
    "星期[一二三四五六日天]|每(?:天|日|周|月|年)|上午|下午|晚上|凌晨|中午|今天|明天|工作日"
)
_REASON_ZH = re.compile("因为|由于|所以|因此|原因|为了|以便|导致")
_POLARITY_ZH = re.compile("不|没|无|非|能|可以|必须|会|只|是|否|须|允许")
# Where something is, in a Chinese answer: after 在/到/通过 ..., a menu path (“账户 > 订单”) or a URL path.
_PLACE_ZH = re.compile(r"(?:在|于|到|位于|前往|进入|通过|打开) *[“「《\"'`]?[^\s，。,]|>|/[A-Za-z]")


def answer_type(question: str) -> AnswerType:
    """What kind of answer the question expects, from the wording of its (last) question sentence."""
    asked = asked_sentence(question)
    if language_of(asked) == "zh":
        return _answer_type_zh(asked.strip())
    q = asked.lower()
    cues = [(m.start(), i, kind) for i, (cue, kind) in enumerate(_TYPE_CUES) if (m := cue.search(q))]
    if cues:
        start, _, kind = min(cues)
        following = set(words(q[start:])[1:6])
        if kind == "generic" and _QUANTITY_NOUNS & following:
            return "number"  # "what is the minimum password length", "which fee ..."
        if kind == "generic" and _TIME_NOUNS & following:
            return "date"  # "what are the opening hours"
        return kind
    tokens = words(q)
    return "yesno" if tokens and tokens[0] in _AUXILIARIES else "generic"


def _answer_type_zh(question: str) -> AnswerType:
    cues = [(m.start(), i, kind) for i, (cue, kind) in enumerate(_TYPE_CUES_ZH) if (m := cue.search(question))]
    if not cues:
        return "generic"
    _, _, kind = min(cues)
    if kind == "generic" and _QUANTITY_NOUNS_ZH.search(question):
        return "number"  # "退货期限是什么"
    return kind


def has_answer_type(kind: AnswerType, text: str, question: str = "") -> bool:
    """Whether `text` contains the kind of answer expected (names must not just repeat the question's)."""
    chinese = has_cjk(text)
    if kind == "number":  # a lone 一 is "a"/"once" (一次, 一笔) more often than the count asked for
        return bool(numbers(LONE_ONE.sub(" ", text) if chinese else text)) or "$" in text or "%" in text
    if kind == "date":
        return bool(_DATE.search(text)) or (chinese and bool(_DATE_ZH.search(text)))
    if kind == "place" and chinese and _PLACE_ZH.search(text):
        return True
    if kind in ("person", "place"):
        asked = set(words(fold(question)))
        if kind == "place":  # "in Delhi", "at Account > Orders"; or the answer is a bare name
            found = _PLACE.findall(text) + (names(text) if len(text.split()) <= 4 else [])
        else:
            found = [name for sentence in split_sentences(text) for name in names(sentence)]
        return any(set(words(fold(name))) - asked - STOPWORDS for name in found)
    if kind == "reason":
        return bool(_REASON.search(text)) or (chinese and bool(_REASON_ZH.search(text)))
    if kind == "yesno":
        return bool(_POLARITY.search(text)) or (chinese and bool(_POLARITY_ZH.search(text)))
    return True
