"""The one base of every error selfcrag raises, so a caller can catch them all (`except SelfcragError`). Each error
keeps its other base too (ValueError, RuntimeError, OSError, ...), for code that catches those.

The errors of the modules that also run as programs (`python -m selfcrag.cli`, `selfcrag.identities`,
`selfcrag.components.llm.local_server`) are defined here, so `import selfcrag` exports them without importing those
modules: runpy warns when the module it runs was imported already."""

from __future__ import annotations


class SelfcragError(Exception):
    """Raised by selfcrag; its message is one line for the person who reads it."""


class CliError(SelfcragError):
    """A user-facing error of the command line (cli.py): printed as one line."""


class IdentityError(SelfcragError, ValueError):
    """The identity file (identities.py) is missing or malformed, or an entry is bad: one line for the operator."""


class LocalModelError(SelfcragError, RuntimeError):
    """The local model (components/llm/local_server.py) cannot be used: a package is missing, or the joined file is
    not the pinned one."""
