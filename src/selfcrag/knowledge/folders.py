"""Which files an ingested folder holds, and what it refuses to read: symlinks that leave the folder (a link to
`/etc/passwd` is not the folder's document), symlink loops, broken links, symlinked folders (read where they lie,
once) and devices, pipes and sockets (a read from a pipe would never end). Each refusal is named, never passed
over in silence; documents.py turns them into skip lines."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

from selfcrag.knowledge import loaders


def walk(root: Path) -> Iterator[tuple[Path, str]]:
    """(path, "") for every regular file under `root` (hidden files and OS/editor leftovers left out), and (path,
    why) for what is not read: a symlink that leaves the folder (`/etc/passwd` is not the folder's document), a
    symlink loop, a broken symlink, a symlinked folder (read where it lies, once), a device, pipe or socket."""
    base = root.resolve()
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(folder.iterdir(), reverse=True)
        except OSError as exc:
            yield folder, f"cannot read folder ({exc.strerror or exc})"
            continue
        for path in entries:
            if loaders.ignored(path.relative_to(root)):
                continue
            if path.is_symlink() and (problem := symlink_problem(path, base)):
                yield path, problem
                continue
            if path.is_dir():
                if not path.is_symlink():
                    stack.append(path)
            elif path.is_file():
                yield path, ""
            else:
                yield path, "not a regular file (a device, pipe or socket)"


def symlink_problem(path: Path, base: Path) -> str:
    """Why a symlink inside the folder is not followed ("" when it points to a file inside the folder)."""
    try:
        target = path.resolve(strict=True)
    except RuntimeError:  # Python 3.11 reports a loop so
        return f"symlink loop ({path.readlink()} leads back to itself); not followed"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"symlink loop ({path.readlink()} leads back to itself); not followed"
        return f"broken symlink (to {path.readlink()}); nothing to read"
    if not target.is_relative_to(base):
        return f"symlink to {target}, outside the ingested folder: refused"
    if target.is_dir():
        if path.parent.resolve().is_relative_to(target):
            return f"symlink loop (to {target}, a folder that holds it); not followed"
        return f"symlink to the folder {target.relative_to(base)}; read there, not twice"
    return ""
