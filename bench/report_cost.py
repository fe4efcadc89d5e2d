#!/usr/bin/env python
"""What status.yml's report costs for a long run: reading every attempt's log on the node
(module_utils/logs/metric_series.py, what the train_metrics module does) and drawing the picture on
the controller (plugin_utils/report/plot.py), for the guide's 3000 rollouts.

The log is made with the generator of the test fixtures (tests/unit/data/report/make_logs.py:
slime's line format, Ray prefixes, nan/inf), two attempts with a resume half way, plus N lines
of SGLang request noise per rollout (default 20), as a real log has. Prints the log's size,
the seconds to read it, the size of the module's result, and the seconds to draw.
Usage: .venv/bin/python bench/report_cost.py [ROLLOUTS [NOISE_LINES_PER_ROLLOUT]]
"""
from __future__ import annotations

import datetime
import json
import os
import random
import shutil
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "collections"))
sys.path.insert(0, os.path.join(REPO, "tests", "unit", "data", "report"))

import make_logs  # noqa: E402
from ansible_collections.mtslime.posttrain.plugins.module_utils.logs.metric_series import experiment_series  # noqa: E402
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.report.plot import render_png  # noqa: E402

NOISE = '(SGLangEngine pid=4001) [2026-09-20 12:01:24] INFO:     127.0.0.1:45123 - "POST /generate HTTP/1.1" 200 OK'


def write_attempt(directory, sid, first, last, loaded, noise, rng):
    lines = []
    make_logs.header(lines, sid, "/data/checkpoints/Qwen3-8B_slime", loaded)
    when = datetime.datetime(2026, 9, 20, 12, 0, 0)
    for rollout in range(first, last + 1):
        lines.extend([NOISE] * noise)
        make_logs.rollout_lines(lines, rollout, when, rng)
        when += datetime.timedelta(seconds=65)
    path = os.path.join(directory, "qwen3-8B.%s.log" % sid)
    with open(path, "w") as handle:
        handle.write("\n".join(lines) + "\n")
    return os.path.getsize(path), len(lines)


def main():
    rollouts = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    noise = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    directory = tempfile.mkdtemp(prefix="mtslime-report-bench-")
    try:
        measure(directory, rollouts, noise)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def measure(directory, rollouts, noise):
    rng = random.Random(0)
    half = rollouts // 2
    size1, lines1 = write_attempt(directory, "qwen3-8B-attempt-1", 1, half + 3, 0, noise, rng)
    size2, lines2 = write_attempt(directory, "qwen3-8B-attempt-2", half, rollouts, half - 1, noise, rng)
    print("logs: 2 attempts, %d rollouts, %.1f MiB, %d lines" % (rollouts, (size1 + size2) / 2.0 ** 20,
                                                                 lines1 + lines2))
    start = time.monotonic()
    metrics = experiment_series(directory, "qwen3-8B", "qwen3-8B")
    read = time.monotonic() - start
    result = len(json.dumps(metrics))
    print("read (train_metrics): %.2f s, result %.0f KiB, %d series" % (read, result / 1024.0, len(metrics["series"])))
    start = time.monotonic()
    png, info = render_png(metrics["series"], metrics["attempts"], "qwen3-8B, %d rollouts" % rollouts)
    print("draw (train_report): %.2f s, PNG %.0f KiB, %d panels" % (time.monotonic() - start, len(png) / 1024.0,
                                                                    len(info["panels"])))


if __name__ == "__main__":
    main()
