"""Small CLI habits: a version, choices that read cleanly, progress that suits where it is written, `.env`."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import selfcrag
from selfcrag import progress_bar
from selfcrag.cli import main, parser

CLI = [sys.executable, "-m", "selfcrag.cli"]


def test_version_is_the_installed_distributions() -> None:
    assert selfcrag.__version__ == version("selfcrag")
    done = subprocess.run([*CLI, "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == f"selfcrag {selfcrag.__version__}"


HEAVY = ("langgraph", "langchain_core", "numpy", "pydantic", "onnxruntime", "faiss")
LOADED = """import sys
from selfcrag.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY)), file=sys.stderr)
""".replace("HEAVY", repr(HEAVY))


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["ask", "--help"], ["review", "--help"], ["ask"]])
def test_the_cli_answers_version_help_and_usage_errors_before_it_imports_the_graph(argv: list[str]) -> None:
    done = subprocess.run([sys.executable, "-c", LOADED, *argv], capture_output=True, text=True, timeout=60)
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr  # benchmarks/cold_start.py times them


@pytest.mark.parametrize("command", ["ask", "eval"])
def test_choices_list_real_values(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args([command, "--help"])
    shown = capsys.readouterr().out
    assert "{general,customer_service,financial,medical,legal}" in shown
    assert "''" not in shown


def test_a_bad_choice_names_the_good_ones(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        parser().parse_args(["ask", "q", "--risk", "extreme"])
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "'extreme'" in error and "'low', 'normal', 'critical'" in error and "''" not in error


def test_progress_off_a_terminal_writes_no_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    sink = io.StringIO()  # not a TTY: a log file, CI; the command's summary line says the rest
    monkeypatch.setattr(sys, "stderr", sink)
    for done in (0, 40, 80, 100):
        progress_bar.advance("embedding", "texts", done, 100)
    assert sink.getvalue() == ""


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_is_a_bar_with_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = _Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    for done in (40, 80, 100):
        progress_bar.advance("embedding", "texts", done, 100)
    shown = screen.getvalue()
    assert "embedding: 100%" in shown and "100/100" in shown and "texts/s" in shown


def test_env_file_fills_what_the_shell_left_unset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".env").write_text("SELFCRAG_TEST_FROM_FILE=file\nSELFCRAG_TEST_BOTH=file\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SELFCRAG_TEST_BOTH", "shell")
    monkeypatch.delenv("SELFCRAG_TEST_FROM_FILE", raising=False)
    try:
        assert main(["monitor", "--since", "1h", "--json"]) in (0, 1)  # any command reads .env first
        assert os.environ["SELFCRAG_TEST_FROM_FILE"] == "file"
        assert os.environ["SELFCRAG_TEST_BOTH"] == "shell"
    finally:
        os.environ.pop("SELFCRAG_TEST_FROM_FILE", None)


# What an offline question has no use for (issue 46: a cold `selfcrag ask` within 1.5x `import langgraph.graph`):
# the model clients, the PostgreSQL driver, web search, the server, ingest's file readers and progress bar, the eval's
# plots, the torch runtime, the tool wrapper and the model verifier (off by default). httpx, requests and
# importlib.metadata are not here: `import langgraph.graph` loads them.
UNNEEDED = ("openai", "langchain_openai", "tiktoken", "psycopg", "psycopg_pool", "pgvector", "tavily", "fastapi",
            "starlette", "uvicorn", "langgraph_api", "tqdm", "pypdf", "bs4", "docx2txt", "matplotlib", "torch",
            "sentence_transformers", "xllamacpp", "langchain_core.tools", "selfcrag.llm.verifier")  # fmt: skip
ASKED = """import sys
from selfcrag.cli import main
code = main(sys.argv[1:])
print(sorted(m for m in UNNEEDED if m in sys.modules), file=sys.stderr)
sys.exit(code)
""".replace("UNNEEDED", repr(UNNEEDED))


def test_an_offline_question_imports_no_model_client_database_driver_or_server() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TAVILY_API_KEY")}
    done = subprocess.run([sys.executable, "-c", ASKED, "ask", "How long do refunds take?"], capture_output=True,
                          text=True, timeout=300, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "5 to 7 business days" in done.stdout  # the question was answered, offline
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr


def test_the_command_is_run_which_exits_with_mains_code_and_no_last_collection(monkeypatch: pytest.MonkeyPatch) -> None:
    import gc
    import tomllib

    from selfcrag import cli

    scripts = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["selfcrag"] == "selfcrag.cli:run"
    monkeypatch.setattr(cli, "main", lambda: 3)
    try:
        with pytest.raises(SystemExit) as exit_:
            cli.run()
        assert exit_.value.code == 3
        assert gc.get_freeze_count() > 0  # what is alive is left out of the exit's collection
    finally:
        gc.unfreeze()  # this process goes on: collect as usual
