"""Does the answer speak of the opposite of what the question asks?

A question can look answered by a sentence that says the reverse: "what is the least ..." over a sentence on
"the most ...", "unconnected graphs" over "connected graphs", "nineteen nations" over "nine nations", "what is
not ..." over an affirmative sentence. Such a sentence shares nearly every word with the question and sits
close to it in embedding space, so it passes every similarity check while answering another question (this is
how SQuAD 2.0 writes many of its unanswerable questions). These exact checks run beside the similarity, in
English and Chinese. Each finding names what the question asks and what the answer says instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from selfcrag.text.text import numbers, split_sentences, term, words

# Pairs of opposites from general English and Chinese usage; a few were added after reading misses on the SQuAD
# tuning articles, none from the articles reserved for acceptance. Left out: words that answers often mention side
# by side whatever the question (same/different), words with another common sense (light, mean, even, present,
# past, close, right), and negative prefixes (known/unknown), which `_prefix_negations` reads with more care.
_PAIRS_EN = """
most least|more less|more fewer|many few|first last|before after|earlier later|early late|earliest latest|
prior subsequent|increase decrease|increase reduce|increase fall|increase drop|decrease rise|
decrease grow|rise fall|rose fell|raise lower|gain loss|gain lose|grow shrink|grew shrank|growth decline|
expand contract|improve worsen|high low|higher lower|highest lowest|large small|larger smaller|largest smallest|
big small|bigger smaller|biggest smallest|greater lesser|greatest least|long short|longer shorter|longest shortest|
major minor|maximum minimum|maximize minimize|old young|older younger|oldest youngest|old new|older newer|
oldest newest|ancient modern|begin end|began ended|start end|start finish|beginning end|opened closed|
win lose|won lost|victory defeat|winner loser|accept reject|allow forbid|allow ban|allow prevent|allow stop|
permit forbid|approve reject|support oppose|strong weak|stronger weaker|strongest weakest|rich poor|richer poorer|
richest poorest|wealthy poor|well poorly|success failure|succeed fail|positive negative|internal external|
inside outside|inner outer|private public|male female|men women|man woman|best worst|better worse|good bad|
include exclude|import export|imports exports|buy sell|bought sold|birth death|born died|true false|common rare|
commonest rarest|frequent rare|often rarely|usually rarely|fast slow|faster slower|fastest slowest|quick slow|
rapid slow|rapidly slowly|quickly slowly|hot cold|warm cool|wet dry|deep shallow|wide narrow|thick thin|add remove|
simple complex|easy difficult|easy hard|easier harder|easiest hardest|majority minority|natural artificial|
rural urban|domestic foreign|temporary permanent|always never|cheap expensive|passive active|input output|
arrive depart|peace war|ally enemy|allies enemies|friend enemy|attack defend|offensive defensive|superior inferior|
predecessor successor|ancestor descendant|lengthen shorten|above below|upper lower|top bottom|entrance exit|
love hate|reward punish|north south|east west|northern southern|eastern western|northeast southwest|
northwest southeast|forward backward|upward downward|import export|build destroy|built destroyed|create destroy|
created destroyed|protect harm|help hurt|increase lessen|strengthen weaken|encourage discourage|include omit|
legalize ban|rise decline|guilty innocent|dead alive|hero villain|victim perpetrator|support reject|
common rarest|most rarest|decrease higher|increase lower|lowest greatest|least greatest|fewest most|half third|
half quarter|third quarter|halves thirds|weakly strongly|weak strongly|negatively positively|help harm|helps harms|
connect separate|connects separates|join separate|safe dangerous|flexible fixed|flexible rigid|attach detach|
borrow lend|borrowed lent|lender borrower|creditor debtor|capture release|captured released|collect distribute|
combine separate|conceal reveal|hide reveal|confirm deny|confirmed denied|construct demolish|continue stop|
continued stopped|descend ascend|hired fired|hire dismiss|hired dismissed|enter exit|entered exited|
fill empty|float sink|forget remember|forgot remembered|freeze melt|froze melted|gather scatter|inhale exhale|
obey defy|obeyed defied|praise criticize|praised criticized|promote demote|promoted demoted|push pull|receive send|
received sent|subtract add|tighten loosen|unite divide|united divided|withdraw deposit|abundant scarce|
alive extinct|asleep awake|beneficial harmful|benefit harm|bright dark|brighter darker|broad narrow|clean dirty|
concave convex|conservative liberal|dense sparse|denser sparser|empty full|explicit implicit|fertile barren|
final initial|former latter|friendly hostile|happy sad|healthy sick|hidden visible|horizontal vertical|
increasing decreasing|indoor outdoor|interior exterior|junior senior|lenient strict|liquid solid|loose tight|
loud quiet|maximal minimal|mobile stationary|national international|native foreign|natural synthetic|
nearest farthest|nearest furthest|optimistic pessimistic|optional mandatory|optional compulsory|
voluntary compulsory|voluntary mandatory|ordinary extraordinary|partial total|peaceful violent|permanent temporary|
plural singular|powerful powerless|profit loss|rough smooth|scarce plentiful|shallow deep|sharp blunt|
static dynamic|tame wild|tiny huge|tiny enormous|transparent opaque|useful useless|valuable worthless|
warmer cooler|wider narrower|widest narrowest|wise foolish|cause prevent|caused prevented|promote inhibit|
promotes inhibits|activate inhibit|activates inhibits|activated inhibited|stimulate suppress|stimulates suppresses|
enable prevent|enables prevents|attract repel|attracts repels|absorb emit|absorbs emits|acidic alkaline|
heating cooling|warming cooling|expansion contraction|inflation deflation|surplus deficit|employer employee|
employers employees|predator prey|predators prey|plaintiff defendant|prosecution defense|upstream downstream|
inflow outflow|income expense|asset liability|strength weakness|strengths weaknesses|safer riskier|
mild severe
"""
_PAIRS_ZH = """
最多 最少|最高 最低|最大 最小|最早 最晚|最长 最短|之前 之后|以前 以后|增加 减少|上涨 下跌|提高 降低|
第一 最后|允许 禁止|成功 失败|支持 反对|接受 拒绝|开始 结束|免费 收费|包括 不包括|可以 不可以|能 不能
"""


def _opposites(pairs: str, key: Callable[[str], str]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for pair in pairs.replace("\n", "").split("|"):
        a, b = (key(w) for w in pair.split())
        found.setdefault(a, set()).add(b)
        found.setdefault(b, set()).add(a)
    return found


OPPOSITES_EN = _opposites(_PAIRS_EN, term)  # inflections meet; comparatives and past tenses are pairs of their own
OPPOSITES_ZH = _opposites(_PAIRS_ZH, lambda w: w)
# Negative prefixes: "unconnected" asks the opposite of "connected", "informal" of "formal". The stem must be a
# word of five letters or more, so "index" or "impose" are not read as negations.
_PREFIXES = ("non", "dis", "un", "in", "im", "il", "ir")
_MIN_STEM = 5
_NEGATION = re.compile(r"\b(?:not|never|no longer|neither|nor|without|cannot|unable|no)\b|n't\b", re.I)
# Verbs that ask what did not happen: "where did Kublai refuse to move the capital" is not answered by where he
# moved it. The answer must negate too, or use the same verb.
_NEGATIVE_VERBS = ("refus", "fail", "avoid", "reject", "deny", "denied", "declin")
_DETERMINERS = frozenset({"a", "an", "the", "my", "your", "our", "his", "her", "its", "their", "this", "that", "these",
                          "those", "any", "each", "every", "some"})
_WHETHER_OR_NOT = re.compile(r"\bor not\b", re.I)  # "whether or not" asks both ways
_NON = re.compile(r"\bnon-?\s?([a-z]{3,})", re.I)  # "non-English", "non-self", "nonprofit"
# Counts below three are as often words of the sentence as quantities ("one of", "the two sides").
_MIN_COUNT = 3

Kind = Literal["negation", "opposite", "number"]


@dataclass(frozen=True)
class Conflict:
    kind: Kind
    asked: str  # as the question says it ("least", "nineteen", "not")
    stated: str  # as the answer says it instead ("most", "nine"); empty for a negation


def conflicts(question: str, answer: str) -> list[Conflict]:
    """What the answer says instead of what the question asks: a negated question answered affirmatively,
    an opposite (most/least, connected/unconnected), or another number."""
    return (_negation(question, answer) + _opposite_words(question, answer) + _prefix_negations(question, answer)
            + _other_numbers(question, answer))


def _negation(question: str, answer: str) -> list[Conflict]:
    """A question asking what is not so ("what was he not known for", "where did he refuse to go") answered by
    what is: the answer neither negates nor uses a verb of refusal."""
    if _NEGATION.search(answer):
        return []
    asking = _outside_titles(_WHETHER_OR_NOT.sub(" ", asked_sentence(question)))
    if negated := _NEGATION.search(asking):
        return [Conflict("negation", negated.group(0).strip(), "")]
    tokens = words(asking)
    # ... used as a verb: "a failed payment" or "the rejected plan" names a thing, it asks nothing negated.
    refused = [w for i, w in enumerate(tokens)
               if w.startswith(_NEGATIVE_VERBS) and not (i and tokens[i - 1] in _DETERMINERS)]
    if refused and not any(w.startswith(_NEGATIVE_VERBS) for w in words(answer)):
        return [Conflict("negation", refused[0], "")]
    return []


_QUOTED = re.compile(r'"[^"]*"|“[^”]*”')
_CAPITALISED = re.compile(r"(?<=[\w,;:)] )[A-Z][a-z']*")


def _outside_titles(sentence: str) -> str:
    """The sentence without its quoted titles and capitalised words past its start: "Never Let Me Go", "the No
    Card" or "No Country for Old Men" name a thing, they ask nothing negated."""
    return _CAPITALISED.sub(" ", _QUOTED.sub(" ", sentence))


