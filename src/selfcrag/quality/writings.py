"""A sentence in another writing, read back for the injection detector (`addressed.py`): it hides from the word
classes by how it is written, never by what it says.

- Chinese in pinyin ("qing hu lue zhi qian de zhi ling"): each run of pinyin syllables is read back into the
  Chinese entries of the word classes whose readings it spells (`data/injection_pinyin.txt`, written by
  `scripts/injection_pinyin.py`), longest first, so the Chinese rules judge it;
- words in rot13 ("vtaber cerivbhf vafgehpgvbaf"): each word whose rot13 is a word of the classes, and which is
  none itself, read as that word;
- a base64 or hex blob that decodes to readable text.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from selfcrag.data_sections import read_sections

_SYLLABLE_RUN = re.compile(r"\b[a-z]+(?: [a-z]+)+\b")  # words separated by single spaces: a run that may be pinyin
MIN_PINYIN = 4  # syllables in a row before a run is read as pinyin (English has short runs of valid syllables)
MIN_ROT13 = 2  # words that must read as class words before a sentence is read as rot13 (one may by chance)
_ROT13 = str.maketrans("abcdefghijklmnopqrstuvwxyz", "nopqrstuvwxyzabcdefghijklm")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{24,}={0,2}")
_HEX = re.compile(r"\b(?:[0-9a-fA-F]{2}){12,}\b")


@dataclass(frozen=True)
class Pinyin:
    syllables: frozenset[str]  # every toneless syllable, ü written u
    readings: dict[tuple[str, ...], str]  # an entry's syllables -> the entry (two entries may read alike: one kept)
    longest: int  # syllables of the longest reading


@cache
def pinyin() -> Pinyin:
    table = read_sections("injection_pinyin.txt", lambda line: [line])
    readings = {tuple(line.split()[1:]): line.split()[0] for line in table["readings"]}
    return Pinyin(frozenset(s for line in table["syllables"] for s in line.split()), readings,
                  max((len(k) for k in readings), default=1))  # fmt: skip


def from_pinyin(view: str) -> str:
    """`view` (folded, lower case) with each run of MIN_PINYIN syllables or more read back into the entries it
    spells ("qing hu lue zhi qian de zhi ling" -> "请忽略之前de指令"); "" when it has no such run."""
    table = pinyin()
    runs = [m for m in _SYLLABLE_RUN.finditer(view) if len(m.group(0).split()) >= MIN_PINYIN
            and all(s.replace("v", "u") in table.syllables for s in m.group(0).split())]  # fmt: skip
    if not runs:
        return ""
    out, last = [], 0
    for run in runs:
        syllables, read, i = [s.replace("v", "u") for s in run.group(0).split()], [], 0
        while i < len(syllables):
            size = next((n for n in range(min(table.longest, len(syllables) - i), 0, -1)
                         if tuple(syllables[i : i + n]) in table.readings), 0)  # fmt: skip
            read.append(table.readings[tuple(syllables[i : i + size])] if size else syllables[i])
            i += max(size, 1)
        out += [view[last : run.start()], "".join(read)]
        last = run.end()
    return "".join([*out, view[last:]])


def from_rot13(view: str, vocabulary: frozenset[str], forms: Callable[[str], frozenset[str]]) -> str:
    """`view` with each word whose rot13 is in `vocabulary` (by any of its `forms`), and which is not itself, read
    as that word; "" when fewer than MIN_ROT13 words read so."""
    changed = 0

    def read(match: re.Match[str]) -> str:
        nonlocal changed
        word = match.group(0)
        decoded = word.translate(_ROT13)
        if forms(word) & vocabulary or not forms(decoded) & vocabulary:
            return word
        changed += 1
        return decoded

    text = re.sub(r"[a-z]{3,}", read, view)
    return text if changed >= MIN_ROT13 else ""


def decoded_blobs(sentence: str) -> list[str]:
    """The readable texts its base64 and hex blobs decode to."""
    return [text for blob in [*_BASE64.findall(sentence), *_HEX.findall(sentence)] if (text := _decode(blob))]


def _decode(blob: str) -> str:
    raw = b""
    if _HEX.fullmatch(blob):
        raw = bytes.fromhex(blob)
    else:
        try:
            raw = base64.b64decode(blob + "=" * (-len(blob) % 4), altchars=b"-_" if "-" in blob or "_" in blob
                                   else None, validate=True)  # fmt: skip
        except (binascii.Error, ValueError):
            return ""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return ""
    # readable text, not a digest: mostly printable, with spaces between words
    return text if " " in text and sum(c.isprintable() for c in text) >= 0.95 * len(text) else ""
