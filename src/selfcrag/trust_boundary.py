"""The trust boundary at run time: what a run's `context` may change of the operator's settings (`resolve`), the
operator's settings as the graph reads them at every step (`OperatorSettings`), and the settings inside a node
(`settings_of`). Which settings are the operator's is declared on each field in `context.py`.

Assistant settings (the system prompts) are operator settings that an assistant on a LangGraph server may set too.
The server hands the graph one context, the assistant's merged with the run's, so only its door can tell them apart:
selfcrag/auth.py refuses a run whose own context changes one, and marks the runs it let in (`DOOR`). In a run
with that mark the assistant settings in the context are the assistant's; anywhere else they are refused as every
operator setting is."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import Any

from selfcrag.context import ASSISTANT_SETTINGS, ENV_PREFIX, OPERATOR_SETTINGS, Context, field_tag
from selfcrag.errors import SettingsError
from selfcrag.quality.thresholds import OVERRIDES


def resolve(requested: Context | dict[str, Any] | None, base: Context) -> Context:
    """The run's settings: the operator's `base`, changed by what the run asked for within the trust boundary.
    Raises SettingsError (one line) for an operator setting the run may not choose, or a value above its cap.

    Both are immutable (frozen), so the result for the same two objects is remembered: the graph resolves at every
    step with the run's one context object, and building a Context again costs ~70 us each time. A refusal is not
    remembered: it is raised again, at the first step of every run that asks."""
    if requested is None:
        return base
    vetted = through_door()
    if isinstance(requested, dict):
        return _resolve(Context(**requested), base, vetted)
    key = (id(requested), id(base), vetted)
    with _resolved_lock:
        hit = _resolved.get(key)
    if hit is not None and hit[0] is requested and hit[1] is base:
        return hit[2]
    settings = _resolve(requested, base, vetted)
    with _resolved_lock:  # the entry holds both objects, so their ids cannot be reused while it is here
        _resolved[key] = (requested, base, settings)
        while len(_resolved) > RESOLVED_KEPT:
            _resolved.popitem(last=False)
    return settings


RESOLVED_KEPT = 64  # (run context, operator settings) pairs remembered: a server's concurrent runs, say
_resolved: OrderedDict[tuple[int, int, bool], tuple[Context, Context, Context]] = OrderedDict()
_resolved_lock = threading.Lock()
# What selfcrag/auth.py's `authenticate` puts in every identity it lets in; LangGraph's server copies the identity
# into each run's `config["configurable"]["langgraph_auth_user"]`, where no client can write.
DOOR = ("checked_by", "selfcrag.auth")


def through_door() -> bool:
    """Whether the running graph step belongs to a run that selfcrag's door let into a LangGraph server (so its
    assistant settings are its assistant's). False outside a run, and in a run made in Python."""
    from langgraph.config import get_config

    try:
        user = get_config().get("configurable", {}).get("langgraph_auth_user")
    except RuntimeError:  # not inside a run: a server's request handler, a node called on its own
        return False
    get = getattr(user, "get", None)
    return callable(get) and get(DOOR[0]) == DOOR[1]


def _resolve(requested: Context, base: Context, vetted: bool = False) -> Context:
    chosen = {name: getattr(requested, name) for name in requested.model_fields_set}
    opened = set(base.allow_per_run) | (ASSISTANT_SETTINGS if vetted else set())
    refused = []
    for name, value in chosen.items():
        field = Context.model_fields[name]
        if name in OPERATOR_SETTINGS and name not in opened and value not in (getattr(base, name), field.default):
            refused.append(name)
    if refused:
        names, first = ", ".join(sorted(refused)), sorted(refused)[0]
        also = ", or in an assistant's context on a LangGraph server" if first in ASSISTANT_SETTINGS else ""
        raise SettingsError(f"{names} {'are operator settings' if len(refused) > 1 else 'is an operator setting'}: "
                            "a run may not choose it; the deployment sets it in the environment "
                            f"(SELFCRAG_{first.upper()}) or with build_graph(settings=...){also}")
    updates = {n: v for n, v in chosen.items() if n not in OPERATOR_SETTINGS or n in opened}
    for name, value in updates.items():
        if (cap := field_tag(name, "cap")) and value > getattr(base, cap):
            raise SettingsError(f"{name}={value} is above this deployment's cap of {getattr(base, cap)} "
                                f"({cap}, SELFCRAG_{cap.upper()})")
    return Context(**{**base.model_dump(), **updates}) if updates else base


def looser_bar(asked: Context, floor: Context) -> list[str]:
    """Where `asked` would show an answer that `floor` would hold for a person, one phrase each (empty: as strict
    or stricter everywhere): an active minimum lower (domain, risk and the overrides make them: `thresholds()`),
    answers shown from a lower confidence (the plain-answer minimum less `caveat_band`: below it a draft is held),
    a narrower `review_band` or a wider `review_spread`. With human review on, a client's run may raise the
    operator's bar, never lower it (selfcrag/auth.py refuses such a run in one line)."""
    mine, theirs = asked.thresholds(), floor.thresholds()
    looser = [f"{OVERRIDES[name]} {getattr(mine, name)} < {getattr(theirs, name)}" for name in OVERRIDES
              if getattr(mine, name) < getattr(theirs, name)]  # fmt: skip
    shown, held = round(mine.overall - asked.caveat_band, 4), round(theirs.overall - floor.caveat_band, 4)
    if shown < held:
        looser.append(f"answers shown from confidence {shown} < {held} (min_confidence less caveat_band)")
    if asked.review_band < floor.review_band:  # a narrower close-call band sends fewer answers to a person
        looser.append(f"review_band {asked.review_band} < {floor.review_band}")
    if asked.review_spread > floor.review_spread:
        looser.append(f"review_spread {asked.review_spread} > {floor.review_spread}")
    return looser

class OperatorSettings:
    """The operator's settings as `Context.from_env(**fixed)` gives them, made again only when a `SELFCRAG_`
    environment variable changed: the graph asks at every step, and `from_env` costs ~0.25 ms (61 environment
    look-ups, most of them misses, and a validation), about 5 ms of a warm offline question's CPU. The variables
    are still read at every step (one pass over the environment, ~50 us), so a change between runs is seen."""

    def __init__(self, fixed: dict[str, Any] | None = None) -> None:
        self.fixed = dict(fixed or {})
        self._made: tuple[tuple[tuple[str, str], ...], Context] | None = None

    def __call__(self) -> Context:
        environment = tuple(item for item in os.environ.items() if item[0].startswith(ENV_PREFIX))
        made = self._made
        if made is not None and made[0] == environment:
            return made[1]
        settings = Context.from_env(**self.fixed)  # an error is raised, never remembered
        self._made = (environment, settings)
        return settings


def settings_of(runtime_context: Context | dict[str, Any] | None) -> Context:
    """The settings inside a node or a route. In a graph from `build_graph` they were resolved already against
    the operator's settings; a node function called on its own (unit tests) resolves against the environment."""
    if isinstance(runtime_context, Context):
        return runtime_context
    return resolve(runtime_context, Context.from_env())
