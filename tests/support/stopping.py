"""The real `selfcrag` command, stopped inside one node, for tests that kill a process at a chosen point of a run:

    python -m support.stopping NODE MARKER selfcrag-arguments...
    python -m support.stopping NODE MARKER aask QUESTION THREAD
    python -m support.stopping NODE MARKER areview REVIEW ACTION

runs `selfcrag.cli.main(arguments)` (or, the async path, `await aask(QUESTION, thread_id=THREAD)` or
`await aresolve_review(REVIEW, ACTION)`) in this process with node NODE replaced, as graphs are built, by one that
writes its process id to the file MARKER and then waits until the process is killed, or until a signal handler
unwinds it (SIGTERM). Everything else is the shipped code: the store, the checkpointer, the CLI."""

from __future__ import annotations

import functools
import importlib
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any


def stop_in(node: str, marker: Path) -> None:
    module = importlib.import_module(f"selfcrag.nodes.{node}")
    make = module.make

    def stopping_make(components: Any) -> Any:
        run = make(components)

        @functools.wraps(run)  # the same signature: the graph passes the runtime as it would
        def stopped(*args: Any, **kwargs: Any) -> Any:
            marker.write_text(str(os.getpid()))
            # Until killed; a SIGTERM handler raises here (or in the main thread, which ends the wait).
            while threading.main_thread().is_alive():
                time.sleep(0.05)
            raise SystemExit(1)

        return stopped

    module.make = stopping_make
    # The module-level graph (a review resumes on it) was built before: build it again.
    graph_module = importlib.import_module("selfcrag.graph")
    graph_module.graph = graph_module.build_graph()


if __name__ == "__main__":
    node, marker, *arguments = sys.argv[1:]
    stop_in(node, Path(marker))
    if arguments[0] in ("aask", "areview"):  # the async path: the same turn, or decision, in an event loop
        import asyncio
        import json

        from selfcrag import aask
        from selfcrag.threads import aresolve_review

        first, second = arguments[1:3]
        step = aask(first, thread_id=second) if arguments[0] == "aask" else aresolve_review(first, second)
        result = asyncio.run(step)
        print(json.dumps({k: v for k, v in result.items() if k != "messages"}, default=str))
        sys.exit(0)
    from selfcrag.cli import main

    sys.exit(main(arguments))