_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")


def _common_words(text: str) -> dict[str, str]:
    """Matching key -> word, for the words that are not part of a name: "New York" says nothing new or old, so a
    capitalised word counts only where a sentence starts."""
    found: dict[str, str] = {}
    for match in _WORD.finditer(text):
        token, before = match.group(0), text[: match.start()].rstrip()
        if token[0].islower() or not before or before[-1] in ".!?:;\"'(":
            for w in words(token):
                found.setdefault(term(w), w)
    return found


def asked_sentence(question: str) -> str:
    """The sentence that asks: "It is not at my door. What should I do?" asks nothing negated."""
    asked = [s for s in split_sentences(question) if s.rstrip().endswith(("?", "？"))]
    return asked[-1] if asked else question


def _opposite_words(question: str, answer: str) -> list[Conflict]:
    asked, said = _common_words(question), _common_words(answer)
    found = [
        Conflict("opposite", word, said[other])
        for key, word in asked.items()
        if key in OPPOSITES_EN and not _mentions(said, key)
        for other in sorted(OPPOSITES_EN[key])
        if other in said and other not in asked
    ]
    for word, others in OPPOSITES_ZH.items():
        if word in question and word not in answer:
            found += [Conflict("opposite", word, other) for other in sorted(others)
                      if other in answer and other not in question and word not in other]
    return found[:1]


