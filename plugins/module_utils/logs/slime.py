# Reading slime's training log (what `ray job logs <id>` prints, as in the guide's
# logs/qwen3-8B.log): metric lines, checkpoint saves, the placement-group wait, the
# first error, the fatal error (the exception of the last traceback) and the guide's
# FAQ hint. Standard library only; Python 3.8+.
#
# Line format (slime.md §4.1): "<kind> <id>: <python dict repr>" with kind one of
# step, rollout, passrate, eval, perf; the dict uses single quotes and bare
# nan / inf / -inf. In front of it there may be slime's logger prefix
# "[YYYY-MM-DD HH:MM:SS] file.py:NNN - " and, through Ray, an actor prefix such as
# "(MegatronTrainRayActor pid=123) " or "(RolloutManager pid=45, ip=10.0.0.2) ";
# Ray's de-duplicator may append " [repeated 3x across cluster]". ANSI codes are removed.
#
# An error line does not make a job failed: jobs print tracebacks they survive. The job's
# status decides (progress_line(result, status)); the summary reports the first error and,
# separately, the fatal one.
from __future__ import annotations

import os
import re

from ansible_collections.mtslime.posttrain.plugins.module_utils.logs.scan import (
    ERROR_PATTERNS,
    FirstErrorScanner,
    strip_ansi,
)
from ansible_collections.mtslime.posttrain.plugins.module_utils.logs.pyrepr import json_safe, parse_payload
from ansible_collections.mtslime.posttrain.plugins.module_utils.logs.faq import (
    CONSEQUENCE_KINDS,
    PG_HINT,
    classify as classify_lines,
)
from ansible_collections.mtslime.posttrain.plugins.module_utils.logs.tracebacks import (
    EXCEPTION_LINE,
    is_noise,
    split_rank,
)

RAY_PREFIX = re.compile(
    r"^\((?:(?P<actor>[A-Za-z_][\w.:<>-]*)\s+)?pid=(?P<pid>\d+)(?:,\s*ip=(?P<ip>[0-9A-Fa-f.:]+))?\)\s?"
    r"|^\(raylet(?:,\s*ip=[0-9A-Fa-f.:]+)?\)\s?"
)
REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")
LOGGER_PREFIX = re.compile(
    r"^\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?[^\]]*\]\s*"  # [2026-09-20 12:00:00] (SGLang adds " TP0")
    r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+)?"
    r"(?:[\w.\-]+\.py:\d+\s*-\s*)?"  # model.py:918 -
)
METRIC = re.compile(r"^(?P<kind>step|rollout|passrate|eval|perf|critic-step) (?P<id>\d+): (?P<payload>\{.*\})\s*$")
SAVED = re.compile(r"successfully saved checkpoint from iteration\s+(?P<it>\d+)(?:\s+to\s+(?P<path>\S+))?")
LOADED = re.compile(r"successfully loaded checkpoint from (?P<path>\S+).*?at iteration\s+(?P<it>\d+)")
# slime/ray/placement_group.py (HEAD L64-67), every 30 s while the group cannot be placed, without a time limit:
# f"Waiting for placement group of {num_gpus} GPUs (elapsed {elapsed}s): {total:g} GPUs registered with Ray,
# {available:g} available."
_G = r"[\d.]+(?:e[+-]?\d+)?"
PG_WAIT = re.compile(
    r"Waiting for placement group of (?P<needed>\d+) GPUs \(elapsed (?P<elapsed>\d+)s\): "
    r"(?P<registered>%s) GPUs registered with Ray, (?P<available>%s) available" % (_G, _G)
)
# Printed once the group is placed (same file, L89-92): "  bundle    0, actual_bundle_index:    0, node: ..., gpu: 0"
PG_PLACED = re.compile(r"^\s*bundle\s+\d+, actual_bundle_index:")

THROUGHPUT_KEYS = (
    "perf/tokens_per_gpu_per_sec",
    "perf/actor_train_tok_per_s",
    "perf/step_time",
    "perf/wait_time_ratio",
)
# Lines matched by scan.py's patterns that are harmless in slime runs.
IGNORE = (
    re.compile(r"^Exception ignored in"),
    re.compile(r"\bno_load_optim\b|\bno_load_rng\b"),
)
PG_WAIT_HINT_AFTER = 60  # seconds of waiting for the placement group before it is worth a hint
ERROR_WINDOW_EXTRA = 3  # lines after a one-line error (or after a traceback's exception line) the hint rules see
# Ray's job statuses that mean the job has ended without success: only then is an error "the failure".
ENDED_BADLY = ("FAILED", "STOPPED")


