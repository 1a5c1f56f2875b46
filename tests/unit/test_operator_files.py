"""Operator-only files are never opened on a client's word (issue 23): a run's `context` is validated by
LangGraph before the trust check, so validation does no I/O, and a run that names another calibration is refused
by `resolve` in one line that says nothing about the file. The operator's own file is checked when the operator's
settings are made, and a file that is not a regular one (a FIFO, /dev/zero) is refused without reading it."""

from __future__ import annotations

import os

import pytest

from selfcrag import build_graph
from selfcrag.context import Context
from selfcrag.errors import CalibrationError, SettingsError
from selfcrag.quality import calibration
from selfcrag.quality.calibration import load, shipped
from selfcrag.trust_boundary import resolve


@pytest.fixture
def fifo(tmp_path):  # noqa: ANN001, ANN201 - a reader that opens it blocks until a writer comes: none ever does
    path = tmp_path / "calibration.fifo"
    os.mkfifo(path)
    return str(path)


@pytest.fixture
def nothing_opened(monkeypatch):  # noqa: ANN001, ANN201
    def refuse(path: object, *args: object) -> None:
        raise AssertionError(f"{path} was opened")

    monkeypatch.setattr(calibration, "load", refuse)
    monkeypatch.setattr(calibration, "_read", refuse)


@pytest.mark.parametrize("named", ["/dev/zero", "FIFO", "/etc/shadow", "/no/such/file.json"])
def test_a_run_that_names_a_calibration_is_refused_before_anything_is_opened(named, fifo, nothing_opened):
    path = fifo if named == "FIFO" else named
    with pytest.raises(SettingsError) as refused:
        resolve({"calibration": path}, Context())
    message = str(refused.value)
    assert message.startswith("calibration is an operator setting: a run may not choose it") and "\n" not in message
    assert path not in message  # the same line whatever the file: it tells nothing about it


def test_validation_alone_does_no_io(fifo, nothing_opened):
    assert Context(calibration=fifo).calibration == fifo  # what LangGraph does with a client's context first


@pytest.mark.parametrize("named", ["/dev/zero", "FIFO"])
def test_a_file_that_is_not_regular_is_refused_without_reading_it(named, fifo):
    path = fifo if named == "FIFO" else named
    with pytest.raises(CalibrationError, match="is not a regular file"):
        load(path)


def test_the_operators_file_is_checked_when_the_operators_settings_are_made(monkeypatch, fifo):
    monkeypatch.setenv("SELFCRAG_CALIBRATION", "/dev/zero")
    with pytest.raises(SettingsError, match="^calibration: calibration file /dev/zero is not a regular file"):
        Context.from_env()
    monkeypatch.delenv("SELFCRAG_CALIBRATION")
    with pytest.raises(SettingsError, match="is not a regular file"):
        build_graph(settings={"calibration": fifo}).invoke({"question": "How long do refunds take?"})
    good = str(shipped("offline"))
    assert Context.from_env(calibration=good).calibration == good
    assert resolve({"calibration": good}, Context.from_env(calibration=good)).calibration == good  # the same file


def test_an_oversized_file_is_refused(tmp_path):
    path = tmp_path / "huge.json"
    path.write_bytes(b" " * (calibration.LARGEST_FILE + 1))
    with pytest.raises(CalibrationError, match="more than a calibration has"):
        load(path)
