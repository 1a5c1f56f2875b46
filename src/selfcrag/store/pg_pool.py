"""A PostgreSQL connection pool that gives up at once on a server that is gone.

psycopg's pool answers a request it cannot serve by waiting its whole timeout while it reconnects in the
background. A run whose server stopped makes a dozen such requests before it ends (the checkpointer's writes, the
lease's renewal and release, the run record), each waiting out the timeout: the one-line error came 84 s after the
stop. Here a request that waits longer than a short slice asks the server directly whether it is there; refused,
the request fails at once, and so does every request for the next slice (no new connection attempt each time).
A server that is only busy (every connection lent out) answers the probe, and the request keeps waiting up to the
pool's timeout as before.
"""

from __future__ import annotations

import time
from typing import Any

SLICE_SECONDS = 1.0  # how long a request waits before it asks whether the server is there at all
PROBE_SECONDS = 2  # the probe's own connect timeout: a stopped server refuses at once, a cut network takes this long


def fail_fast_pool(url: str, **options: Any) -> Any:
    """A `psycopg_pool.ConnectionPool(url, **options)` whose requests fail at once while the server is unreachable
    (psycopg_pool.PoolTimeout, saying why), instead of after the pool's timeout."""
    import psycopg
    from psycopg_pool import ConnectionPool, PoolTimeout

    class FailFastPool(ConnectionPool):
        _unreachable_until = 0.0
        _why = ""

        def getconn(self, timeout: float | None = None) -> Any:
            deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
            while True:
                if time.monotonic() < self._unreachable_until:
                    raise PoolTimeout(f"the database server is unreachable: {self._why}")
                wait = min(SLICE_SECONDS, deadline - time.monotonic())
                try:
                    return super().getconn(timeout=max(0.0, wait))
                except PoolTimeout:
                    if time.monotonic() >= deadline:
                        raise
                why = self._probe()
                if why:
                    self._why, self._unreachable_until = why, time.monotonic() + SLICE_SECONDS
                    raise PoolTimeout(f"the database server is unreachable: {why}") from None

        def _probe(self) -> str:
            """'' when the server answers (the pool is only busy), else the first line of why it does not. A
            server that answers with an error of its own (too many clients, a password refused) is there: the
            request waits for a pooled connection as before."""
            try:
                psycopg.connect(url, connect_timeout=PROBE_SECONDS).close()
            except psycopg.Error as exc:
                if getattr(exc, "sqlstate", None) or "FATAL:" in str(exc):  # libpq's prefix for the server's reply
                    return ""
                return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            return ""

    return FailFastPool(url, **options)