# -- line parsing ---------------------------------------------------------------
def message_of(line):
    """(message, source, plain) of a log line: the message with ANSI codes, Ray's actor prefix,
    Ray's repeat suffix and slime's logger prefix removed, its indentation kept (tracebacks need
    it); source "pid=N" for a Ray actor's line, else ""; plain is False when slime's logger wrote it."""
    line = strip_ansi(line).rstrip("\r\n")
    source = ""
    match = RAY_PREFIX.match(line)
    if match:
        source = "pid=%s" % match.group("pid") if match.group("pid") else "raylet"
        line = line[match.end():]
    line = REPEATED.sub("", line)
    logged = LOGGER_PREFIX.match(line)
    if logged and logged.end() > 0:
        line = line[logged.end():]
    return line.rstrip(), source, not logged


def clean_line(line):
    """The message of a log line: ANSI codes, Ray's actor prefix, Ray's repeat suffix and slime's
    logger prefix removed, and stripped."""
    return message_of(line)[0].strip()


def parse_metric(line):
    """(kind, id, payload dict) for a metric line, else None."""
    match = METRIC.match(clean_line(line))
    if not match:
        return None
    payload = parse_payload(match.group("payload"))
    if payload is None:
        return None
    return match.group("kind"), int(match.group("id")), payload


# -- errors and their hints -------------------------------------------------------
def new_error_scanner(before=20, after=60):
    """A FirstErrorScanner for slime logs: Ray/logger prefixes removed before matching (and Ray's
    actors told apart in tracebacks), a wide window kept so the hint can see the end of a traceback."""
    return FirstErrorScanner(context=after, before=before, patterns=ERROR_PATTERNS, ignore=IGNORE, split=message_of)


def _meaningful(lines):
    """Cleaned lines without torch's rank prefix and without launcher noise."""
    out = []
    for item in lines:
        text = split_rank(clean_line(item))[1].strip()
        if not is_noise(text):
            out.append(text)
    return out


def _error_window(found, extra=ERROR_WINDOW_EXTRA):
    """The lines that make up the first error: for a traceback, through its first exception
    line (plus `extra` lines); otherwise the line and `extra` lines after it. Later, unrelated
    errors and launcher noise stay out, so they cannot decide the hint."""
    first = _meaningful([found["line"]])
    after = _meaningful(found.get("context") or [])
    if not first or "Traceback" not in first[0]:
        return first + after[:extra]
    for index, item in enumerate(after):
        if EXCEPTION_LINE.match(item):
            return first + after[: index + 1 + extra]
    return first + after


def classify(found):
    """(kind, faq, hint) for a first-error dict from new_error_scanner, or ('error', None, None)."""
    return classify_lines(_error_window(found), _meaningful(found.get("before") or []))


def describe_error(found, context_lines=5):
    """The first_error result: {lineno, line, kind, faq, exception, exception_lineno, rank, context,
    context_start}. For a traceback's header, `exception` is the exception line that ends it (the last
    of a chain, however long the traceback) and `rank` the rank that raised it."""
    kind, faq, hint = classify(found)
    rank, head = split_rank(clean_line(found["line"]))
    exception, exception_lineno = (head, found["lineno"]) if EXCEPTION_LINE.match(head) else (None, None)
    ending = found.get("traceback")
    if ending:
        exception, exception_lineno, rank = ending["exception"], ending["lineno"], ending["rank"]
    before = (found.get("before") or [])[-context_lines:] if context_lines else []
    after = (found.get("context") or [])[: max(context_lines * 2, 0)]
    return {
        "lineno": found["lineno"],
        "line": found["line"],
        "kind": kind,
        "faq": faq,
        "exception": exception,
        "exception_lineno": exception_lineno,
        "rank": rank,
        "context": before + [found["line"]] + after,
        "context_start": found["lineno"] - len(before),
    }, hint


def describe_fatal(block):
    """The fatal_error result from a TracebackScanner block: {lineno, line, exception, type, kind,
    faq, rank, actor_pid, traceback_start, task}, and its hint."""
    kind, faq, hint = classify_lines(block["text"], block["before"])
    source = block.get("source") or ""
    return {
        "lineno": block["lineno"],
        "line": block["line"],
        "exception": block["exception"].strip(),
        "type": block["type"],
        "kind": kind,
        "faq": faq,
        "rank": block["rank"],
        "actor_pid": int(source[4:]) if source.startswith("pid=") else None,
        "traceback_start": block["traceback_start"],
        "task": block["task"],
    }, hint


