"""Text helpers shared by retrieval (BM25), the offline graders and the rule checks, for English and Chinese.

Words are lower-cased; identifiers such as `user_123`, `E1042` or `v2.3` stay whole so keyword retrieval can
find them, also inside Chinese text and when typed with full-width characters (`Ｅ１０４２`). Chinese has no
spaces between words: a run of Chinese characters is cut into overlapping character pairs ("退货期限" ->
退货 货期 期限) after splitting off function words (benchmarks/chinese_tokenisation.py measured this
against the jieba word segmenter; see docs/DESIGN.md). Numbers are normalised so "30", "30.0", "thirty",
"三十" and "３０" compare equal.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from selfcrag.language import CJK

# The keyword tokenisation's version. An index records it: BM25 postings cut another way match nothing.
TOKENIZER = "words/3 (accents folded; Chinese: character pairs)"
# Identifiers (user_123, E1042, v2.3, api-key) and plain words/numbers, or a run of Chinese characters.
_TOKEN = re.compile(rf"[A-Za-z0-9]+(?:[_.][A-Za-z0-9]+)*|[{CJK}]+")
_CJK_CHAR = re.compile(f"[{CJK}]")
# A sentence ends at . ! ? before a capital (English), after 。！？； unless a closing quote or bracket follows
# (“我的包裹在哪里？”进行报告 is one sentence), at a blank line, and before a list item.
_SENTENCE_END = re.compile(
    rf"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9{CJK}])|(?<=[。！？；])(?![”’」』）)\]】])\s*|\n{{2,}}|\n(?=\s*[-*#]|\s*\d+\.)"
)

STOPWORDS_EN = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her
    here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not
    now of off on once only or other our ours ourselves out over own same she should so some such than that the
    their theirs them themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves also may might
    must shall us per via within without whose de la le el s t d ll m o re ve y
    """.split()
)
# Chinese function words. They are also where a run of characters is cut before pairing, so the single
# characters here rarely sit inside a content word.
STOPWORDS_ZH = frozenset(
    """
    的 了 吗 呢 吧 啊 呀 哦 嘛 是 和 与 及 或 并 而 把 被 让 给 也 都 就 又 很 您 你 我 这 那
    我们 你们 您们 他们 她们 它们 咱们 自己 这个 那个 这些 那些 这里 那里 这样 那样 一个 一些 可以 能够 应该
    如果 因为 所以 但是 而且 或者 还是 然后 那么 已经 没有 请问
    """.split()
)
# Function words that are also part of content words — 地 (地址), 过 (通过), 有 (有效), 在 (在线), 他 (其他),
# 请 (申请) — are stop words only where they stand alone between two cuts; they never cut a run.
STOPWORDS_ZH_ALONE = frozenset("地 得 过 着 他 她 它 请 不 没 有 在 对 为 从 到 以 于 将 还 上 中 里 可 去 来".split())
# Question words say what kind of answer is expected; they are not content to match.
QUESTION_WORDS_EN = frozenset({"what", "which", "who", "whom", "whose", "when", "where", "why", "how", "many", "much"})
QUESTION_WORDS_ZH = frozenset(
    """
    什么 哪 哪个 哪些 哪里 哪儿 哪天 谁 怎么 怎样 怎么样 如何 为什么 为何 多少 多少钱 多久 多长 几 几个 几点 几号
    几天 几次 何时 是否 叫什么
    """.split()
)
QUESTION_WORDS = QUESTION_WORDS_EN | QUESTION_WORDS_ZH
# The Chinese question words are stop words too: they carry nothing to match (the English ones mostly were).
STOPWORDS = STOPWORDS_EN | STOPWORDS_ZH | STOPWORDS_ZH_ALONE | QUESTION_WORDS_ZH
# Verbs that frame a question without naming its topic ("E1042 是什么意思", "表示什么", "需要几天").
LIGHT_VERBS_ZH = frozenset("意思 表示 知道 告诉 需要 能 会 要 想 办 做".split())
# Where a run of Chinese characters is cut, longest first: function words, question words and the light verbs
# of two characters (错误代码表示 -> 错误代码 | 表示, no pair 码表; a single 会 stays, or 会员 would be cut).
_ZH_BREAKS = sorted(STOPWORDS_ZH | QUESTION_WORDS_ZH | {w for w in LIGHT_VERBS_ZH if len(w) > 1}, key=len, reverse=True)
_ZH_BREAK = re.compile("|".join(map(re.escape, _ZH_BREAKS)))

_NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
    "thousand": 1000, "million": 1_000_000, "billion": 1_000_000_000,
}
_NUMBER = re.compile(r"(?<![A-Za-z_])\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![A-Za-z_.\d])\d+(?:\.\d+)?(?![A-Za-z_]*\d)")
_ZH_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8,
              "九": 9}
_ZH_UNITS = {"十": 10, "百": 100, "千": 1000}
_ZH_MYRIADS = {"万": 10_000, "亿": 100_000_000}
_ZH_NUMERAL = re.compile("[零〇一二两三四五六七八九十百千万亿]+")
_ZH_PERCENT = re.compile("百分之([零〇一二两三四五六七八九十百千万亿]+)")
_SCALED = re.compile(r"(\d+(?:\.\d+)?)\s*([万亿])")  # 3万 = 30000
# Words written with numeral characters that are no numbers: 一定 (surely), 十分 (very), 万一 (in case) ...
_ZH_NOT_NUMBERS = re.compile("一定|一些|一切|一起|一样|一般|一直|一旦|一致|一律|一下|统一|唯一|之一|万一|千万|十分")


def normalise(text: str) -> str:
    """Full-width letters and digits as ASCII (NFKC): `Ｅ１０４２` is E1042. ASCII text is returned as is."""
    return text if text.isascii() else unicodedata.normalize("NFKC", text)


def fold(text: str) -> str:
    """Text for matching: accents dropped ("Möngke" and "Mongke" meet, and "ö" no longer cuts a word in two),
    full-width forms as ASCII, Chinese kept."""
    if text.isascii():
        return text
    return normalise("".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)))


def segment_chinese(run: str) -> list[str]:
    """Tokens of a run of Chinese characters: function words split off (and kept, for the stop-word filters),
    the pieces between them as overlapping character pairs, a single character as itself."""
    tokens: list[str] = []
    start = 0
    for match in [*_ZH_BREAK.finditer(run), None]:
        piece = run[start : match.start() if match else len(run)]
        tokens += [piece] if len(piece) == 1 else [piece[i : i + 2] for i in range(len(piece) - 1)]
        if match:
            tokens.append(match.group(0))
            start = match.end()
    return tokens


