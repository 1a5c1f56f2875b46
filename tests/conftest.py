from __future__ import annotations

import os
import tempfile

# The tests never reach a network service: no web search key, no model key.
os.environ.pop("TAVILY_API_KEY", None)
os.environ.pop("OPENAI_API_KEY", None)
os.environ.pop("OPENAI_BASE_URL", None)  # a compatible server in the environment would switch to models too
# Settings from the developer's shell (SELFCRAG_BACKEND=model, a SELFCRAG_INDEX_DIR...) would change what runs.
for name in [n for n in os.environ if n.startswith("SELFCRAG_")]:
    del os.environ[name]
os.environ.setdefault("LANGGRAPH_CLI_NO_ANALYTICS", "1")
os.environ.setdefault("LANGGRAPH_NO_VERSION_CHECK", "1")
# The built sample index is cached per test session, not in the user's home.
os.environ["SELFCRAG_CACHE_DIR"] = tempfile.mkdtemp(prefix="selfcrag-test-cache-")
# Threads, reviews and run records go to a store of this session, never the user's (SELFCRAG_HOME).
os.environ["SELFCRAG_HOME"] = tempfile.mkdtemp(prefix="selfcrag-test-home-")

# The store's database fixtures (`store_url`: SQLite and a real PostgreSQL) and the knowledge base's (`kb_location`:
# a directory and PostgreSQL + pgvector), for any test that names them.
pytest_plugins = ["support.store", "support.knowledge_base"]
