"""Checks of the project's own material: the layers, README, docs, deploy/, the sample repo, the
test and bench harness."""
