"""Log setup for the daemon: plain text, or one JSON object per line (``--log-format json``)
with the runtime, module and operation a message is about. Each event is one line: a message's
line breaks are shown as ``\\n`` in text (JSON escapes them), an exception that ends a thread is
one ``internal error`` line (its traceback only with ``--debug``), and a failure that repeats is
logged once per change of state (:class:`Repeats`: the same failure again at DEBUG, then one line
when it works again). Messages never carry credentials: URLs are redacted where they are made,
and every line is masked on its way out (:func:`reconciler.core.redaction.mask`) in case a
message quotes a token. A failure is named by its cause (:func:`cause`): its type, and whether
it is retried. Callers: ``reconciler daemon``, the daemon's parts."""

from __future__ import annotations

import json
import logging
import sys
import threading
from datetime import UTC, datetime

from reconciler.core.head import Head
from reconciler.core.redaction import mask
from reconciler.errors import ReconcilerError, TransientError
from reconciler.operations.crash import place_of

#: The JSON field of each context a line may carry, and the ``extra`` key that gives it (a
#: record's own ``module`` is the Python module that logged: never taken for a module of ours).
CONTEXT_FIELDS = {"runtime": "runtime", "module": "module_name", "operation": "operation"}


class JsonFormatter(logging.Formatter):
    """``{"time", "level", "logger", "message", "runtime"?, "module"?, "operation"?}``."""

    def format(self, record: logging.LogRecord) -> str:
        document = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, key in CONTEXT_FIELDS.items():
            value = getattr(record, key, None)
            if value is not None:
                document[name] = value
        if record.exc_info:
            document["error"] = self.formatException(record.exc_info)
        return json.dumps(document, sort_keys=True)


class OneLineFormatter(logging.Formatter):
    """Text lines, one per event: a message's line breaks (a server's answer, a tool's output)
    shown as ``\\n``. A traceback (only with ``--debug``) follows on lines of its own."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        return super().formatMessage(record).replace("\r\n", "\n").replace("\n", "\\n")


class Repeats:
    """The failure last logged of each subject (a runtime, the source, a cluster), so that a
    failure retried again and again is news once: :meth:`news` says whether to log it at its
    level (else at DEBUG), :meth:`recovered` whether to say the subject works again."""

    def __init__(self) -> None:
        self._last: dict[str, tuple[str, bool]] = {}
        self._lock = threading.Lock()

    def news(self, subject: str, state: str, *, failure: bool = True) -> bool:
        """Record ``subject``'s ``state`` (a failure, or a wait when not ``failure``); whether
        it differs from the one recorded last."""
        with self._lock:
            last = self._last.get(subject)
            self._last[subject] = (state, failure)
            return last is None or last[0] != state

    def recovered(self, subject: str) -> bool:
        """``subject`` works: whether its last state recorded was a failure."""
        with self._lock:
            last = self._last.pop(subject, None)
            return last is not None and last[1]

    def level(self, subject: str, state: str, level: int, *, failure: bool = True) -> int:
        """``level`` when ``state`` is news for ``subject`` (:meth:`news`), else DEBUG."""
        return level if self.news(subject, state, failure=failure) else logging.DEBUG


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
        handler.setFormatter(OneLineFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(MaskingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    threading.excepthook = log_thread_failure


def log_thread_failure(args: threading.ExceptHookArgs) -> None:
    """An exception that ends a thread (a bug: every expected failure is caught where it
    happens) as one ``internal error`` line naming the thread and the place, not a traceback
    on stderr (the traceback with ``--debug``, at DEBUG)."""
    error = args.exc_value
    if error is None or isinstance(error, SystemExit):
        return
    name = args.thread.name if args.thread is not None else "a thread"
    logging.getLogger("reconciler.daemon").error(
        "thread %s: internal error: %s: %s (at %s)",
        name,
        type(error).__name__,
        error,
        place_of(error),
    )
    logging.getLogger("reconciler.daemon").debug("thread %s: traceback", name, exc_info=error)


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
