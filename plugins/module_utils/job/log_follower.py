# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""mtslime.posttrain log follower: copies a Ray job's log into a file, ANSI codes removed.

The ray_job module copies this file next to the log (``.<stem>.follower.py``) and starts it
detached when the ``ray`` CLI is not on PATH (with the CLI it runs the guide's
``ray job logs <id> -f | sed`` pipeline instead). It polls ``GET <dashboard>/api/jobs/<id>``
and ``.../logs``, appends the complete lines that are new, and ends when the job ends.

Standard library only, Python 3.6+, no import from the collection: it runs on its own.
Usage: log_follower.py <dashboard_url> <submission_id> <output file> [interval seconds]
"""
from __future__ import annotations
# pylint: disable=ansible-bad-function  # also a program (python3 FILE, outside any module): prints, exits

import json
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

ANSI = re.compile(r"\x1B\[[0-9;?]*[ -/]*[@-~]")
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
MAX_FAILURES = 120
USAGE = "usage: log_follower.py <dashboard_url> <submission_id> <output file> [interval seconds]\n"


def strip_ansi(text):
    return ANSI.sub("", text)


def new_chunk(logs, seen, finished):
    """(text to append, new offset). While the job runs only complete lines are taken,
    so a line is never split between two polls; a log that got shorter (Ray restarted
    the driver's log) is read again from its start."""
    if len(logs) < seen:
        seen = 0
    chunk = logs[seen:]
    if not finished:
        chunk = chunk[: chunk.rfind("\n") + 1]
    return chunk, seen + len(chunk)


class Dashboard:
    """The two Jobs API calls the follower needs, without a proxy (the dashboard is local)."""

    def __init__(self, url, submission_id, timeout=60):
        self.url = url.rstrip("/")
        self.quoted = urllib.parse.quote(submission_id, safe="")
        self.timeout = timeout
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def get(self, path):
        with self.opener.open(self.url + path, timeout=self.timeout) as response:
            return json.loads(response.read().decode("utf-8", "replace"))

    def status(self):
        return (self.get("/api/jobs/%s" % self.quoted) or {}).get("status")

    def logs(self):
        return (self.get("/api/jobs/%s/logs" % self.quoted) or {}).get("logs") or ""


def follow(dashboard, handle, interval=5.0, max_failures=MAX_FAILURES, sleep=time.sleep, name="log_follower.py"):
    """Copy the job's log into `handle` until the job ends. Returns the exit code:
    0 the job ended, 1 the dashboard does not know the job, 2 the dashboard stopped answering."""
    seen = 0
    failures = 0
    while True:
        try:
            status = dashboard.status()
            logs = dashboard.logs()
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                handle.write("[%s: job %s is not known to %s]\n" % (name, urllib.parse.unquote(dashboard.quoted),
                                                                    dashboard.url))
                handle.flush()
                return 1
            failures += 1
        except (OSError, ValueError):
            failures += 1
        else:
            failures = 0
            finished = status in TERMINAL
            chunk, seen = new_chunk(logs, seen, finished)
            if chunk:
                handle.write(strip_ansi(chunk))
                handle.flush()
            if finished:
                return 0
        if failures >= max_failures:
            handle.write("[%s: the dashboard %s did not answer %d times; giving up]\n"
                         % (name, dashboard.url, failures))
            handle.flush()
            return 2
        sleep(interval)


def main(argv):
    if len(argv) not in (3, 4):
        sys.stderr.write(USAGE)
        return 64
    url, submission_id, out = argv[0], argv[1], argv[2]
    try:
        interval = float(argv[3]) if len(argv) == 4 else 5.0
    except ValueError:
        sys.stderr.write("interval %r is not a number of seconds\n%s" % (argv[3], USAGE))
        return 64
    if interval <= 0:
        sys.stderr.write("interval %r must be > 0 seconds\n%s" % (argv[3], USAGE))
        return 64
    with open(out, "w", encoding="utf-8") as handle:
        return follow(Dashboard(url, submission_id), handle, interval)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
