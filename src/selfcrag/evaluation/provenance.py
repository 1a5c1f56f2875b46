"""What a result was made from: a file's hash and the commit of the code that ran. The calibration file and an
evaluation's records and run.json carry them, so a figure can be traced to its data and code."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path


def sha256(path: Path) -> str:
    """Of a file's bytes; of a folder (a knowledge base given as --corpus), of its files' names and bytes."""
    if not path.is_dir():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    digest = hashlib.sha256()
    for item in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(item.relative_to(path)).encode() + b"\0" + item.read_bytes())
    return digest.hexdigest()


def git_commit() -> str:
    """The commit of the code that produced the runs, "+changes" when the package had uncommitted changes ("" outside
    a git checkout)."""
    here = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, cwd=here,
                              check=False)  # fmt: skip
        changed = subprocess.run(["git", "status", "--porcelain", "--", "."], capture_output=True, text=True,
                                 timeout=10, cwd=here, check=False)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return ""
    if head.returncode != 0:
        return ""
    return head.stdout.strip() + ("+changes" if changed.stdout.strip() else "")
