"""The fault matrix's cases, one module per door (see benchmarks/fault_matrix.py)."""
