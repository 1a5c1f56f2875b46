"""The fault matrix's cases, one module per door (see benchmarks/fault_matrix.py).

Importing the package prepares the process before any case module imports selfcrag or the test servers, so that
the developer's shell does not change what runs."""

import os
import sys
import tempfile
from pathlib import Path

# The local test servers live with the tests; selfcrag itself is whichever the interpreter finds (the install, or
# PYTHONPATH), as for every other command.
_TESTS = str(Path(__file__).resolve().parents[2] / "tests")
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

os.environ.setdefault("SELFCRAG_CACHE_DIR", tempfile.mkdtemp(prefix="selfcrag-faults-cache-"))
os.environ.setdefault("SELFCRAG_HOME", tempfile.mkdtemp(prefix="selfcrag-faults-home-"))
os.environ.setdefault("LANGGRAPH_CLI_NO_ANALYTICS", "1")
os.environ.setdefault("LANGGRAPH_NO_VERSION_CHECK", "1")
for _name in [n for n in os.environ if n.startswith(("SELFCRAG_", "OPENAI_", "TAVILY_"))]:
    if _name not in ("SELFCRAG_CACHE_DIR", "SELFCRAG_HOME"):
        del os.environ[_name]
