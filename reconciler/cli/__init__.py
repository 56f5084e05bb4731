"""The ``reconciler`` command line (click): the composition root of the program."""
