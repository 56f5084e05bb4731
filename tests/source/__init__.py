"""Tests of reconciler.source: file trees, git revisions, reading a repo from disk or git."""
