"""Where a question goes before anything is retrieved (Adaptive RAG's `route_question`): `direct` — a greeting,
thanks, or a question about the assistant itself, which has nothing to look up and gets a short reply saying what
the assistant does; `web_search` — a question naming something the knowledge base never mentions, when web
search is configured; `retrieve` — everything else, and whenever in doubt: a knowledge question routed away is a
lost answer.

Offline the decision is read from what the text does, not from a list of phrasings: `direct` when no content
word is left once stop words, question words, light verbs and the words of conversation itself
(`data/conversation_words.txt`: "hello", "thanks", "your name", 你好 ...) are set aside; `web_search` when a
name, identifier or number the question asks about (`terms.key_terms`) is not in the index's vocabulary at all.
On the model backend one model call decides (components/llm/router.py) and any fault falls back to `retrieve`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from selfcrag.components.base import Route, RouteName
from selfcrag.components.sanitize import unreadable
from selfcrag.components.terms import key_terms, question_terms
from selfcrag.components.text import LIGHT_VERBS_ZH, STOPWORDS, keyword_tokens, words
from selfcrag.data_sections import read_sections
from selfcrag.language import Language, has_cjk, language_of
from selfcrag.prompts import messages

if TYPE_CHECKING:
    from selfcrag.context import Context

ROUTES: tuple[RouteName, ...] = ("direct", "web_search", "retrieve")
# Longer than this many words, a text with nothing to look up is more likely a question badly put than small talk:
# it retrieves (and abstains saying what was missing) rather than getting a greeting back.
DIRECT_MAX_WORDS = 12
TOPICS_SHOWN = 5  # knowledge-base titles a direct reply names: enough to say what it covers, short enough to read


@lru_cache(maxsize=1)
def conversation_terms() -> tuple[frozenset[str], frozenset[str]]:
    """The matching keys of the conversation words (tokenised as questions are), and their Chinese characters."""
    entries = [w for ws in read_sections("conversation_words.txt", _commas).values() for w in ws]
    keys = frozenset(key for entry in entries for key in question_terms(entry))
    chars = frozenset(c for entry in entries if has_cjk(entry) for c in entry) | frozenset("".join(LIGHT_VERBS_ZH))
    return keys, chars


def _commas(line: str) -> list[str]:
    return [w.strip() for w in line.split(",") if w.strip()]


def content_to_look_up(question: str) -> list[str]:
    """The question's content words that are not conversation: what a retrieval would look for. A Chinese pair is
    conversation when each of its characters belongs to a conversation word or a light verb (你能帮我吗 -> 能帮)."""
    keys, chars = conversation_terms()
    left = []
    for key, word in question_terms(question).items():
        if key in keys or (has_cjk(key) and all(c in chars or c in STOPWORDS for c in key)):
            continue
        left.append(word)
    return left


def nothing_to_look_up(question: str) -> bool:
    """A short text with letters the tokenizer reads and no content word beyond conversation: a greeting, thanks,
    or a question about the assistant. A text without letters, or in a script no index reads, is not one: the
    graph's own path tells the user why it cannot be read (routing.question_unreadable)."""
    if unreadable(question, []) or len(words(question)) > DIRECT_MAX_WORDS:
        return False
    return not content_to_look_up(question)


def unknown_key_terms(question: str, knows: Callable[[str], bool]) -> list[str]:
    """The names, identifiers and numbers the question asks about that the index has no word of: no passage can
    answer it. A key term counts as known when every token it makes is in the index's vocabulary."""
    return [word for word in key_terms(question).values() if not all(knows(t) for t in keyword_tokens(word))]


def vocabulary_of(index: Any) -> Callable[[str], bool] | None:
    """The index's `knows(token)` (the built-in index's keyword vocabulary), or None for an index without one."""
    knows = getattr(index, "knows", None)
    return knows if callable(knows) else None


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
    """Titles of the knowledge base's documents, those in the question's language first (the index's `titles()`;
    none for an index without it)."""
    titles = getattr(index, "titles", None)
    every = list(titles()) if callable(titles) else []
    return ([t for t in every if language_of(t) == language] or every)[:n]


def direct_reply(question: str, index: Any) -> str:
    """The reply to conversation: what the assistant does and what it can be asked about. It claims nothing about
    any topic, so it needs no evidence and cites none."""
    language = language_of(question)
    named = topics(index, language)
    if not named:
        return messages.phrase("direct_reply", language)
    return messages.phrase("direct_reply_topics", language, messages.listing(named, language))
