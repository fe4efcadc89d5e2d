"""The exception that ends a traceback, however long the traceback, in every failure summary: the convert
role's (logs/scan.py first_error, through async_progress), the job's (logs/slime.py: train_progress,
job/attempts.py) and the status document's (report/status_doc.py). The tracebacks are real ones, made here
by Python (traceback.format_exc()) and prefixed as torchrun and Ray prefix a rank's or an actor's lines
(shared/reference/real-programs.md, "Logs")."""

from __future__ import annotations

import traceback

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.job import attempts
from ansible_collections.mtslime.posttrain.plugins.module_utils.logs import scan
from ansible_collections.mtslime.posttrain.plugins.module_utils.logs import slime as slime_log
from ansible_collections.mtslime.posttrain.plugins.module_utils.logs.tracebacks import TracebackScanner
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.report import html as report_html
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.report import status_doc

RECURSION = "RecursionError: maximum recursion depth exceeded"


def _ping(depth):
    return _pong(depth + 1)


def _pong(depth):
    return _ping(depth + 1)


def recursion_traceback():
    """A real RecursionError's traceback: two functions calling each other, so Python cannot fold the frames
    into "[Previous line repeated N more times]" and prints about 2,000 lines."""
    try:
        _ping(0)
    except RecursionError:
        return traceback.format_exc().splitlines()
    raise AssertionError("no RecursionError")


def chained_traceback(kind):
    """A real chained traceback: "during" (an exception raised while handling another) or "cause"
    (raise ... from ...). The last exception is the one that propagated."""
    try:
        try:
            {}["model.embed_tokens.weight"]
        except KeyError as error:
            if kind == "cause":
                raise ValueError("the checkpoint has no embeddings") from error
            raise ValueError("the checkpoint has no embeddings")  # noqa: B904 -- the implicit chain is the point
    except ValueError:
        return traceback.format_exc().splitlines()
    raise AssertionError("no ValueError")


def prefixed(prefix, lines):
    return [prefix + line for line in lines]


