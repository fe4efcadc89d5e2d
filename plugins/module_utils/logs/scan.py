# Reading the end of a log file and finding its first error line, without
# loading large logs into memory. Lines under torch's launcher ("[rank0]: ...") are
# matched without that prefix, and the launcher's own noise (module_utils/logs/tracebacks.py)
# is never an error.
from __future__ import annotations

import os
import re

from ansible_collections.mtslime.posttrain.plugins.module_utils.logs.tracebacks import (
    HEADER,
    TracebackScanner,
    is_noise,
    split_rank,
)

ANSI = re.compile(r"\x1B\[[0-9;?]*[ -/]*[@-~]")

# Ordered: the first line matching any of these is "the first error".
ERROR_PATTERNS = (
    re.compile(r"^Traceback \(most recent call last\)"),
    # "KeyError: 'x'", "torch.OutOfMemoryError: ...", "ray.exceptions.RayTaskError(OutOfMemoryError): ray::..."
    re.compile(r"\b(?:[A-Z][A-Za-z]*Error|Exception)(?:\([\w.]+\))?(?::|$)"),
    re.compile(r"\bout of memory\b", re.IGNORECASE),
    re.compile(r"\bMUSA error\b|\bCUDA error\b"),
    re.compile(r"\bscheduler is dead\b"),
    re.compile(r"\bsignal: ?(?:9|SIGKILL)\b|\bKilled\b"),
    re.compile(r"^\s*(?:ERROR|FATAL)\b|\] ERROR\b"),
    re.compile(r"\berror:", re.IGNORECASE),
)


def strip_ansi(text):
    return ANSI.sub("", text)


# Lines that say nothing about how far a program got (is_progress): Python's warnings, printed as
# "/path/file.py:144: FutureWarning: message" with the warning's source line indented under it
# ("  warnings.warn("), the C++ and glog warnings of torch ("[W1201 10:00:41.5 file.cpp:12] Warning: ...",
# "W1201 10:00:41.5 123 file.py:12] ..."), logging's "WARNING:name:..." and the launcher's noise.
PY_WARNING = re.compile(r"^\S.*?:\d+: (?:[A-Za-z_][\w.]*)?Warning: ")
WARN_CALL = re.compile(r"^\s*(?:warnings\.)?warn(?:_explicit)?\(")
OTHER_WARNING = re.compile(r"^\[W\d{3,4} |^W\d{4} \d\d:\d\d|^(?:WARNING|Warning)\b[:\s]")


def _tail_lines(path, max_bytes):
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            handle.seek(max(0, size - max_bytes))
            tail = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    return [strip_ansi(line) for line in tail.splitlines()]


def last_line(path, max_bytes=65536):
    """The last non-empty line of a file, or None."""
    for line in reversed(_tail_lines(path, max_bytes) or []):
        if line.strip():
            return line.strip()
    return None


def is_progress(lines, index):
    """Whether lines[index] says how far the program got: not empty, not a warning (nor the source line
    Python prints under a warning), not launcher noise. Torch's "[rankN]: " prefix is looked through."""
    text = split_rank(lines[index])[1]
    if not text.strip() or WARN_CALL.match(text) or is_noise(text) or OTHER_WARNING.match(text.lstrip()):
        return False
    if PY_WARNING.match(text):
        return False
    if text[:1].isspace() and index > 0 and PY_WARNING.match(split_rank(lines[index - 1])[1]):
        return False  # the warning's source line
    return True


def last_progress_line(path, max_bytes=65536):
    """The last line of a log that says how far the program got (is_progress), stripped; None when the
    end of the log has none. What a waiting run shows as "last:" and the lock holder's "doing" line."""
    lines = _tail_lines(path, max_bytes) or []
    for index in range(len(lines) - 1, -1, -1):
        if is_progress(lines, index):
            return lines[index].strip()
    return None


