"""Every form of YAML nesting as text of any depth, with the place where the level past the
reader's limit starts: for the nesting limit tests of ``tests/config``, which also import it in a
child process to read very deep nesting without risking their own."""

from __future__ import annotations

from collections.abc import Callable

from reconciler.config.yamlsafe import MAX_DEPTH

#: Each nesting form: text of ``n`` levels, and the place (line, column) of level MAX_DEPTH + 1.
FORMS: dict[str, tuple[Callable[[int], str], tuple[int, int]]] = {
    "block sequence": (lambda n: "- " * n + "x\n", (1, 2 * MAX_DEPTH + 3)),
    "complex key": (lambda n: "? " * n + "x\n", (1, 2 * MAX_DEPTH + 3)),
    "complex key and sequence": (lambda n: "? - " * (n // 2) + "x\n", (1, 2 * MAX_DEPTH + 3)),
    "value of a complex key": (
        lambda n: "? x\n: " + "- " * (n - 1) + "x\n",
        (2, 2 * MAX_DEPTH + 3),
    ),
    "indented mapping": (
        lambda n: "".join(" " * i + "a:\n" for i in range(n)) + " " * n + "x\n",
        (MAX_DEPTH + 2, MAX_DEPTH + 2),
    ),
    "indented sequence": (
        lambda n: "".join(" " * i + "-\n" for i in range(n)) + " " * n + "x\n",
        (MAX_DEPTH + 2, MAX_DEPTH + 2),
    ),
    "sequence under a key, not indented": (
        lambda n: "".join("  " * i + "- a:\n" for i in range(n // 2)) + "x\n",
        (MAX_DEPTH // 2 + 1, MAX_DEPTH + 3),
    ),
    "flow sequence": (lambda n: "[" * n + "]" * n + "\n", (1, MAX_DEPTH + 2)),
    "flow mapping": (lambda n: "{a: " * n + "x" + "}" * n + "\n", (1, 4 * MAX_DEPTH + 5)),
    "flow single-pair mapping": (
        lambda n: "[a: " * (n // 2) + "x" + "]" * (n // 2) + "\n",
        (1, 2 * MAX_DEPTH + 2),
    ),
    "flow in block": (
        lambda n: "- " * (n // 2) + "[" * (n // 2) + "]" * (n // 2) + "\n",
        (1, 2 * MAX_DEPTH + 2),
    ),
    "complex flow key": (lambda n: "{? " * n + "x" + "}" * n + "\n", (1, 3 * MAX_DEPTH + 4)),
}
