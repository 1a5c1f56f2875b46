"""Does a sentence address the assistant? Judged by what the text does, not how it is spelt.

The sentence is read through `folding.views` (zero-width characters, look-alike letters, full-width forms, case,
traditional characters, digits for letters all folded) and counts as addressed to the assistant when any of these
signals fires on a view. Each combines word classes from `data/injection_words.txt`, never listed phrasings:

- a speaker label at the start (system, assistant, developer, user ... in any case or script, in brackets or not)
  followed by a clause, or a JSON chat-role object (`{"role": "system", "content": ...}`);
- an override: a verb that sets instructions aside (or a negated verb of following them) in the imperative, aimed
  at directives (instructions, rules, guidance, prompt ...) that are marked as the assistant's (previous, your,
  given ...);
- an output command: a verb of saying in the imperative that dictates content ("that", "only", "with"), about the
  assistant's answer or to its user;
- the same two in Chinese, clause by clause;
- a base64 or hex blob that decodes to text that fires one of the above.

"Imperative" means the verb opens its clause, after nothing but words that may lead a command ("please", "you
must no longer", "I want you to"): "the court could not ignore its prior guidance" reports, it does not command.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from functools import cache, lru_cache

from selfcrag.data_sections import read_sections
from selfcrag.language import CJK
from selfcrag.quality.folding import views

# Tokens of a folded English view: words, and the punctuation that ends a clause.
_TOKENS = re.compile(r"[a-z]+(?:'[a-z]+)?|[,;:()\[\]{}<>\"“”«»!?.…—|*#=]")
_BOUNDARY = frozenset(",;:()[]{}<>\"“”«»!?.…—|*#=")
_WINDOW = 12  # words after the verb where its object must be
_GAP = 6  # words between the parts of a split verb
_ZH_CLAUSE = re.compile(r"[，,；;。！？!?：:\n「」“”\"]")
_ZH_QUOTE = "「“\"'『:："
_JSON_ROLE = re.compile(r"""["']role["']\s*:\s*["']([a-z]+)["']""")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{24,}={0,2}")
_HEX = re.compile(r"\b(?:[0-9a-fA-F]{2}){12,}\b")
_CJK_CHAR = re.compile(f"[{CJK}]")
_PIECES = re.compile(r"(?<=[.!?。！？])\s+")  # where a sentence could have ended, whatever case follows


@dataclass(frozen=True)
class Words:
    """The word classes: English entries (tuples of lemmas) by the lemma they start with; Chinese ones as strings."""

    classes: dict[str, dict[str, tuple[tuple[str, ...], ...]]]
    chinese: dict[str, tuple[str, ...]]
    role_start: re.Pattern[str]

    def has(self, name: str, tokens: list[str], at: int) -> int:
        """How many tokens the entry of class `name` that starts at `tokens[at]` spans, else 0. In an entry, `...`
        stands for the object of a split verb, up to `_GAP` words ("put ... to one side")."""
        if at >= len(tokens):
            return 0
        by_first = self.classes[name]
        for lemma in _forms(tokens[at]):
            for entry in by_first.get(lemma, ()):
                if end := _match(entry[1:], tokens, at + 1):
                    return end - at
        return 0

    def any_in(self, name: str, tokens: list[str]) -> bool:
        return any(self.has(name, tokens, i) for i in range(len(tokens)))


def _match(entry: tuple[str, ...], tokens: list[str], at: int) -> int:
    """The index after the rest of an entry matched from `tokens[at]`, else 0."""
    if not entry:
        return at
    if entry[0] == "...":
        for skip in range(1, _GAP + 1):
            if at + skip < len(tokens) and tokens[at + skip - 1] not in _BOUNDARY and (
                    end := _match(entry[1:], tokens, at + skip)):
                return end
        return 0
    if at < len(tokens) and entry[0] in _forms(tokens[at]):
        return _match(entry[1:], tokens, at + 1)
    return 0


@lru_cache(maxsize=65536)
def _forms(token: str) -> frozenset[str]:
    """The lemmas a token may be a form of: itself, and without a plural, past or -ing ending ("rules",
    "configured", "ignoring")."""
    forms = {token}
    for ending in ("s", "es", "d", "ed", "ing"):
        if token.endswith(ending) and len(token) > len(ending) + 1:
            stem = token[: -len(ending)]
            forms |= {stem, stem + "e"}
    return frozenset(forms)


