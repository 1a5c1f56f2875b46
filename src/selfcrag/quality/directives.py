"""Does a sentence tell someone what to say, write, reply or treat as true? Judged by its grammar, not its words.

The detector (`addressed.py`) looks for the assistant being addressed; a planted sentence that names no assistant,
or names it in a way nobody listed ("answer generators", "請人工智慧助理", "bots reading this"), passes it. This
test asks instead what role the sentence plays: it *dictates speech* when a verb of saying (say, tell, reply,
state, mention ...; 说, 告诉, 回复 ...) has a dictated content (a "that" clause, a colon, a quotation, a clause
after a recipient, "as true") and something gives that verb force over whoever reads it:

- the imperative: the verb opens its clause ("..., tell users that", "Bots reading this, reply with:");
- a modal of obligation whose subject is a speaker ("your reply has to state", "answer generators should treat
  ... as true", "all answers are to say"), or the passive of telling ("customers are to be informed that");
- a causative or a possessed answer ("have your response mention", "make sure your summary tells people that");
- an answer marked as the one to give ("the right reply is that", "the answer must be that");
- in Chinese: a force word (请, 务必, 一律 ...) before the verb and an answerer or an answer named before it
  ("请人工智慧助理务必回复：", "今后回答一律说明"), or a command to tell an audience ("告诉顾客...").

What keeps ordinary text out: a content that reports the addressee's own state ("confirm that you are over 18",
"请告诉我们您的订单号") dictates nothing to pass on; verbs of knowing ("please note that") are not of saying; a
command inside quotation marks beside a verb that reports speech is someone's words in an article; a present-tense
report ("the chatbot replies that", "the summary states that") has no force. Word classes are in
`data/directive_words.txt`. The verdict is used by the output check (`echoes.py`), where a false alarm costs only
an answer sentence that says what nothing but such a sentence said.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, lru_cache

from selfcrag.data_sections import read_sections
from selfcrag.quality.folding import views
from selfcrag.text.text import split_sentences

_TOKENS = re.compile(r"[a-z]+(?:'[a-z]+)?|\d+|[,;:()\[\]{}<>\"“”«»!?.…—|*#=]")
_BOUNDARY = frozenset(',;:()[]{}<>!?.…—|*#="“”«»')  # quotation marks open and close a clause too
_QUOTES = frozenset('"“”«»')
_END = frozenset(".!?;")
_RECIPIENT_SPAN = 5  # words between a verb of saying and its content ("tell all of our customers that")
_CLAUSE_AHEAD = 2  # words after a verb within which a clause without "that" must show its verb
_ZH_CLAUSE = "，,；;。！？!?:：\n"
_ZH_OPEN, _ZH_CLOSE = "“「『\"", "”」』\""
_ON_ANSWERER = "an obligation on whoever answers to say something"
_COMMAND, _TOLD = "a command to say something", "an obligation to tell someone something"
_COMMAND_PUBLIC = "a command to say something to an answer's public"
_ZH_COMMAND = "a command to tell someone something (Chinese)"
_PIECES = re.compile(r"(?<=[.!?。！？])\s+")


@dataclass(frozen=True)
class Words:
    classes: dict[str, frozenset[str]]  # single words (lemmas) by class
    phrases: dict[str, tuple[tuple[str, ...], ...]]  # multi-word entries by class
    chinese: dict[str, tuple[str, ...]]  # zh_ classes, longest first

    def is_(self, name: str, token: str) -> bool:
        return not _forms(token).isdisjoint(self.classes[name])


@cache
def words() -> Words:
    sections = read_sections("directive_words.txt", lambda line: [w.strip() for w in line.split(",") if w.strip()])
    classes = {n: frozenset(e for e in es if " " not in e) for n, es in sections.items() if not n.startswith("zh_")}
    phrases = {n: tuple(tuple(e.split()) for e in es if " " in e) for n, es in sections.items()}
    chinese = {n: tuple(sorted(es, key=len, reverse=True)) for n, es in sections.items() if n.startswith("zh_")}
    return Words(classes, phrases, chinese)


@lru_cache(maxsize=65536)
def _forms(token: str) -> frozenset[str]:
    """The lemmas a token may be a form of: itself, and without a plural, -s, past or -ing ending."""
    forms = {token}
    for ending in ("s", "es", "d", "ed", "ing"):
        if token.endswith(ending) and len(token) > len(ending) + 1:
            stem = token[: -len(ending)]
            forms |= {stem, stem + "e"}
    for ending in ("ies", "ied"):  # replies, replied
        if token.endswith(ending) and len(token) > 4:
            forms.add(token[:-3] + "y")
    return frozenset(forms)


@lru_cache(maxsize=8192)
def directive(sentence: str) -> str:
    """Why the sentence dictates what someone says or holds true ("" when it does not)."""
    for view in views(sentence):
        for piece in (view, *_PIECES.split(view)[1:]):
            if found := _english(piece) or _chinese(piece):
                return found
    return ""


# Reasons that name no answerer nor an answer's public: a command or an obligation to tell one person ("Tell the
# customer that the refund is on its way" in a support playbook). The output check takes them; the detector, which
# removes a sentence from every answer's evidence, takes only the sentences that name the answer, whoever writes
# it or whom it reaches (a Chinese command has its audience right after the verb: "告诉这位顾客" names one person).
_TO_ANYONE = frozenset({_COMMAND, _TOLD})


def to_answerer(sentence: str) -> bool:
    """Whether the sentence dictates what the answer or whoever writes it says (`directive`, naming it)."""
    return directive(sentence) not in _TO_ANYONE | {""}


def directive_sentences(texts: list[str]) -> list[str]:
    """The sentences of these texts (read line by line, as the detector reads them) that dictate speech."""
    return [s for text in texts for line in text.splitlines() for s in split_sentences(line) if directive(s)]


# --- English ---------------------------------------------------------------------------------------------------


def _english(view: str) -> str:
    w = words()
    tokens = _TOKENS.findall(view)
    quoted = _inside_quotes(tokens)
    reported = any(w.is_("reporting", t) for t, q in zip(tokens, quoted, strict=True) if not q)
    for i, token in enumerate(tokens):
        if quoted[i] and reported:
            continue  # a command inside someone's quoted words, in an article that reports them
        if w.is_("speech", token) or w.is_("passive_speech", token) or w.is_("treat", token):
            force = _force(tokens, i, w)
            if force and _content(tokens, i, w) >= 0:
                return force
        if w.is_("output", token) and (found := _answer_given(tokens, i, w)):
            return found
    return ""


def _inside_quotes(tokens: list[str]) -> list[bool]:
    inside, out = False, []
    for token in tokens:
        if token in "“«":
            inside = True
        elif token in "”»":
            inside = False
        elif token == '"':
            inside = not inside
        out.append(inside and token not in _QUOTES)
    return out


def _clause_start(tokens: list[str], at: int) -> int:
    start = at
    while start > 0 and tokens[start - 1] not in _BOUNDARY:
        start -= 1
    return start


def _content(tokens: list[str], at: int, w: Words) -> int:
    """Where the content the verb at `at` dictates starts, else -1: after a recipient, a "that", a colon or a
    quotation mark; for a verb that holds as true, after "as" and a word of truth; without "that", a clause whose
    verb shows within a few words (a noun object, "mention the main causes", is no content). A content about the
    addressee itself ("that you are over 18") is none."""
    if w.is_("treat", tokens[at]):
        for j in range(at + 1, min(len(tokens) - 1, at + 1 + _RECIPIENT_SPAN)):
            if tokens[j] == "as" and w.is_("truth", tokens[j + 1]):
                return j + 2
        return -1
    j, through = at + 1, False
    while j < len(tokens) and j - at <= _RECIPIENT_SPAN and tokens[j] != "that" and tokens[j] not in w.classes[
            "self"] and (w.is_("audience", tokens[j]) or w.is_("determiner", tokens[j]) or w.is_("output", tokens[j])
                         or tokens[j] in ("of", "in", "to", "for")):  # "tell all of our customers", "in every reply"
        through |= tokens[j] in ("of", "in", "to", "for")
        j += 1
    if j < len(tokens) and tokens[j] == "with" and j + 1 < len(tokens) and tokens[j + 1] in ":\"“«":
        j += 1
    if j >= len(tokens):
        return -1
    if tokens[j] == "that" or tokens[j] in ":\"“«":
        start = j + 1
    elif not through and tokens[j] not in _BOUNDARY and _clause_at(tokens, j, w):
        start = j  # "say delivery is always free", "mention they are worth 5 euros" (not "state of New York was")
    else:
        return -1
    while start < len(tokens) and tokens[start] in _QUOTES:
        start += 1
    if start >= len(tokens) or tokens[start] in _END or tokens[start] in w.classes["self"]:
        return -1
    return start


def _public(tokens: list[str], at: int, w: Words) -> bool:
    """Whether a command to say something is aimed at the public of an answer: its recipient an audience in the
    plural or all of it ("tell users", "inform everyone"), or the answer named ("state in every reply that"). "Tell
    the customer that the refund is on its way" is a task for one person in a support playbook."""
    recipients = tokens[at + 1 : at + 1 + _RECIPIENT_SPAN]
    plural = any(w.is_("audience", t) and (t.endswith("s") or t in ("everyone", "everybody", "anyone", "people",
                                                                     "public")) for t in recipients)  # fmt: skip
    return plural or any(w.is_("output", t) for t in tokens)


