"""Where config comes from: a folder or a git revision read as a file tree, the repo loader, the
schema files and the names of the installed step plugins; the only package that imports ``git``.
An adapter beside :mod:`reconciler.cluster` (neither imports the other), below ``operations``;
comparing two revisions is the use case :mod:`reconciler.review`.
"""
