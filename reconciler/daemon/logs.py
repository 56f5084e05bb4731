"""Log setup for the daemon: plain text, or one JSON object per line (``--log-format json``)
with the runtime, module and operation a message is about. Messages never carry credentials:
URLs are redacted where they are made, and every line is masked on its way out
(:func:`reconciler.core.redaction.mask`) in case a message quotes a token. A failure is named
by its cause (:func:`cause`): its type, and whether it is retried. Callers: ``reconciler
daemon``, the daemon's parts."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

from reconciler.core.head import Head
from reconciler.core.redaction import mask
from reconciler.errors import ReconcilerError, TransientError

CONTEXT_FIELDS = ("runtime", "module", "operation")


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message", "runtime"?, "module"?, "operation"?}``."""

    def format(self, record: logging.LogRecord) -> str:
        document = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                document[name] = value
        if record.exc_info:
            document["error"] = self.formatException(record.exc_info)
        return json.dumps(document, sort_keys=True)


class MaskingFilter(logging.Filter):
    """Replaces the secret shapes in a record's message with ``***`` (S4)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = mask(message)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def setup_logging(log_format: str, level: int = logging.INFO) -> None:
    """Send logs to stderr in ``log_format`` ("text" or "json")."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(MaskingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)


def cause(error: ReconcilerError) -> str:
    """What kind of failure ``error`` is, for logs: its type, and whether retrying helps."""
    if isinstance(error, TransientError):
        return f"{type(error).__name__}, transient: retried"
    return f"{type(error).__name__}, permanent: needs a fix"


def source_failure(error: ReconcilerError) -> str:
    """``unreachable (ServerError, transient: retried)`` or ``failed (SourceError, ...)``."""
    what = "unreachable" if isinstance(error, TransientError) else "failed"
    return f"{what} ({cause(error)})"


def failure_level(error: ReconcilerError) -> int:
    """A transient failure is a warning (it is retried), a permanent one an error."""
    return logging.WARNING if isinstance(error, TransientError) else logging.ERROR


def shown(head: Head | None) -> str:
    """A commit as logs show it (``nothing`` before one)."""
    return head.shown if head is not None else "nothing"
