"""Web search through Tavily (`tavily-python`). Without TAVILY_API_KEY it is unavailable, and the graph
takes the retrieval-only path. Every failure becomes a WebSearchError so the graph can degrade."""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING, Any

from selfcrag.contract import Passage
from selfcrag.errors import WebSearchError
from selfcrag.llm.calls import time_left, within
from selfcrag.text.redaction import redact

if TYPE_CHECKING:
    from selfcrag.context import Context


class TavilyWebSearch:
    def __init__(
        self, api_key: str | None = None, api_base_url: str | None = None, timeout: float | None = None
    ) -> None:
        self._api_key = api_key if api_key is not None else os.environ.get("TAVILY_API_KEY", "")
        # TAVILY_API_BASE_URL points the real client at a proxy or a local test server.
        self._api_base_url = api_base_url or os.environ.get("TAVILY_API_BASE_URL") or None
        self._timeout = timeout  # None: the run's `web_timeout` setting
        self._client: Any = None
        self.searches = 0  # requests sent, this object's life long

    @property
    def available(self) -> bool:
        return bool(self._api_key)

    def search(self, query: str, settings: Context) -> list[Passage]:
        """One search, over in `timeout` (else `web_timeout`) seconds in all and never past the run's deadline:
        the client's timeout is per read, so a server that trickles its reply would hold it for longer; the
        request runs in a worker thread and we stop waiting at the deadline (calls.within)."""
        if not self.available:
            raise WebSearchError("web search unavailable: TAVILY_API_KEY is not set")
        seconds = self._timeout if self._timeout is not None else settings.web_timeout
        try:
            if self._client is None:
                from tavily import TavilyClient

                self._client = TavilyClient(api_key=self._api_key, api_base_url=self._api_base_url)
            self.searches += 1
            # The client's own timeout ends the abandoned request soon after we stop waiting.
            reply = within(seconds, lambda: self._client.search(query, max_results=settings.web_results,
                                                                timeout=time_left(seconds)), "web search")  # fmt: skip
        except Exception as exc:  # any client, HTTP or timeout fault degrades the run, never crashes it
            detail = redact(" ".join(str(exc)[:300].split()))
            raise WebSearchError(f"web search failed: {type(exc).__name__}: {detail}") from exc
        results = reply.get("results") if isinstance(reply, dict) else None
        if not isinstance(results, list):
            raise WebSearchError("web search failed: reply has no result list")
        return [passage for r in results if (passage := _to_passage(r)) is not None]


def _to_passage(result: Any) -> Passage | None:
    if not isinstance(result, dict) or not result.get("content") or not result.get("url"):
        return None
    url = str(result["url"])
    doc_id = "web:" + hashlib.sha1(url.encode()).hexdigest()[:10]
    score = result.get("score")
    return Passage(
        id=f"{doc_id}#0",
        doc_id=doc_id,
        chunk_index=0,
        title=str(result.get("title") or url),
        source=url,
        text=str(result["content"]),
        score=min(1.0, max(0.0, float(score))) if isinstance(score, (int, float)) else 0.5,
        origin="web",
    )
