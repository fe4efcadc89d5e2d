# Python tracebacks in the logs of distributed jobs: which exception ended a process, with
# the prefixes that launchers put in front of it removed and their own noise told apart.
#
# What the real programs print (shared/reference/real-programs.md, "Logs"):
# - under torch's launcher (torchrun, slime's converter) every line of a rank's traceback
#   carries "[rank0]: ", and the C++ warnings of the process group "[rank0]:[W1201 ...]":
#     [rank0]: Traceback (most recent call last):
#     [rank0]:   File "/home/slime/tools/convert_hf_to_torch_dist.py", line 97, in main
#     [rank0]: AssertionError: Torch not compiled with CUDA enabled
#     [rank0]:[W1201 10:00:01.123456789 ProcessGroupNCCL.cpp:1496] Warning: WARNING: destroy_process_group() ...
#   then torchrun's own traceback ending "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"
#   and its "Root Cause (first observed failure)" summary. The rank's exception is the cause; the
#   warning and ChildFailedError are noise.
# - Ray wraps a task's failure as "ray.exceptions.RayTaskError(OutOfMemoryError): ray::Actor.method() ...",
#   followed by the remote frames and the remote exception line; a log read from the middle of a
#   traceback has no "Traceback" header above it.
# - A traceback does not mean the job failed: handled exceptions are printed too.
# - A traceback can be thousands of lines long (a RecursionError prints a frame per call) and chained
#   ("During handling of the above exception, another exception occurred:" / "The above exception was the
#   direct cause of the following exception:"): the exception that ended it is its last exception line.
# Standard library only; Python 3.8+.
from __future__ import annotations

import re

# "[rank3]: " (torch >= 2.4 prefixes every line of a rank's traceback) and "[default3]:" (torchrun --tee).
RANK_PREFIX = re.compile(r"^\[(?:rank|default)(?P<rank>\d+)\]:\s?")

HEADER = "Traceback (most recent call last):"
CHAIN = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
# A line that is an exception on its own: a dotted type name ending like an exception class,
# optionally with Ray's "(InnerError)", then ": message" or the end of the line.
EXCEPTION_LINE = re.compile(
    r"^(?P<type>(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*)?(?:Error|Exception|Interrupt|Exit)(?:\((?P<inner>[\w.]+)\))?)"
    r"(?::(?:\s(?P<message>.*))?)?\s*$"
)
# Lines launchers print around a failure that are not its cause.
NOISE = (
    # c10d's warnings at exit: "[W1201 10:00:01.123 ProcessGroupNCCL.cpp:1496] Warning: WARNING: destroy_process_group()
    # was not called ..." (torch >= 2.4) and "... process group has NOT been destroyed before we destruct ..."
    re.compile(r"^\[[WIE]\d{3,4} [^\]]*ProcessGroup\w*\.cpp:\d+\] .*(?:destroy_process_group|has NOT been destroyed)"),
    # torchrun's agent: "W1201 10:00:02.000000 123 torch/distributed/elastic/multiprocessing/api.py:897] Sending
    # process 5 closing signal SIGTERM", "E1201 ... api.py:869] failed (exitcode: 1) local_rank: 0 (pid: 5) ..."
    re.compile(r"^[WIE]\d{3,4} [\d:.]+\s+\d+ \S*torch/distributed/(?:elastic|run\.py)\S*\] "),
    # the same before torch 2.2: "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process ...",
    # "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) ..."
    re.compile(r"^(?:WARNING|ERROR|INFO):torch\.distributed\.(?:elastic|run)\b"),
)
# torchrun's own exception: it says that a worker failed, not why.
LAUNCHER_EXCEPTIONS = ("ChildFailedError",)
# "ray.exceptions.RayTaskError(OutOfMemoryError): ray::MegatronTrainRayActor.train() (pid=3001, ip=...)"
RAY_TASK = re.compile(r"^\S*RayTaskError(?:\([\w.]+\))?: (?P<task>ray::[\w.<>]+\(\))")
ROOT_CAUSE = "Root Cause (first observed failure):"
ROOT_CAUSE_RANK = re.compile(r"^\s*rank\s*:\s*(?P<rank>\d+)\s*\(local_rank:\s*\d+\)")

MAX_BLOCK_LINES = 300  # lines of one traceback kept for the hint rules
AFTER_LINES = 3  # lines after the exception line that still belong to its message (SGLang's "Possible solutions")


def split_rank(text):
    """(rank or None, text without a torch launcher prefix "[rankN]: ")."""
    match = RANK_PREFIX.match(text)
    if not match:
        return None, text
    return int(match.group("rank")), text[match.end():]


def is_noise(text):
    """A launcher line that never is the cause of a failure (text: the line without prefixes)."""
    return any(pattern.search(text) for pattern in NOISE)


def exception_type(text):
    """The exception's type name of an `Xxx: message` line, or None."""
    match = EXCEPTION_LINE.match(text)
    if not match or match.group("type") == "Error":
        return None
    return match.group("type")


def is_launcher_exception(type_name):
    return bool(type_name) and type_name.split("(")[0].split(".")[-1] in LAUNCHER_EXCEPTIONS