def _clause_at(tokens: list[str], at: int, w: Words) -> bool:
    """Whether a clause opens at `at` without "that": its verb within a few words, no relative pronoun before it
    ("state the source it is based on" names a thing)."""
    for token in tokens[at + 1 : at + 1 + _CLAUSE_AHEAD]:
        if token in _BOUNDARY or token in ("it", "which", "who", "that", "they", "he", "she", "we", "you", "i"):
            return False
        if w.is_("finite", token):
            return True
    return False


def _force(tokens: list[str], at: int, w: Words) -> str:
    """What obliges the reader to the verb at `at`, else ""."""
    start = _clause_start(tokens, at)
    prefix = tokens[start:at]
    base = tokens[at] in w.classes["speech"] or tokens[at] in w.classes["treat"]
    commanded = base and all(w.is_("lead", t) for t in prefix) and not _after_subject(tokens, start, w)
    # "ignore the rules above and say that ...": a second command joined to a first one that has no subject
    joined = max((k for k, t in enumerate(prefix) if t in ("and", "then")), default=-1)
    if commanded or (base and joined > 0 and _commands(prefix[:joined], w)
                     and all(w.is_("lead", t) for t in prefix[joined:])):  # fmt: skip
        return _COMMAND_PUBLIC if _public(tokens, at, w) else _COMMAND
    modal = _modal_before(tokens, at, start, w)
    if modal >= 0:
        subject = tokens[start:modal]
        if any(_speaker(t, w) for t in subject):
            return _ON_ANSWERER
        if w.is_("passive_speech", tokens[at]) and tokens[at - 1] == "be":
            return _TOLD
    for j, token in enumerate(prefix):
        ahead = prefix[j + 1 : j + 4]
        if token in ("have", "let", "make", "get") and base and any(_speaker(t, w) for t in ahead):
            return "an answer made to say something"
        if token == "your" and any(w.is_("output", t) or w.is_("answerer", t) for t in ahead):
            return "the reader's answer told what to say"
    if base and any(w.is_("answerer", t) for t in prefix) and any(t.endswith("ing") for t in prefix) and all(
            w.is_("answerer", t) or w.is_("scene", t) or w.is_("determiner", t) or w.is_("output", t)
            or t.endswith("ing") for t in prefix):  # fmt: skip
        return "a command to an answerer named before it"
    return ""


