"""The deterministic reasoner: graders, refiner, generator, rewriter and contextualizer with no model, each
implementing a Protocol of `selfcrag.contract`."""