class _Block(object):
    """One traceback being read: its lines, its exception lines, and where it is."""

    def __init__(self, source, rank, start, before):
        self.source = source
        self.rank = rank
        self.start = start  # line number of the header, None when the log started mid-traceback
        self.before = before
        self.lines = []
        self.exception = None  # (lineno, raw line, text, type)
        self.task = None  # "ray::Actor.method()" of a RayTaskError
        self.state = "frames"
        self.after = 0
        self.launcher = False

    def add(self, text):
        self.lines.append(text)
        if len(self.lines) > MAX_BLOCK_LINES:
            del self.lines[0]

    def set_exception(self, lineno, raw, text):
        type_name = exception_type(text) or text.split(":", 1)[0].strip() or text
        self.exception = (lineno, raw, text, type_name)
        task = RAY_TASK.match(text)
        if task:
            self.task = task.group("task")
        if is_launcher_exception(type_name):
            self.launcher = True
        self.state = "after"
        self.after = 0

    def describe(self):
        lineno, raw, text, type_name = self.exception
        return {
            "lineno": lineno,
            "line": raw.strip(),
            "exception": text,
            "type": type_name,
            "rank": self.rank,
            "source": self.source or None,
            "traceback_start": self.start,
            "task": self.task,
            "text": list(self.lines),
            "before": list(self.before),
        }


def _ending(found):
    ending = {key: found[key] for key in ("lineno", "line", "type", "rank", "source", "task")}
    ending["exception"] = found["exception"].strip()
    return ending


class TracebackScanner(object):
    """Reads a log line by line and keeps the last traceback of each source.

    feed(lineno, raw, text, source="", plain=True) once per line: `raw` is the line as logged
    (ANSI removed), `text` the message without the prefixes the caller knows (Ray's actor, slime's
    logger); the rank prefix is removed here. `source` separates interleaved writers (a Ray actor's
    pid); `plain` is False for lines that came through a logger (they are never a bare exception line).
    fatal() gives the exception line of the last traceback that is not launcher noise."""

    def __init__(self, before=20):
        self.open = {}
        self.last = None
        self.last_by_rank = {}
        self.ended = {}  # header line number -> the traceback's last exception (exception_of)
        self.root_cause_rank = None
        self._in_root_cause = False
        self._before = before
        self._recent = []

    def _close(self, key):
        block = self.open.pop(key, None)
        if block is None or block.exception is None:
            return
        found = block.describe()
        if block.start is not None:
            self.ended[block.start] = _ending(found)
        if block.launcher:
            return
        self.last = found
        if block.rank is not None:
            self.last_by_rank[block.rank] = found

    def _remember(self, text):
        if self._before:
            self._recent.append(text)
            if len(self._recent) > self._before:
                del self._recent[0]

    def feed(self, lineno, raw, text, source="", plain=True):
        rank, text = split_rank(text)
        key = (source, rank)
        if is_noise(text):
            return
        self._root_cause(text)
        block = self.open.get(key)
        if HEADER in text:
            if block is not None and block.state != "chain":
                # a new traceback, not a chained one ("During handling of the above exception ...")
                self._close(key)
                block = None
            if block is None:
                block = _Block(source, rank, lineno, list(self._recent))
                self.open[key] = block
            block.add(text)
            block.state = "frames"
            self._remember(text)
            return
        if block is not None and self._continues(block, lineno, raw, text):
            self._remember(text)
            return
        if block is not None:
            self._close(key)
        if plain and exception_type(text):
            # an exception line on its own: a log that starts mid-traceback, or Ray's RayTaskError line
            block = _Block(source, rank, None, list(self._recent))
            block.add(text)
            block.set_exception(lineno, raw, text)
            self.open[key] = block
        self._remember(text)

    def _continues(self, block, lineno, raw, text):
        """Whether `text` belongs to `block` (and record it there)."""
        stripped = text.strip()
        if block.state == "frames":
            if not stripped or text[:1].isspace() or stripped in CHAIN:
                block.add(text)
                return True
            block.add(text)
            block.set_exception(lineno, raw, text)
            return True
        if block.state == "chain":
            if not stripped:
                return True
            return False
        # after an exception line
        if stripped in CHAIN:
            block.add(text)
            block.state = "chain"
            return True
        if text[:1].isspace() and stripped.startswith('File "'):
            # RayTaskError: the remote task's frames follow the wrapper's line
            block.add(text)
            block.state = "frames"
            return True
        if exception_type(text):
            block.add(text)
            block.set_exception(lineno, raw, text)
            return True
        if block.after < AFTER_LINES:
            block.after += 1
            if stripped:
                block.add(text)
            return True
        return False

    def _root_cause(self, text):
        if text.strip() == ROOT_CAUSE:
            self._in_root_cause = True
            return
        if self._in_root_cause:
            match = ROOT_CAUSE_RANK.match(text)
            if match:
                self.root_cause_rank = int(match.group("rank"))
                self._in_root_cause = False
            elif text.startswith("="):
                self._in_root_cause = False

    def exception_of(self, start):
        """The exception that ends the traceback whose header ("Traceback (most recent call last):") is line
        `start`, however long the traceback: the last exception of a chain, with the rank whose prefix its
        lines carry and the writer (Ray actor "pid=N") that printed it. {lineno, line, exception, type, rank,
        source, task}, or None when no traceback starts at `start` or its exception line has not been read yet
        (a traceback still being read gives its latest exception line)."""
        if start in self.ended:
            return self.ended[start]
        for block in self.open.values():
            if block.start == start and block.exception is not None:
                return _ending(block.describe())
        return None

    def reading(self, start):
        """Whether the traceback whose header is line `start` may still go on (its chain included)."""
        return any(block.start == start for block in self.open.values())

    def finish(self):
        for key in list(self.open):
            self._close(key)

    def fatal(self):
        """The last traceback that is not launcher noise, as {lineno, line, exception, type, rank, source,
        traceback_start, task, text, before}; when torchrun names a root-cause rank that printed a traceback,
        that rank's last one. None when the log has no traceback."""
        self.finish()
        if self.root_cause_rank is not None and self.root_cause_rank in self.last_by_rank:
            return self.last_by_rank[self.root_cause_rank]
        return self.last
