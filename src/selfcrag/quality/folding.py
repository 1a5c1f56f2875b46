"""How the injection detector reads a sentence: every way of spelling it that a reader would read as the same words.

A planted sentence hides from a word list by its spelling, never by its meaning: zero-width characters inside a
word ("I\u200bgnore"), letters of another script that look Latin ("Ignоre" with a Cyrillic о), full-width forms,
capitals, traditional characters for simplified ones, digits for letters ("1gn0r3"), letters spaced out
("I g n o r e"). `views` gives the sentence as it reads: one string in lower case with all of these folded, and
(only when it has words mixing letters and digits) the same with the digits read as letters, once with 1 as i
and once as l. The views are for judging only; what is stored and answered is cleaned by
`text/sanitize.clean_document`, which folds look-alikes only where that is safe.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from importlib import resources

from selfcrag.text.sanitize import confusables, strip_invisible

# Digits and signs written for letters, when they sit inside a word with letters ("pr3v10us", "s@y").
_LEET = {"0": "o", "3": "e", "4": "a", "5": "s", "7": "t", "8": "b", "@": "a", "$": "s"}
_LEET_WORD = re.compile(r"(?=[a-z0-9@$]*[a-z])(?=[a-z0-9@$]*[0-9@$])[a-z0-9@$]+")
# Three or more single letters spaced out ("i g n o r e"): one word again.
_SPACED = re.compile(r"\b(?:[a-z] ){2,}[a-z]\b")


@cache
def _traditional() -> dict[int, str]:
    """Traditional Chinese characters -> simplified (data/traditional_chinese.txt)."""
    text = (resources.files("selfcrag") / "data" / "traditional_chinese.txt").read_text(encoding="utf-8")
    pairs = [entry for line in text.splitlines() if not line.startswith("#") for entry in line.split()]
    return {ord(pair[0]): pair[1] for pair in pairs if len(pair) == 2}


def simplified(text: str) -> str:
    """The text with traditional Chinese characters written as simplified ones (nothing else changed)."""
    return text.translate(_traditional())


def fold(text: str) -> str:
    """The text as read: invisible characters gone, NFKC, look-alikes as Latin, traditional as simplified,
    lower case, spaced-out letters joined."""
    text = unicodedata.normalize("NFKC", strip_invisible(text))
    text = text.translate(confusables()).translate(_traditional()).lower()
    return _SPACED.sub(lambda m: m.group(0).replace(" ", ""), text)


def views(text: str) -> tuple[str, ...]:
    """`fold(text)`, and the same with digits inside words read as letters when it has such words."""
    folded = fold(text)
    if not _LEET_WORD.search(folded):
        return (folded,)
    out = [folded]
    for one in "il":
        table = str.maketrans({**_LEET, "1": one})
        out.append(_LEET_WORD.sub(lambda m, t=table: m.group(0).translate(t), folded))  # type: ignore[misc]
    return tuple(dict.fromkeys(out))