def _mentions(said: dict[str, str], key: str) -> bool:
    """The answer uses the asked word in some form ("east" in "eastern")."""
    return any(k.startswith(key) for k in said)


def _prefix_negations(question: str, answer: str) -> list[Conflict]:
    """"unconnected" asked, "connected" answered (or the reverse). An answer that negates in words ("not known")
    may mean what the prefix does ("unknown"), so it never counts."""
    if _NEGATION.search(answer):
        return []
    for match in _NON.finditer(question):  # "non-English-speaking countries" answered by "English-speaking ..."
        base = match.group(1).lower()
        if re.search(rf"\b{base}\b", answer, re.I) and not re.search(rf"\bnon-?\s?{base}\b", answer, re.I):
            return [Conflict("opposite", match.group(0), base)]
    asked, said = set(words(question)), set(words(answer))
    for word in sorted(asked - said):
        for prefix in _PREFIXES:
            base = word[len(prefix):]
            if word.startswith(prefix) and len(base) >= _MIN_STEM and base in said:
                return [Conflict("opposite", word, base)]
            if len(word) >= _MIN_STEM and prefix + word in said and prefix + word not in asked:
                return [Conflict("opposite", word, prefix + word)]
    return []


_ORDINAL = re.compile(r"(?<![\w.])(\d+)(?:st|nd|rd|th)\b", re.I)


def _kinds(text: str) -> dict[float, str]:
    """Each number of the text and what it counts: a rank ("32nd"), a year (1000-2100, whole), or an amount.
    Numbers of different kinds say nothing about each other: "the 32nd Attorney General" is not contradicted
    by "in 2016", nor "number six on the chart" by "(1992)"."""
    ranks = {float(m.group(1)) for m in _ORDINAL.finditer(text)}
    return {n: "rank" if n in ranks else "year" if n.is_integer() and 1000 <= n <= 2100 else "amount"
            for n in numbers(text)}


def _other_numbers(question: str, answer: str) -> list[Conflict]:
    """The question states a count, rank or year the answer does not, and the answer states a different one of
    the same kind."""
    asked, said = _kinds(question), _kinds(answer)
    missing = sorted(n for n in asked.keys() - said.keys() if n >= _MIN_COUNT)
    instead = sorted(said.keys() - asked.keys())
    for wanted in missing:
        if other := next((n for n in instead if said[n] == asked[wanted]), None):
            return [Conflict("number", _shown(wanted), _shown(other))]
    return []


def _shown(value: float) -> str:
    return str(int(value)) if value.is_integer() else str(value)
