# Reading the end of a log file and finding its first error line, without
# loading large logs into memory. Lines under torch's launcher ("[rank0]: ...") are
# matched without that prefix, and the launcher's own noise (module_utils/logs/tracebacks.py)
# is never an error.
from __future__ import annotations

import os
import re

from ansible_collections.mtslime.posttrain.plugins.module_utils.logs.tracebacks import (
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


def last_line(path, max_bytes=65536):
    """The last non-empty line of a file, or None."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as handle:
            handle.seek(max(0, size - max_bytes))
            tail = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    for line in reversed(tail.splitlines()):
        line = strip_ansi(line).strip()
        if line:
            return line
    return None


def first_error(lines, context=5, traceback_limit=300):
    """First line matching ERROR_PATTERNS in an iterable of lines (torch's "[rankN]: " prefix
    removed for matching, launcher noise skipped).

    Returns {"lineno", "line", "context", "exception"} or None: `context` are the lines after it;
    when the line starts a Python traceback, `exception` is the line that ends it (for example
    "RuntimeError: ..."), which says what went wrong, without the rank prefix."""
    found = None
    after = []
    for number, raw in enumerate(lines, start=1):
        line = strip_ansi(raw.rstrip("\r\n"))
        text = split_rank(line)[1]
        if found is not None:
            if len(after) < context:
                after.append(line)
            if found["exception"] is None and found["in_traceback"] and not is_noise(text):
                if number - found["lineno"] > traceback_limit:
                    found["in_traceback"] = False
                elif text and not text[0].isspace() and not text.startswith(("Traceback", "During handling",
                                                                             "The above exception")):
                    found["exception"] = text.strip()
                    found["in_traceback"] = False
            if len(after) >= context and not found["in_traceback"]:
                break
            continue
        if not is_noise(text) and any(pattern.search(text) for pattern in ERROR_PATTERNS):
            traceback = text.lstrip().startswith("Traceback")
            found = {"lineno": number, "line": line.strip(), "exception": None if traceback else text.strip(),
                     "in_traceback": traceback}
    if found is None:
        return None
    found.pop("in_traceback")
    found["context"] = after
    return found


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
    {"lineno", "line", "context", "before"} or None: `context` are the lines after the
    error (as first_error), `before` up to `before` lines in front of it.
    `clean(line)` may rewrite a line before it is matched (for example to remove a
    Ray actor prefix so that '^Traceback' matches); torch's rank prefix is removed
    after it. The reported lines are only ANSI-stripped. `ignore` patterns veto a
    match (known harmless lines); launcher noise never matches."""

    def __init__(self, context=5, before=0, patterns=ERROR_PATTERNS, ignore=(), clean=None):
        self.context = context
        self.before = before
        self.patterns = tuple(patterns)
        self.ignore = tuple(ignore)
        self.clean = clean
        self.lineno = 0
        self.found = None
        self._recent = []

    @property
    def done(self):
        return self.found is not None and len(self.found["context"]) >= self.context

    def matches(self, line):
        text = split_rank(self.clean(line) if self.clean else line)[1]
        if is_noise(text) or any(pattern.search(text) for pattern in self.ignore):
            return False
        return any(pattern.search(text) for pattern in self.patterns)

    def feed(self, raw):
        self.lineno += 1
        if self.done:
            return
        line = strip_ansi(raw.rstrip("\r\n"))
        if self.found is not None:
            self.found["context"].append(line)
            return
        if self.matches(line):
            self.found = {"lineno": self.lineno, "line": line.strip(), "context": [], "before": list(self._recent)}
            return
        if self.before:
            self._recent.append(line)
            if len(self._recent) > self.before:
                del self._recent[0]

    def result(self):
        if self.found is None:
            return None
        return dict(self.found, context=list(self.found["context"]), before=list(self.found["before"]))