def converter_log(body, rank=3):
    """The converter under torchrun: a few lines, rank `rank`'s traceback, another rank's lines in between,
    c10d's exit warning, torchrun's ChildFailedError."""
    head = ["W1201 10:00:00.123000 4120 torch/distributed/run.py:792] *****************************************",
            "[rank0]: loading model.safetensors"] * 8
    lines = prefixed("[rank%d]: " % rank, body)
    middle = len(lines) // 2
    lines[middle:middle] = ["[rank0]: still converting layer 12"]
    tail = ["[rank%d]:[W1201 10:00:41.512345678 ProcessGroupNCCL.cpp:1496] Warning: WARNING: destroy_process_group() "
            "was not called before program exit" % rank,
            "Traceback (most recent call last):",
            '  File "/usr/local/bin/torchrun", line 8, in <module>',
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "]
    return head + lines + tail


def where(lines, text):
    """1-based number of the last line that ends with `text`."""
    return max(number for number, line in enumerate(lines, start=1) if line.endswith(text))


def test_a_real_recursion_traceback_is_about_two_thousand_lines():
    lines = recursion_traceback()
    assert len(lines) > 1900 and lines[-1] == RECURSION and lines[0] == "Traceback (most recent call last):"


def test_the_scanner_finds_the_exception_of_a_long_traceback_with_its_rank():
    log = converter_log(recursion_traceback(), rank=3)
    scanner = TracebackScanner()
    for number, line in enumerate(log, start=1):
        scanner.feed(number, line, line)
    header = log.index("[rank3]: Traceback (most recent call last):") + 1
    ending = scanner.exception_of(header)
    assert (ending["exception"], ending["rank"], ending["type"]) == (RECURSION, 3, "RecursionError")
    assert ending["lineno"] == where(log, RECURSION) and ending["lineno"] - header > 1900
    assert scanner.exception_of(header + 1) is None  # no traceback starts there


@pytest.mark.parametrize("kind", ["during", "cause"])
def test_the_scanner_ends_a_chain_with_its_last_exception(kind):
    body = chained_traceback(kind)
    joint = {"during": "During handling of the above exception, another exception occurred:",
             "cause": "The above exception was the direct cause of the following exception:"}[kind]
    assert joint in body and body[-1] == "ValueError: the checkpoint has no embeddings"
    log = converter_log(body, rank=1)
    scanner = TracebackScanner()
    for number, line in enumerate(log, start=1):
        scanner.feed(number, line, line)
    ending = scanner.exception_of(log.index("[rank1]: Traceback (most recent call last):") + 1)
    assert (ending["exception"], ending["rank"]) == ("ValueError: the checkpoint has no embeddings", 1)
    assert ending["lineno"] == where(log, "ValueError: the checkpoint has no embeddings")


def test_a_traceback_still_being_read_gives_its_latest_exception():
    body = chained_traceback("during")
    scanner = TracebackScanner()
    for number, line in enumerate(body[: body.index("KeyError: 'model.embed_tokens.weight'") + 1], start=1):
        scanner.feed(number, line, line)
    assert scanner.reading(1) and scanner.exception_of(1)["exception"] == "KeyError: 'model.embed_tokens.weight'"


# -- the convert role (async_progress's first_error) ------------------------------------------------------------
def test_the_conversion_summary_names_the_exception_of_a_two_thousand_line_traceback(tmp_path):
    log = converter_log(recursion_traceback(), rank=0)
    path = tmp_path / "convert.log"
    path.write_text("\n".join(log) + "\n")
    found = scan.first_error_in_file(str(path))
    header = log.index("[rank0]: Traceback (most recent call last):") + 1
    assert (found["lineno"], found["line"]) == (header, "[rank0]: Traceback (most recent call last):")
    assert (found["exception"], found["exception_lineno"], found["rank"]) == (RECURSION, where(log, RECURSION), 0)
    assert len(found["context"]) == 5


@pytest.mark.parametrize("kind", ["during", "cause"])
def test_the_conversion_summary_names_the_last_exception_of_a_chain(kind):
    log = converter_log(chained_traceback(kind), rank=2)
    found = scan.first_error(log)
    assert (found["exception"], found["rank"]) == ("ValueError: the checkpoint has no embeddings", 2)


def test_a_log_that_ends_inside_the_traceback_names_the_exception_read_so_far():
    body = chained_traceback("cause")
    end = body.index("KeyError: 'model.embed_tokens.weight'") + 1
    found = scan.first_error(body[:end])
    assert found["exception"] == "KeyError: 'model.embed_tokens.weight'" and found["exception_lineno"] == end


# -- the job (train_progress, attempts) and the status document ---------------------------------------------------
def ray_log(body):
    """A training job's log through Ray: steps, then an actor's traceback behind its "(Actor pid=N)" prefix."""
    steps = ["(MegatronTrainRayActor pid=3001) [2026-09-20 12:06:28] model.py:918 - step %d: {'train/loss': 0.1}" % n
             for n in (1, 2)]
    return steps + prefixed("(MegatronTrainRayActor pid=3001) ", body)


def test_the_job_summary_and_the_status_name_the_exception_of_a_long_traceback(tmp_path):
    log = ray_log(recursion_traceback())
    path = tmp_path / "job.log"
    path.write_text("\n".join(log) + "\n")
    result = slime_log.summarize_file(str(path), status="FAILED")
    first, fatal = result["first_error"], result["fatal_error"]
    assert (first["lineno"], first["exception"], first["exception_lineno"]) == (3, RECURSION, len(log))
    assert (fatal["exception"], fatal["actor_pid"], fatal["traceback_start"]) == (RECURSION, 3001, 3)
    assert result["progress"] == "FAILED after step 2: %s (line %d)" % (RECURSION, len(log))
    assert attempts.from_log(result)["exception"] == RECURSION
    last = status_doc.last_part(dict(result, failed=False), str(path))
    assert (last["first_error"]["exception"], last["first_error"]["exception_lineno"]) == (RECURSION, len(log))


@pytest.mark.parametrize("kind", ["during", "cause"])
def test_the_job_summary_names_the_last_exception_of_a_rank_prefixed_chain(tmp_path, kind):
    log = ray_log(prefixed("[rank5]: ", chained_traceback(kind)))
    path = tmp_path / "job.log"
    path.write_text("\n".join(log) + "\n")
    result = slime_log.summarize_file(str(path), status="RUNNING")
    first = result["first_error"]
    assert (first["exception"], first["rank"]) == ("ValueError: the checkpoint has no embeddings", 5)
    assert result["progress"].endswith(
        "warning: error at line %d: ValueError: the checkpoint has no embeddings [rank 5]" % len(log))
    job = {"failed": False, "status": "RUNNING", "submission_id": "qwen3-8B-attempt-1"}
    cluster = status_doc.cluster_status(job=job, progress=dict(result, failed=False), head="node1")
    assert cluster["last"]["first_error"]["rank"] == 5
    assert status_doc.summary_line(cluster).endswith(
        "warning: the job goes on after an error in its log: ValueError: the checkpoint has no embeddings [rank 5]")
    page = report_html.page(cluster, b"", {}, {}, "qwen3-8B on node1")
    assert ("first error (line %d)</td><td><span class=\"bad\">ValueError: the checkpoint has no embeddings [rank 5]"
            % len(log)) in page