# -- whole-log summary ---------------------------------------------------------------
class Summary:
    """Accumulates what train_progress returns; feed it the tail lines with their numbers."""

    def __init__(self):
        self.last = {}  # kind -> (id, payload, lineno)
        self.throughput = {}
        self.throughput_rollout = None
        self.last_checkpoint = None
        self.last_checkpoint_dir = None
        self.loaded_checkpoint = None
        self.pg_wait = None
        self.progress_after_wait = False

    def feed(self, lineno, raw):
        message = clean_line(raw)
        if not message:
            return
        match = METRIC.match(message)
        if match:
            payload = parse_payload(match.group("payload"))
            if payload is None:
                return
            kind, ident = match.group("kind"), int(match.group("id"))
            self.last[kind] = (ident, payload, lineno)
            if kind == "perf":
                for key in THROUGHPUT_KEYS:
                    if key in payload:
                        self.throughput[key] = payload[key]
                        self.throughput_rollout = ident
            if kind in ("step", "rollout") and self.pg_wait is not None:
                self.progress_after_wait = True
            return
        if "checkpoint" in message:
            saved = SAVED.search(message)
            if saved:
                self.last_checkpoint = int(saved.group("it"))
                self.last_checkpoint_dir = saved.group("path")
                return
            loaded = LOADED.search(message)
            if loaded:
                self.loaded_checkpoint = {
                    "iteration": int(loaded.group("it")),
                    "path": loaded.group("path"),
                    "lineno": lineno,
                }
                return
        if "placement group" in message:
            wait = PG_WAIT.search(message)
            if wait:
                self.pg_wait = {
                    "needed": int(wait.group("needed")),
                    "elapsed": int(wait.group("elapsed")),
                    "registered": float(wait.group("registered")),
                    "available": float(wait.group("available")),
                    "lineno": lineno,
                }
                self.progress_after_wait = False
        elif self.pg_wait is not None and PG_PLACED.match(message):
            self.progress_after_wait = True

    def waiting_for_gpus(self):
        if self.pg_wait is None or self.progress_after_wait:
            return None
        return gpu_wait(self.pg_wait)


def _g(value):
    return "%g" % value


def gpu_wait(wait):
    """waiting_for_gpus from slime's wait line: needed / registered / available GPUs, how many are
    missing (needed - available), how many of those Ray does not know at all (needed - registered)
    and how many are registered but held by others, with a sentence that says so."""
    needed, registered, available = wait["needed"], wait["registered"], wait["available"]
    missing = max(0.0, needed - available)
    unregistered = max(0.0, needed - registered)
    busy = max(0.0, missing - unregistered)
    parts = []
    if unregistered:
        parts.append("%s not registered with Ray" % _g(unregistered))
    if busy:
        parts.append("%s registered but in use" % _g(busy))
    message = "slime has waited %ds for a placement group of %d GPUs: Ray has %s registered, %s available; %s" % (
        wait["elapsed"],
        needed,
        _g(registered),
        _g(available),
        ("%s missing (%s)" % (_g(missing), ", ".join(parts))) if missing else "none missing, the group is being placed",
    )
    return dict(wait, missing=missing, unregistered=unregistered, busy=busy, message=message)


class _Scan:
    """Pass 1 over the whole log: first error, fatal error, step counts."""

    def __init__(self, before=20, after=60):
        self.errors = new_error_scanner(before=before, after=after)
        self.steps = 0
        self.first_step = None
        self.last_step_lineno = 0
        self.total = 0

    def feed(self, raw):
        self.total += 1
        self.errors.feed(raw)
        message = self.errors.message
        if "step " in message:
            match = METRIC.match(message.strip())
            if match and match.group("kind") == "step":
                self.steps += 1
                self.last_step_lineno = self.total
                if self.first_step is None:
                    self.first_step = int(match.group("id"))

    def errors_and_hint(self, context_lines):
        """(first_error, fatal_error, hint, hint_from). A traceback that training steps followed was
        survived: it stays the first error (a warning) but is not the fatal one. The first error gives
        the hint when there is no fatal error, or when it is the fatal one's cause: it came after the
        last step, before the fatal error, and has a kind of its own while the fatal one is a
        consequence (a dead scheduler after an OOM) or has none."""
        found = self.errors.result()
        first, first_hint = describe_error(found, context_lines) if found else (None, None)
        block = self.errors.tracebacks.fatal()
        if block is None or block["lineno"] <= self.last_step_lineno:
            return first, None, first_hint, "first_error" if first_hint else None
        fatal, fatal_hint = describe_fatal(block)
        vague = CONSEQUENCE_KINDS | {"error"}
        cause = (
            first is not None
            and first_hint
            and self.last_step_lineno < first["lineno"] < fatal["lineno"]
            and fatal["kind"] in vague
            and first["kind"] not in vague
        )
        if cause:
            return first, fatal, first_hint, "first_error"
        return first, fatal, fatal_hint, "fatal_error" if fatal_hint else None


