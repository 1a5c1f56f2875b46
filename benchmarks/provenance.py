"""What wrote a results file, written into it: the commit measured, whether the tree had uncommitted changes, and
the command line. Every file under benchmarks/results/ carries these three fields (tests/unit/
test_results_provenance.py), so a figure quoted from it can be traced back to the code and the run that made it.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def provenance(argv: list[str] | None = None, script: str | None = None) -> dict[str, object]:
    """`commit` (HEAD, "unknown" outside a git checkout), `dirty` (tracked files other than results differ from it:
    the code measured is not the commit's) and `command`: the script as run from the project root with its
    arguments (`argv`, default this process's own)."""
    name = Path(script or sys.argv[0]).name
    args = sys.argv[1:] if argv is None else argv
    command = shlex.join([f"benchmarks/{name}", *args])
    head = _git("rev-parse", "HEAD")
    if not head:
        return {"commit": "unknown (not run in a git checkout)", "dirty": "unknown", "command": command}
    changed = _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)benchmarks/results")
    return {"commit": head, "dirty": bool(changed), "command": command}
