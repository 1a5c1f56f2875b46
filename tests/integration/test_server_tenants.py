"""Tenants on a shared server: a real `langgraph dev` whose identities carry a tenant (identities.py), over one
knowledge base holding two tenants' documents, driven through `langgraph_sdk`. Each asker retrieves only its own
tenant's documents, k of them when its tenant has fewer, better-matching documents in the other's way; a run
that asks for another tenant is refused in one line, and an identity without a tenant is not scoped."""

from __future__ import annotations

import httpx
import pytest
from langchain_core.documents import Document
from langgraph_sdk import get_sync_client
from support.langgraph_server import langgraph_dev

from selfcrag import ingest
from selfcrag.identities import add

pytestmark = pytest.mark.system  # a langgraph dev server

QUESTION = "How many days is the refund window for returns?"
GLOBEX = [Document(page_content=f"Refund window for returns: a refund is given within {10 + n} days of the "
                   f"return, for order class {n}.", id=f"globex-{n}", metadata={"tenant": "globex"})
          for n in range(40)]
ACME = [Document(page_content=text, id=f"acme-{n}", metadata={"tenant": "acme"})
        for n, text in enumerate(["Boots bought from us can be sent back unworn; we pay back in 45 days.",
                                  "Refunds for sandals take 30 days once the parcel is back.",
                                  "Socks are final sale, with no refund."])]


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("tenants")
    ingest([*GLOBEX, *ACME], work / "index")
    identities = work / "identities.json"
    tokens = {"alice": add(identities, "alice", "asker", tenant="acme"),
              "bob": add(identities, "bob", "asker", tenant="globex"),
              "dana": add(identities, "dana", "asker")}  # no tenant: every document
    env = {"SELFCRAG_AUTH_FILE": str(identities), "SELFCRAG_HOME": str(work / "home"),
           "SELFCRAG_INDEX_DIR": str(work / "index")}
    with langgraph_dev(env) as url:
        yield {name: get_sync_client(url=url, api_key=token) for name, token in tokens.items()}


def retrieved(client, **run) -> list[list[str]]:  # noqa: ANN001
    """The doc ids each retrieval round of a stateless run found."""
    result = client.runs.wait(None, "selfcrag", input={"question": QUESTION}, **run)
    return [[p["id"].split("#")[0] for p in step["passages"]] for step in result["trace"] if step["node"] == "retrieve"]


def test_each_asker_retrieves_only_its_own_tenants_documents_and_k_of_them(clients) -> None:
    alice = retrieved(clients["alice"], context={"k": 3})
    assert alice and all(len(found) == 3 and all(d.startswith("acme-") for d in found) for found in alice[:1])
    assert all(d.startswith("acme-") for found in alice for d in found)
    bob = retrieved(clients["bob"], context={"k": 3})
    assert bob and all(d.startswith("globex-") for found in bob for d in found)
    # dana is not scoped: the better-matching documents of either tenant, here globex's
    assert all(d.startswith("globex-") for found in retrieved(clients["dana"], context={"k": 3}) for d in found)
    # a scoped-free asker may narrow itself to a tenant (a run setting), seeing only that tenant then
    assert all(d.startswith("acme-") for found in retrieved(clients["dana"], context={"tenant": "acme"})
               for d in found)


def test_an_asker_cannot_widen_or_change_its_tenant(clients) -> None:
    alice = clients["alice"]
    for run in ({"context": {"tenant": "acme", "k": 3}},  # its own tenant, said again
                {"context": {"tenant": ""}}):  # "every document" for an unscoped asker; its own for alice
        assert all(d.startswith("acme-") for found in retrieved(alice, **run) for d in found)
    for run in ({"context": {"tenant": "globex"}}, {"config": {"configurable": {"tenant": "globex"}}}):
        with pytest.raises(httpx.HTTPStatusError) as caught:
            retrieved(alice, **run)
        assert caught.value.response.status_code == 403
        assert "alice retrieves only tenant 'acme'" in caught.value.response.text