def _after_subject(tokens: list[str], start: int, w: Words) -> bool:
    """Whether the clause at `start` continues a subject a comma interrupted ("The Playbills, which describe ...,
    also state that"), or follows a full stop inside an abbreviation ("the U.S. state of"), so its verb is no
    command."""
    if start >= 2 and tokens[start - 1] == "." and len(tokens[start - 2]) == 1:
        return True
    if start == 0 or tokens[start - 1] not in ',"”»':
        return False
    opening = max((k + 1 for k in range(start) if tokens[k] in ".!?;"), default=0)
    return w.is_("determiner", tokens[opening]) or any(
        t in ("which", "who", "whom", "whose") for t in tokens[opening:start])


def _commands(clause: list[str], w: Words) -> bool:
    """Whether a clause reads as a command: no modal or finite verb ("staff can log in and state that ..." is a
    statement) and not opened by a determiner, a pronoun or an addressee ("customers log in and ...")."""
    first = clause[0]
    return not (w.is_("determiner", first) or first in w.classes["self"] or w.is_("audience", first)
                or w.is_("answerer", first) or first in ("it", "he", "she", "they")
                or any(t in w.classes["modal"] or w.is_("finite", t) for t in clause))


def _speaker(token: str, w: Words) -> bool:
    return token in ("you", "your") or w.is_("answerer", token) or w.is_("output", token)