def words(text: str) -> list[str]:
    """Lower-cased tokens, accents folded, identifiers kept whole, Chinese segmented, punctuation dropped."""
    out: list[str] = []
    for token in _TOKEN.findall(fold(text)):
        if _CJK_CHAR.match(token):
            out += segment_chinese(token)
        else:
            out.append(token.lower())
    return out


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix stripper: enough for 'returns'/'returned'/'returning' to meet, cheap and deterministic."""
    if len(word) <= 3 or not word.isascii() or not word.isalpha():
        return word
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)] + keep
            if suffix == "s" and word.endswith("ss"):
                return word
            return base
    return word


def term(word: str) -> str:
    """A matching key for a word: text.stem plus two fixes so more inflections meet ("shipping"/"ship" and
    "arrives"/"arrive" stem differently): no final e, no doubled final consonant. Chinese is kept as is."""
    if not word.isascii():
        return word
    s = stem(word)
    if len(s) >= 4 and s.endswith("e"):
        s = s[:-1]
    if len(s) >= 4 and s[-1] == s[-2] and s[-1] not in "aeiouslz":
        s = s[:-1]
    return s


def content_words(text: str) -> list[str]:
    """Stemmed tokens without stop words or question words: what a passage must cover."""
    return [stem(w) for w in words(text) if w not in STOPWORDS and w not in QUESTION_WORDS]


def keyword_tokens(text: str) -> list[str]:
    """Tokens for BM25: stemmed, stop words removed."""
    return [stem(w) for w in words(text) if w not in STOPWORDS]


_ABBREVIATION = re.compile(r"(?:\b(?:Mr|Mrs|Ms|Dr|Prof|St|Jr|Sr|vs|etc|Inc|Ltd|Co|Mt)|\b[A-Z]|e\.g|i\.e)\.$")
# "No." abbreviates "number" only before one ("No. 5", "No. 1 hit"); before a word it is the answer "No." (a
# yes/no verdict the offline generator leads with), which must stay its own sentence for the checks to read.
_NUMBER_SIGN = re.compile(r"\bNo\.$")


def split_sentences(text: str) -> list[str]:
    """Sentences (and list items / headings) in order, stripped, empty ones dropped."""
    sentences: list[str] = []
    for part in _SENTENCE_END.split(text.strip()):
        part = part.strip() if part else ""
        if not part:
            continue
        joined = sentences and (_ABBREVIATION.search(sentences[-1]) or
                                (_NUMBER_SIGN.search(sentences[-1]) and part[:1].isdigit()))
        if joined:  # "Dr." or "U.S." or "No. 5" did not end a sentence
            sentences[-1] = f"{sentences[-1]} {part}"
        else:
            sentences.append(part)
    return sentences


def chinese_number(numeral: str) -> int:
    """三十 -> 30, 十五 -> 15, 一百零五 -> 105, 两万 -> 20000; without units, digit by digit (一二三 -> 123)."""
    if not any(c in _ZH_UNITS or c in _ZH_MYRIADS for c in numeral):
        return int("".join(str(_ZH_DIGITS[c]) for c in numeral))
    total = section = digit = 0
    for c in numeral:
        if c in _ZH_DIGITS:
            digit = _ZH_DIGITS[c]
        elif c in _ZH_UNITS:
            section += (digit or 1) * _ZH_UNITS[c]  # 十五: a unit without a digit before it counts once
            digit = 0
        else:
            total = (total + section + digit) * _ZH_MYRIADS[c]
            section = digit = 0
    return total + section + digit


def numbers(text: str) -> set[float]:
    """Numeric values in the text: digits (full-width too), number words ("thirty") and Chinese numerals (三十)."""
    text = normalise(text)
    values: set[float] = set()
    if _CJK_CHAR.search(text):
        text = _ZH_NOT_NUMBERS.sub(" ", text)
        for pattern, read in ((_ZH_PERCENT, lambda m: chinese_number(m.group(1))),
                              (_SCALED, lambda m: float(m.group(1)) * _ZH_MYRIADS[m.group(2)])):
            values.update(float(read(m)) for m in pattern.finditer(text))
            text = pattern.sub(" ", text)  # read once: 百分之十 is 10, not 100 and 10
        values.update(float(chinese_number(m)) for m in _ZH_NUMERAL.findall(text))
    for match in _NUMBER.findall(text):
        try:
            values.add(float(match.replace(",", "")))
        except ValueError:
            continue
    for w in words(text):
        if w in _NUMBER_WORDS:
            values.add(float(_NUMBER_WORDS[w]))
    return values


def approx_tokens(text: str) -> int:
    """A cheap token count: whitespace words, and each Chinese character as one (model tokenizers spend about
    one token per character). Budgets only need to be roughly right offline."""
    cjk = len(_CJK_CHAR.findall(text))
    return len(text.split()) if not cjk else cjk + len(_CJK_CHAR.sub(" ", text).split())


def repeated_share(text: str, source: str, n: int = 3) -> float:
    """The share of `text`'s runs of `n` words that also occur in `source` (0.0 for a text shorter than `n`
    words): how much of a reply is a copy of what it was given rather than words of its own."""
    mine, theirs = words(text), words(source)
    runs = [tuple(mine[i : i + n]) for i in range(len(mine) - n + 1)]
    if not runs:
        return 0.0
    given = {tuple(theirs[i : i + n]) for i in range(len(theirs) - n + 1)}
    return sum(run in given for run in runs) / len(runs)
