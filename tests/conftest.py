from __future__ import annotations

import os
import tempfile

# The tests never reach a network service: no web search key, no model key.
os.environ.pop("TAVILY_API_KEY", None)
os.environ.pop("OPENAI_API_KEY", None)
os.environ.setdefault("LANGGRAPH_CLI_NO_ANALYTICS", "1")
os.environ.setdefault("LANGGRAPH_NO_VERSION_CHECK", "1")
# The built sample index is cached per test session, not in the user's home.
os.environ["SELFCRAG_CACHE_DIR"] = tempfile.mkdtemp(prefix="selfcrag-test-cache-")
