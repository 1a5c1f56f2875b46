"""`retriever_factory` names a LangChain VectorStore or retriever by import path (knowledge/configured.py): made once
with `retriever_kwargs` and the run's embeddings, searched for the run's k with relevance scores; a factory that is
missing, malformed, failing or of the wrong kind is said in one line; a run may never name one."""

from __future__ import annotations

import pytest

from selfcrag import Context, IngestError, SettingsError
from selfcrag.backend import LazyEmbedder, searched
from selfcrag.trust_boundary import resolve

STORE = {"retriever_factory": "support.stores:policies", "retriever_kwargs": {"prefix": "p"}}


def test_a_vector_store_by_import_path_gets_the_runs_embeddings_and_answers_for_the_runs_k():
    settings = Context(**STORE, k=2)
    passages = searched(None, LazyEmbedder(), settings).retrieve("How long do refunds take?", settings)
    assert [p["doc_id"] for p in passages][:1] == ["p-0"] and len(passages) == 2
    assert passages[0]["title"] == "Policy 0" and passages[0]["score"] > passages[1]["score"]  # relevance scores
    assert searched(None, LazyEmbedder(), settings) is searched(None, LazyEmbedder(), Context(**STORE))  # made once


def test_a_retriever_by_import_path_answers_as_it_returns():
    settings = Context(retriever_factory="support.stores:FirstTwo", k=1)
    assert [p["doc_id"] for p in searched(None, LazyEmbedder(), settings).retrieve("anything", settings)] == ["fixed-0"]


@pytest.mark.parametrize(("values", "says"), [
    ({"retriever_factory": "support.stores"}, "retriever_factory must be module:attribute"),
    ({"retriever_factory": "no_such_package_here:Store"}, "no module no_such_package_here is installed"),
    ({"retriever_kwargs": {"prefix": "p"}}, "retriever_kwargs without retriever_factory"),
    ({**STORE, "index_dir": "./my-index"}, "set index_dir or retriever_factory, not both"),
])  # fmt: skip
def test_a_factory_that_cannot_serve_is_refused_when_the_settings_are_made(values, says):
    with pytest.raises(SettingsError, match=says):
        Context.from_env(**values)


@pytest.mark.parametrize(("values", "says"), [
    ({"retriever_factory": "support.stores:nothing"}, "module support.stores has no nothing"),
    ({"retriever_factory": "support.stores:policies", "retriever_kwargs": {"bogus": 1}},
     r"policies\(\*\*retriever_kwargs\) failed: TypeError: "),
    ({"retriever_factory": "support.stores:not_a_store"}, "returned a dict, not a LangChain VectorStore"),
])  # fmt: skip
def test_a_factory_that_fails_is_said_in_one_line_at_the_first_search(values, says):
    with pytest.raises(IngestError, match=says) as failed:
        searched(None, LazyEmbedder(), Context(**values))
    assert "\n" not in str(failed.value)


def test_the_environment_gives_the_kwargs_as_json_and_a_run_may_not_name_a_factory(monkeypatch):
    monkeypatch.setenv("SELFCRAG_RETRIEVER_FACTORY", "support.stores:policies")
    monkeypatch.setenv("SELFCRAG_RETRIEVER_KWARGS", '{"prefix": "env"}')
    assert Context.from_env().retriever_kwargs == {"prefix": "env"}
    monkeypatch.setenv("SELFCRAG_RETRIEVER_KWARGS", '["prefix"]')
    with pytest.raises(SettingsError, match="SELFCRAG_RETRIEVER_KWARGS must be a JSON object"):
        Context.from_env()
    with pytest.raises(SettingsError, match="allow_per_run cannot open retriever_factory"):
        Context(allow_per_run=("retriever_factory",))
    with pytest.raises(SettingsError, match="retriever_factory is an operator setting"):
        resolve(Context(retriever_factory="os:system"), Context())
