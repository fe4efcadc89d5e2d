"""module_utils/logs/tracebacks.py: rank prefixes, launcher noise, exception lines and the traceback scanner."""

from __future__ import annotations

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.logs import tracebacks as tb


@pytest.mark.parametrize(
    "line, rank, rest",
    [
        ("[rank0]: Traceback (most recent call last):", 0, "Traceback (most recent call last):"),
        ('[rank12]:   File "x.py", line 1, in f', 12, '  File "x.py", line 1, in f'),
        ("[rank3]:[W1201 10:00:41.5 ProcessGroupNCCL.cpp:1496] W", 3, "[W1201 10:00:41.5 ProcessGroupNCCL.cpp:1496] W"),
        ("[default1]:AssertionError: x", 1, "AssertionError: x"),  # torchrun --tee
        ("[2026-09-20 12:00:00] x.py:1 - hello", None, "[2026-09-20 12:00:00] x.py:1 - hello"),
    ],
)
def test_split_rank(line, rank, rest):
    assert tb.split_rank(line) == (rank, rest)


@pytest.mark.parametrize(
    "text",
    [
        "[W1201 10:00:41.512345678 ProcessGroupNCCL.cpp:1496] Warning: WARNING: destroy_process_group() was not called "
        "before program exit, which can leak resources.",
        "[W219 09:17:03.293812312 ProcessGroupNCCL.cpp:1168] Warning: WARNING: process group has NOT been destroyed "
        "before we destruct ProcessGroupNCCL.",
        "W0312 00:49:04.930000 184948 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 185003 "
        "closing signal SIGTERM",
        "E0312 00:49:05.096000 184948 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
        "local_rank: 0 (pid: 185002) of binary: /usr/bin/python",
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 17966)",
    ],
)
def test_launcher_noise(text):
    assert tb.is_noise(text)


@pytest.mark.parametrize(
    "text",
    [
        # a collective that really failed is not noise
        "[E1201 10:10:00.1 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout",
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error",
        "AssertionError: x",
    ],
)
def test_not_noise(text):
    assert not tb.is_noise(text)


TORCHRUN_ERROR = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError"


@pytest.mark.parametrize(
    "text, type_name",
    [
        ("KeyError: 'x'", "KeyError"),
        ("torch.OutOfMemoryError: MUSA out of memory.", "torch.OutOfMemoryError"),
        ("ray.exceptions.RayTaskError(OutOfMemoryError): ray::A.b()", "ray.exceptions.RayTaskError(OutOfMemoryError)"),
        ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", TORCHRUN_ERROR),
        ("KeyboardInterrupt", "KeyboardInterrupt"),
        ("Exception: Capture cuda graph failed", "Exception"),
        ("Error: No MT GPU device found.", None),  # not a Python exception
        ("Errors: 3", None),
        ("  File \"x.py\", line 1", None),
        ("RuntimeErrorish stuff", None),
    ],
)
def test_exception_type(text, type_name):
    assert tb.exception_type(text) == type_name


def feed(lines, sources=None):
    scanner = tb.TracebackScanner()
    for number, line in enumerate(lines, start=1):
        scanner.feed(number, line, line, (sources or {}).get(number, ""))
    return scanner.fatal()


def test_raytaskerror_with_remote_frames_ends_with_the_remote_exception():
    found = feed(
        [
            "Traceback (most recent call last):",
            '  File "train.py", line 98, in <module>',
            "ray.exceptions.RayTaskError(ZeroDivisionError): ray::f() (pid=71867, ip=127.0.0.1)",
            '  File "test.py", line 7, in f',
            "    1 / 0",
            "ZeroDivisionError: division by zero",
        ]
    )
    assert (found["lineno"], found["exception"], found["task"], found["traceback_start"]) == (
        6,
        "ZeroDivisionError: division by zero",
        "ray::f()",
        1,
    )


def test_interleaved_writers_keep_their_own_tracebacks():
    lines = [
        "Traceback (most recent call last):",  # actor A
        "Traceback (most recent call last):",  # actor B
        '  File "a.py", line 1, in f',
        '  File "b.py", line 1, in g',
        "ValueError: from a",
        "KeyError: 'from b'",
    ]
    found = feed(lines, {1: "pid=1", 2: "pid=2", 3: "pid=1", 4: "pid=2", 5: "pid=1", 6: "pid=2"})
    assert (found["exception"], found["source"], found["traceback_start"]) == ("KeyError: 'from b'", "pid=2", 2)


def test_a_header_after_text_and_a_new_traceback_without_chain_line():
    found = feed(
        [
            "Scheduler hit an exception: Traceback (most recent call last):",
            '  File "s.py", line 1, in run',
            "RuntimeError: first",
            "Traceback (most recent call last):",
            '  File "t.py", line 2, in run',
            "RuntimeError: second",
        ]
    )
    assert (found["exception"], found["traceback_start"]) == ("RuntimeError: second", 4)


def test_a_log_cut_inside_a_traceback_has_no_fatal_error():
    assert feed(["Traceback (most recent call last):", '  File "a.py", line 1, in f']) is None


def test_logger_lines_are_never_bare_exception_lines():
    scanner = tb.TracebackScanner()
    scanner.feed(1, "[2026-01-01 00:00:00] x.py:1 - ValueError: retrying", "ValueError: retrying", "", plain=False)
    assert scanner.fatal() is None


def test_root_cause_rank_wins_over_the_last_traceback():
    lines = [
        "[rank1]: Traceback (most recent call last):",
        "[rank1]: ValueError: rank one",
        "[rank3]: Traceback (most recent call last):",
        "[rank3]: ValueError: rank three",
        "Root Cause (first observed failure):",
        "[0]:",
        "  rank      : 1 (local_rank: 1)",
    ]
    assert feed(lines)["exception"] == "ValueError: rank one"
    assert feed(lines[:4])["exception"] == "ValueError: rank three"
