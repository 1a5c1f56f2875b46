"""Questions per CPU-second: a real `langgraph dev` server against the same graph in this process (issue 46, item 6).

Both arms answer the same offline questions (the bundled sample's, repeated) from the same bundled sample index,
`--clients` at a time:

- `in process`: `build_graph(checkpointer=InMemorySaver())` (the server's runtime keeps checkpoints in memory too),
  each question its own thread id, asked from a pool of `--clients` threads; this process's CPU seconds.
- `server`: `langgraph dev --no-reload` started here on a free port, asked by `--clients` concurrent `langgraph_sdk`
  clients (a thread each question, `runs.wait`); the CPU seconds of the server's whole process group, read from
  /proc (Linux), the clients' own CPU apart.
- `server, no file persistence`: a second such server with `LANGGRAPH_DISABLE_FILE_PERSISTENCE=true`. The dev
  server's in-memory runtime pickles every thread it holds to `.langgraph_api/` every few seconds, a cost that grows
  with the threads asked since it started and that a deployment on PostgreSQL (`langgraph up`) does not pay: this
  arm shows how much of the gap is the dev server's own and how much is the serving.

Each arm is warmed (index, embedder, first compile) before it is timed; then the arms alternate for `--rounds`
rounds of `--questions` each and the medians are compared, so both see the same load. Prints a table and writes
benchmarks/results/server_throughput.json (commit, command, every round). The goal: server >= 0.9x in process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/support starts the server
from provenance import provenance  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "tests" / "data" / "sample_questions.jsonl"
UNFLUSHED = "server, no file persistence"


def questions(count: int) -> list[str]:
    asked = [json.loads(line)["question"] for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line]
    return [asked[i % len(asked)] for i in range(count)]


def group_cpu(session: int) -> float:
    """CPU seconds (user + system, with waited-for children's) of every process in session `session`."""
    tick, total = os.sysconf("SC_CLK_TCK"), 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone between the listing and the read
            continue
        if int(fields[3]) == session:  # field 6 of proc(5): the session id
            total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return total / tick


def timed(run: Callable[[list[str]], list[dict[str, Any]]], asked: list[str],
          cpu: Callable[[], float]) -> dict[str, Any]:  # fmt: skip
    cpu0, wall0, own0 = cpu(), time.perf_counter(), time.process_time()
    outputs = run(asked)
    cpu_s, wall_s = cpu() - cpu0, time.perf_counter() - wall0
    answered = sum(1 for out in outputs if out.get("decision") in ("answer", "answer_with_caveat"))
    return {"questions": len(asked), "cpu_s": round(cpu_s, 3), "wall_s": round(wall_s, 3),
            "questions_per_cpu_s": round(len(asked) / cpu_s, 3), "answered": answered,
            "client_cpu_s": round(time.process_time() - own0, 3)}  # fmt: skip


def in_process(clients: int) -> Callable[[list[str]], list[dict[str, Any]]]:
    from langgraph.checkpoint.memory import InMemorySaver

    from selfcrag import build_graph

    graph = build_graph(checkpointer=InMemorySaver())

    def ask(question: str) -> dict[str, Any]:
        return graph.invoke({"question": question}, {"configurable": {"thread_id": str(uuid.uuid4())}})

    def run(asked: list[str]) -> list[dict[str, Any]]:
        with ThreadPoolExecutor(clients) as pool:
            return list(pool.map(ask, asked))

    return run


def over_http(url: str, clients: int) -> Callable[[list[str]], list[dict[str, Any]]]:
    from langgraph_sdk import get_client

    async def ask_all(asked: list[str]) -> list[dict[str, Any]]:
        client, gate = get_client(url=url), asyncio.Semaphore(clients)

        async def ask(question: str) -> dict[str, Any]:
            async with gate:
                thread = await client.threads.create()
                out = await client.runs.wait(thread["thread_id"], "selfcrag", input={"question": question})
                return out if isinstance(out, dict) else {}

        return list(await asyncio.gather(*(ask(q) for q in asked)))

    return lambda asked: asyncio.run(ask_all(asked))


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cli.add_argument("--clients", type=int, default=20)
    cli.add_argument("--questions", type=int, default=100, help="questions per arm and round")
    cli.add_argument("--rounds", type=int, default=3)
    cli.add_argument("--jobs", type=int, default=0, help="the server's --n-jobs-per-worker (0: langgraph's default)")
    cli.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "server_throughput.json")
    args = cli.parse_args()
    origin = provenance()
    home = tempfile.mkdtemp(prefix="selfcrag-throughput-home-")
    # Both arms keep threads and run records in a store of this run, and read the same index cache.
    env = {"SELFCRAG_HOME": home, "SELFCRAG_CACHE_DIR": os.environ.get("SELFCRAG_CACHE_DIR") or
           tempfile.mkdtemp(prefix="selfcrag-throughput-cache-")}  # fmt: skip
    os.environ.update(env)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TAVILY_API_KEY"):
        os.environ.pop(name, None)
    from support.langgraph_server import langgraph_dev_process

    asked = questions(args.questions)
    local = in_process(args.clients)
    local(asked[: args.clients])  # warm: the index, the embedder, the graph's first steps
    rows: dict[str, list[dict[str, Any]]] = {"in process": [], "server": [], UNFLUSHED: []}
    extra = ["--n-jobs-per-worker", str(args.jobs)] if args.jobs else []
    unflushed = {**env, "LANGGRAPH_DISABLE_FILE_PERSISTENCE": "true",  # and a store of its own
                 "SELFCRAG_HOME": tempfile.mkdtemp(prefix="selfcrag-throughput-home-")}
    with langgraph_dev_process(env, extra) as (url, session), \
            langgraph_dev_process(unflushed, extra) as (plain_url, plain_session):
        servers = {"server": (over_http(url, args.clients), session),
                   UNFLUSHED: (over_http(plain_url, args.clients), plain_session)}
        for remote, _ in servers.values():
            remote(asked[: args.clients])  # warm each server the same way
        for turn in range(args.rounds):
            rows["in process"].append(timed(local, asked, time.process_time))
            for arm, (remote, group) in servers.items():
                rows[arm].append(timed(remote, asked, lambda group=group: group_cpu(group)))
            print(f"round {turn + 1}: " + ", ".join(f"{arm} {runs[-1]['questions_per_cpu_s']} q/CPU-s"
                                                    for arm, runs in rows.items()), flush=True)
    summary = {arm: {"questions_per_cpu_s_median": statistics.median(r["questions_per_cpu_s"] for r in runs),
                     "cpu_ms_per_question_median": round(1000 * statistics.median(
                         r["cpu_s"] / r["questions"] for r in runs), 1),
                     "wall_s_median": statistics.median(r["wall_s"] for r in runs),
                     "answered": [r["answered"] for r in runs]}
               for arm, runs in rows.items()}  # fmt: skip
    ratio, unflushed_ratio = (round(summary[arm]["questions_per_cpu_s_median"] /
                                    summary["in process"]["questions_per_cpu_s_median"], 3)
                              for arm in ("server", UNFLUSHED))  # fmt: skip
    print(f"{'arm':<30}{'q / CPU-s':>11}{'CPU ms / q':>12}{'wall s':>9}  answered")
    for arm, s in summary.items():
        print(f"{arm:<30}{s['questions_per_cpu_s_median']:>11}{s['cpu_ms_per_question_median']:>12}"
              f"{s['wall_s_median']:>9}  {s['answered']}")
    print(f"server / in process: {ratio}x (goal 0.9x or more); without the dev server's file persistence "
          f"{unflushed_ratio}x")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({**origin, "clients": args.clients, "questions": args.questions,
                                    "jobs_per_worker": args.jobs or "default", "summary": summary,
                                    "server_over_in_process": ratio,
                                    "unflushed_server_over_in_process": unflushed_ratio, "rounds": rows},
                                   indent=1) + "\n")  # fmt: skip
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
