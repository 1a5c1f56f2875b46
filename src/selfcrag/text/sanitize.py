"""Hostile text in, clean text out; and whether the agent can read a question at all.

`clean_text` runs on every question (and the chat history) where a run starts. Text arrives from terminals,
web forms and JSON: ANSI colour codes pasted with it ("\\x1b[31m" would otherwise leave a search term "31m"),
C0/C1 control characters, zero-width and bidi controls (invisible, and a way to hide instructions from a
reader), lone surrogates (from JSON `\\ud800` escapes or undecodable bytes), and U+FFFD where bytes were not
UTF-8. They are removed, the text NFC-normalised (the same letters compare equal whichever way they were
composed) and whitespace collapsed.

`unreadable` decides whether the question can be read against the retrieved evidence: a question with no
letter or digit left (emoji, punctuation) cannot be looked up, and one written mostly in a script that
neither the keyword tokenizer nor the retrieved passages use (an Arabic question over an English/Chinese
knowledge base) can only match by accident. A letter's script is the first word of its Unicode name
(LATIN, CJK, ARABIC, CYRILLIC ...), so no list of languages is needed.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from functools import cache, lru_cache
from importlib import resources

from selfcrag.language import CJK

# Terminal escape sequences, each removed whole: CSI (ESC [ ... final byte, or the 8-bit CSI), OSC / DCS /
# SOS / PM / APC strings up to their terminator (BEL or ST) or the end of the line, and the short ESC
# sequences (charset selection, keypad modes). Removing only ESC would leave "[31m" in the question.
_ESCAPES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]"
)
_REPLACEMENT = "\ufffd"
# Horizontal whitespace runs become one space; a run with a line break becomes one line break.
_SPACES = re.compile(r"[^\S\n]+")
_BREAKS = re.compile(r" ?\n\s*")

# The share of a question's letters that must be in a script the stack or the evidence reads.
MIN_READABLE_SHARE = 0.5


@lru_cache(maxsize=4096)
def _kept(char: str) -> str:
    """What a character becomes: itself, a line break or a space (line controls), or nothing."""
    if char in "\n\t":
        return char
    if char in "\r\v\f\x85\u2028\u2029":  # line and paragraph ends of other systems: a line break
        return "\n"
    category = unicodedata.category(char)
    # Cc: C0/C1 controls; Cf: format characters (zero-width space and joiners, bidi embeddings and isolates,
    # soft hyphen, byte-order mark, invisible tag characters); Cs: lone surrogates.
    if category in ("Cc", "Cf", "Cs") or char == _REPLACEMENT:
        return ""
    return char


def clean_text(text: str) -> str:
    """`text` without escape sequences, control, format and replacement characters or lone surrogates; NFC;
    whitespace collapsed (line breaks kept, one at a time); stripped."""
    if not (text.isascii() and text.isprintable()):
        text = "".join(_kept(c) for c in _ESCAPES.sub("", text))
        text = unicodedata.normalize("NFC", text)
    return _BREAKS.sub("\n", _SPACES.sub(" ", text)).strip()


def strip_invisible(text: str) -> str:
    """`text` without control, format (zero-width, bidi, soft hyphen) and replacement characters or lone
    surrogates; whitespace of every kind kept as it was (a PDF's page break, a line separator)."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(c if c.isspace() else _kept(c) for c in text)


@cache
def confusables() -> dict[int, str]:
    """Cyrillic and Greek letters that look Latin -> the Latin letter (data/confusables.txt)."""
    text = (resources.files("selfcrag") / "data" / "confusables.txt").read_text(encoding="utf-8")
    pairs = (line.split() for line in text.splitlines() if line.strip() and not line.startswith("#"))
    return {ord(pair[0]): pair[1] for pair in pairs}


_WORD = re.compile(r"\w+")


def _unmix(match: re.Match[str]) -> str:
    """A word that mixes Latin letters with look-alikes of another script ("Ignоre") is one Latin word spelt to
    deceive: it is read as Latin. A word wholly in Cyrillic or Greek is left as it is."""
    word = match.group(0)
    table = confusables()
    if any(ord(c) in table for c in word) and any("a" <= c.lower() <= "z" for c in word):
        return word.translate(table)
    return word


# Text a document holds that no reader of it sees, whatever the file type: a place to plant instructions, never
# to inform. An HTML comment (also in Markdown, which renders raw HTML, and in text or JSONL that came from a web
# page), up to its end or, unclosed, to the end of the text as a browser hides it; a Markdown image, whose alt
# text shows only when the picture fails to load (the HTML loader reads no `alt` either); a Markdown comment
# line, the `[//]: # (...)` idiom, a link definition to nowhere that nothing renders.
_HIDDEN = re.compile(r"<!--.*?(?:-->|\Z)|!\[[^\]\n]*\]\([^)\n]*\)|^[ \t]*\[[^\]\n]*\]:[ \t]*(?:#|<>)[^\n]*$",
                     re.S | re.M)
# Characters that draw nothing yet are no format character (`_kept` drops those): variation selectors, whose runs
# can spell bytes after any letter, Hangul fillers and the blank Braille pattern.
_BLANKS = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef\u115f\u1160\u3164\uffa0\u2800]+")


