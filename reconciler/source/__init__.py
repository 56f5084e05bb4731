"""Sources of config: git revisions (``git``); the only package that imports ``git``."""
