"""Where a question goes before anything is retrieved (Adaptive RAG's `route_question`): `direct` — a greeting,
thanks, or a question about the assistant itself, which has nothing to look up and gets a short reply saying what
the assistant does; `web_search` — a question naming something the knowledge base never mentions, when web
search is configured; `retrieve` — everything else, and whenever in doubt: a knowledge question routed away is a
lost answer.

Offline the decision is read from what the text does, not from a list of phrasings: `direct` when no content
word is left once stop words, question words, light verbs and the words of conversation itself
(`data/conversation_words.txt`: "hello", "thanks", "your name", 你好 ...) are set aside; `web_search` when a
name, identifier or number the question asks about (`terms.key_terms`) is not in the index's vocabulary at all and
the index knows fewer than half of the question's content words.
On the model backend one model call decides (llm/router.py) and any fault falls back to `retrieve`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from selfcrag.contract import Route, Vocabulary
from selfcrag.data_sections import read_sections
from selfcrag.language import Language, has_cjk, language_of
from selfcrag.prompts import messages
from selfcrag.text.sanitize import unreadable
from selfcrag.text.terms import join_pairs, key_terms, question_terms
from selfcrag.text.text import LIGHT_VERBS_ZH, STOPWORDS, keyword_tokens, words

if TYPE_CHECKING:
    from selfcrag.context import Context

# Longer than this many words, a text with nothing to look up is more likely a question badly put than small talk:
# it retrieves (and abstains saying what was missing) rather than getting a greeting back.
DIRECT_MAX_WORDS = 12
# A question whose content words the index knows at least this share of is within its coverage, whatever name it
# adds (benchmarks/route_questions.py measures the choice: 2/3 routed 14 of HaluEval's 500 answerable questions away).
COVERED_SHARE = 0.5
TOPICS_SHOWN = 5  # knowledge-base titles a direct reply names: enough to say what it covers, short enough to read
# Titles those are chosen from (the question's language first): a bound, so a greeting costs a knowledge base of a
# million documents what it costs one of a hundred; a language whose documents all come later is not named.
TITLES_READ = 100


@lru_cache(maxsize=1)
def conversation_words() -> tuple[frozenset[str], tuple[str, ...], frozenset[str]]:
    """The conversation words as a question's terms are matched: English keys and Chinese runs (each word
    tokenised as a question is: 你好 -> 好, 早上好 -> 早上好), the Chinese words themselves, and the single
    characters that are words on their own (conversation words of one character, light verbs)."""
    entries = [w for ws in read_sections("conversation_words.txt", _commas).values() for w in ws]
    forms = frozenset(form for entry in entries for form in join_pairs(list(question_terms(entry))))
    chinese = tuple(entry for entry in entries if has_cjk(entry))
    alone = frozenset(e for e in chinese if len(e) == 1) | frozenset(v for v in LIGHT_VERBS_ZH if len(v) == 1)
    return forms, chinese, alone


def _commas(line: str) -> list[str]:
    return [w.strip() for w in line.split(",") if w.strip()]


def content_to_look_up(question: str) -> list[str]:
    """The question's content words that are not conversation: what a retrieval would look for. A Chinese run of
    characters (cut into pairs by the tokenizer, joined back here) is conversation when every character of it lies
    in an occurrence of a conversation word, or is a word of conversation on its own (很高兴认识 = 很 高兴 认识;
    你能帮我吗 -> 能帮 = 能 帮), or the run is what a conversation word leaves once cut (你好 -> 好); 手机 is not,
    though 助手 holds 手."""
    keys, chinese, alone = conversation_words()
    terms = question_terms(question)
    left = [word for key, word in terms.items() if not has_cjk(key) and key not in keys]
    runs = join_pairs([w for k, w in terms.items() if has_cjk(k)])
    return left + [run for run in runs if run not in keys and not _spoken(run, chinese, alone)]


def _spoken(run: str, chinese: tuple[str, ...], alone: frozenset[str]) -> bool:
    covered = [c in alone or c in STOPWORDS for c in run]
    for entry in chinese:
        start = run.find(entry)
        while start >= 0:
            covered[start : start + len(entry)] = [True] * len(entry)
            start = run.find(entry, start + 1)
    return all(covered)


def nothing_to_look_up(question: str) -> bool:
    """A short text with letters the tokenizer reads and no content word beyond conversation: a greeting, thanks,
    or a question about the assistant. A text without letters, or in a script no index reads, is not one: the
    graph's own path tells the user why it cannot be read (routing.question_unreadable)."""
    if unreadable(question, []) or len(words(question)) > DIRECT_MAX_WORDS:
        return False
    return not content_to_look_up(question)


def unknown_key_terms(question: str, knows: Callable[[str], bool]) -> list[str]:
    """The names, identifiers and numbers the question asks about that the index has no word of, when the index
    also lacks most of the question's content words: no passage can answer it. One unknown name alone is not
    enough (a misspelling, an accent the index reads otherwise: on HaluEval that routed 145 of 500 answerable
    questions away; with the content words too, 3; SQuAD dev sample and its articles' other questions: 0)."""
    unknown = [word for word in key_terms(question).values() if not _known(word, knows)]
    content = list(question_terms(question).values())
    if not unknown or sum(_known(word, knows) for word in content) >= COVERED_SHARE * len(content):
        return []
    return unknown


def _known(word: str, knows: Callable[[str], bool]) -> bool:
    """Every token the index makes of the word is in its vocabulary."""
    return all(knows(token) for token in keyword_tokens(word))


def vocabulary_of(index: Any) -> Callable[[str], bool] | None:
    """The index's `knows(token)` (contract.Vocabulary: both built-in indexes), or None for an index without one."""
    return index.knows if isinstance(index, Vocabulary) else None


def indexed_content(question: str, index: Any) -> list[str]:
    """The question's content words that the index holds (none for an index without a vocabulary): a model's
    direct reply to a question naming them would skip what the knowledge base has on them."""
    knows = vocabulary_of(index)
    return [word for word in content_to_look_up(question) if knows and _known(word, knows)]


def route_offline(question: str, index: Any, web: bool) -> Route:
    """The route read from the text and the index's vocabulary (module docstring)."""
    if nothing_to_look_up(question):
        return Route("direct", "no content word to look up: conversation, not a question about the documents")
    knows = vocabulary_of(index)
    if web and knows is not None and (unknown := unknown_key_terms(question, knows)):
        return Route("web_search", f"the knowledge base never mentions: {', '.join(unknown)}")
    return Route("retrieve", "content to look up" + ("" if web else "; web search unavailable"))


class OfflineRouter:
    def route(self, question: str, index: Any, web: bool, settings: Context) -> Route:
        return route_offline(question, index, web)


def topics(index: Any, language: Language, n: int = TOPICS_SHOWN) -> list[str]:
    """Titles of the knowledge base's first TITLES_READ documents, those in the question's language first (none
    for an index without a `Vocabulary`)."""
    every = index.titles(max(n, TITLES_READ)) if isinstance(index, Vocabulary) else []
    return ([t for t in every if language_of(t) == language] or every)[:n]


def direct_reply(question: str, index: Any) -> str:
    """The reply to conversation: what the assistant does and what it can be asked about. It claims nothing about
    any topic, so it needs no evidence and cites none."""
    language = language_of(question)
    named = topics(index, language)
    if not named:
        return messages.phrase("direct_reply", language)
    return messages.phrase("direct_reply_topics", language, messages.listing(named, language))
