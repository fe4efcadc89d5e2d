# Reading slime's training log (what `ray job logs <id>` prints, as in the guide's
# logs/qwen3-8B.log): metric lines, checkpoint saves, the placement-group wait,
# the first error and the guide's FAQ hint for it. Standard library only; Python 3.8+.
#
# Line format (slime.md §4.1): "<kind> <id>: <python dict repr>" with kind one of
# step, rollout, passrate, eval, perf; the dict uses single quotes and bare
# nan / inf / -inf. In front of it there may be slime's logger prefix
# "[YYYY-MM-DD HH:MM:SS] file.py:NNN - " and, through Ray, an actor prefix such as
# "(MegatronTrainRayActor pid=123) " or "(RolloutManager pid=45, ip=10.0.0.2) ";
# Ray's de-duplicator may append " [repeated 3x across cluster]". ANSI codes are removed.
from __future__ import annotations

import ast
import math
import os
import re

from ansible_collections.mtslime.posttrain.plugins.module_utils.logscan import (
    ERROR_PATTERNS,
    FirstErrorScanner,
    strip_ansi,
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
PG_WAIT = re.compile(
    r"Waiting for placement group of (?P<needed>\d+) GPUs \(elapsed (?P<elapsed>\d+)s\): "
    r"(?P<registered>[\d.]+) GPUs registered with Ray, (?P<available>[\d.]+) available"
)
EXCEPTION_LINE = re.compile(r"^\s*(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception|Interrupt)\b:?")

THROUGHPUT_KEYS = (
    "perf/tokens_per_gpu_per_sec",
    "perf/actor_train_tok_per_s",
    "perf/step_time",
    "perf/wait_time_ratio",
)
# Lines matched by logscan's patterns that are harmless in slime runs.
IGNORE = (
    re.compile(r"^Exception ignored in"),
    re.compile(r"\bno_load_optim\b|\bno_load_rng\b"),
)
PG_WAIT_HINT_AFTER = 60  # seconds of waiting for the placement group before it is worth a hint

# The guide's FAQ as data. The first entry whose patterns match the first error
# (its line and the lines after it, through the end of a traceback) gives `kind`
# and `hint`. `near` entries also match when a device error follows one of those
# lines shortly before the error (SGLang prints "Capturing batches" first).
HINTS = (
    {
        "kind": "graph_capture",
        "faq": "Q2, §4.3.2",
        "error": (
            r"MUSA error 900",
            r"operation not permitted when stream is capturing",
            r"StreamCaptureUnsupported",
            r"Capture (?:cuda|musa) graph failed",
            r"torch_memory_saver",
        ),
        "near": (r"Capturing batches",),
        "near_error": (r"MUSA error", r"CUDA error", r"RuntimeError"),
        "hint": (
            "SGLang failed while capturing device graphs (MUSA error 900 / 'operation not permitted when stream is "
            "capturing' near 'Capturing batches'): torch_memory_saver and graph capture do not work together on this "
            "MUSA stack. Check --sglang-cuda-graph-max-bs 64 against the MUSA and torch_memory_saver versions; to "
            "confirm, rerun with --sglang-disable-cuda-graph (guide §4.3.2 and FAQ Q2)."
        ),
    },
    {
        "kind": "oom",
        "faq": "Q4",
        "error": (r"out of memory", r"OutOfMemoryError", r"\bOOM\b", r"ERROR_OUT_OF_MEMORY", r"ALLOC_FAILED"),
        "hint": (
            "Device memory ran out. Confirm the 4+4 split of training and rollout GPUs took effect, then change one "
            "thing at a time, in this order (FAQ Q4): 1. lower --sglang-mem-fraction-static (0.7); 2. lower "
            "--rollout-batch-size (16) or --n-samples-per-prompt (8); 3. shorten --rollout-max-response-len (512); "
            "4. lower --max-tokens-per-gpu (8192); 5. look for other processes using the GPUs (mthreads-gmi)."
        ),
    },
    {
        "kind": "hf_validate",
        "faq": "Q3",
        "error": (r"hf_validate_args failed",),
        "hint": (
            "slime compared MODEL_ARGS (scripts/models/qwen3-8B.sh) with the Hugging Face config.json of "
            "--hf-checkpoint and they differ (hidden size, heads, layers, FFN size, norm eps or rope_theta): source the "
            "model script that matches /data/models/Qwen3-8B/config.json and pass ${MODEL_ARGS[@]} to train.py."
        ),
    },
    {
        "kind": "ray_ports",
        "faq": "Q1",
        "error": (r"Could not find any running Ray instance", r"Failed to connect to GCS", r"answers with HTTP/2"),
        "hint": (
            "Ray was not found at the address used (FAQ Q1): `ray status` needs the GCS port "
            "(ray status --address=127.0.0.1:64379); `ray job submit` and RAY_ADDRESS need the dashboard port "
            "(http://<head>:8772). Check that the head runs (ray start --head --port=64379 --dashboard-port=8772)."
        ),
    },
    {
        "kind": "router_connect",
        "faq": "slime #1026/#1615",
        "error": (
            r"ConnectError",
            r"All connection attempts failed",
            r"sglang_router",
            r"Max retries exceeded",
            r"ProxyError",
            r"502 Bad Gateway",
        ),
        "hint": (
            "The rollout side could not reach an SGLang server or the router: either an HTTP proxy intercepts "
            "local traffic (set no_proxy=127.0.0.1,localhost,<node IPs> in runtime_env env_vars; the guide exports "
            "no_proxy) or an SGLang server crashed earlier (look for an OOM or graph-capture error of SGLangEngine "
            "in the Ray dashboard)."
        ),
    },
    {
        "kind": "missing_path",
        "faq": "Q3",
        "error": (r"FileNotFoundError", r"No such file or directory"),
        "hint": (
            "A model, data or checkpoint path does not exist inside the container (FAQ Q3): every path is a container "
            "path; check ls -ld /data/models/Qwen3-8B /data/LLMs/MCORE/Qwen3-8B_slime /data/models/data and the "
            "docker -v mounts."
        ),
    },
    {
        "kind": "collective",
        "faq": "Q2",
        "error": (
            r"\b[MN]CCL error",
            r"ProcessGroup[MN]CCL",
            r"Watchdog caught collective operation timeout",
            r"\bmccl\b.*(?:fail|error|timeout)",
        ),
        "hint": (
            "A collective (MCCL) operation failed or timed out (FAQ Q2). If another error comes before it on a "
            "different rank, that one is the cause; otherwise check the node's network interfaces and MCCL settings "
            "(MCCL_IB_GID_INDEX, GLOO_SOCKET_IFNAME) and that no other process holds the GPUs."
        ),
    },
    {
        "kind": "scheduler_dead",
        "faq": "Q2",
        "error": (r"scheduler is dead",),
        "hint": (
            "'scheduler is dead' is a consequence, not the cause (FAQ Q2): no earlier OOM, kernel, MCCL or "
            "graph-capture error is in this log, so look in the SGLangEngine actor's own log (Ray dashboard) for the "
            "first one. If it mentions Capturing batches, torch_memory_saver or 'operation not permitted when stream "
            "is capturing', check --sglang-cuda-graph-max-bs and try --sglang-disable-cuda-graph."
        ),
    },
    {
        "kind": "device_error",
        "faq": "Q2",
        "error": (r"MUSA error", r"CUDA error", r"illegal memory access", r"device-side assert"),
        "hint": (
            "A device kernel failed (FAQ Q2). 'illegal memory access' inside SGLang often goes away with a lower "
            "--sglang-mem-fraction-static (slime qa.md); set MUSA_LAUNCH_BLOCKING=1 in runtime_env env_vars to find "
            "the kernel."
        ),
    },
)
PG_HINT = {
    "kind": "placement_group",
    "faq": "slime qa.md",
    "hint": (
        "slime is waiting for a placement group of {needed} GPUs but Ray has {registered} registered ({available} "
        "available) after {elapsed}s: not enough GPUs are registered with Ray (actor GPUs + rollout GPUs = 4 + 4 in "
        "the guide). Check `ray status --address=127.0.0.1:64379`, that every node joined and that Ray sees the MUSA "
        "devices (start Ray with --num-gpus), and that no other job holds GPUs."
    ),
}


def _compiled(patterns):
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


_HINT_RULES = tuple(
    dict(
        entry,
        _error=_compiled(entry["error"]),
        _near=_compiled(entry.get("near", ())),
        _near_error=_compiled(entry.get("near_error", ())),
    )
    for entry in HINTS
)


# -- line parsing ---------------------------------------------------------------
def clean_line(line):
    """The message of a log line: ANSI codes, Ray's actor prefix, Ray's repeat
    suffix and slime's logger prefix removed."""
    line = strip_ansi(line).rstrip("\r\n")
    line = RAY_PREFIX.sub("", line, count=1)
    line = REPEATED.sub("", line)
    return LOGGER_PREFIX.sub("", line, count=1).strip()


def actor_of(line):
    match = RAY_PREFIX.match(strip_ansi(line))
    return (match.group("actor") or "") if match and "pid=" in match.group(0) else None


class _Unsupported(ValueError):
    pass


_NAMES = {
    "nan": float("nan"),
    "NaN": float("nan"),
    "inf": float("inf"),
    "Infinity": float("inf"),
    "True": True,
    "False": False,
    "None": None,
}


def _eval(node):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval(node.operand)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
        raise _Unsupported("sign on a non-number")
    if isinstance(node, ast.Dict):
        return {_eval(k): _eval(v) for k, v in zip(node.keys, node.values) if k is not None}
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_eval(item) for item in node.elts]
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        # numpy / torch scalars: np.float64(0.5), tensor(0.5)
        value = _eval(node.args[0])
        if isinstance(value, (int, float)):
            return value
    if hasattr(ast, "Num") and isinstance(node, getattr(ast, "Num")):  # pragma: no cover (Python < 3.8 trees)
        return node.n
    if hasattr(ast, "Str") and isinstance(node, getattr(ast, "Str")):  # pragma: no cover
        return node.s
    raise _Unsupported(node.__class__.__name__)


