"""Settings, the trace reducer, text helpers and web search without a key."""

from __future__ import annotations

import pytest

from selfcrag.context import Context
from selfcrag.errors import WebSearchError
from selfcrag.state import add_steps
from selfcrag.text.text import content_words, numbers, split_sentences, words
from selfcrag.trust_boundary import settings_of
from selfcrag.web_search import TavilyWebSearch


def test_context_reads_env_defaults_and_overrides(monkeypatch):
    monkeypatch.setenv("SELFCRAG_MAX_RETRIEVAL_ROUNDS", "5")
    monkeypatch.setenv("SELFCRAG_HUMAN_REVIEW", "true")
    ctx = Context.from_env(k=7)
    assert (ctx.max_retrieval_rounds, ctx.human_review, ctx.k) == (5, True, 7)
    assert settings_of(None).max_retrieval_rounds == 5
    assert settings_of({"k": 3}).k == 3


def test_context_rejects_bad_values(monkeypatch):
    with pytest.raises(ValueError, match="lower_threshold"):
        Context(lower_threshold=0.8, upper_threshold=0.5)
    with pytest.raises(ValueError, match="max_retrieval_rounds"):
        Context(max_retrieval_rounds=0)
    monkeypatch.setenv("SELFCRAG_K", "many")
    with pytest.raises(ValueError, match="SELFCRAG_K"):
        Context.from_env()


def test_every_setting_has_a_description():
    assert all(f.description for f in Context.model_fields.values())


def test_trace_reducer_appends_and_restarts_on_prepare():
    steps = add_steps([{"node": "prepare"}], [{"node": "retrieve"}])
    assert [s["node"] for s in steps] == ["prepare", "retrieve"]
    assert add_steps(steps, [{"node": "prepare", "reason": "new run"}]) == [{"node": "prepare", "reason": "new run"}]


def test_words_keep_identifiers_whole():
    assert {"e1042", "user_123", "v2.3"} <= set(words("Error E1042 for user_123 on v2.3."))
    assert content_words("How many days do I have to return an item?") == ["day", "return", "item"]


def test_sentences_and_numbers():
    sentences = split_sentences("You have 30 days. Dr. Smith agrees! Next.")
    assert sentences == ["You have 30 days.", "Dr. Smith agrees!", "Next."]
    assert numbers("30 days, $1,200.50, thirty, E1042 user_123") == {30.0, 1200.5}


def test_no_abbreviates_number_only_before_one():
    # A verdict "No." leads the offline answer to a yes/no question: the checks read the sentence after it alone.
    assert split_sentences("No. Larry Hagman was an actor.") == ["No.", "Larry Hagman was an actor."]
    assert split_sentences("It reached No. 5 on the chart. No. It did not.") == [
        "It reached No. 5 on the chart.", "No.", "It did not."]


def test_web_search_without_key_is_unavailable_and_raises_a_web_error():
    web = TavilyWebSearch(api_key="")
    assert not web.available
    with pytest.raises(WebSearchError, match="unavailable"):
        web.search("q", Context())


def test_web_search_network_fault_becomes_web_error():
    web = TavilyWebSearch(api_key="tvly-test", api_base_url="http://127.0.0.1:9", timeout=2)
    with pytest.raises(WebSearchError, match="web search failed"):
        web.search("q", Context())
