"""Every error selfcrag raises, in one place: one base, `SelfcragError`, so a caller catches them all with one clause,
and each keeps its other base too (ValueError, RuntimeError, OSError, ...) for code that catches those. `selfcrag`
exports them all; importing this module costs nothing, where importing the modules that raise them would (the
model layer, the store, the evaluation) or would make runpy warn (`python -m selfcrag.cli` and the other modules
that also run as programs). A comment names the module that raises each group."""

from __future__ import annotations


class SelfcragError(Exception):
    """Raised by selfcrag; its message is one line for the person who reads it."""


# cli.py
class CliError(SelfcragError):
    """A user-facing error: printed as one line."""


# identities.py
class IdentityError(SelfcragError, ValueError):
    """The identity file is missing or malformed, or an entry is bad: one line for the operator."""


# llm/local_server.py
class LocalModelError(SelfcragError, RuntimeError):
    """The local model cannot be used: a package is missing, or the joined file is not the pinned one."""


# context.py
class SettingsError(SelfcragError, ValueError):
    """A run asked for a setting it may not choose, or beyond the operator's cap: one line for the caller."""


# nodes/prepare.py
class QuestionError(SelfcragError, ValueError):
    """The run's question cannot be used: not text, or too long. The message is one line for the caller."""


class EmptyQuestionError(QuestionError):
    """The run has no question: neither `question` nor a user message."""


# knowledge/documents.py
class IngestError(SelfcragError, ValueError):
    """Bad input to ingest or a missing/mismatched index; the message is one line for the user."""


# knowledge/loaders.py
class Unreadable(SelfcragError):
    """The file cannot be read as its type says; the message is the reason, without the path."""


# knowledge/index_files.py
class DamagedFile(SelfcragError, ValueError):
    """One file of an index is not what the others say; the message starts with the file's name."""


# contract.py
class EmbeddingModelError(SelfcragError, RuntimeError):
    """The embedding model is missing, fails its checksum, or its endpoint cannot be used."""


class WebSearchError(SelfcragError, RuntimeError):
    """Web search failed (timeout, HTTP error, bad reply); the graph degrades to retrieval only."""


# backend.py
class ComponentError(SelfcragError, TypeError):
    """A component given to the graph cannot take the arguments its node passes (a method written to an older
    contract): raised when the components are put together, not when a run's first call fails."""


# llm/faults.py
class ModelConfigError(SelfcragError, ValueError):
    """The model settings cannot work (no key or server, unknown provider): a setup error, raised, not degraded."""


# llm/calls.py
class BudgetSpent(SelfcragError, RuntimeError):
    """The run's model-call budget is spent: the call was not made."""


class RunTimeSpent(SelfcragError, RuntimeError):
    """The run's time limit is spent: the call was not made."""


class TotalTimeoutError(SelfcragError, TimeoutError):
    """No complete reply by the call's deadline (however the server trickled it)."""


# llm/structured.py
class MethodUnavailable(SelfcragError, ValueError):
    """This model's structured output cannot be used without LangChain's parser: the next method is tried."""


# quality/calibration.py
class CalibrationError(SelfcragError, ValueError):
    """A calibration file that cannot be read or is not a calibration: one line naming the file and the fault."""


# evaluation/questions.py
class QuestionFileError(SelfcragError, ValueError):
    """A question file that cannot be read: one line for the user."""


# evaluation/run.py
class ResumeError(SelfcragError, ValueError):
    """An evaluation cannot be resumed: its settings differ from the run's, or its records are damaged. One line."""


class EvalError(SelfcragError, ValueError):
    """An evaluation asked to measure what cannot be measured (a model server's pid with no readable CPU time)."""


# llm/replay.py
class CallNotRecorded(SelfcragError, ValueError):
    """A replayed evaluation asked for a model call its calls file does not hold, or the file cannot be read."""


class ReplayedFault(SelfcragError, RuntimeError):
    """A model call that failed when it was recorded, failing again on replay as it did then: the same line for the
    trace (`described`), the same HTTP status for the code that reads one, and retried only if it was then."""

    def __init__(self, described: str, status_code: int | None = None, retried: bool = False,
                 note: str = "") -> None:  # fmt: skip
        super().__init__(described)
        self.described = described
        self.status_code = status_code
        self.retried = retried
        self.note = note


# evaluation/calibrate.py
class CalibrationDataError(SelfcragError, ValueError):
    """Too few labelled runs, or only one kind of label: nothing to fit. One line."""


# store/db.py
class StoreError(SelfcragError, OSError):
    """The database cannot be reached or used: one line for the user (an OSError: storage failed)."""


# store/leases.py
class ThreadBusyError(SelfcragError, ValueError):
    """The thread cannot take a new question now (another turn holds it, or an answer awaits review)."""


class LeaseLostError(SelfcragError, ValueError):
    """A lease holder stalled past its lease: its write was refused, and it stops. One line for the user."""


# store/reviews.py
class ReviewError(SelfcragError, ValueError):
    """No such review, or it cannot be decided now: one line for the user."""


# testing.py
class FakeModelError(SelfcragError, RuntimeError):
    """A scripted model fault (`fail=`)."""
