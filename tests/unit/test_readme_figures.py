"""The figures README.md and the docs/ pages quote come from results files, and their relative links resolve.

The convention: a paragraph or table that quotes measured figures names the results files it quotes, as paths
under `benchmarks/results/` (a link, or in backticks; a folder stands for the files in it), in the paragraph
itself; a table row in the row (its first cell may link to the file), or else in the paragraph just before the
table. Every number in such a block must be held by one of the files it names, as shown after rounding (a
percentage also as a fraction, a count with its thousands commas). Not figures: text in backticks (commands,
settings, file names), link targets, and numbers joined to letters or symbols (p50, hit@5, Φ₁, 2-core, 0.5B, 10k).
Outside such blocks a percentage, a multiple (1.3x) or a time in ms is a measured figure all the same, quoted from
nowhere: it fails until its block names the file that holds it. The settings table is generated from the code
(docs/settings.md) and is not prose.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *(p for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "DESIGN.md")]
FENCE = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)
GENERATED = re.compile(r"<!-- settings-table:start.*?<!-- settings-table:end -->", re.S)
CITED = re.compile(r"benchmarks/results/[\w.*/-]*")
# A number on its own: not inside a word or a name (p50, Φ₁, hit@5, 2-core, 0.5B, 10k, 1a207cb), nor a date.
NUMBER = re.compile(
    r"(?<![\w.@#₀-₉·-])(?<![^\d ]/)"  # not after a letter, a dot, a symbol or a path's slash (25/26 is two)
    r"([−-]?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(%|×|x(?![A-Za-z]))?"  # sign, digits, decimals, percent or multiple
    r"(?![\w@₀-₉]|-[A-Za-z]|\.\d)"  # not before a letter (0.5B, 10k) or a hyphenated word (2-core)
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def prose(text: str) -> str:
    """The page without code: fences, the generated table, backtick spans, link targets and HTML comments."""
    text = GENERATED.sub("", FENCE.sub("", text))
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    return LINK.sub(lambda m: m.group(0).split("](")[0] + "]", text)


def blocks(page: Path) -> Iterator[tuple[int, str, list[str]]]:
    """Each paragraph or table row of a page: its first line, its prose and the results paths it cites (a row
    without its own, those of the paragraph before the table)."""
    blank = lambda m: "\n" * m.group(0).count("\n")  # noqa: E731 - keeps the line numbers
    text = GENERATED.sub(blank, FENCE.sub(blank, page.read_text(encoding="utf-8")))
    line, caption = 1, []
    for chunk in re.split(r"(\n\s*\n)", text):
        if chunk.strip() and not chunk.startswith("\n"):
            cited = CITED.findall(re.sub(r"<!--.*?-->", "", chunk, flags=re.S))
            if chunk.lstrip().startswith("|"):
                for i, row in enumerate(chunk.strip("\n").splitlines()):
                    yield line + i, prose(row), CITED.findall(row) or caption
                cited = []
            else:
                yield line, prose(chunk), cited
            caption = cited
        line += chunk.count("\n")


def figures(text: str) -> Iterator[re.Match[str]]:
    unquoted = re.sub(r"`[^`]*`", "", text)
    yield from NUMBER.finditer(unquoted)


@cache
def held(path: Path) -> frozenset[float]:
    """Every number a results file holds: values, numbers in keys and numeric strings, and how many items a
    list or mapping has."""
    found: set[float] = set()

    def walk(value: object) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, int | float):
            found.add(float(value))
        elif isinstance(value, str) and re.fullmatch(r"[\d.,/ %-]+", value):  # "97/100"
            found.update(float(n) for n in re.findall(r"\d+(?:\.\d+)?", value))
        elif isinstance(value, dict):
            found.add(float(len(value)))  # how many: 10 groups, 213 cases
            for key, item in value.items():  # a key may name its parameters: "this tree, 80 paragraphs"
                found.update(float(n) for n in re.findall(r"\d+(?:\.\d+)?", str(key)))
                walk(item)
        elif isinstance(value, list):
            found.add(float(len(value)))
            for item in value:
                walk(item)

    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        for record in text.splitlines():
            if record.strip():
                walk(json.loads(record))
    else:
        walk(json.loads(text))
    return frozenset(found)


def results_files(cited: str) -> list[Path]:
    target = ROOT / cited.rstrip("/.")
    if target.is_dir():
        return sorted(p for p in target.rglob("*") if p.suffix in (".json", ".jsonl"))
    return sorted(p for p in target.parent.glob(target.name) if p.suffix in (".json", ".jsonl"))


def matches(figure: re.Match[str], values: frozenset[float]) -> bool:
    """The figure as shown is one of the values, rounded to the figure's decimals (a percentage also as a
    fraction of 1); signs are compared apart from the number (−0.159 is shown with its sign in words)."""
    digits = figure.group(2).replace(",", "") + (figure.group(3) or "")
    shown = float(digits)
    decimals = len(figure.group(3) or ".") - 1
    half = 0.5 * 10**-decimals + 1e-9
    scales = (1.0, 100.0) if figure.group(4) == "%" else (1.0,)
    return any(abs(abs(v) * scale - shown) <= half for v in values for scale in scales)


def unheld(page: Path) -> list[str]:
    """`page:line: figure (files)` for each figure no results file it should come from holds."""
    missing = []
    for line, text, cited in blocks(page):
        files = [f for c in cited for f in results_files(c)]
        assert not cited or files, f"{page.name}:{line} cites {cited}, which name no results file"
        values = frozenset().union(*(held(f) for f in files))
        for figure in figures(text):
            in_ms = re.match(r"\s?ms\b", text[figure.end() :]) is not None
            measured = bool(files) or bool(figure.group(4)) or in_ms
            if measured and not matches(figure, values):
                where = ", ".join(sorted({str(f.relative_to(ROOT)) for f in files})) or "no results file cited"
                missing.append(f"{page.name}:{line}: {figure.group(0)} ({where})")
    return missing


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_quoted_figure_is_in_its_results_file(page: Path) -> None:
    missing = unheld(page)
    assert not missing, "figures no results file holds:\n" + "\n".join(missing)


def test_a_figure_no_results_file_holds_fails(tmp_path: Path) -> None:
    """The check can fail: a cited table with one made-up cell, and an uncited made-up percentage."""
    page = tmp_path / "page.md"
    cited = "On HotpotQA (`benchmarks/results/eval_hotpotqa/metrics.json`):\n\n| n |\n|---|\n| 100 |\n| 4321 |\n\n"
    page.write_text(cited + "Elsewhere it is 97.3% faster.\n", encoding="utf-8")
    missing = unheld(page)
    assert [m.split(": ", 1)[1] for m in missing] == ["4321 (benchmarks/results/eval_hotpotqa/metrics.json)",
                                                      "97.3% (no results file cited)"]  # fmt: skip


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists() or (anchor and resolved.suffix == ".md" and anchor not in anchors(resolved)):
            broken.append(target)
    assert not broken, f"{page.name}: broken links {broken}"
