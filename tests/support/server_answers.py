"""What a real API server answers for the resource quantities we write (in a container's
``resources.limits``): the canonical forms the server-form normaliser must predict. Callers: the
server-form tests of ``tests/core`` and the real-server check of ``tests/contract``."""

from __future__ import annotations

#: (what we write, what a real API server answers in a container's ``resources.limits``).
SERVER_ANSWERS: tuple[tuple[object, str], ...] = (
    ("1000m", "1"), ("1", "1"), ("0.5", "500m"), ("500m", "500m"), ("1024Mi", "1Gi"),
    ("1.5Gi", "1536Mi"), ("1536Mi", "1536Mi"), ("0.5Gi", "512Mi"), ("1000", "1k"),
    ("1e3", "1e3"), ("1.5e3", "1500"), ("100e-3", "100e-3"), ("1000k", "1M"), ("1024", "1024"),
    ("1023Mi", "1023Mi"), ("2048Ki", "2Mi"), ("1Ki", "1Ki"), ("0.5Ki", "512"),
    ("1.5Ki", "1536"), ("0", "0"), ("0m", "0"), ("0.0", "0"), ("128974848", "128974848"),
    ("129e6", "129e6"), ("129M", "129M"), ("1.1", "1100m"), ("0.0001", "1m"), ("1n", "1m"),
    ("0.1n", "1m"), ("10u", "1m"), ("01", "01"), ("1E3", "1E3"), ("2000m", "2"),
    ("1500m", "1500m"), (1, "1"), (0.5, "500m"), (1.5, "1500m"), (1000, "1k"), (1e9, "1G"),
    ("+1", "+1"), ("3.0", "3"), ("1.0Gi", "1Gi"), ("12E", "12E"), ("8Mi", "8Mi"),
    ("1000Mi", "1000Mi"), ("1024Ki", "1Mi"),
)  # fmt: skip