def _number(value):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return None


def build_result(summary, scan, tail, context_lines=5, status=None):
    step = summary.last.get("step")
    rollout = summary.last.get("rollout")
    passrate = summary.last.get("passrate")
    evaluation = summary.last.get("eval")
    first, fatal, hint, hint_from = scan.errors_and_hint(context_lines)
    result = {
        "first_step": scan.first_step,
        "last_step": step[0] if step else None,
        "steps": scan.steps,
        "last_rollout": rollout[0] if rollout else None,
        "reward": json_safe(_number(rollout[1].get("rollout/raw_reward"))) if rollout else None,
        "pass_at_k": json_safe({k.split("/", 1)[-1]: v for k, v in passrate[1].items()}) if passrate else {},
        "passrate_rollout": passrate[0] if passrate else None,
        "eval": json_safe(evaluation[1]) if evaluation else {},
        "eval_rollout": evaluation[0] if evaluation else None,
        "throughput": json_safe(summary.throughput),
        "throughput_rollout": summary.throughput_rollout,
        "train": json_safe(step[1]) if step else {},
        "last_checkpoint": summary.last_checkpoint,
        "last_checkpoint_dir": summary.last_checkpoint_dir,
        "loaded_checkpoint": summary.loaded_checkpoint,
        "waiting_for_gpus": summary.waiting_for_gpus(),
        "first_error": first,
        "fatal_error": fatal,
        "hint": hint,
        "hint_from": hint_from,
        "tail": tail,
        "lines": scan.total,
    }
    waiting = result["waiting_for_gpus"]
    if hint is None and waiting and waiting["elapsed"] >= PG_WAIT_HINT_AFTER:
        why = []
        if waiting["unregistered"]:
            why.append(PG_HINT["unregistered"].format(unregistered=_g(waiting["unregistered"])))
        if waiting["busy"]:
            why.append(PG_HINT["busy"].format(busy=_g(waiting["busy"])))
        fmt = {k: (_g(v) if isinstance(v, float) else v) for k, v in waiting.items()}
        result["hint"] = PG_HINT["hint"].format(why=" ".join(why), **fmt).replace("  ", " ")
        result["hint_from"] = "waiting_for_gpus"
    result["progress"] = progress_line(result, status)
    return result


def _fmt(value):
    if isinstance(value, float):
        return "%.4g" % value
    return str(value)


def _short(text, limit=160):
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _metrics(result):
    parts = []
    if result["last_step"] is not None:
        parts.append("step %d (%d steps logged)" % (result["last_step"], result["steps"]))
    if result["reward"] is not None:
        parts.append("reward %s" % _fmt(result["reward"]))
    if result["pass_at_k"]:
        best = sorted(result["pass_at_k"].items(), key=lambda kv: int(re.sub(r"\D", "", kv[0]) or 0))[-1]
        parts.append("%s %s" % (best[0], _fmt(best[1])))
    scores = {
        k: v
        for k, v in result["eval"].items()
        if re.match(r"^eval/[^/]+$", k) and not re.search(r"-(?:pass@\d+|truncated_ratio)$", k)
    }
    if scores:
        parts.append(
            "eval %s @ rollout %s"
            % (", ".join("%s %s" % (k[5:], _fmt(v)) for k, v in sorted(scores.items())), result["eval_rollout"])
        )
    if "perf/tokens_per_gpu_per_sec" in result["throughput"]:
        parts.append("%s tok/s/GPU" % _fmt(result["throughput"]["perf/tokens_per_gpu_per_sec"]))
    if result["last_checkpoint"] is not None:
        parts.append("checkpoint %d" % result["last_checkpoint"])
    waiting = result["waiting_for_gpus"]
    if waiting:
        parts.append(
            "waiting %ds for %d GPUs (%g registered, %g available, %g missing)"
            % (waiting["elapsed"], waiting["needed"], waiting["registered"], waiting["available"], waiting["missing"])
        )
    return ", ".join(parts) if parts else "no training step logged yet"


