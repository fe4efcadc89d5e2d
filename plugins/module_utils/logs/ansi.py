# How ANSI escape codes (colours, cursor moves) are taken out of a log, defined once: the regular
# expression for Python (the log readers, the preflight's tool output) and the same expression as the
# sed program of the guide's `ray job logs -f | sed` pipeline (the run script, ray_job's follower).
# log_follower.py, a standalone program, keeps a copy that tests/unit/job/test_state_names.py compares.
#
# Standard library only, no import from the collection; Python 3.8+.
from __future__ import annotations

import re

PATTERN = r"\x1B\[[0-9;?]*[ -/]*[@-~]"
ANSI = re.compile(PATTERN)
# sed -E: the same expression, with `\x1B` as GNU sed reads it; no quote inside, so it can be single-quoted.
SED_EXPRESSION = "s/%s//g" % PATTERN


def strip_ansi(text):
    return ANSI.sub("", text)
