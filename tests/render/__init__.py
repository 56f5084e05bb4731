"""Tests of reconciler.render: templated module versions rendered by the real engines."""
