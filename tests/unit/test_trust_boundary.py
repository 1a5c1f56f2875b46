"""The trust boundary between run settings and operator settings (context.py `resolve`)."""

from __future__ import annotations

import pytest

from selfcrag import Context, build_graph
from selfcrag.context import NEVER_PER_RUN, OPERATOR_SETTINGS
from selfcrag.errors import SettingsError
from selfcrag.trust_boundary import resolve

OPERATOR = Context(index_dir="/srv/index", base_url="http://models.internal/v1", cap_k=8)


def test_every_setting_is_either_a_run_or_an_operator_setting_and_operator_ones_say_so():
    for name, field in Context.model_fields.items():
        assert (field.json_schema_extra or {}).get("scope") in ("run", "operator"), name
        assert field.description.startswith("Operator setting") == (name in OPERATOR_SETTINGS), name
    assert {"index_dir", "base_url", "generator_model", "embeddings", "llm_timeout", "cap_llm_calls"} <= (
        OPERATOR_SETTINGS)
    assert {"k", "domain", "risk", "max_retrieval_rounds", "max_llm_calls", "human_review"}.isdisjoint(
        OPERATOR_SETTINGS)


def test_a_run_changes_run_settings_and_keeps_the_operators():
    settings = resolve({"k": 3, "domain": "medical"}, OPERATOR)
    assert (settings.k, settings.domain) == (3, "medical")
    assert (settings.index_dir, settings.base_url) == ("/srv/index", "http://models.internal/v1")
    assert resolve(None, OPERATOR) is OPERATOR and resolve({}, OPERATOR) is OPERATOR


@pytest.mark.parametrize("asked", [{"base_url": "http://attacker/v1"}, {"index_dir": "/etc"},
                                   {"generator_model": "openai:gpt-4o"}, {"cap_k": 1000}, {"llm_timeout": 9999}])
def test_an_operator_setting_with_a_value_of_the_runs_own_is_refused(asked):
    name = next(iter(asked))
    with pytest.raises(SettingsError, match=f"{name} is an operator setting"):
        resolve(asked, OPERATOR)


def test_repeating_the_operators_value_or_the_default_is_not_a_request():
    settings = resolve({"base_url": "http://models.internal/v1", "index_dir": "", "backend": "auto"}, OPERATOR)
    assert (settings.base_url, settings.index_dir) == ("http://models.internal/v1", "/srv/index")


def test_caps_bound_what_a_run_may_ask_for():
    assert resolve({"k": 8}, OPERATOR).k == 8
    with pytest.raises(SettingsError, match=r"k=9 is above this deployment's cap of 8 \(cap_k, SELFCRAG_CAP_K\)"):
        resolve({"k": 9}, OPERATOR)
    for name, value in {"max_retrieval_rounds": 6, "max_generations": 5, "max_llm_calls": 41, "web_results": 11,
                        "max_strips": 21, "context_tokens": 8001, "history_turns": 21}.items():
        with pytest.raises(SettingsError, match=f"{name}={value} is above"):
            resolve({name: value}, Context())


def test_the_operator_may_open_the_index_but_never_endpoints_models_or_caps():
    opened = Context(allow_per_run=("index_dir",))
    assert resolve({"index_dir": "/data/other"}, opened).index_dir == "/data/other"
    with pytest.raises(SettingsError, match="base_url is an operator setting"):
        resolve({"base_url": "http://attacker/v1"}, opened)
    for name in NEVER_PER_RUN:
        with pytest.raises(SettingsError, match="cannot open"):
            Context(allow_per_run=(name,))
    with pytest.raises(SettingsError, match="names no operator setting"):
        Context(allow_per_run=("k",))


def test_bad_values_are_one_line_naming_the_field():
    with pytest.raises(SettingsError, match=r"^invalid settings: max_llm_calls: Input should be a valid integer"):
        Context(max_llm_calls="abc")
    with pytest.raises(SettingsError, match="no_such_setting: no such setting"):
        resolve({"no_such_setting": 1}, OPERATOR)
    with pytest.raises(SettingsError, match="temperature: Input should be less than or equal to 2"):
        Context(temperature=5)


def test_environment_defaults_apply_under_any_context_and_the_environment_is_named_in_errors(monkeypatch):
    monkeypatch.setenv("SELFCRAG_K", "7")
    monkeypatch.setenv("SELFCRAG_ALLOW_PER_RUN", "index_dir, embeddings")
    base = Context.from_env()
    assert base.allow_per_run == ("index_dir", "embeddings")
    assert resolve({"domain": "legal"}, base).k == 7  # a context that does not mention k keeps the operator's
    monkeypatch.setenv("SELFCRAG_CAP_K", "many")
    with pytest.raises(SettingsError, match=r"SELFCRAG_CAP_K='many'"):
        Context.from_env()


def test_the_graph_refuses_before_any_step_runs():
    graph = build_graph(settings={"cap_retrieval_rounds": 2})
    with pytest.raises(SettingsError, match="max_retrieval_rounds=3 is above"):
        graph.invoke({"question": "How many days do I have to return an item?"}, context={"max_retrieval_rounds": 3})
    with pytest.raises(SettingsError, match="base_url is an operator setting"):
        graph.invoke({"question": "How many days do I have to return an item?"}, context={"base_url": "http://x/v1"})


