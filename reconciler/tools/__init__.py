"""Maintainer tools run with ``python -m`` (not commands of the product): the generator of
docs/config-reference.md (:mod:`reconciler.tools.docgen`)."""
