"""Metadata filters: which documents a search may return, applied inside the search of both indexes (the candidate
rows before ranking, so k results come back when k documents match), never to its results afterwards.

A filter is an object of metadata keys, every one of which must match (AND):
- `{"tenant": "acme"}` or `{"tenant": {"$eq": "acme"}}`: the document's `tenant` equals "acme";
- `{"tenant": {"$in": ["acme", "globex"]}}`: it equals one of them (an empty list matches nothing).
Values are strings, numbers or booleans, compared as JSON compares them (1 equals 1.0; true is not 1). A document
without the key, or whose value is a list or an object, does not match. Any other operator ($ne, $gt, $or, ...)
is refused with one line: a filter that is silently ignored would return documents it was meant to keep out.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

SUPPORTED = 'equality ({"key": value} or {"key": {"$eq": value}}) and {"key": {"$in": [values]}}'
TENANT_KEY = "tenant"  # the metadata key the `tenant` run setting matches (context.py)

Scalar = str | int | float | bool
Canonical = tuple[str, Any]  # a value as JSON compares it: ("s", text), ("n", float) or ("b", bool)


def canonical(value: Any) -> Canonical | None:
    """`value` as the filter compares it, or None for a value no filter matches (a list, an object, null)."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int | float):
        return ("n", float(value)) if math.isfinite(value) else None
    if isinstance(value, str):
        return ("s", value)
    return None


@dataclass(frozen=True)
class MetadataFilter:
    """Each key with the values it may take (one for equality, several for `$in`, none: matches nothing)."""

    terms: tuple[tuple[str, tuple[Scalar, ...]], ...]

    def allowed(self) -> dict[str, set[Canonical]]:
        return {key: {c for v in values if (c := canonical(v)) is not None} for key, values in self.terms}

    def matches(self, metadata: dict[str, Any]) -> bool:
        return all(canonical(metadata.get(key)) in wanted for key, wanted in self.allowed().items())

    def and_(self, other: MetadataFilter | None) -> MetadataFilter:
        """Both filters at once: a key both name may take only the values both allow."""
        if other is None:
            return self
        mine = dict(self.terms)
        for key, values in other.terms:
            if key in mine:
                theirs = {canonical(v) for v in values}
                values = tuple(v for v in mine[key] if canonical(v) in theirs)
            mine[key] = values
        return MetadataFilter(tuple(mine.items()))

    def sql(self, column: str) -> tuple[str, dict[str, str]]:
        """A WHERE condition on a JSONB `column` (containment, which a GIN index serves) and its named parameters."""
        clauses: list[str] = []
        params: dict[str, str] = {}
        for key, values in self.terms:
            alternatives = []
            for value in values:
                name = f"meta_{len(params)}"
                params[name] = json.dumps({key: value}, ensure_ascii=False)
                alternatives.append(f"{column} @> %({name})s::jsonb")
            clauses.append("(" + " OR ".join(alternatives) + ")" if alternatives else "FALSE")
        return " AND ".join(clauses) or "TRUE", params


def parse(raw: Any) -> MetadataFilter | None:
    """The filter `raw` describes (None for none), or ValueError with one line saying what is wrong."""
    if raw is None or isinstance(raw, MetadataFilter):
        return raw
    if not isinstance(raw, dict):
        raise ValueError(f"a metadata filter must be an object of keys, not {type(raw).__name__}; supported: "
                         f"{SUPPORTED}")
    terms = []
    for key, condition in raw.items():
        if not isinstance(key, str) or not key or key.startswith("$"):
            raise ValueError(f"metadata filter key {key!r} is not supported; supported: {SUPPORTED}")
        if isinstance(condition, dict):
            if len(condition) != 1 or next(iter(condition)) not in ("$eq", "$in"):
                operators = ", ".join(map(str, condition)) or "an empty object"
                raise ValueError(f"metadata filter on {key!r}: {operators} is not supported; supported: {SUPPORTED}")
            operator, operand = next(iter(condition.items()))
            if operator == "$in" and not isinstance(operand, list | tuple):
                raise ValueError(f'metadata filter on {key!r}: "$in" takes a list of values')
            values = tuple(operand) if operator == "$in" else (operand,)
        else:
            values = (condition,)
        for value in values:
            if canonical(value) is None:
                raise ValueError(f"metadata filter on {key!r}: {value!r} is not a string, number or boolean")
        terms.append((key, values))
    return MetadataFilter(tuple(terms))


def tenant_filter(tenant: str) -> MetadataFilter | None:
    """The filter of the `tenant` run setting: documents whose metadata `tenant` is it ("" scopes nothing)."""
    return MetadataFilter(((TENANT_KEY, (tenant,)),)) if tenant else None


def parsed_metadata(encoded: str) -> dict[str, Any]:
    """A chunk's stored metadata (SourceDocument.metadata, JSON) as a dict; {} for none."""
    if not encoded:
        return {}
    value = json.loads(encoded)
    return value if isinstance(value, dict) else {}


class RowsByValue:
    """Each metadata key's values and the rows holding them, for an index whose rows carry `metadata` (JSON strings,
    SourceDocument.metadata): a filtered search costs the matching rows, not a pass over every chunk."""

    def __init__(self, metadata: list[str]) -> None:
        self.count = len(metadata)
        self.by_value: dict[str, dict[Canonical, list[int]]] = {}
        parsed: dict[str, dict[str, Any]] = {}  # a document's chunks share one metadata string
        for row, encoded in enumerate(metadata):
            if encoded:
                meta = parsed.setdefault(encoded, parsed_metadata(encoded))
                for key, value in meta.items():
                    if (value_key := canonical(value)) is not None:
                        self.by_value.setdefault(key, {}).setdefault(value_key, []).append(row)

    def rows(self, where: MetadataFilter) -> np.ndarray:
        """The rows matching `where`, ascending (int64)."""
        rows: np.ndarray | None = None
        for key, wanted in where.allowed().items():
            values = self.by_value.get(key, {})
            matched = np.unique(np.asarray([r for value in wanted for r in values.get(value, [])], dtype=np.int64))
            rows = matched if rows is None else np.intersect1d(rows, matched, assume_unique=True)
        return np.arange(self.count, dtype=np.int64) if rows is None else rows
