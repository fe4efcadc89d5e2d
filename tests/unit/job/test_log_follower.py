"""module_utils/job/log_follower.py, the program ray_job starts when the ray CLI is missing: run as a
program against the fake Ray dashboard, and its pieces directly."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import urllib.error

from ansible_collections.mtslime.posttrain.plugins.module_utils.job import log_follower

PROGRAM = log_follower.__file__


def run_program(*args, timeout=20):
    # -S -E: no site packages, no PYTHON* variables: the program needs the standard library only
    return subprocess.run([sys.executable, "-S", "-E", PROGRAM, *args], capture_output=True, text=True,
                          timeout=timeout, cwd=os.path.dirname(PROGRAM), check=False)


def test_copies_a_finished_jobs_log_without_ansi_codes(fake, tmp_path):
    fake.add_job("e-attempt-1", "RUNNING")
    fake.logs["e-attempt-1"] = "\x1b[32mstep 1: loss 0.5\x1b[0m\nstep 2: loss 0.4\nno newline yet"
    fake.set_status("e-attempt-1", "SUCCEEDED")
    out = tmp_path / "e.log"
    proc = run_program(fake.url, "e-attempt-1", str(out), "0.05")
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == "step 1: loss 0.5\nstep 2: loss 0.4\nno newline yet"


def test_an_unknown_job_is_written_into_the_log_and_exits_1(fake, tmp_path):
    out = tmp_path / "e.log"
    proc = run_program(fake.url, "nobody-attempt-9", str(out), "0.05")
    assert proc.returncode == 1
    assert "job nobody-attempt-9 is not known to %s" % fake.url in out.read_text()


def test_bad_arguments_print_the_usage(tmp_path):
    proc = run_program("http://127.0.0.1:1")
    assert proc.returncode == 64 and "usage: log_follower.py" in proc.stderr
    proc = run_program("http://127.0.0.1:1", "x", str(tmp_path / "o"), "soon")
    assert proc.returncode == 64 and "'soon' is not a number of seconds" in proc.stderr
    proc = run_program("http://127.0.0.1:1", "x", str(tmp_path / "o"), "0")
    assert proc.returncode == 64 and "must be > 0" in proc.stderr


def test_only_complete_lines_while_running_and_a_shorter_log_starts_over():
    assert log_follower.new_chunk("a\nb", 0, finished=False) == ("a\n", 2)
    assert log_follower.new_chunk("a\nb", 2, finished=True) == ("b", 3)
    assert log_follower.new_chunk("x\n", 5, finished=False) == ("x\n", 2)
    assert log_follower.new_chunk("abc", 0, finished=False) == ("", 0)


class Scripted:
    """A dashboard that answers from a list: (status, logs) or an exception."""

    url = "http://10.0.0.1:8772"
    quoted = "e-attempt-1"

    def __init__(self, answers):
        self.answers = list(answers)
        self.current = None

    def status(self):
        self.current = self.answers.pop(0)
        if isinstance(self.current, Exception):
            raise self.current
        return self.current[0]

    def logs(self):
        return self.current[1]


def test_lines_are_appended_as_they_come_and_errors_are_retried():
    handle = io.StringIO()
    dashboard = Scripted([("RUNNING", "a\nb"), OSError("refused"), ("RUNNING", "a\nb\nc\n"), ("FAILED", "a\nb\nc\nd")])
    sleeps = []
    assert log_follower.follow(dashboard, handle, interval=3, sleep=sleeps.append) == 0
    assert handle.getvalue() == "a\nb\nc\nd" and sleeps == [3, 3, 3]


def test_a_dashboard_that_never_answers_ends_it_with_a_line_saying_so():
    handle = io.StringIO()
    dashboard = Scripted([OSError("refused")] * 3)
    assert log_follower.follow(dashboard, handle, max_failures=3, sleep=lambda _s: None) == 2
    assert handle.getvalue() == (
        "[log_follower.py: the dashboard http://10.0.0.1:8772 did not answer 3 times; giving up]\n")


def test_a_404_ends_it_at_once():
    handle = io.StringIO()
    gone = urllib.error.HTTPError("http://x/api/jobs/e-attempt-1", 404, "Not Found", {}, None)
    assert log_follower.follow(Scripted([gone]), handle, sleep=lambda _s: None) == 1
    assert "job e-attempt-1 is not known" in handle.getvalue()
