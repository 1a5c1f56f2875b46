"""Which language a text is in, for the two the agent speaks: Chinese (`zh`) and English (`en`).

Messages the agent writes without a model (abstentions, caveats) and prompts that ask a model for an answer
follow the question's language. Chinese questions often carry English product names and ids ("Plus 会员",
"E1042 是什么意思？"), so the test weighs CJK characters against Latin *words*, not letters: a Chinese word
is one or two characters, an English word about five letters.
"""

from __future__ import annotations

import re
from typing import Literal

Language = Literal["zh", "en"]

# CJK Unified Ideographs, Extension A and the compatibility block: the characters of written Chinese.
CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_CHAR = re.compile(f"[{CJK}]")
_LATIN_WORD = re.compile(r"[A-Za-z\uff21-\uff3a\uff41-\uff5a][A-Za-z0-9_\uff10-\uff19\uff21-\uff3a\uff41-\uff5a]*")


def has_cjk(text: str) -> bool:
    return bool(_CJK_CHAR.search(text))


def language_of(text: str) -> Language:
    """`zh` when the text has at least as many CJK characters as Latin words, else `en` (also for no text)."""
    cjk = len(_CJK_CHAR.findall(text))
    return "zh" if cjk and cjk >= len(_LATIN_WORD.findall(text)) else "en"
