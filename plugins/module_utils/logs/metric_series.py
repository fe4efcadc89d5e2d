# The curves of an experiment: every attempt's log read with slime.py's parser, and
# one series per metric over the rollout (or step) ids, resumes joined into one line.
#
# Where the logs are (interface 3 of the round's brief): each attempt of experiment E
# logs to <log_dir>/<model_name>.<submission_id>.log, with submission ids
# E-attempt-<n> (the collection) or E_<YYYYmmdd-HHMMSS> (the guide's run script by
# hand). <model_name>.log links to the latest; when it is a plain file and no attempt
# log exists (a run started with the guide's own script), it is read as the only attempt.
#
# A resumed attempt starts at the rollout after the checkpoint it loaded, so the
# rollouts an earlier attempt logged after that checkpoint were done again: the joined
# line takes each id's value from the latest attempt that logged it, and the earlier
# values are returned apart (`superseded`). Values that are not finite numbers stay in
# the series as the strings 'nan', 'inf', '-inf' (slime_log.json_safe), so a plot shows
# a gap there instead of dropping them.
#
# Standard library only; Python 3.8+.
from __future__ import annotations

import math
import os
import re

from ansible_collections.mtslime.posttrain.plugins.module_utils.job import names as run_names
from ansible_collections.mtslime.posttrain.plugins.module_utils.job.rules import attempt_of
from ansible_collections.mtslime.posttrain.plugins.module_utils.logs.slime import (
    LOADED,
    clean_line,
    json_safe,
    parse_metric,
)

# The metrics of the report, by key. Rollout-level lines (rollout, passrate, eval, perf)
# are indexed by rollout id, step lines by step id.
DEFAULT_PATTERNS = (
    r"rollout/raw_reward",
    r"passrate/pass@\d+",
    r"eval/[^/]+",  # eval/<name> and eval/<name>-pass@k (not eval/<name>/response_len/...)
    r"rollout/response_len/mean",
    r"rollout/response_lengths",
    r"perf/tokens_per_gpu_per_sec",
    r"perf/actor_train_tok_per_s",
    r"perf/step_time",
)
EXCLUDED = re.compile(r"-truncated_ratio$")
MAX_POINTS = 4000
MAX_EXTRA = 20
MAX_AVAILABLE = 500
HAND_NAMED = r"^%s_(\d{8}-\d{6})$"
TIMESTAMP = re.compile(r"\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)")
HEAD_BYTES = 256 * 1024
KIND_AXIS = {"step": "step", "critic-step": "step"}  # every other kind: rollout


def compile_patterns(extra=()):
    patterns = [re.compile("^(?:%s)$" % p) for p in DEFAULT_PATTERNS]
    patterns += [re.compile("^%s$" % re.escape(key)) for key in extra]
    return patterns


def wanted(key, patterns):
    return not EXCLUDED.search(key) and any(p.match(key) for p in patterns)


