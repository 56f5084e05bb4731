"""Where config comes from: a folder or a git revision read as a file tree, the repo loader, the
schema files and the two-revision review; the only package that imports ``git``.
"""
