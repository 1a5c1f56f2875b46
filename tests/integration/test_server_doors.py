"""Who a real `langgraph dev` lets in as it comes, with no identity file: on a loopback address every request is the
operator `developer` (said once in its log); bound where the network reaches it (`--host 0.0.0.0`, as a deployed
server or a container is) it refuses every client without a token, its own endpoints included, and only the health
check answers. (With identities: tests/integration/test_server_auth.py.)"""

from __future__ import annotations

import httpx
import pytest
from langgraph_sdk import get_sync_client
from support.langgraph_server import langgraph_dev

pytestmark = pytest.mark.system  # a langgraph dev server

RETURNS = "How many days do I have to return an item?"


def test_langgraph_dev_on_loopback_answers_with_no_identities_saying_so_once(tmp_path):
    log = tmp_path / "langgraph-dev.log"
    with langgraph_dev({"SELFCRAG_HOME": str(tmp_path / "home")}, log=log) as url:
        client = get_sync_client(url=url)
        (assistant,) = client.assistants.search(graph_id="selfcrag")
        result = client.runs.wait(None, assistant["assistant_id"], input={"question": RETURNS})
        assert "30 days" in result["answer"] and result["decision"] != "abstain"
        assert httpx.get(f"{url}/info").status_code == 200  # the developer is the operator
    said = log.read_text().count("no identity file (SELFCRAG_AUTH_FILE) on `langgraph dev` at http://127.0.0.1:")
    assert said == 1, log.read_text()[-3000:]


def test_a_server_the_network_reaches_refuses_every_client_without_a_token(tmp_path):
    env = {"SELFCRAG_HOME": str(tmp_path / "home"), "SELFCRAG_OPEN_PATHS": "/metrics"}
    with langgraph_dev(env, host="0.0.0.0") as url:  # noqa: S104 (the point: a server others reach)
        assert httpx.get(f"{url}/ok").status_code == 200
        response = httpx.post(f"{url}/assistants/search", json={})
        assert response.status_code == 401
        assert response.json()["detail"].startswith("this server has no identities: set SELFCRAG_AUTH_FILE")
        for path in ("/info", "/docs", "/openapi.json"):
            assert httpx.get(f"{url}{path}").status_code == 401, path
        assert httpx.post(f"{url}/internal/truncate", json={}).status_code == 401
        assert httpx.get(f"{url}/metrics").status_code == 200  # the operator opened it (SELFCRAG_OPEN_PATHS)
