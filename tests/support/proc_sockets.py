"""What a process holds, read from /proc: its file descriptors and its established TCP
connections to a port (the fleet bench's figures, and the test that many watch streams share
one connection)."""

from __future__ import annotations

import os
from pathlib import Path


def fetch_connections(pid: int | str, port: int) -> tuple[int, int]:
    """(open file descriptors, established TCP connections of ``pid`` to ``port``)."""
    inodes, fds = set(), 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        fds += 1
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    connected = 0
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            parts = line.split()
            remote_port = int(parts[2].rsplit(":", 1)[1], 16)
            if parts[3] == "01" and remote_port == port and parts[9] in inodes:
                connected += 1
    return fds, connected
