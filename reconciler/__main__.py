"""Entry point for ``python -m reconciler``; the console script ``reconciler`` calls the same."""

from reconciler.cli import main

main()
