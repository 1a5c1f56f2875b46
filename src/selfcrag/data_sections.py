"""Word lists kept as data: a file of `[section]` headers, each followed by its entries (`#` starts a comment)."""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources


def read_sections(name: str, split: Callable[[str], list[str]] = str.split) -> dict[str, list[str]]:
    """The sections of `selfcrag/data/<name>`, each line's entries cut by `split`. A malformed file is a packaging
    error: it fails loudly, naming the line."""
    text = (resources.files("selfcrag") / "data" / name).read_text(encoding="utf-8")
    sections: dict[str, list[str]] = {}
    current = ""
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
            sections[current] = []
        elif not current:
            raise ValueError(f"{name} line {number}: words before any [section]")
        else:
            sections[current] += split(line)
    return sections
