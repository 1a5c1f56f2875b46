"""The quality monitor: every finished run is recorded by the graph, `selfcrag monitor` reports them, low-quality
runs are WARNINGs on `selfcrag.monitor`, a database fault never fails a run, and `selfcrag report` draws them."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

from selfcrag import ask, build_graph
from selfcrag.store import dashboard, runs

CLI = [sys.executable, "-m", "selfcrag.cli"]
RETURNS = "How many days do I have to return an item?"
UNKNOWN = "What is the capital of Mongolia?"


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})  # fmt: skip


def test_monitor_reports_every_run_of_the_window(store_url):
    ask(RETURNS)
    ask(UNKNOWN, context={"domain": "customer_service"})
    build_graph().invoke({"question": RETURNS})  # no thread, no checkpointer: recorded all the same
    proc = cli("monitor", "--since", "1h", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["runs"] == 3 and report["decisions"] == {"answer": 2, "abstain": 1}
    assert report["pass_rate"] == round(2 / 3, 4)
    assert set(report["avg_scores"]) == {"context_relevance", "groundedness", "answer_relevance", "confidence"}
    assert 0 < report["latency_ms"]["p50"] <= report["latency_ms"]["p95"]
    assert report["lowest"][0]["question"] == UNKNOWN and report["domains"] == ["customer_service", "general"]
    text = cli("monitor")
    assert "3 runs" in text.stdout and "pass rate      67%" in text.stdout and UNKNOWN in text.stdout
    pruned = cli("monitor", "--prune-before", "2999-01-01")
    assert pruned.returncode == 0 and "deleted 3 run records" in pruned.stdout
    assert json.loads(cli("monitor", "--json").stdout)["runs"] == 0


def test_a_low_quality_run_is_a_warning_with_its_record(store_url, caplog):
    with caplog.at_level(logging.WARNING, logger="selfcrag.monitor"):
        ask(RETURNS)
        ask(UNKNOWN, thread_id="alerting")
    (warning,) = [r for r in caplog.records if r.name == "selfcrag.monitor"]
    assert warning.levelno == logging.WARNING and "low-quality run: decision abstain" in warning.getMessage()
    assert warning.selfcrag_run["thread_id"] == "alerting" and warning.selfcrag_run["question"] == UNKNOWN


def test_a_database_fault_never_fails_the_run(tmp_path, monkeypatch, caplog):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv("SELFCRAG_DATABASE_URL", f"sqlite:///{blocked}/store.db")
    with caplog.at_level(logging.WARNING, logger="selfcrag.store"):
        result = build_graph().invoke({"question": RETURNS})
    assert "30 days" in result["answer"]
    assert any(r.name == "selfcrag.store" and "run not recorded" in r.getMessage() for r in caplog.records)


def test_report_writes_a_dashboard_with_plots(store_url, tmp_path):
    ask(RETURNS)
    ask(UNKNOWN)
    proc = cli("report", "--since", "7d", "--out", str(tmp_path / "report"))
    assert proc.returncode == 0, proc.stderr
    assert "2 runs" in proc.stdout
    page = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    for plot in ("pass_rate", "groundedness", "decisions", "latency"):
        assert f'src="{plot}.png"' in page
        assert (tmp_path / "report" / f"{plot}.png").read_bytes().startswith(b"\x89PNG")
    assert "pass rate" in page and len(runs.recent(0)) == 2


def test_report_draws_each_run_at_its_own_time_on_a_date_axis(store_url, tmp_path, monkeypatch):
    """`selfcrag report --since 7d`, as cmd_report makes it: 24 spans of 7 hours, each its own point at its own time
    (labels as strings once merged equal dates into 8 points and put today's runs days back)."""
    from matplotlib import dates
    from matplotlib.figure import Figure

    drawn: dict[str, Figure] = {}
    savefig = Figure.savefig

    def keep(figure: Figure, path, *args, **kwargs):  # noqa: ANN001, ANN202 (the real savefig, and the figure kept)
        drawn[os.path.basename(path)] = figure
        return savefig(figure, path, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    ask(RETURNS)
    ask(UNKNOWN)
    until = time.time()
    since = until - 7 * 86400
    recorded = runs.recent(since, until)
    dashboard.write_report(recorded, since, until, tmp_path / "report")
    assert set(drawn) == {"pass_rate.png", "groundedness.png", "decisions.png", "latency.png"}
    start, end = datetime.fromtimestamp(since, tz=UTC), datetime.fromtimestamp(until, tz=UTC)
    span = timedelta(days=7) / dashboard.BUCKETS
    for name in ("pass_rate.png", "latency.png"):
        axes = drawn[name].axes[0]
        x = list(axes.lines[0].get_xdata(orig=True))
        assert all(isinstance(t, datetime) for t in x), name
        assert len(set(x)) == dashboard.BUCKETS and x == sorted(x)
        assert start < x[0] < start + span and end - span < x[-1] < end
        (left, right) = (dates.num2date(v) for v in axes.get_xlim())
        assert abs(left - start) < timedelta(seconds=1) and abs(right - end) < timedelta(seconds=1)
    decisions = drawn["decisions.png"].axes[0]
    bars = [dates.num2date(bar.get_x() + bar.get_width() / 2) for bar in decisions.patches if bar.get_height() > 0]
    assert bars, "no bar for the two runs"
    for run in recorded:  # each run (today's) is drawn in the span of its own time
        made = datetime.fromtimestamp(run["created_at"], tz=UTC)
        assert any(abs(bar - made) <= span / 2 for bar in bars)


def test_bad_windows_and_dates_are_one_line(store_url):
    for args, message in ((("monitor", "--since", "soon"), "not a duration"),
                          (("monitor", "--prune-before", "yesterday"), "not a date")):  # fmt: skip
        proc = cli(*args)
        assert proc.returncode != 0 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
