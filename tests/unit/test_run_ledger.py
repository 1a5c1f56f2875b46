"""Each run's counts live in the process running it (selfcrag/ledger.py), never in client-writable state."""

from __future__ import annotations

import time

import pytest
from langgraph.runtime import ExecutionInfo, Runtime

from selfcrag import ledger
from selfcrag.context import Context
from selfcrag.errors import SettingsError
from selfcrag.ledger import forget, ledger_of, open_run
from selfcrag.state import running_total

SETTINGS = Context(max_llm_calls=10, max_retrieval_rounds=3, max_generations=2)
FORGED = {"llm_calls": -100000, "tokens": -5, "retrieval_rounds": -40, "generations": -40}


def runtime(run_id: str | None = "run-1", thread: str | None = "thread-1", ns: str = "generate:task") -> Runtime:
    info = ExecutionInfo(checkpoint_id="c", checkpoint_ns=ns, task_id="task", thread_id=thread, run_id=run_id)
    return Runtime(context=None, execution_info=info)


def test_a_run_that_did_not_start_here_opens_a_fresh_ledger_whatever_the_state_says():
    before = time.monotonic()
    fresh = ledger_of({**FORGED, "run_ledger": "made-up"}, runtime(run_id="resumed"), SETTINGS)
    assert (fresh.calls, fresh.tokens, fresh.rounds, fresh.generations) == (0, 0, 0, 0)
    assert fresh.started >= before  # its time starts when it runs, not when the state says
    assert ledger_of({"run_ledger": "made-up"}, runtime(run_id="resumed", ns="judge:other"), SETTINGS) is fresh


def test_the_nodes_of_a_run_share_its_ledger_and_other_runs_do_not():
    ident = open_run(runtime(ns="prepare:t0"))
    state = {"run_ledger": ident}
    first = ledger_of(state, runtime(ns="retrieve:t1"), SETTINGS)
    assert first.reserve_call(10) and first.next_round(new_evidence=True) == 1
    assert ledger_of(state, runtime(ns="generate:t2"), SETTINGS) is first
    assert ledger_of(state, runtime(run_id="run-2"), SETTINGS) is not first
    assert ledger_of(state, runtime(ns="parent:p1|generate:t2"), SETTINGS) is not first  # a subgraph's own run
    forget(state, runtime(ns="finalize:t3"))
    assert ledger_of(state, runtime(ns="generate:t4"), SETTINGS).calls == 0


def test_runs_in_process_without_a_run_id_are_told_apart_by_the_id_prepare_writes():
    plain = runtime(run_id=None, thread=None)
    one, two = {"run_ledger": open_run(plain)}, {"run_ledger": open_run(plain)}
    assert ledger_of(one, plain, SETTINGS) is not ledger_of(two, plain, SETTINGS)
    assert ledger_of(one, plain, SETTINGS) is ledger_of(one, plain, SETTINGS)


def test_a_node_called_outside_a_run_counts_from_the_state_clamped_into_the_caps():
    clamped = ledger_of(FORGED, None, SETTINGS)
    assert (clamped.calls, clamped.tokens, clamped.rounds, clamped.generations) == (0, 0, 0, 0)
    high = ledger_of({"llm_calls": 10**9, "retrieval_rounds": float("inf"), "generations": "many"}, None, SETTINGS)
    assert (high.calls, high.rounds, high.generations) == (10, 3, 0)


def test_the_ledgers_kept_are_bounded():
    for _ in range(ledger.LEDGERS_KEPT + 10):
        open_run(runtime(run_id=None, thread="busy"))
    assert len(ledger._LEDGERS) <= ledger.LEDGERS_KEPT


def test_a_node_reports_calls_its_components_made_outside_the_budgeted_path():
    run = ledger.RunLedger()
    assert run.reserve_call(10)
    assert run.spent({"llm_calls": 3, "tokens": 40}, reserved=1) == {"llm_calls": 3, "tokens": 40}
    assert run.spent({"llm_calls": -7, "tokens": "x"}) == {"llm_calls": 3, "tokens": 40}  # nothing to subtract


@pytest.mark.parametrize(("existing", "new", "total"), [(-100000, 3, 3), (7, 2, 7), ("abc", 2, 2), (None, -1, 0),
                                                        (True, 0, 0)])  # fmt: skip
def test_the_state_counters_keep_the_larger_count_and_no_forged_one(existing, new, total):
    assert running_total(existing, new) == total


def test_run_settings_left_at_their_default_are_brought_within_the_operators_caps():
    assert Context.from_env(cap_llm_calls=10).max_llm_calls == 10  # the default budget is 20
    assert Context.from_env(cap_retrieval_rounds=2).max_retrieval_rounds == 2
    with pytest.raises(SettingsError, match=r"^max_llm_calls=30 is above its cap, cap_llm_calls=10, in the same "
                       r"settings: lower it or raise the cap$"):
        Context.from_env(cap_llm_calls=10, max_llm_calls=30)
