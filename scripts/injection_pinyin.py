"""The pinyin table of the injection detector (`selfcrag/data/injection_pinyin.txt`), from pypinyin.

    pip install pypinyin==0.55.0 && python scripts/injection_pinyin.py

A planted sentence written in pinyin ("qing hu lue zhi qian de zhi ling") hides from the Chinese word classes of
`data/injection_words.txt` by its script, not its meaning; `quality/writings.py` reads such a sentence back into
those entries with this table: every toneless syllable (to find a run of pinyin), and each Chinese entry's reading
(phrase-aware, so 长 in 长期 reads chang). pypinyin (MIT) is needed only here, never at run time. Run it again
after changing the Chinese entries: a unit test fails while an entry has no reading.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from pypinyin import Style, lazy_pinyin

DATA = Path(__file__).resolve().parents[1] / "src" / "selfcrag" / "data"
CJK = re.compile(r"[\u4e00-\u9fff]")


def toneless(text: str) -> list[str]:
    """Readings without tones, ü written u (as most people type it: "lue", "nu")."""
    return [s.replace("v", "u") for s in lazy_pinyin(text, style=Style.NORMAL, v_to_u=False)]


def main() -> int:
    syllables = sorted({s for cp in range(0x4E00, 0xA000) for s in toneless(chr(cp)) if s.isascii() and s.isalpha()})
    entries: list[str] = []
    for line in (DATA / "injection_words.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith(("#", "[")):
            continue
        entries += [e.strip() for e in line.split(",") if CJK.search(e)]
    lines = ["# Toneless pinyin for the injection detector (quality/writings.py): every syllable, then the reading of",
             "# each Chinese entry of injection_words.txt. Written by scripts/injection_pinyin.py from pypinyin 0.55",
             "# (MIT); do not edit by hand.", "[syllables]"]
    lines += [" ".join(syllables[i : i + 20]) for i in range(0, len(syllables), 20)]
    lines.append("[readings]")
    lines += [f"{entry} {' '.join(toneless(entry))}" for entry in dict.fromkeys(entries)]
    (DATA / "injection_pinyin.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(syllables)} syllables, {len(dict.fromkeys(entries))} readings", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
