"""Runtime operations (DESIGN.md §4): persisted operations made of stages and retryable steps,
the engine that runs them, the built-in steps and the state store that keeps them."""
