"""State that lasts beyond one run, in one place (`SELFCRAG_HOME`, or PostgreSQL at `SELFCRAG_DATABASE_URL`):

- `home`        where things live: the home directory, the database URL, the sample-index cache
- `db`          one small SQL layer over SQLite and PostgreSQL (placeholders, pooled connections, schema)
- `checkpoint`  LangGraph's SQLite or PostgreSQL checkpointer for threads and paused reviews
- `runs`        every finished run recorded by the node that ends it; low-quality runs logged as warnings
- `threads`     ask on a thread (continuity across processes); a paused run is queued for review; a turn a crash
                cut short is finished as itself or closed before the next question
- `leases`      one turn at a time on a thread: a lease with a holder and an expiry (a review claim is one too)
- `reviews`     the review queue: list, show, approve / edit / reject (resumes the thread)
- `monitor`     statistics over a time window
- `dashboard`   the HTML report with plots over time

Nothing here is imported by `import selfcrag`, and a database fault never fails a run.
"""
