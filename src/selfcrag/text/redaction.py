"""Secrets out of text that leaves the process: an upstream server's error may echo what it was sent (a 401 body
that quotes the key, a proxy that repeats the Authorization header), and that text goes into a run's trace, a log
line, a run record. `redact` is the one function every such exit calls.

What counts as a secret: the configured keys themselves (any environment variable named like a key, token, secret
or password), and anything shaped like one: `sk-...` (OpenAI and most compatible servers), `tvly-...` (Tavily),
a bearer token, and a long run of letters and digits mixed (an opaque token or a hash). Ordinary words, numbers
and URLs stay readable."""

from __future__ import annotations

import os
import re

REDACTED = "[redacted]"
SHAPES = re.compile(
    r"(?i:bearer|basic)\s+[^\s\"',;]+"  # an Authorization header's credentials
    r"|\b(?:sk|tvly|pk|rk)-[A-Za-z0-9_\-]{6,}"  # provider keys: sk-..., sk-proj-..., tvly-...
    r"|(?<![A-Za-z0-9_\-+/=])(?=[A-Za-z0-9_\-+/=]*[0-9])(?=[A-Za-z0-9_\-+/=]*[A-Za-z])[A-Za-z0-9_\-+/=]{32,}"
)
SECRET_NAMES = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD)$")
SHORTEST = 8  # a configured value shorter than this ("test", "none") is left alone: it would blank ordinary words


def configured_secrets() -> list[str]:
    """The values of the environment's key-like variables (OPENAI_API_KEY, SELFCRAG_API_KEY, TAVILY_API_KEY, ...),
    longest first so a key that contains another is replaced whole. Read each time: the environment may change."""
    values = {value.strip() for name, value in os.environ.items() if SECRET_NAMES.search(name.upper())}
    return sorted((v for v in values if len(v) >= SHORTEST), key=len, reverse=True)


def redact(text: str) -> str:
    """`text` with every configured key and every key-shaped token replaced by `[redacted]`."""
    for secret in configured_secrets():
        if secret in text:
            text = text.replace(secret, REDACTED)
    return SHAPES.sub(REDACTED, text)