def _error_text(error):
    text = _short(error.get("exception") or clean_line(error["line"]))
    if error.get("task"):
        text += " [in %s]" % error["task"]
    elif error.get("rank") is not None:
        text += " [rank %d]" % error["rank"]
    return text


def progress_line(result, status=None):
    """One line for people. The job's Ray status decides whether an error is the failure:
    FAILED / STOPPED show the fatal exception line and the FAQ hint; any other status (or none)
    shows the run's progress and mentions an error only as a warning."""
    status = (status or "").upper() or None
    fatal, first = result.get("fatal_error"), result.get("first_error")
    cause = first if (result.get("hint_from") == "first_error" and fatal and first
                      and first["lineno"] != fatal["lineno"]) else None
    error = fatal or first
    if status in ENDED_BADLY:
        text = status + ((" after step %d" % result["last_step"]) if result["last_step"] is not None else "")
        if fatal:
            text += ": %s (line %d)" % (_error_text(fatal), fatal["lineno"])
        elif first:
            text += "; no exception after the last step; first error (line %d): %s" % (
                first["lineno"],
                _error_text(first),
            )
        else:
            text += "; the log has no error line"
        if cause:
            text += "; caused by line %d: %s" % (cause["lineno"], _error_text(cause))
        if result.get("hint"):
            faq = (cause or error or {}).get("faq")
            text += " -- %s%s" % (("FAQ %s: " % faq) if faq else "", result["hint"])
        return text
    text = _metrics(result)
    if status:
        text = "%s: %s" % (status, text)
    if error:
        text += "; %s at line %d: %s" % ("warning: error" if status else "error", error["lineno"], _error_text(error))
        if cause:
            text += " (caused by line %d: %s)" % (cause["lineno"], _error_text(cause))
    return text


def _tail_lines(text, start_lineno, tail_lines):
    lines = text.splitlines()
    summary = Summary()
    for offset, raw in enumerate(lines):
        summary.feed(start_lineno + offset, raw)
    tail = [strip_ansi(item).rstrip() for item in lines[-tail_lines:]] if tail_lines > 0 else []
    return summary, tail


def summarize_text(text, max_bytes=0, tail_lines=20, context_lines=5, status=None):
    """Summary of a whole log held in memory (for example from the Jobs API)."""
    lines = text.splitlines()
    scan = _Scan()
    for raw in lines:
        scan.feed(raw)
    data = text.encode("utf-8", errors="replace")
    if max_bytes and len(data) > max_bytes:
        chunk = data[-max_bytes:].decode("utf-8", errors="replace")
        cut = chunk.find("\n")
        chunk = chunk[cut + 1 :] if cut >= 0 else ""
    else:
        chunk = text
    start = scan.total - len(chunk.splitlines()) + 1
    summary, tail = _tail_lines(chunk, start, tail_lines)
    result = build_result(summary, scan, tail, context_lines, status)
    result["bytes"] = len(data)
    result["bytes_read"] = min(len(data), max_bytes) if max_bytes else len(data)
    return result


def summarize_file(path, max_bytes=0, tail_lines=20, context_lines=5, status=None):
    """Summary of a log file: the first and the fatal error and the step counts from its whole
    text (streamed), the metrics from at most its last `max_bytes` bytes (0 = all). Reads only
    the bytes present when it starts, so a log that grows meanwhile gives a consistent answer."""
    size = os.path.getsize(path)

    def limited(handle):
        consumed = 0
        for raw in handle:
            if consumed >= size:
                break
            consumed += len(raw)
            yield raw.decode("utf-8", errors="replace")

    scan = _Scan()
    with open(path, "rb") as handle:
        for raw in limited(handle):
            scan.feed(raw)
        offset = max(0, size - max_bytes) if max_bytes else 0
        handle.seek(offset)
        chunk = handle.read(size - offset).decode("utf-8", errors="replace")
    if offset > 0:
        cut = chunk.find("\n")
        chunk = chunk[cut + 1 :] if cut >= 0 else ""
    start = scan.total - len(chunk.splitlines()) + 1
    summary, tail = _tail_lines(chunk, start, tail_lines)
    result = build_result(summary, scan, tail, context_lines, status)
    result["bytes"] = size
    result["bytes_read"] = size - offset
    return result
