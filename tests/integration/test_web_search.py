"""Web search through the real `tavily-python` client against a local Tavily stand-in, inside the whole
offline graph: results become documents, are graded like retrieved ones and cited by URL; every failure
degrades to the retrieval-only path and says so in the trace."""

from __future__ import annotations

import pytest
from support.tavily_server import TavilyTestServer

from selfcrag import Context, build_graph, offline_components
from selfcrag.errors import WebSearchError
from selfcrag.web_search import TavilyWebSearch

# The sample knowledge base says nothing about Antarctica: CRAG grades it `incorrect` and asks the web.
QUESTION = "Do you ship to Antarctica?"
ON_TOPIC = {
    "url": "https://news.example.org/parcelly-antarctica",
    "title": "Parcelly now ships to Antarctica",
    "content": "Parcelly ships to Antarctica research stations by sea freight twice a year. "
    "Deliveries to Antarctica take 8 to 12 weeks.",
    "score": 0.93,
}
OFF_TOPIC = {
    "url": "https://wiki.example.org/emperor-penguin",
    "title": "Emperor penguin",
    "content": "The emperor penguin is the tallest and heaviest of all living penguin species.",
    "score": 0.41,
}


@pytest.fixture
def tavily():
    with TavilyTestServer([ON_TOPIC, OFF_TOPIC]) as server:
        yield server


def graph_for(server: TavilyTestServer, api_key: str = TavilyTestServer.api_key, timeout: float = 5.0):
    web = TavilyWebSearch(api_key=api_key, api_base_url=server.url, timeout=timeout)
    return build_graph(offline_components(web=web))


def steps(result, node):
    return [s for s in result["trace"] if s["node"] == node]


def test_results_become_documents_with_url_title_and_content(tavily):
    client = TavilyWebSearch(api_key="test", api_base_url=tavily.url)
    passages = client.search("ship antarctica", Context(web_results=2))
    assert [p["source"] for p in passages] == [ON_TOPIC["url"], OFF_TOPIC["url"]]
    assert passages[0]["title"] == ON_TOPIC["title"] and passages[0]["text"] == ON_TOPIC["content"]
    assert passages[0]["origin"] == "web" and passages[0]["score"] == pytest.approx(0.93)
    assert tavily.requests == [{"query": "ship antarctica", "max_results": 2, "authorization": "Bearer test"}]


def test_a_result_without_url_or_content_is_skipped(tavily):
    tavily.results = [{"title": "no url", "content": "text"}, {"url": "https://a.example", "content": ""}, ON_TOPIC]
    passages = TavilyWebSearch(api_key="test", api_base_url=tavily.url).search("q", Context())
    assert [p["source"] for p in passages] == [ON_TOPIC["url"]]


def test_a_question_the_knowledge_base_cannot_cover_searches_the_web_first_then_falls_back_to_it(tavily):
    question = "Who founded the Zorblax Institute in Reykjavik?"  # no word of its names is in the sample
    result = graph_for(tavily).invoke({"question": question})
    nodes = [s["node"] for s in result["trace"]]
    assert nodes[:5] == ["prepare", "contextualize", "route_question", "web_search", "retrieve"]
    route = steps(result, "route_question")[0]
    assert route["decision"] == "web_search" and "zorblax" in route["reason"]
    assert tavily.requests[0]["query"] == question  # asked as the user asked it: no rewrite before the first search
    assert steps(result, "web_search")[0]["urls"] == []  # the stand-in's results are off topic: the knowledge base next
    assert result["decision"] == "abstain"
    without_web = build_graph(offline_components()).invoke({"question": question})
    assert steps(without_web, "route_question")[0]["decision"] == "retrieve"


def test_web_results_are_graded_and_the_answer_cites_the_url(tavily):
    result = graph_for(tavily).invoke({"question": QUESTION})

    assert [s["node"] for s in result["trace"]][:7] == [
        "prepare", "contextualize", "route_question", "retrieve", "grade_documents", "rewrite_query",
        "web_search"]  # fmt: skip
    assert steps(result, "grade_documents")[0]["decision"] == "incorrect"
    (search,) = steps(result, "web_search")
    # Graded like retrieved passages: the penguin page is off topic and does not reach generation.
    assert search["urls"] == [ON_TOPIC["url"]]
    assert "2 results" in search["reason"] and "1 relevant" in search["reason"]
    assert tavily.requests[0]["query"] == steps(result, "rewrite_query")[0]["query"]

    assert result["decision"] in ("answer", "answer_with_caveat")
    assert "Antarctica" in result["answer"]
    assert [c["source"] for c in result["citations"]] == [ON_TOPIC["url"]]
    assert all(f"[{c['ref']}]" in result["answer"] for c in result["citations"])
    assert result["citations"][0]["quote"] in ON_TOPIC["content"]


def test_web_search_off_in_context_takes_the_retrieval_only_path(tavily):
    result = graph_for(tavily).invoke({"question": QUESTION}, context=Context(web_search=False))
    assert tavily.requests == []
    assert not steps(result, "web_search")
    assert result["decision"] == "abstain"


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("timeout", "TimeoutError"),
        ("status 500", "500"),
        ("status 429", "UsageLimitExceededError"),
        ("wrong key", "InvalidAPIKeyError"),
        ("not json", "web search failed"),
    ],
)
def test_failures_degrade_to_retrieval_only_and_are_traced(tavily, fault, expected):
    api_key = "test"
    if fault == "timeout":
        tavily.delay = 3.0
    elif fault.startswith("status"):
        tavily.fail_status = int(fault.split()[1])
    elif fault == "wrong key":
        api_key = "not-the-key"
    else:
        tavily.not_json = True

    result = graph_for(tavily, api_key=api_key, timeout=0.5).invoke({"question": QUESTION})

    (search,) = steps(result, "web_search")
    assert search["decision"] == "unavailable"
    assert expected in search["reason"]
    after = [s["node"] for s in result["trace"]]
    after = after[after.index("web_search") + 1 :]
    # Retrieval only from here on: a knowledge-base rewrite (this question has rounds left), no web. (Its rewrite
    # adds no term the question lacked while every passage was rejected, so it retrieves nothing again.)
    assert "rewrite_query" in after and "web_search" not in after
    rewrites = [s for s in result["trace"][result["trace"].index(search) + 1 :] if s["node"] == "rewrite_query"]
    assert rewrites[0]["decision"] != "web query"
    assert len(tavily.requests) == 1
    assert result["decision"] == "abstain" and result["answer"].startswith("I don't know")


def test_failure_is_a_web_search_error_for_the_node_to_handle(tavily):
    tavily.fail_status = 500
    with pytest.raises(WebSearchError, match="web search failed"):
        TavilyWebSearch(api_key="test", api_base_url=tavily.url).search("q", Context())
