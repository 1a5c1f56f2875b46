"""The fault and hostile-input matrix, run as an operator would meet it: every case through real parts, counted.

    .venv/bin/python benchmarks/fault_matrix.py [--fast] [--group NAME ...] [--case TEXT] [--skip TEXT ...]
                                                [--set NAME=VALUE ...] [--out FILE]

Each case is a small function in benchmarks/faults/ that goes through one door as a user would (the library, the
CLI, a real `langgraph dev`, SQLite and a real PostgreSQL) and sets the failure columns that apply to it:

- calls.py: a model or web search that answers badly, slowly or not at all; budgets; a client's hostile settings;
- indexes.py: `kill -9` in the middle of index saves; every file of an index damaged;
- threads.py: human review, forged counters, a turn killed mid-run, a review claim whose holder dies, concurrent
  turns, oversize history and payloads, the store's database stopping or its disk filling — on both stores;
- fencing.py: a reviewer stopped (SIGSTOP) past its lease while another decides, then resumed — on both stores;
- server.py: a real `langgraph dev` with auth: other clients' threads, drafts, reviews and the shared assistant,
  and a client's calibration path;
- documents.py: hostile questions, planted instructions in documents and web results, oversize and hostile files;
- phrasings.py: planted instructions in phrasings never tuned on (../shared/injection, read at run time; skipped
  with one line when the folder is absent), offline and with a model that obeys.

Columns, each of which must be 0 (faults/core.py says what each counts). Two apply to every case: "leaked keys"
(the operator's key, planted in every model and server case, in anything the case produced: outputs, traces, log
records, stderr, requests to another endpoint) and "tracebacks" (for every command that must end in one line).
`--fast` runs the subset `.ci/run` runs (about two minutes of CPU); the whole matrix takes about half an hour.
The JSON records the commit measured, the command line and the time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from faults import calls, documents, fencing, indexes, phrasings, server, threads  # noqa: E402, F401 - importing registers the cases
from faults.core import CASES, COLUMNS, MEANING, ROOT, Outcome, run_case  # noqa: E402
from provenance import provenance  # noqa: E402


def commit() -> dict[str, object]:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    import selfcrag

    return {**provenance(), "branch": git("rev-parse", "--abbrev-ref", "HEAD"),
            "selfcrag_from": str(Path(selfcrag.__file__).parent)}  # fmt: skip


def table(outcomes: list[Outcome]) -> dict[str, dict[str, int]]:
    groups = list(dict.fromkeys(o.group for o in outcomes))
    rows = {
        g: {
            "cases": sum(o.group == g for o in outcomes),
            **{c: sum(bool(o.flags.get(c)) for o in outcomes if o.group == g) for c in COLUMNS},
        }
        for g in groups
    }
    rows["total"] = {k: sum(row[k] for row in rows.values()) for k in ("cases", *COLUMNS)}
    return rows


def by_set(outcomes: list[Outcome]) -> dict[str, dict[str, int]]:
    """Cases and failing cases per set, for cases named "<arm>: <set>/<name>" (the phrasings group's sets; its
    cases without a set are the audit's twenty, "audit")."""
    sets: dict[str, dict[str, int]] = {}
    for o in outcomes:
        arm, _, name = o.case.partition(": ")
        if "/" in name or (o.group == "phrasings" and name):
            row = sets.setdefault(f"{arm}: {name.split('/', 1)[0] if '/' in name else 'audit'}",
                                  {"cases": 0, "failing": 0})  # fmt: skip
            row["cases"] += 1
            row["failing"] += bool(o.failed())
    return sets


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--fast", action="store_true", help="only the subset .ci/run runs")
    cli.add_argument("--group", action="append", default=[], help="only this group (repeatable)")
    cli.add_argument("--case", default="", help="only cases whose name contains this text")
    cli.add_argument("--skip", action="append", default=[], metavar="TEXT",
                     help="leave out cases whose name contains this text (repeatable; e.g. --skip heldout/ while "
                          "designing, so the held-out set stays unseen)")  # fmt: skip
    cli.add_argument("--out", type=Path, help="default benchmarks/results/fault_matrix[_fast].json")
    cli.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                     help="an operator's setting for every case, as SELFCRAG_<NAME> (e.g. contested_check=true): "
                          "the matrix clears the caller's own; recorded in the JSON")  # fmt: skip
    args = cli.parse_args()
    for pair in args.set:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            cli.error(f"--set {pair!r}: expected NAME=VALUE")
        os.environ[f"SELFCRAG_{name.strip().upper()}"] = value.strip()
    chosen = [c for c in CASES if (c.fast or not args.fast) and (not args.group or c.group in args.group)
              and args.case in c.name and not any(text in c.name for text in args.skip)]  # fmt: skip
    started, measured = time.time(), commit()  # the code as it was when the run began
    outcomes: list[Outcome] = []
    for entry in chosen:
        outcome = run_case(entry)
        outcomes.append(outcome)
        mark = "FAIL " + ",".join(outcome.failed()) if outcome.failed() else "ok"
        print(f"[{outcome.group:<9}] {outcome.case[:58]:<58} {outcome.seconds:6.1f}s  {mark}  {outcome.note[:70]}",
              file=sys.__stderr__, flush=True)  # fmt: skip
    rows = table(outcomes)
    names = {c: c.replace("_", " ") for c in COLUMNS}
    print(f"{'group':<10}{'cases':>6}" + "".join(f"{names[c]:>{len(names[c]) + 2}}" for c in COLUMNS))
    for group, row in rows.items():
        print(f"{group:<10}{row['cases']:>6}" + "".join(f"{row[c]:>{len(names[c]) + 2}}" for c in COLUMNS))
    out = args.out or ROOT / "benchmarks" / "results" / f"fault_matrix{'_fast' if args.fast else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    record = {
        **measured,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": round(time.time() - started, 1),
        "skipped": args.skip,  # cases left out by name (--skip)
        "settings": args.set,  # operator settings every case ran with (--set), beside the defaults
        "columns": MEANING,
        "table": rows,
        "by_set": by_set(outcomes),
        "cases": [{k: v for k, v in o.__dict__.items() if k not in ("seen", "one_line")} for o in outcomes],
    }
    out.write_text(json.dumps(record, indent=2, default=str) + "\n")
    failing = [f"{o.group}: {o.case} ({', '.join(o.failed())})" for o in outcomes if o.failed()]
    if failing:
        print(f"{len(failing)} failing cases:\n  " + "\n  ".join(failing), file=sys.__stderr__)
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