def parse_payload(text):
    """A metric dict repr (single quotes, bare nan/inf/-inf) -> dict, or None."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
        value = _eval(tree.body)
    except (SyntaxError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def parse_metric(line):
    """(kind, id, payload dict) for a metric line, else None."""
    match = METRIC.match(clean_line(line))
    if not match:
        return None
    payload = parse_payload(match.group("payload"))
    if payload is None:
        return None
    return match.group("kind"), int(match.group("id")), payload


def json_safe(value):
    """nan / inf / -inf become the strings 'nan', 'inf', '-inf' (JSON has no such numbers)."""
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


# -- the first error and its hint -------------------------------------------------
def new_error_scanner(before=20, after=60):
    """A FirstErrorScanner for slime logs: Ray/logger prefixes removed before matching,
    a wide window kept so the hint can see the end of a traceback."""
    return FirstErrorScanner(context=after, before=before, patterns=ERROR_PATTERNS, ignore=IGNORE, clean=clean_line)


def _error_window(found, extra=3):
    """The cleaned lines that make up the first error: for a traceback, through its first
    exception line (plus `extra` lines); otherwise the line and `extra` lines after it.
    Later, unrelated errors stay out, so they cannot decide the hint."""
    first = clean_line(found["line"])
    after = [clean_line(item) for item in found.get("context") or []]
    if "Traceback" not in first:
        return [first] + after[:extra]
    for index, item in enumerate(after):
        if EXCEPTION_LINE.match(item):
            return [first] + after[: index + 1 + extra]
    return [first] + after


def classify(found):
    """(kind, faq, hint) for a first-error dict from new_error_scanner, or ('error', None, None)."""
    error_text = "\n".join(_error_window(found))
    before_text = "\n".join(clean_line(item) for item in (found.get("before") or []))
    for rule in _HINT_RULES:
        if any(p.search(error_text) for p in rule["_error"]):
            return rule["kind"], rule["faq"], rule["hint"]
        if (
            rule["_near"]
            and any(p.search(before_text) for p in rule["_near"])
            and any(p.search(error_text) for p in rule["_near_error"])
        ):
            return rule["kind"], rule["faq"], rule["hint"]
    return "error", None, None


def describe_error(found, context_lines=5):
    """The first_error result: {lineno, line, kind, faq, exception, context, context_start}."""
    kind, faq, hint = classify(found)
    cleaned = [clean_line(item) for item in found.get("context") or []]
    exception = None
    if EXCEPTION_LINE.match(clean_line(found["line"])) and not clean_line(found["line"]).startswith("Traceback"):
        exception = clean_line(found["line"])
    else:
        for item in cleaned:
            if EXCEPTION_LINE.match(item):
                exception = item
                break
    before = (found.get("before") or [])[-context_lines:] if context_lines else []
    after = (found.get("context") or [])[: max(context_lines * 2, 0)]
    return {
        "lineno": found["lineno"],
        "line": found["line"],
        "kind": kind,
        "faq": faq,
        "exception": exception,
        "context": before + [found["line"]] + after,
        "context_start": found["lineno"] - len(before),
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

    def waiting_for_gpus(self):
        if self.pg_wait is None or self.progress_after_wait:
            return None
        return dict(self.pg_wait)


def _number(value):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return None


def build_result(summary, steps, first, hint, tail, total_lines):
    step = summary.last.get("step")
    rollout = summary.last.get("rollout")
    passrate = summary.last.get("passrate")
    evaluation = summary.last.get("eval")
    result = {
        "last_step": step[0] if step else None,
        "steps": steps,
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
        "hint": hint,
        "tail": tail,
        "lines": total_lines,
    }
    waiting = result["waiting_for_gpus"]
    if hint is None and waiting and waiting["elapsed"] >= PG_WAIT_HINT_AFTER:
        fmt = {k: ("%g" % v if isinstance(v, float) else v) for k, v in waiting.items()}
        result["hint"] = PG_HINT["hint"].format(**fmt)
    result["progress"] = progress_line(result)
    return result


def _fmt(value):
    if isinstance(value, float):
        return "%.4g" % value
    return str(value)


def progress_line(result):
    if result["first_error"]:
        err = result["first_error"]
        text = "failed: %s (line %d)" % ((err.get("exception") or err["line"])[:160], err["lineno"])
        if result["last_step"] is not None:
            text += " after step %d" % result["last_step"]
        return text
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
            "waiting %ds for %d GPUs (%g registered, %g available)"
            % (waiting["elapsed"], waiting["needed"], waiting["registered"], waiting["available"])
        )
    if not parts:
        return "no training step logged yet"
    return ", ".join(parts)


def _scan_full(lines, before=20, after=60):
    """Pass 1 over the whole log: first error (from the beginning) and step count."""
    scanner = new_error_scanner(before=before, after=after)
    steps = 0
    total = 0
    for raw in lines:
        total += 1
        scanner.feed(raw)
        if "step " in raw:
            message = clean_line(raw)
            if message.startswith("step ") and METRIC.match(message):
                steps += 1
    return scanner.result(), steps, total


def _tail_lines(text, start_lineno, tail_lines):
    lines = text.splitlines()
    summary = Summary()
    for offset, raw in enumerate(lines):
        summary.feed(start_lineno + offset, raw)
    tail = [strip_ansi(item).rstrip() for item in lines[-tail_lines:]] if tail_lines > 0 else []
    return summary, tail


def summarize_text(text, max_bytes=0, tail_lines=20, context_lines=5):
    """Summary of a whole log held in memory (for example from the Jobs API)."""
    lines = text.splitlines()
    found, steps, total = _scan_full(lines)
    first, hint = describe_error(found, context_lines) if found else (None, None)
    data = text.encode("utf-8", errors="replace")
    if max_bytes and len(data) > max_bytes:
        chunk = data[-max_bytes:].decode("utf-8", errors="replace")
        cut = chunk.find("\n")
        chunk = chunk[cut + 1 :] if cut >= 0 else ""
    else:
        chunk = text
    start = total - len(chunk.splitlines()) + 1
    summary, tail = _tail_lines(chunk, start, tail_lines)
    result = build_result(summary, steps, first, hint, tail, total)
    result["bytes"] = len(data)
    result["bytes_read"] = min(len(data), max_bytes) if max_bytes else len(data)
    return result


def summarize_file(path, max_bytes=0, tail_lines=20, context_lines=5):
    """Summary of a log file: the first error from its beginning (streamed), the metrics
    from at most its last `max_bytes` bytes (0 = all). Reads only the bytes present
    when it starts, so a log that grows meanwhile gives a consistent answer."""
    size = os.path.getsize(path)

    def limited(handle):
        consumed = 0
        for raw in handle:
            if consumed >= size:
                break
            consumed += len(raw)
            yield raw.decode("utf-8", errors="replace")

    with open(path, "rb") as handle:
        found, steps, total = _scan_full(limited(handle))
        offset = max(0, size - max_bytes) if max_bytes else 0
        handle.seek(offset)
        chunk = handle.read(size - offset).decode("utf-8", errors="replace")
    if offset > 0:
        cut = chunk.find("\n")
        chunk = chunk[cut + 1 :] if cut >= 0 else ""
    first, hint = describe_error(found, context_lines) if found else (None, None)
    start = total - len(chunk.splitlines()) + 1
    summary, tail = _tail_lines(chunk, start, tail_lines)
    result = build_result(summary, steps, first, hint, tail, total)
    result["bytes"] = size
    result["bytes_read"] = size - offset
    return result
