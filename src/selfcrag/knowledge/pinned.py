"""Files pinned by sha256 (the embedding model and its tokenizer), checked at every start without hashing 24 MB
each time: a file whose digest matched its pin is remembered by its identity on disk (`cache_dir()/pinned.json`),
and a start whose file still has that identity takes the match as made.

The identity is (resolved path, size, mtime_ns, ctime_ns, inode, device). Any write to the file, a rename over it
or a `touch` changes its ctime, which the kernel sets and no user call can set back (`os.utime` sets only atime and
mtime): a changed file is hashed again and refused. A file changed within the filesystem's timestamp tick of being
hashed could keep the identity it was hashed with, so a file changed in the last RECENT_S seconds is hashed every
time and never remembered (git's "racy" index entries, the same problem). What this does not catch: a change made
past the kernel (the raw block device, a changed clock and ctime together) or a forged entry in the cache file —
both need more access than replacing the model file would, and the cache holds only matches: an entry names the
digest it saw, and one that is not the pin is never taken.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from pathlib import Path

from selfcrag.errors import EmbeddingModelError
from selfcrag.home import cache_dir

CACHE_FILE = "pinned.json"
RECENT_S = 2.0  # well past any filesystem's timestamp granularity (ext4/xfs: ns, FAT: 2 s)


def identity(path: Path) -> list[int | str]:
    info = path.stat()
    return [str(path.resolve()), info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev]


def _remembered() -> dict[str, list[int | str]]:
    with contextlib.suppress(OSError, ValueError):
        seen = json.loads((cache_dir() / CACHE_FILE).read_text(encoding="utf-8"))
        if isinstance(seen, dict):
            return seen
    return {}


def _remember(seen: dict[str, list[int | str]]) -> None:
    """Written whole, then swapped in: a reader sees the old file or the new one. A home that cannot be written
    only means the next start hashes again."""
    target = cache_dir() / CACHE_FILE
    with contextlib.suppress(OSError):
        target.parent.mkdir(parents=True, exist_ok=True)
        part = target.with_name(f"{CACHE_FILE}.{os.getpid()}.part")
        part.write_text(json.dumps(seen, indent=1), encoding="utf-8")
        os.replace(part, target)


def verified(path: Path, sha256: str) -> Path:
    """`path`, once its content is known to have the digest `sha256`; EmbeddingModelError if it is missing or not."""
    if not path.is_file():
        raise EmbeddingModelError(f"embedding model file not found: {path}")
    ident = identity(path)
    seen = _remembered()
    entry = seen.get(str(ident[0]))
    if entry is not None and entry[:-1] == ident and entry[-1] == sha256:
        return path
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        raise EmbeddingModelError(f"{path} has sha256 {digest}, expected {sha256}; reinstall the package")
    # The identity read before hashing: a change while hashing gives the file a new one, never this entry's.
    changed_ns = max(int(ident[2]), int(ident[3]))
    if time.time_ns() - changed_ns > RECENT_S * 1e9:
        seen[str(ident[0])] = [*ident, digest]
        _remember(seen)
    return path
