from __future__ import annotations

import os

# The tests never reach a network service: no web search key, no model key.
os.environ.pop("TAVILY_API_KEY", None)
os.environ.pop("OPENAI_API_KEY", None)
os.environ.setdefault("LANGGRAPH_CLI_NO_ANALYTICS", "1")
os.environ.setdefault("LANGGRAPH_NO_VERSION_CHECK", "1")
