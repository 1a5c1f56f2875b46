from __future__ import annotations

import os
import shutil
import tempfile

import pytest

# The tests never reach a network service: no web search key, no model key.
os.environ.pop("TAVILY_API_KEY", None)
os.environ.pop("OPENAI_API_KEY", None)
os.environ.pop("OPENAI_BASE_URL", None)  # a compatible server in the environment would switch to models too
# Settings from the developer's shell (SELFCRAG_BACKEND=model, a SELFCRAG_INDEX_DIR...) would change what runs.
for name in [n for n in os.environ if n.startswith("SELFCRAG_")]:
    del os.environ[name]
os.environ.setdefault("LANGGRAPH_CLI_NO_ANALYTICS", "1")
os.environ.setdefault("LANGGRAPH_NO_VERSION_CHECK", "1")
# The built sample index (and the embedding model's optimized copy, ~90 MB) is cached per test session, not in the
# user's home, and removed when the session ends (pytest_unconfigure).
SESSION_CACHE = os.environ["SELFCRAG_CACHE_DIR"] = tempfile.mkdtemp(prefix="selfcrag-test-cache-")
# Threads, reviews and run records go to a store of this session, never the user's (SELFCRAG_HOME).
os.environ["SELFCRAG_HOME"] = tempfile.mkdtemp(prefix="selfcrag-test-home-")

# The store's database fixtures (`store_url`: SQLite and a real PostgreSQL) and the knowledge base's (`kb_location`:
# a directory and PostgreSQL + pgvector), for any test that names them.
pytest_plugins = ["support.store", "support.knowledge_base"]

# The README's test command runs the quick suite: what runs in this process or in short-lived children of it. Tests
# marked `system` start systems outside it — a PostgreSQL cluster, a `langgraph dev` server, headless Chromium, the
# real 0.5B model — or stop and kill processes mid-run; `pytest -m system` runs them alone, `--system` with the
# rest, and CI (.ci/run) runs both commands.
SYSTEM = "system"
SYSTEM_LEFT = pytest.StashKey[int]()  # how many were left out, for the summary line


def pytest_addoption(parser):  # noqa: ANN001, ANN201
    parser.addoption("--system", action="store_true", help="also run the system tests (PostgreSQL, langgraph dev, "
                     "Chromium, the real model, killed processes); `-m system` runs them alone")  # fmt: skip


def starts_postgres(item: pytest.Item) -> bool:
    """Whether the test uses a PostgreSQL server of the session: named, or as the PostgreSQL half of `store_url` or
    `kb_location` (their SQLite and directory halves stay in the quick suite)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return bool({"postgres_url", "pgvector_url"} & set(getattr(item, "fixturenames", ()))) or "postgres" in (
        params.get("store_url"), params.get("kb_location"))


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m selection reads the marks
def pytest_collection_modifyitems(config, items):  # noqa: ANN001, ANN201
    for item in items:
        if starts_postgres(item):
            item.add_marker(SYSTEM)
    if config.getoption("--system") or config.option.markexpr:  # asked for, or chosen by a -m expression
        return
    system = [item for item in items if item.get_closest_marker(SYSTEM)]
    if system:
        config.hook.pytest_deselected(items=system)
        items[:] = [item for item in items if not item.get_closest_marker(SYSTEM)]
        config.stash[SYSTEM_LEFT] = len(system)
        if hasattr(config, "workeroutput"):  # a pytest-xdist worker (`-n auto`): the controller prints the line
            config.workeroutput["system_left"] = len(system)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: a worker has finished (each collected the same tests)
def pytest_testnodedown(node, error):  # noqa: ANN001, ANN201
    left = getattr(node, "workeroutput", {}).get("system_left", 0)
    node.config.stash[SYSTEM_LEFT] = max(node.config.stash.get(SYSTEM_LEFT, 0), left)


def pytest_terminal_summary(terminalreporter, config):  # noqa: ANN001, ANN201
    if left := config.stash.get(SYSTEM_LEFT, 0):
        terminalreporter.write_line(f"{left} system tests not run here: `python -m pytest -q -m system` runs them "
                                    "(PostgreSQL, langgraph dev servers, Chromium, the real model; CI runs both)")



def pytest_unconfigure(config):  # noqa: ANN001, ANN201
    shutil.rmtree(SESSION_CACHE, ignore_errors=True)  # derived files only: the next session builds its own
