"""Names that are not settings, said once instead of ignored: a misspelt `SELFCRAG_` environment variable, and
settings passed in LangGraph's `config["configurable"]`, which the graph does not read (they go in `context`).

A misspelt key in a run's `context` is an error (context.py in Python, selfcrag/auth.py on the server); this module
only words the message, with the nearest valid name."""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from selfcrag.data_sections import read_sections

LOG = logging.getLogger("selfcrag.settings")
PREFIX = "SELFCRAG_"
_said: set[str] = set()  # what was said already in this process


def _other_variables() -> frozenset[str]:
    """The SELFCRAG_ variables read by something other than the settings (data/environment.txt, `#` comments)."""
    sections = read_sections("environment.txt", lambda line: line.split("#")[0].split())
    return frozenset(name for names in sections.values() for name in names)


OTHER_VARIABLES = _other_variables()  # never warned about


def nearest(name: str, names: Sequence[str]) -> str:
    """The valid name closest to `name`, or "" when none is close (a misspelling, not an unrelated word)."""
    close = difflib.get_close_matches(name.lower(), [n.lower() for n in names], n=1, cutoff=0.6)
    return next((n for n in names if close and n.lower() == close[0]), "")


def no_such_setting(name: str, settings: Iterable[str]) -> str:
    """One line for a key that names no setting."""
    close = nearest(name, list(settings))
    return f"{name}: no such setting" + (f" (did you mean {close}?)" if close else " (selfcrag.Context lists them)")


def say_once(message: str) -> None:
    if message not in _said:
        _said.add(message)
        LOG.warning(message)


def check_environment(settings: Iterable[str]) -> None:
    """Warn once about each SELFCRAG_ variable that is neither a setting nor another variable selfcrag reads."""
    known = {f"{PREFIX}{name.upper()}" for name in settings} | OTHER_VARIABLES
    for variable in sorted(os.environ):
        if variable.startswith(PREFIX) and variable not in known:
            close = nearest(variable.removeprefix(PREFIX), [k.removeprefix(PREFIX) for k in known])
            say_once(f"environment variable {variable} is ignored: no setting or variable of selfcrag has that name"
                     + (f" (did you mean {PREFIX}{close}?)" if close else ""))


def check_configurable(config: Mapping[str, Any] | None, context: Any, settings: Iterable[str]) -> None:
    """Warn once when `config["configurable"]` names settings the run's `context` did not get: LangGraph hands the
    graph only `context` (a LangGraph server copies `configurable` into the context, so there it never warns)."""
    configurable = (config or {}).get("configurable") or {}
    given = getattr(context, "model_fields_set", None) or (set(context) if isinstance(context, Mapping) else set())
    if unread := sorted(set(configurable) & set(settings) - set(given)):
        say_once(f"settings in config['configurable'] are ignored: {', '.join(unread)}; pass them as "
                 "context={...} (graph.invoke(..., context=...), or a server client's context)")