def first_error(lines, context=5):
    """First line matching ERROR_PATTERNS in an iterable of lines (torch's "[rankN]: " prefix
    removed for matching, launcher noise skipped).

    Returns {"lineno", "line", "context", "exception", "exception_lineno", "rank"} or None: `context`
    are the lines after it; `exception` says what went wrong without the rank prefix: when the line
    starts a Python traceback, the exception line that ends it however long it is (the last of a
    chain, TracebackScanner.exception_of) at `exception_lineno`, raised by `rank`; otherwise the line
    itself."""
    scanner = FirstErrorScanner(context=context)
    for raw in lines:
        scanner.feed(raw)
        if scanner.done:
            break
    found = scanner.result()
    if found is None:
        return None
    ending = found["traceback"]
    rank, text = split_rank(found["line"])
    if ending:
        exception, exception_lineno, rank = ending["exception"], ending["lineno"], ending["rank"]
    elif HEADER in text:
        exception, exception_lineno = None, None
    else:
        exception, exception_lineno = text.strip(), found["lineno"]
    return {"lineno": found["lineno"], "line": found["line"], "context": found["context"], "exception": exception,
            "exception_lineno": exception_lineno, "rank": rank}


def fatal_error(lines):
    """The exception line of the last traceback that is not launcher noise (see tracebacks.py):
    {"lineno", "line", "exception", "type", "rank", "traceback_start", "task"} or None."""
    scanner = TracebackScanner(before=0)
    for number, raw in enumerate(lines, start=1):
        line = strip_ansi(raw.rstrip("\r\n"))
        scanner.feed(number, line, line)
    found = scanner.fatal()
    if found is None:
        return None
    return {k: found[k] for k in ("lineno", "line", "exception", "type", "rank", "traceback_start", "task")}


def first_error_in_file(path, context=5):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return first_error(handle, context=context)
    except OSError:
        return None


def fatal_error_in_file(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return fatal_error(handle)
    except OSError:
        return None


class FirstErrorScanner:
    """Incremental form of first_error, for a pass over a log that does other work too.

    feed(raw_line) once per line (line numbers count from 1); result() gives
    {"lineno", "line", "context", "before", "traceback"} or None: `context` are the lines after the
    error (as first_error), `before` up to `before` lines in front of it, `traceback` the exception
    that ends the traceback when the error line is its header (TracebackScanner.exception_of).
    `clean(line)` may rewrite a line before it is matched (for example to remove a
    Ray actor prefix so that '^Traceback' matches); torch's rank prefix is removed
    after it. `split(line)` gives (message, source, plain) for the traceback scanner (`tracebacks`,
    which also knows the log's fatal error) and, without `clean`, the message (stripped) is what is
    matched; by default the line is its own message. The reported
    lines are only ANSI-stripped. `ignore` patterns veto a match (known harmless lines); launcher
    noise never matches."""

    def __init__(self, context=5, before=0, patterns=ERROR_PATTERNS, ignore=(), clean=None, split=None):
        self.context = context
        self.before = before
        self.patterns = tuple(patterns)
        self.ignore = tuple(ignore)
        self.clean = clean
        self.split = split
        self.tracebacks = TracebackScanner(before=before)
        self.lineno = 0
        self.message = None  # split()'s message of the line fed last
        self.found = None
        self._recent = []

    @property
    def done(self):
        """The first error and its context are read, and so is the traceback it starts."""
        return (self.found is not None and len(self.found["context"]) >= self.context
                and not self.tracebacks.reading(self.found["lineno"]))

    def matches(self, line, message=None):
        """Whether `line` is an error line; `message` is split(line)'s, matched (stripped) when there is no clean."""
        if self.clean:
            line = self.clean(line)
        elif message is not None:
            line = message.strip()
        text = split_rank(line)[1]
        if is_noise(text) or any(pattern.search(text) for pattern in self.ignore):
            return False
        return any(pattern.search(text) for pattern in self.patterns)

    def feed(self, raw):
        self.lineno += 1
        line = strip_ansi(raw.rstrip("\r\n"))
        message, source, plain = self.split(line) if self.split else (line, "", True)
        self.message = message
        self.tracebacks.feed(self.lineno, line, message, source, plain)
        if self.found is not None:
            if len(self.found["context"]) < self.context:
                self.found["context"].append(line)
            return
        if self.matches(line, message if self.split else None):
            self.found = {"lineno": self.lineno, "line": line.strip(), "context": [], "before": list(self._recent)}
            return
        if self.before:
            self._recent.append(line)
            if len(self._recent) > self.before:
                del self._recent[0]

    def result(self):
        if self.found is None:
            return None
        return dict(self.found, context=list(self.found["context"]), before=list(self.found["before"]),
                    traceback=self.tracebacks.exception_of(self.found["lineno"]))
