"""Re-decide a recorded model-backend evaluation from its recorded calls, with no model: how long it takes, and
whether every record comes out as it was.

    .venv/bin/python benchmarks/eval_replay.py RECORDED_DIR --index DIR [--corpus FILE] [--last N] [--strict]
                                               [--results FILE]

RECORDED_DIR is a `selfcrag eval` folder (its run.json, records.jsonl and calls.jsonl or calls.jsonl.gz). The same
evaluation (its generator model, baseline and `--set` settings from run.json) runs again with `--replay
RECORDED_DIR` and the model endpoint pointed at a port that answers nothing and counts every connection. A call the
recording lacks is one that failed when it was recorded (a call that times out leaves no reply to keep): with
`--strict` it ends the replay in one line (`--replay-misses error`); by default it is sent to that port, where it
fails again (`--replay-misses live`), so the run degrades as the recorded one did. The questions are the records'
own (`--last N`: the last N recorded, as calls recorded before the replay key held a model copy's settings do not
replay). Prints one table: questions, wall and CPU seconds of the replayed eval (its process and children), calls
replayed, calls the recording lacked, connections to the model port, and how many (question, system) records match
the recorded decision, answer and confidence. Writes benchmarks/results/model_replay.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import provenance  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
COMPARED = ("decision", "answer", "confidence")


class Tripwire:
    """A port where the model endpoint would be: it answers nothing, and counts every connection made to it."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.connections = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


def records(folder: Path) -> dict[tuple[str, str], dict[str, Any]]:
    rows = [json.loads(line) for line in (folder / "records.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]  # fmt: skip
    return {(str(r["id"]), str(r["system"])): r for r in rows}


def questions_of(recorded: dict[tuple[str, str], dict[str, Any]], last: int, path: Path) -> Path:
    """The recorded questions (the last `last` of them, or all), written as a questions file at `path`."""
    asked = list({key[0]: record for key, record in recorded.items()}.values())[-last if last else 0 :]
    path.write_text("".join(json.dumps({field: q[field] for field in ("id", "question", "answers", "is_impossible")})
                            + "\n" for q in asked), encoding="utf-8")  # fmt: skip
    return path


def replay(recorded: Path, questions: Path, index: Path, corpus: Path | None, out: Path, port: int,
           strict: bool) -> dict[str, Any]:  # fmt: skip
    run = json.loads((recorded / "run.json").read_text(encoding="utf-8"))
    command = [sys.executable, "-m", "selfcrag.cli", "eval", str(questions), "--index", str(index), "--out", str(out),
               "--replay", str(recorded), "--replay-misses", "error" if strict else "live"]  # fmt: skip
    if corpus:
        command += ["--corpus", str(corpus)]
    if run.get("baseline"):
        command += ["--baseline", run["baseline"]]
    if run.get("backend") == "model":
        command += ["--model", run["generator_model"]]
    for name, value in (run.get("settings") or {}).items():
        command += ["--set", f"{name}={value}"]
    env = {**os.environ, "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "OPENAI_API_KEY": "none"}
    before, started = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600, check=False)
    wall, after = time.monotonic() - started, resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"the replayed eval failed: {done.stderr.strip().splitlines()[-1:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    said = re.search(r"\((\d+) calls replayed, (\d+) not in ", done.stdout)
    if said is None:
        raise SystemExit(f"the replayed eval did not say what it replayed: {done.stdout.strip().splitlines()[-1:]}")
    return {"wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1), "calls_replayed": int(said.group(1)),
            "calls_not_recorded": int(said.group(2))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recorded", type=Path)
    parser.add_argument("--last", type=int, default=0, help="only the last N recorded questions")
    parser.add_argument("--strict", action="store_true", help="a call the recording lacks ends the replay")
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--corpus", type=Path)
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results" / "model_replay.json")
    args = parser.parse_args(argv)
    tripwire = Tripwire()
    try:
        with tempfile.TemporaryDirectory(prefix="selfcrag-replay-") as work:
            out, was = Path(work) / "eval", records(args.recorded)
            asked = questions_of(was, args.last, Path(work) / "questions.jsonl")
            timing = replay(args.recorded, asked, args.index, args.corpus, out, tripwire.port, args.strict)
            again = records(out)
    finally:
        tripwire.close()
    same = [key for key, record in again.items() if key in was and all(record.get(f) == was[key].get(f)
                                                                         for f in COMPARED)]  # fmt: skip
    differ = sorted(f"{i} ({system}): " + ", ".join(f"{f} {str(was.get((i, system), {}).get(f))[:60]!r} recorded, "
                                                   f"{str(record.get(f))[:60]!r} replayed" for f in COMPARED
                                                   if record.get(f) != was.get((i, system), {}).get(f))
                    for (i, system), record in again.items() if (i, system) not in same)  # fmt: skip
    result = {**provenance(argv), "recorded": str(args.recorded), "questions": len({i for i, _ in again}),
              **timing, "model_port_connections": tripwire.connections, "records": len(again),
              "records_as_recorded": len(same), "differ": differ, "compared": list(COMPARED)}  # fmt: skip
    print("| questions | wall s | CPU s | calls replayed | not recorded | model port connections | records as "
          "recorded |\n|---|---|---|---|---|---|---|")
    print(f"| {result['questions']} | {timing['wall_seconds']} | {timing['cpu_seconds']} | "
          f"{timing['calls_replayed']} | {timing['calls_not_recorded']} | {tripwire.connections} | "
          f"{len(same)} / {len(again)} |")
    if differ:
        print("differ:\n" + "\n".join(differ))
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