@cache
def words() -> Words:
    sections = read_sections("injection_words.txt", lambda line: [w.strip() for w in line.split(",") if w.strip()])
    english: dict[str, dict[str, tuple[tuple[str, ...], ...]]] = {}
    for name, entries in sections.items():
        by_first: dict[str, list[tuple[str, ...]]] = {}
        for entry in entries:
            if not _CJK_CHAR.search(entry):
                by_first.setdefault(entry.split()[0], []).append(tuple(entry.split()))
        english[name] = {first: tuple(found) for first, found in by_first.items()}
    chinese = {name: tuple(e for e in entries if _CJK_CHAR.search(e)) for name, entries in sections.items()}
    roles = "|".join(sorted((re.escape(r) for r in sections["roles"]), key=len, reverse=True))
    # "system:", "[assistant]", "(developer)", "<user>", "【系统】": a label that opens the sentence
    role_start = re.compile(rf"^\W{{0,3}}[\[(<【]?\s*(?:{roles})\s*(?:[\])>】]\s*[:：>-]?|[:：>])\s*(.*)$", re.S)
    return Words(english, chinese, role_start)


def addressed(sentence: str) -> str:
    """Which signal says the sentence addresses the assistant ("" when none does). Each clause that ends in a full
    stop is judged on its own too: the sentence splitter starts a sentence only at a capital letter, so a line
    "system: ..." in lower case after another sentence reaches here glued to it, its label no longer first."""
    for view in views(sentence):
        for piece in (view, *_PIECES.split(view)[1:]):
            if found := _judge(piece):
                return found
    return _encoded(sentence)


def _judge(view: str) -> str:
    w = words()
    if _speaker(view, w):
        return "speaker label"
    if (role := _JSON_ROLE.search(view)) and role.group(1) in w.classes["chat_roles"]:
        return "chat role object"
    tokens = _TOKENS.findall(view)
    if _override(tokens, w):
        return "override of its instructions"
    if _output_command(tokens, w):
        return "command about its answer"
    if _CJK_CHAR.search(view) and (found := _chinese(view, w)):
        return found
    return ""


def _speaker(view: str, w: Words) -> bool:
    """A speaker label opening the sentence, followed by a clause (a spec sheet's "System: macOS 12" has none)."""
    match = w.role_start.match(view)
    if not match:
        return False
    rest = match.group(1)
    tokens = _TOKENS.findall(rest)
    return w.any_in("clause", tokens) or any(z in rest for z in w.chinese["clause"])


def _clause_start(tokens: list[str], at: int) -> int:
    start = at
    while start > 0 and tokens[start - 1] not in _BOUNDARY:
        start -= 1
    return start


def _imperative(tokens: list[str], at: int, w: Words) -> list[str] | None:
    """The words leading the verb at `at` when it stands in the imperative (each may lead a command), else None."""
    lead = tokens[_clause_start(tokens, at) : at]
    if all(w.has("lead", [t], 0) or w.has("second_person", [t], 0) for t in lead):
        return lead
    return None


def _after(tokens: list[str], at: int) -> list[str]:
    """The words after `at` up to the end of the sentence or `_WINDOW` words (commas do not end an object)."""
    out: list[str] = []
    for token in tokens[at:]:
        if token in ".!?;" or len(out) >= _WINDOW:
            break
        out.append(token)
    return out


def _override(tokens: list[str], w: Words) -> bool:
    for at in range(len(tokens)):
        size = w.has("override", tokens, at)
        if not size:
            size = w.has("comply", tokens, at)
            lead = _imperative(tokens, at, w) if size else None
            if lead is None or not any(w.has("negation", [t], 0) for t in lead):
                continue
        elif (lead := _imperative(tokens, at, w)) is None:
            continue
        if _directives_object(tokens, at, size, lead, w):
            return True
    return False


