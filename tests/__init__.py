"""The test suite, laid out like the package: one folder per package of ``reconciler`` (and
``processes``, ``project``, the contract suites and ``e2e``); helpers in ``support``."""
