# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""The one error of the Ray client and the working_dir packager (api.py, package.py)."""
from __future__ import annotations


class RayApiError(Exception):
    """A failed request to the Ray dashboard: the URL, the HTTP status (None when no
    HTTP answer came), the text/plain body Ray sent, and a hint when one applies."""

    def __init__(self, message, url=None, method="GET", status=None, body=None, hint=None, kind="http"):
        self.message = message
        self.url = url
        self.method = method
        self.status = status
        self.body = body or ""
        self.hint = hint
        self.kind = kind  # http | connect | protocol | timeout | decode | package
        super().__init__(str(self))

    @property
    def summary(self):
        """The last non-empty line of the body: for Ray's tracebacks, the exception itself."""
        for line in reversed(self.body.splitlines()):
            line = line.strip()
            if line and line != ".":
                return line
        return ""

    def __str__(self):
        text = self.message
        if self.url:
            text += " (%s %s" % (self.method, self.url)
            text += ", HTTP %s)" % self.status if self.status is not None else ")"
        if self.summary and self.summary not in text:
            text += ": %s" % self.summary
        if self.hint:
            text += ". Hint: %s" % self.hint
        return text

    def to_dict(self):
        return {
            "message": self.message,
            "url": self.url,
            "method": self.method,
            "status": self.status,
            "body": self.body[-4000:],
            "hint": self.hint,
            "kind": self.kind,
        }