def _directives_object(tokens: list[str], at: int, size: int, lead: list[str], w: Words) -> bool:
    """Whether the verb at `at` (spanning `size` tokens) takes the assistant's directives as its object: a
    directive noun that heads the phrase after the verb (only determiners and markers like "previous", "your"
    before it; nothing that makes it another thing after it: "password rules", "the rules section", "prompts to
    update your browser"), marked as the assistant's by a prior or second-person word."""
    end = min(len(tokens), at + size + _WINDOW)
    for i in range(at + 1, end):
        if tokens[i] in _BOUNDARY and i >= at + size:
            return False
        noun = w.has("directive", tokens, i)
        # the words before the noun, past the verb (a split verb's object starts right after its first word)
        before = tokens[at + size : i] if i >= at + size else tokens[at + 1 : i]
        if not noun or not all(_modifier(t, w) for t in before):
            continue
        after = i + noun
        split_verb = after < at + size  # "put the earlier instructions to one side": the verb goes on
        follows = tokens[after] if after < len(tokens) else "."
        if not split_verb and follows not in _BOUNDARY and not w.has("directive_end", tokens, after):
            return False
        if follows == "to" and not split_verb and not (after + 1 < len(tokens) and _modifier(tokens[after + 1], w)):
            return False  # "instructions to update ...": about a task, not the assistant
        rest = _after(tokens, at + 1)
        return w.any_in("prior", rest) or w.any_in("second_person", rest + lead)
    return False


def _modifier(token: str, w: Words) -> bool:
    return any(w.has(name, [token], 0) for name in ("modifier", "prior", "second_person"))


def _output_command(tokens: list[str], w: Words) -> bool:
    # the assistant's answer or its user named anywhere in the sentence
    yours = any(w.has("second_person", tokens, i) and w.has("answer_noun", tokens, i + 1)
                for i in range(len(tokens) - 1))
    aimed = yours or w.any_in("audience", tokens) or w.any_in("question_scope", tokens)
    if not aimed:
        return False
    for at in range(len(tokens)):
        size = w.has("output", tokens, at)
        if not size:
            continue
        lead = tokens[_clause_start(tokens, at) : at]
        # "your reply must state ...": the assistant's answer as the subject also commands
        subject = yours and any(w.has("answer_noun", [t], 0) for t in lead)
        if (subject or _imperative(tokens, at, w) is not None) and any(
                w.has("output_object", [t], 0) or t in "\"“:" for t in _after(tokens, at + size)[:4]):
            return True
    return False


def _chinese(view: str, w: Words) -> str:
    z = w.chinese
    for clause in _ZH_CLAUSE.split(view):
        if not clause:
            continue
        body = clause.strip()
        while lead := next((x for x in z["zh_lead"] if body.startswith(x)), ""):
            body = body[len(lead) :]
        led = clause.strip()[: len(clause.strip()) - len(body)]
        if (any(body.startswith(v) for v in z["zh_override"]) or body.startswith("把") or "把" in led) and any(
                v in clause for v in z["zh_override"]) and any(d in clause for d in z["zh_directive"]) and any(
                p in clause for p in z["zh_prior"]):
            return "override of its instructions"
        verb = next((v for v in z["zh_output"] if body.startswith(v)), "")
        if verb:
            rest = body[len(verb) :]
            dictated = rest[:1] in _ZH_QUOTE or any(rest.startswith(a) for a in z["zh_audience"])
            if dictated or (any(r in led for r in z["zh_restrict"]) and ("你" in led or rest[:1] in _ZH_QUOTE)):
                return "command about its answer"
    return ""


def _encoded(sentence: str) -> str:
    """A base64 or hex blob that decodes to text addressed to the assistant."""
    for blob in [*_BASE64.findall(sentence), *_HEX.findall(sentence)]:
        text = _decode(blob)
        if text and (found := addressed(text)):
            return f"encoded {found}"
    return ""


def _decode(blob: str) -> str:
    raw = b""
    if _HEX.fullmatch(blob):
        raw = bytes.fromhex(blob)
    else:
        try:
            raw = base64.b64decode(blob + "=" * (-len(blob) % 4), altchars=b"-_" if "-" in blob or "_" in blob
                                   else None, validate=True)
        except (binascii.Error, ValueError):
            return ""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return ""
    # readable text, not a digest: mostly printable, with spaces between words
    return text if " " in text and sum(c.isprintable() for c in text) >= 0.95 * len(text) else ""
