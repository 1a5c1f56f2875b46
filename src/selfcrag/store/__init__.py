"""State that lasts beyond one run, in one place (`SELFCRAG_HOME`, or PostgreSQL at `SELFCRAG_DATABASE_URL`):

- `db`          one small SQL layer over SQLite and PostgreSQL (placeholders, pooled connections, schema)
- `checkpoint`  LangGraph's SQLite or PostgreSQL checkpointer for threads and paused reviews
- `runs`        every finished run recorded by the node that ends it; low-quality runs logged as warnings
- `leases`      one turn at a time on a thread: a lease with a holder, an epoch and an expiry (a review claim is
                one too); every write under it lands only while its epoch is current (fencing)
- `reviews`     the review queue: list, show, and the decision recorded (selfcrag/threads.py resumes the thread)
- `monitor`     statistics over a time window
- `dashboard`   the HTML report with plots over time

Below the nodes, which record runs here; what runs the graph on a thread is above it (selfcrag/threads.py), and
where things live (home directory, database URL) is selfcrag/home.py. A database fault never fails a run.
"""
