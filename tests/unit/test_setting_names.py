"""A name that is no setting is never ignored without a word: a misspelt key in a run's context is an error naming
the nearest setting, a misspelt SELFCRAG_ variable and settings in `config["configurable"]` are said once, and an
operator's value above its cap is refused naming the variable it came from."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from selfcrag import Context, SettingsError, build_graph, setting_names
from selfcrag.backend import offline_components

ROOT = Path(__file__).parents[2]
RETURNS = "How many days do I have to return an item?"


@pytest.fixture
def said(monkeypatch, caplog):  # noqa: ANN001, ANN201
    """What selfcrag.settings said, in a process where nothing was said yet."""
    monkeypatch.setattr(setting_names, "_said", set())
    caplog.set_level(logging.WARNING, logger="selfcrag.settings")
    return lambda: [r.getMessage() for r in caplog.records if r.name == "selfcrag.settings"]


def test_a_misspelt_setting_is_an_error_naming_the_nearest():
    with pytest.raises(SettingsError, match=re.escape("max_retreival_rounds: no such setting (did you mean "
                                                      "max_retrieval_rounds?)")):  # fmt: skip
        Context(max_retreival_rounds=2)
    with pytest.raises(SettingsError) as caught:
        Context(nonsense_key=1, k=0)
    assert "nonsense_key: no such setting" in str(caught.value) and "did you mean" not in str(caught.value)
    assert "k: Input should be greater than or equal to 1" in str(caught.value)  # each problem, in one line


def test_a_misspelt_environment_variable_is_said_once_with_the_nearest_name(monkeypatch, said):
    monkeypatch.setenv("SELFCRAG_KK", "3")
    monkeypatch.setenv("SELFCRAG_UPPER_TRESHOLD", "0.6")
    assert Context.from_env().k == 5  # ignored, as before, but said
    Context.from_env()
    assert said() == [
        "environment variable SELFCRAG_KK is ignored: no setting or variable of selfcrag has that name "
        "(did you mean SELFCRAG_K?)",
        "environment variable SELFCRAG_UPPER_TRESHOLD is ignored: no setting or variable of selfcrag has that name "
        "(did you mean SELFCRAG_UPPER_THRESHOLD?)",
    ]


def test_every_variable_selfcrag_reads_is_known_and_never_warned_about(monkeypatch, said):
    read = set()
    for folder in ("src", "benchmarks", "examples", "scripts", "tests/support"):
        for path in (ROOT / folder).rglob("*.py"):
            read |= set(re.findall(r"SELFCRAG_[A-Z0-9_]*[A-Z0-9]", path.read_text(encoding="utf-8")))
    settings = {f"SELFCRAG_{name.upper()}" for name in Context.model_fields}
    assert read - settings - setting_names.OTHER_VARIABLES == set(), "add them to data/environment.txt"
    assert setting_names.OTHER_VARIABLES - read == set(), "read nowhere: remove them from data/environment.txt"
    for name in setting_names.OTHER_VARIABLES:
        monkeypatch.setenv(name, "")
    monkeypatch.setenv("SELFCRAG_K", "4")
    assert Context.from_env().k == 4
    assert said() == []


def test_an_operator_value_above_its_cap_is_refused_naming_its_variable(monkeypatch):
    monkeypatch.setenv("SELFCRAG_MAX_RETRIEVAL_ROUNDS", "99")
    with pytest.raises(SettingsError) as caught:
        Context.from_env()
    assert str(caught.value) == ("max_retrieval_rounds=99 is above its cap, cap_retrieval_rounds=5, in the same "
                                 "settings: lower it or raise the cap (from the environment: "
                                 "SELFCRAG_MAX_RETRIEVAL_ROUNDS='99')")


def test_settings_in_configurable_are_said_once_to_go_in_the_context(said):
    graph = build_graph(offline_components())
    ignored = graph.invoke({"question": RETURNS}, config={"configurable": {"k": 1, "thread_id": "t1"}})
    assert [s["decision"] for s in ignored["trace"] if s["node"] == "retrieve"] == ["5 passages"]  # not read
    graph.invoke({"question": RETURNS}, config={"configurable": {"k": 1}})
    assert said() == ["settings in config['configurable'] are ignored: k; pass them as context={...} "
                      "(graph.invoke(..., context=...), or a server client's context)"]
    graph.invoke({"question": RETURNS}, config={"configurable": {"max_retrieval_rounds": 2}},
                 context={"max_retrieval_rounds": 2})  # also in the context (as a LangGraph server sends it)
    assert len(said()) == 1