def test_operator_settings_are_made_once_and_again_when_the_environment_changes(monkeypatch):
    """The graph asks for the operator's settings at every step: the same object while no SELFCRAG_ variable
    changed, new ones (read from the environment) as soon as one did, and a bad environment refused each time."""
    from selfcrag.trust_boundary import OperatorSettings

    monkeypatch.setenv("SELFCRAG_K", "4")
    operator = OperatorSettings({"cap_k": 9})
    first = operator()
    assert (first.k, first.cap_k) == (4, 9) and operator() is first
    monkeypatch.setenv("SELFCRAG_K", "6")
    assert operator().k == 6 and operator() is operator()
    monkeypatch.setenv("SELFCRAG_K", "many")
    for _ in range(2):
        with pytest.raises(SettingsError, match=r"SELFCRAG_K='many'"):
            operator()
    monkeypatch.setenv("SELFCRAG_CAP_K", "2")  # what build_graph fixed wins over the environment
    monkeypatch.setenv("SELFCRAG_K", "6")
    assert operator().k == 6 and operator().cap_k == 9


def test_a_resolved_context_is_remembered_and_a_refusal_is_not():
    requested = Context(k=3, domain="medical")
    settings = resolve(requested, OPERATOR)
    assert resolve(requested, OPERATOR) is settings and settings == resolve(requested.model_dump(
        exclude_unset=True), OPERATOR)
    other = Context(index_dir="/srv/index", base_url="http://models.internal/v1", cap_k=2)  # equal but another
    with pytest.raises(SettingsError, match="k=3 is above this deployment's cap of 2"):
        resolve(requested, other)
    refused = Context(index_dir="/etc")
    for _ in range(2):
        with pytest.raises(SettingsError, match="index_dir is an operator setting"):
            resolve(refused, OPERATOR)


def test_every_run_of_a_graph_is_refused_at_its_first_step_and_sees_the_environment_of_its_time(monkeypatch):
    """Settings are resolved against the operator's with caches (context.py): a refused request is refused at the
    first step of every run, not only the first run, and an operator change between runs reaches the next run."""
    steps: list[str] = []
    graph = build_graph(settings={"cap_retrieval_rounds": 2})
    asked = Context(max_retrieval_rounds=3)
    for _ in range(2):
        with pytest.raises(SettingsError, match="max_retrieval_rounds=3 is above"):
            for chunk in graph.stream({"question": "How many days do I have to return an item?"}, context=asked):
                steps.extend(chunk)
    assert steps == []  # not one step ran
    monkeypatch.setenv("SELFCRAG_CAP_RETRIEVAL_ROUNDS", "1")  # build_graph's fixed 2 still wins over it
    monkeypatch.setenv("SELFCRAG_CAP_K", "3")
    with pytest.raises(SettingsError, match="k=4 is above this deployment's cap of 3"):
        graph.invoke({"question": "How many days do I have to return an item?"}, context={"k": 4})
    monkeypatch.delenv("SELFCRAG_CAP_K")
    out = graph.invoke({"question": "How many days do I have to return an item?"}, context={"k": 4})
    assert out["decision"]


def test_the_published_schema_lists_what_a_run_or_an_assistant_may_set(monkeypatch):
    from selfcrag.context import ASSISTANT_SETTINGS

    published = set(Context.model_json_schema()["properties"])
    assert published == set(Context.model_fields) - (OPERATOR_SETTINGS - ASSISTANT_SETTINGS)
    monkeypatch.setenv("SELFCRAG_ALLOW_PER_RUN", "index_dir")  # opened to runs: a form offers it
    assert set(Context.model_json_schema()["properties"]) == published | {"index_dir"}


def test_an_unpublished_operator_setting_is_refused_at_the_servers_door_in_the_boundarys_words():
    from selfcrag.auth import CONTEXT_GIVEN, refuse_unpublished

    given = {CONTEXT_GIVEN: True}
    with pytest.raises(Exception) as refused:
        refuse_unpublished({"k": 3, "base_url": "http://attacker.example/v1"}, given)
    assert refused.value.status_code == 403
    assert refused.value.detail.startswith("base_url is an operator setting: a run may not choose it")
    with pytest.raises(Exception) as mistyped:
        refuse_unpublished({"llm_timeout": "soon"}, given)
    assert mistyped.value.status_code == 422 and "llm_timeout" in mistyped.value.detail
    refuse_unpublished({"base_url": "", "index_dir": "", "k": 3}, given)  # a form repeating the defaults: let in
    refuse_unpublished({"base_url": "http://attacker.example/v1"}, {})  # copied from configurable: not the client's


def test_each_system_prompt_is_published_for_studio_on_the_nodes_that_send_it():
    from selfcrag.context import ASSISTANT_SETTINGS
    from selfcrag.graph import graph

    published, nodes = Context.model_json_schema()["properties"], set(graph.get_graph().nodes)
    for name in ASSISTANT_SETTINGS:
        assert published[name]["langgraph_type"] == "prompt", name
        assert published[name]["langgraph_nodes"] and set(published[name]["langgraph_nodes"]) <= nodes, name
