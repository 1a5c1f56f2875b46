"""One module per graph node. Each `make(components)` returns the node function: it reads state, calls one
component, and returns a state update with one trace step saying what it decided and why."""