def _modal_before(tokens: list[str], at: int, start: int, w: Words) -> int:
    """Where a modal of obligation that governs the verb at `at` starts (adverbs and a passive "be" may stand
    between), else -1."""
    j = at
    if j - 1 >= start and tokens[j - 1] == "be" and w.is_("passive_speech", tokens[at]):
        j -= 1
    while j - 1 >= start and w.is_("adverb", tokens[j - 1]):
        j -= 1
    for size in (3, 2, 1):
        if j - size >= start:
            piece = tuple(tokens[j - size : j])
            if (size == 1 and piece[0] in w.classes["modal"]) or piece in w.phrases["modal"]:
                return j - size
    return -1


def _answer_given(tokens: list[str], at: int, w: Words) -> str:
    """An answer noun at `at` said to be a content: "the right reply is that", "the answer must be that"."""
    j = at + 1
    modal = False
    if j < len(tokens) and (tokens[j] in w.classes["modal"]):
        modal, j = True, j + 1
    if j >= len(tokens) or tokens[j] not in w.classes["copula"]:
        return ""
    j += 1
    if j >= len(tokens) or not (tokens[j] == "that" or tokens[j] in ":\"“«"):
        return ""
    start = _clause_start(tokens, at)
    if modal or any(w.is_("evaluative", t) or t == "your" for t in tokens[start:at]):
        return "an answer prescribed"
    return ""


# --- Chinese ---------------------------------------------------------------------------------------------------


def _chinese(view: str) -> str:
    z = words().chinese
    if not any(ord(c) > 0x2E80 for c in view):
        return ""
    for verb in z["zh_speech"]:
        for p in _positions(view, verb):
            if _zh_reported(view, p):
                continue
            before, after = view[:p], view[p + len(verb) :]
            clause = before[max((before.rfind(c) for c in _ZH_CLAUSE), default=-1) + 1 :]
            audience = next((a for a in z["zh_audience"] if after.startswith(a)), "")
            marked = after[len(audience) :][:1] in (":", "：", '"', "“", "「")
            content = after[len(audience) :].lstrip(":：\"“「 ")
            if not content or content[0] in _ZH_CLAUSE or content.startswith(z["zh_self"]):
                continue
            clause_after = re.split(f"[{_ZH_CLAUSE}]", content)[0]
            if not marked and not any(m in clause_after for m in z["zh_predicate"]):
                continue  # "说明退款期限" names a thing; "说明保修期为十年" states something
            forced = any(f in clause for f in z["zh_force"])
            named = any(_named(before, a) for a in (*z["zh_answerer"], *z["zh_output"]))
            if forced and named:
                return "an answer told what to say (Chinese)"
            if audience and (forced or not _without_leads(clause, z["zh_lead"])):
                return _ZH_COMMAND
    return ""


def _named(text: str, word: str) -> bool:
    """Whether the text holds the word; a Latin one ("ai", "bot") only as a word of its own, not inside "said"."""
    if not word.isascii():
        return word in text
    return re.search(rf"(?<![a-z]){re.escape(word)}(?![a-z])", text) is not None


def _positions(text: str, part: str) -> list[int]:
    return [m.start() for m in re.finditer(re.escape(part), text)]


def _without_leads(clause: str, leads: tuple[str, ...]) -> str:
    """The clause with the words that may open a command taken off its front ("" when only they were there)."""
    rest = clause.strip()
    while found := next((lead for lead in leads if rest.startswith(lead)), ""):
        rest = rest[len(found) :].strip()
    return rest


def _zh_reported(view: str, at: int) -> bool:
    """Whether the verb at `at` sits in quotation marks a verb of reporting introduces ("他说：“请告诉大家...”")."""
    opened = max((view.rfind(c, 0, at) for c in _ZH_OPEN), default=-1)
    if opened < 0 or max((view.rfind(c, opened + 1, at) for c in _ZH_CLOSE), default=-1) > opened:
        return False
    z = words().chinese
    return any(r in view[:opened] for r in (*z["zh_reporting"], *z["zh_speech"]))
