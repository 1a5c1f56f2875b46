"""Every error selfcrag raises has one base, `SelfcragError`, and is exported from `selfcrag`: a caller catches them
all with one clause, or one by name, without knowing which module raises it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import selfcrag
from selfcrag import SelfcragError

ROOT = Path(__file__).parents[2]


def defined_errors() -> dict[str, type[BaseException]]:
    """Every exception class defined anywhere in the package (each module imported and read)."""
    found: dict[str, type[BaseException]] = {}
    for module in pkgutil.walk_packages(selfcrag.__path__, "selfcrag."):
        for name, value in vars(importlib.import_module(module.name)).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == module.name:
                found[name] = value
    return found


def test_every_error_derives_from_one_base_and_is_exported():
    errors = defined_errors()
    assert {"SettingsError", "IngestError", "QuestionError", "StoreError", "CliError"} <= set(errors)
    for name, error in errors.items():
        assert issubclass(error, SelfcragError), name
        assert name in selfcrag.__all__, name
        assert getattr(selfcrag, name) is error, name
    assert "SelfcragError" in selfcrag.__all__


def test_errors_keep_the_bases_code_catches_them_by():
    assert issubclass(selfcrag.SettingsError, ValueError)
    assert issubclass(selfcrag.IngestError, ValueError)
    assert issubclass(selfcrag.EmptyQuestionError, selfcrag.QuestionError)
    assert issubclass(selfcrag.StoreError, OSError)
    assert issubclass(selfcrag.TotalTimeoutError, TimeoutError)
    assert issubclass(selfcrag.WebSearchError, RuntimeError)
    with pytest.raises(SelfcragError, match="k: Input should be greater than or equal to 1"):
        selfcrag.Context(k=0)  # one clause catches a bad setting


def test_exporting_the_errors_imports_no_module_that_runs_as_a_program():
    """`python -m selfcrag.cli` (and the others) would warn on every start if `import selfcrag` imported it first."""
    programs = ["selfcrag.cli", "selfcrag.identities", "selfcrag.llm.local_server"]
    probe = f"import sys, selfcrag; print([m for m in {programs!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    for program in programs:
        source = (ROOT / "src" / Path(*program.split("."))).with_suffix(".py").read_text(encoding="utf-8")
        assert '__name__ == "__main__"' in source, program  # still a program: else drop it from this list
