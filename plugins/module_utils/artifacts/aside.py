# The one naming scheme for what the collection moves out of the way instead of
# deleting it: <path>.<reason>-<UTC time>, e.g.
#   /data/LLMs/MCORE/Qwen3-8B_slime.interrupted-20261201T103512Z
# with .1, .2 ... appended when that name is taken. Every role and module that moves
# partial, damaged or replaced output aside goes through move_aside() and reports the
# path it returns.
#
# Standard library only; Python 3.8+.
from __future__ import annotations

import os
import re
import time

STAMP_FORMAT = "%Y%m%dT%H%M%SZ"
# Reasons are short words of the vocabulary below; anything else is normalised to one.
REASONS = (
    "interrupted",  # a producer (conversion, download, extraction) died before finishing
    "stale",  # complete, but made from other inputs (another model, other settings)
    "failed-check",  # complete-looking, but its check failed
    "replaced",  # a file that a newer, different copy replaces
    "incomplete",  # a checkpoint iteration whose files are missing or torn
    "no-data-state",  # a checkpoint iteration without slime's data cursor
    "previous",  # a file that held the place of a link (the guide's log file name)
    "container-run",  # a container's run directory, kept before the container is recreated
    "failed",  # a smoke run's scratch directory whose conversion or check failed, kept for a look
)
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def stamp(now=None):
    return time.strftime(STAMP_FORMAT, time.gmtime(time.time() if now is None else now))


def clean_reason(reason):
    text = _UNSAFE.sub("-", str(reason or "aside")).strip("-.")
    return text or "aside"


def _normalised(path):
    return os.path.abspath(os.path.expanduser(str(path))).rstrip(os.sep) or os.sep


def aside_name(path, reason, now=None):
    """The name move_aside would give `path` now: the first free one."""
    base = "%s.%s-%s" % (_normalised(path), clean_reason(reason), stamp(now))
    candidate, number = base, 1
    while os.path.lexists(candidate):
        candidate = "%s.%d" % (base, number)
        number += 1
    return candidate


def move_aside(path, reason, now=None):
    """Rename `path` to aside_name(path, reason) and return the new path. Never deletes.
    Raises FileNotFoundError when `path` does not exist."""
    path = _normalised(path)
    if not os.path.lexists(path):
        raise FileNotFoundError("cannot move %s aside: it does not exist" % path)
    for _attempt in range(100):
        target = aside_name(path, reason, now=now)
        # os.rename would silently replace an empty directory of that name: look again right before.
        if os.path.lexists(target):
            continue
        os.rename(path, target)
        return target
    raise FileExistsError("cannot find a free name to move %s aside" % path)


def is_aside(name):
    """Whether a file name is one that move_aside produced (so listings can skip it)."""
    return bool(re.search(r"\.[A-Za-z0-9_.-]+-\d{8}T\d{6}Z(\.\d+)?$", name))