def drop_hidden(text: str) -> str:
    """`text` without what its reader never sees (`_HIDDEN`, `_BLANKS`); the lines around it kept."""
    if "<!--" in text or "](" in text or "]:" in text:
        text = _HIDDEN.sub("", text)
    return text if text.isascii() else _BLANKS.sub("", text)


def clean_document(text: str) -> str:
    """Document text as it is stored and answered from, cleaned as questions are (`clean_text`) where that is
    safe for a document: hidden text (comments, image alt text, invisible runs: `drop_hidden`), invisible and
    control characters removed, NFC, words mixing Latin letters with look-alikes spelt in Latin; line breaks and
    spacing kept (they mark paragraphs, list items and table rows)."""
    if not (text.isascii() and text.isprintable()):  # first: a zero-width space inside "<!--" hides nothing
        text = _WORD.sub(_unmix, unicodedata.normalize("NFC", strip_invisible(_ESCAPES.sub("", text))))
    return drop_hidden(text)


def decode_argv(arg: str) -> str:
    """A command-line argument as text. Python hands bytes that are not valid in the locale's encoding over as
    surrogate escapes; they are read back as UTF-8, undecodable bytes becoming U+FFFD (which `clean_text`
    removes), so a mistyped byte costs one character, not the run."""
    try:
        raw = arg.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate that is no escaped byte: clean_text drops it
        return arg
    return raw.decode("utf-8", "replace")


@lru_cache(maxsize=65536)
def script_of(char: str) -> str:
    """The script of a letter, from its Unicode name ("ARABIC LETTER ALEF" -> ARABIC); "" for anything else.
    Full-width and other compatibility forms are read as their plain letters (Ａ is LATIN)."""
    plain = unicodedata.normalize("NFKC", char)[:1] or char
    if not unicodedata.category(plain).startswith("L"):
        return ""
    name = unicodedata.name(plain, "")
    return name.split(" ", 1)[0] if name else ""


def scripts(texts: Iterable[str]) -> set[str]:
    """Every script the texts' letters are written in."""
    return {s for text in texts for s in map(script_of, set(text)) if s}


# The scripts the keyword tokenizer and the graders read (`text.words`: Latin letters and Chinese
# characters), whatever the evidence.
TOKENIZER_SCRIPTS = frozenset({script_of("a"), script_of(CJK[0])})


def unreadable(question: str, passages: Iterable[str]) -> str:
    """Why the question cannot be read against this evidence: "" when it can; "empty" when no letter or digit
    is left; else the main script of its letters (e.g. "Arabic") when less than half of them are in a script
    the tokenizer reads or the passages use."""
    if not any(c.isalnum() for c in question):
        return "empty"
    letters = Counter(s for s in map(script_of, question) if s)
    total = sum(letters.values())
    foreign = {s: n for s, n in letters.items() if s not in TOKENIZER_SCRIPTS}
    if not total or total - sum(foreign.values()) >= MIN_READABLE_SHARE * total:
        return ""  # digits only, or mostly letters the tokenizer reads: no need to look at the evidence
    covered = TOKENIZER_SCRIPTS | scripts(passages)
    readable = sum(n for s, n in letters.items() if s in covered)
    if readable >= MIN_READABLE_SHARE * total:
        return ""
    return max(foreign, key=lambda s: foreign[s]).title()
