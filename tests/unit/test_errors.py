"""Every error selfcrag raises has one base, `SelfcragError`, and is exported from `selfcrag`: a caller catches them
all with one clause, or one by name, without knowing which module raises it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import selfcrag
from selfcrag import SelfcragError


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
