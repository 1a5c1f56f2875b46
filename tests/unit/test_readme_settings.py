"""The table of docs/settings.md is the one `scripts/settings_table.py` generates from `Context`: it cannot drift."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from selfcrag import Context
from selfcrag.context import OPERATOR_SETTINGS

ROOT = Path(__file__).parents[2]
spec = importlib.util.spec_from_file_location("settings_table", ROOT / "scripts" / "settings_table.py")
assert spec and spec.loader
settings_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(settings_table)


def test_settings_page_table_is_up_to_date():
    page = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    assert settings_table.with_table(page) == page, "run: python scripts/settings_table.py"
    assert settings_table.main(["--check"]) == 0


def test_every_setting_has_a_row_with_its_default_and_description():
    rows = settings_table.table().splitlines()[2:]
    assert [row.split("|")[1].strip(" `") for row in rows] == list(Context.model_fields)
    for row, (name, f) in zip(rows, Context.model_fields.items(), strict=True):
        assert f.description, f"{name} has no description"
        assert f.description.replace("|", "\\|") in row
        assert f"`{f.default!r}`" in row if isinstance(f.default, str) else f"`{f.default}`" in row
        assert ("| operator |" in row) == (name in OPERATOR_SETTINGS)


def test_regenerating_is_idempotent_and_touches_only_the_table():
    text = f"intro\n{settings_table.START}\nold table\n{settings_table.END}\noutro\n"
    once = settings_table.with_table(text)
    assert settings_table.with_table(once) == once
    assert once.startswith("intro\n") and once.endswith("\noutro\n") and "old table" not in once
