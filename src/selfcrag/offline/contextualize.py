"""Follow-up questions: does a question lean on the conversation, and its standalone form without a model.

"And how long does it take to arrive?" after "How much does express shipping cost?" names nothing it asks
about: retrieved as it stands, it finds any delivery time. A question depends on the thread when it opens as a
continuation ("and ...", "what about ...", "那 ...", "还有 ...") or has no subject term of its own: every content
word is a verb (after a subject pronoun, "to" or a modal: "does it *take* to *arrive*"), or the noun of a word
pointing back ("this *plan*"), or there is none ("Why?"); a name, identifier or number is always a subject.
The words that decide are general function words (`data/followup_words.txt`); a first question never depends
on anything.

Offline, the standalone question is the follow-up with the subject terms of the earlier user turns carried in:
"And how long does it take to arrive? (express shipping cost)". An earlier follow-up carries its own
predecessor's terms, so a chain of follow-ups keeps its subject.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from selfcrag.contract import Rewrite, Turn
from selfcrag.data_sections import read_sections
from selfcrag.language import has_cjk, language_of
from selfcrag.offline.router import nothing_to_look_up
from selfcrag.text.terms import key_terms, question_terms
from selfcrag.text.text import QUESTION_WORDS, STOPWORDS, term, words

CARRIED_TERMS = 6  # subject terms carried from earlier turns: a topic, not a paragraph


@dataclass(frozen=True)
class FollowupWords:
    continuation: tuple[str, ...]  # openers, longest first
    verb_follows: frozenset[str]
    refers_back: frozenset[str]


@lru_cache(maxsize=1)
def followup_words() -> FollowupWords:
    def phrases(line: str) -> list[str]:  # comma-separated: an entry may be several words ("what about")
        return [w.strip().lower() for w in line.split(",") if w.strip()]

    sections = read_sections("followup_words.txt", phrases)
    return FollowupWords(tuple(sorted(sections["continuation"], key=len, reverse=True)),
                         frozenset(sections["verb follows"]), frozenset(sections["refers back"]))  # fmt: skip


def _pieces(tokens: list[str]) -> list[str]:
    """Tokens with the overlapping Chinese pairs of one run joined back (加急 急配 配送 -> 加急配送)."""
    out: list[str] = []
    for token in tokens:
        last = out[-1] if out else ""
        if len(token) == 2 and has_cjk(token) and last and has_cjk(last[-1]) and last[-1] == token[0] and \
                last not in STOPWORDS:  # fmt: skip
            out[-1] = last + token[1]
        else:
            out.append(token)
    return out


def subject_terms(question: str) -> list[str]:
    """The content words a question names as its own subject, as written, in order (see the module doc)."""
    vocabulary = followup_words()
    own = question_terms(question)  # content words, without question verbs and the word after "how"
    named = key_terms(question)  # names, identifiers, numbers: a subject wherever they stand ("to Canada")
    expect = ""  # what the next content word is: "verb", or "referred" (the noun of a word pointing back)
    found: dict[str, str] = {}
    for word in _pieces(words(question)):
        if word in vocabulary.verb_follows or word in vocabulary.refers_back:
            expect = "verb" if word in vocabulary.verb_follows else "referred"
        elif word in STOPWORDS or word in QUESTION_WORDS:
            continue
        elif term(word) in named:
            found.setdefault(term(word), word)
            expect = ""
        elif expect:
            # A Chinese run holds the verb and its object (你们提供礼品包装服务): the first two characters are the verb.
            if expect == "verb" and has_cjk(word) and len(word) > 3:
                found.setdefault(word[2:], word[2:])
            expect = ""
        elif term(word) in own or any(term(w) in own for w in _pairs(word)):
            found.setdefault(term(word), word)
    return list(found.values())


def _pairs(piece: str) -> list[str]:
    return [piece[i : i + 2] for i in range(len(piece) - 1)] if has_cjk(piece) else []


def _keys(piece: str) -> set[str]:
    """How a question would hold the piece: a Chinese run as its pairs, a word by its matching key."""
    return set(_pairs(piece)) or {term(piece)}


def continues(question: str) -> str:
    """The continuation opener the question starts with ("and", "what about", "那"), or ""."""
    start = question.strip().lstrip("¿¡\"'“‘([（「 ").lower()
    for opener in followup_words().continuation:
        rest = start[len(opener) :]
        if start.startswith(opener) and (not rest or not (rest[0].isalnum() and opener.isascii())):
            return opener
    return ""


def depends_on_thread(question: str, history: list[Turn]) -> str:
    """Why the question cannot stand without the conversation, or "" when it can (or there is none)."""
    if not history:
        return ""
    if opener := continues(question):
        return f'it continues the conversation ("{opener} ...")'
    if not subject_terms(question):
        return "it names no subject of its own"
    return ""


def earlier_subject(history: list[Turn]) -> list[str]:
    """The subject terms of the conversation so far: the last user turn's own, plus those it leaned on when it
    was itself a follow-up. A turn that was conversation ("Thanks!", offline/router.py) names no subject: the
    one before it carries on."""
    subject: list[str] = []
    earlier: list[Turn] = []
    for turn in history:
        if turn["role"] == "user" and not nothing_to_look_up(turn["content"]):
            own = subject_terms(turn["content"])
            leaned = depends_on_thread(turn["content"], earlier)
            subject = (own + [t for t in subject if t not in own]) if leaned else own
        earlier.append(turn)
    return subject[:CARRIED_TERMS]


def carry_subject(question: str, history: list[Turn]) -> Rewrite:
    """The follow-up with the earlier turns' subject terms it lacks: "... arrive? (express shipping cost)"."""
    have = {term(w) for w in words(question)}
    carried = [t for t in earlier_subject(history) if not _keys(t) <= have]
    if not carried:
        return Rewrite(query=question, reason="no earlier subject to carry into it")
    chinese = language_of(question) == "zh"
    joined = ("，" if chinese else " ").join(carried)
    standalone = f"{question.strip()}（{joined}）" if chinese else f"{question.strip()} ({joined})"
    return Rewrite(query=standalone, reason=f"carried the earlier subject: {', '.join(carried)}")

