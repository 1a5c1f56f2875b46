"""Replace a whole directory so that readers see the complete old one or the complete new one, never a mix.

`replace_directory(DIR, fill)` has `fill` write the new content into `DIR.tmp-<pid>-<id>` beside DIR (same
filesystem, so renames are atomic), fsyncs every file and the directory, then swaps under a lock on the parent:
DIR -> `DIR.old-<pid>-<id>`, tmp -> DIR, fsync the parent, remove the old one. A failure or Ctrl-C before the
swap removes the tmp and leaves DIR untouched. A process killed between the two renames leaves DIR missing
and the complete old index beside it; `recover_directory` (called by loaders) renames it back: a save that
did not finish did not happen. Two savers each write their own tmp, and the lock makes their swaps take
turns, so the last one wins whole. Leftovers of killed savers are removed by the next save.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

TMP, OLD = ".tmp-", ".old-"


def _fsync(path: Path, directory: bool = False) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0))
    except OSError:
        if directory:  # some platforms cannot open a directory; its entries are then as durable as they get
            return
        raise
    try:
        os.fsync(fd)
    except OSError:
        if not directory:  # a file that cannot reach the disk is a failed save; a directory fsync is best effort
            raise
    finally:
        os.close(fd)


@contextlib.contextmanager
def _parent_locked(parent: Path, shared: bool = False) -> Iterator[None]:
    """A lock on the parent directory: exclusive for the few renames of a swap or a recovery, shared for
    readers, so a reader never opens one file of the old index and the next of the new. A lock on the
    directory itself leaves no lock file behind. Without fcntl (Windows), or a parent we cannot open,
    everything runs unlocked."""
    try:
        import fcntl

        fd = os.open(parent, os.O_RDONLY)
    except (ImportError, OSError):
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def reading(path: Path) -> contextlib.AbstractContextManager[None]:
    """Hold this while reading the files of `path`: no swap replaces it meanwhile (a save waits)."""
    return _parent_locked(path.parent, shared=True)


@contextlib.contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Ctrl-C between the two renames is held until the swap is done (the main thread gets KeyboardInterrupt)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received and callable(previous):
            previous(signal.SIGINT, None)


def _sibling(path: Path, kind: str) -> Path:
    return path.with_name(f"{path.name}{kind}{os.getpid()}-{secrets.token_hex(4)}")


def _leftovers(path: Path, kind: str) -> list[tuple[int, Path]]:
    pattern = re.compile(re.escape(path.name + kind) + r"(\d+)-[0-9a-f]+")
    found = []
    with contextlib.suppress(OSError):
        for entry in path.parent.iterdir():
            match = pattern.fullmatch(entry.name)
            if match and entry.is_dir():
                found.append((int(match.group(1)), entry))
    return found


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists but belongs to someone else
        return True
    return True


def _remove_dead_leftovers(path: Path) -> None:
    for kind in (TMP, OLD):
        for pid, entry in _leftovers(path, kind):
            if not _alive(pid):
                shutil.rmtree(entry, ignore_errors=True)


def _swap(tmp: Path, path: Path) -> Path | None:
    old = None
    if path.exists():
        old = _sibling(path, OLD)
        os.rename(path, old)
    try:
        os.rename(tmp, path)
    except BaseException:
        if old is not None:
            os.rename(old, path)
        raise
    return old


def replace_directory(path: Path, fill: Callable[[Path], None]) -> None:
    """Have `fill` write the new content into a fresh sibling directory, then swap it in for `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _sibling(path, TMP)
    tmp.mkdir()
    old = None
    try:
        fill(tmp)
        for entry in sorted(tmp.rglob("*"), reverse=True):  # a subdirectory's files before it (keywords/)
            _fsync(entry, directory=entry.is_dir())
        _fsync(tmp, directory=True)
        with _parent_locked(path.parent), _interrupts_deferred():
            _remove_dead_leftovers(path)
            old = _swap(tmp, path)
            _fsync(path.parent, directory=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)  # a crash here leaves a stale copy that the next save removes


def recover_directory(path: Path, complete: Callable[[Path], bool]) -> Path | None:
    """`path` if it exists; else the old copy a killed swap left beside it, renamed back into place (or read
    where it lies when the parent is read-only); else None."""
    if path.exists():
        return path
    if not path.parent.is_dir():
        return None
    with _parent_locked(path.parent):
        if path.exists():  # another process recovered it while we waited for the lock
            return path
        # Under the lock no swap is halfway, so an old copy with DIR missing is a killed saver's.
        candidates = sorted((entry for pid, entry in _leftovers(path, OLD) if not _alive(pid) and complete(entry)),
                            key=lambda entry: entry.stat().st_mtime_ns, reverse=True)
        if not candidates:
            return None
        try:
            os.rename(candidates[0], path)
        except OSError:
            return candidates[0]
        _fsync(path.parent, directory=True)
        return path