# -- which logs, in which order ------------------------------------------------------------
def _first_timestamp(path):
    try:
        with open(path, "rb") as handle:
            head = handle.read(HEAD_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    match = TIMESTAMP.search(head)
    return match.group(1).replace("T", " ") if match else None


def attempt_logs(log_dir, model_name, experiment, submission_ids=None):
    """[(submission_id, attempt number or None, path)] oldest first, and the ids given
    whose log is missing. With `submission_ids` (ray_job's attempts, oldest first) that
    order is used; otherwise the files of the experiment are found in `log_dir`: its
    attempts by number, hand-named jobs by their date, merged by the first logged time."""
    missing = []
    if submission_ids:
        found = []
        for sid in submission_ids:
            path = run_names.attempt_log(log_dir, model_name, sid)
            if os.path.isfile(path):
                found.append((sid, attempt_of(sid, experiment), path))
            else:
                missing.append(sid)
        return found, missing
    try:
        names = sorted(os.listdir(log_dir))
    except OSError:
        names = []
    numbered, dated = [], []
    hand = re.compile(HAND_NAMED % re.escape(experiment))
    for name in names:
        sid = run_names.submission_of(name, model_name)
        if sid is None:
            continue
        path = os.path.join(log_dir, name)
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        number = attempt_of(sid, experiment)
        if number is not None:
            numbered.append((number, sid, path))
            continue
        match = hand.match(sid)
        if match:
            day, clock = match.group(1).split("-")
            when = "%s-%s-%s %s:%s:%s" % (day[:4], day[4:6], day[6:], clock[:2], clock[2:4], clock[4:])
            dated.append((when, sid, path))
    numbered.sort()
    dated.sort()
    ordered = [(sid, number, path) for number, sid, path in numbered]
    # Hand-named jobs go before the first numbered attempt that started after them.
    for when, sid, path in dated:
        at = len(ordered)
        for index, (dummy, number, other) in enumerate(ordered):
            if number is None:
                continue
            started = _first_timestamp(other)
            if started is not None and started > when:
                at = index
                break
        ordered.insert(at, (sid, None, path))
    if not ordered:
        guide = run_names.guide_log(log_dir, model_name)
        if os.path.isfile(guide) and not os.path.islink(guide):
            ordered.append(("%s (guide log)" % model_name, None, guide))
    return ordered, missing


# -- reading one log ---------------------------------------------------------------------------
def _finite(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def read_log(path, patterns, available=None):
    """(facts, points) of one attempt's log: facts = lines, bytes, metric_lines,
    first/last rollout and step ids; points = {key: (kind, [(id, value), ...])} in log
    order. Every metric key seen goes into the set `available`. Reads only the bytes
    present when it starts (the follower may be writing)."""
    size = os.path.getsize(path)
    decided = {}
    facts = {"lines": 0, "bytes": size, "metric_lines": 0, "unparsed_metric_lines": 0,
             "first_rollout": None, "last_rollout": None, "first_step": None, "last_step": None,
             "loaded_iteration": None, "loaded_from": None}
    points = {}
    consumed = 0
    with open(path, "rb") as handle:
        for raw in handle:
            if consumed >= size:
                break
            consumed += len(raw)
            facts["lines"] += 1
            if b": {" not in raw:
                if facts["loaded_from"] is None and b"successfully loaded checkpoint" in raw:
                    loaded = LOADED.search(clean_line(raw.decode("utf-8", "replace")))
                    if loaded:
                        facts["loaded_iteration"] = int(loaded.group("it"))
                        facts["loaded_from"] = loaded.group("path")
                continue
            parsed = parse_metric(raw.decode("utf-8", "replace"))
            if parsed is None:
                if re.search(rb"\b(?:step|rollout|passrate|eval|perf) \d+: \{", raw):
                    facts["unparsed_metric_lines"] += 1
                continue
            kind, ident, payload = parsed
            facts["metric_lines"] += 1
            which = "step" if KIND_AXIS.get(kind) == "step" else "rollout"
            if kind != "critic-step":
                if facts["first_" + which] is None or ident < facts["first_" + which]:
                    facts["first_" + which] = ident
                if facts["last_" + which] is None or ident > facts["last_" + which]:
                    facts["last_" + which] = ident
            for key, value in payload.items():
                if not isinstance(key, str):
                    continue
                if key not in decided:
                    decided[key] = wanted(key, patterns)
                    if available is not None and len(available) < MAX_AVAILABLE:
                        available.add(key)
                if not decided[key]:
                    continue
                if not _finite(value):
                    continue  # strings, lists: not a curve
                points.setdefault(key, (kind, []))[1].append((ident, value))
    return facts, points


# -- joining attempts, bounding the result --------------------------------------------------------
def _label(value):
    return json_safe(float(value)) if isinstance(value, float) and not math.isfinite(value) else value


def downsample(points, max_points, keep=()):
    """Every k-th point (k = ceil(n / max_points)), plus every non-finite value and the
    indices in `keep` (each attempt's first and last point), so gaps and attempt
    boundaries survive. Returns (points, every or None)."""
    if max_points <= 0 or len(points) <= max_points:
        return points, None
    every = int(math.ceil(len(points) / float(max_points)))
    keep = set(keep)
    kept = [
        point for index, point in enumerate(points)
        if index % every == 0 or index == len(points) - 1 or index in keep or isinstance(point[1], str)
    ]
    return kept, every


def join_series(per_attempt, max_points=MAX_POINTS):
    """per_attempt: [points dict of read_log] oldest first -> {key: series} where a
    series is {kind, axis, points: [[id, value, attempt_index]], superseded: [...],
    count, non_finite, downsampled}. The latest attempt that logged an id wins."""
    keys = []
    for points in per_attempt:
        for key in points:
            if key not in keys:
                keys.append(key)
    series = {}
    for key in sorted(keys):
        kind = None
        latest = {}
        order = []
        superseded = []
        for index, points in enumerate(per_attempt):
            if key not in points:
                continue
            kind = kind or points[key][0]
            for ident, value in points[key][1]:
                if ident in latest and latest[ident][1] != index:
                    superseded.append([ident, _label(latest[ident][0]), latest[ident][1]])
                elif ident not in latest:
                    order.append(ident)
                latest[ident] = (value, index)
        joined = [[ident, _label(latest[ident][0]), latest[ident][1]] for ident in sorted(order)]
        boundaries = [i for i, p in enumerate(joined) if i == 0 or p[2] != joined[i - 1][2]]
        boundaries += [i - 1 for i in boundaries if i > 0] + [len(joined) - 1]
        total = len(joined)
        joined, every = downsample(joined, max_points, boundaries)
        superseded, every_old = downsample(superseded, max_points)
        series[key] = {
            "kind": kind,
            "axis": KIND_AXIS.get(kind, "rollout"),
            "points": joined,
            "superseded": superseded,
            "count": total,
            "non_finite": sum(1 for p in joined if isinstance(p[1], str)),
            "downsampled": (
                {"from": total, "to": len(joined), "every": every, "superseded_every": every_old}
                if every or every_old else None
            ),
        }
    return series


def experiment_series(log_dir, model_name, experiment, submission_ids=None, extra_metrics=(),
                      max_points=MAX_POINTS):
    """Everything train_metrics returns except `changed`."""
    patterns = compile_patterns(extra_metrics)
    logs, missing = attempt_logs(log_dir, model_name, experiment, submission_ids)
    attempts, per_attempt, available = [], [], set()
    for index, (sid, number, path) in enumerate(logs):
        facts, points = read_log(path, patterns, available)
        per_attempt.append(points)
        attempts.append(dict(facts, index=index, submission_id=sid, attempt=number, log=path,
                             started=_first_timestamp(path)))
    return {
        "log_dir": log_dir,
        "attempts": attempts,
        "missing_logs": missing,
        "series": join_series(per_attempt, max_points),
        "available_metrics": sorted(available),
        "max_points": max_points,
    }
