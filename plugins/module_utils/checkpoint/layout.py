# The layout of a Megatron save directory (--save, or the converter's output), as Megatron and slime write it:
# the iteration directories `iter_%07d/` and the converter's `release/`, the tracker
# `latest_checkpointed_iteration.txt` (an iteration number or 'release'), and slime's data cursors
# `rollout/global_dataset_state_dict_<N>.pt`. Names and listings only: whether a checkpoint directory is
# complete is mcore.py's, the resume rule is resume.py's; both read the directory through this file.
#
# Standard library only, no import from the collection; Python 3.8+.
from __future__ import annotations

import os
import re
import zipfile

TRACKER = "latest_checkpointed_iteration.txt"
RELEASE = "release"
ROLLOUT_DIR = "rollout"
DATASET_STATE = "global_dataset_state_dict_%d.pt"

ITER_RE = re.compile(r"^iter_(\d{7,})$")
DATASET_STATE_RE = re.compile(r"^global_dataset_state_dict_(\d+)\.pt$")


def iter_dirname(iteration):
    return "iter_%07d" % int(iteration)


def listdir(path):
    """The sorted names in `path`; [] when it cannot be listed."""
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def file_size(path):
    """The size of the regular file `path`, or None (missing, not a file, unreadable)."""
    try:
        return os.path.getsize(path) if os.path.isfile(path) else None
    except OSError:
        return None


def read_tracker(path):
    """(raw_text or None, parsed) where parsed is an int, 'release', or None when the file is missing,
    empty (Megatron's plain write cut by a kill: the same as no tracker), unreadable or malformed.
    raw_text is whitespace-stripped; None for a missing or empty tracker."""
    tracker = os.path.join(path, TRACKER)
    if not os.path.lexists(tracker):
        return None, None
    try:
        with open(tracker, "rb") as handle:
            data = handle.read(4096)
    except OSError as exc:
        return "<unreadable: %s>" % exc.strerror, None
    text = data.decode("utf-8", "replace").strip()
    if not text:
        return None, None
    if text == RELEASE:
        return text, RELEASE
    if re.match(r"^\d+$", text):
        return text, int(text)
    return text, None


def tracker_is_empty(path):
    tracker = os.path.join(path, TRACKER)
    return os.path.isfile(tracker) and read_tracker(path)[0] is None


def iterations_of(path):
    """Numbers of the iter_XXXXXXX/ directories in `path` (names moved aside do not match), sorted."""
    found = []
    for name in listdir(path):
        match = ITER_RE.match(name)
        if match and os.path.isdir(os.path.join(path, name)):
            found.append(int(match.group(1)))
    return sorted(found)


def dataset_state_file(path, iteration):
    return os.path.join(path, ROLLOUT_DIR, DATASET_STATE % int(iteration))


def dataset_state_ok(path, iteration):
    """Whether slime's data cursor for `iteration` is usable: non-empty, and when it is torch's zip
    format (torch.save since 1.6), a zip whose central directory is intact (read from its end only)."""
    state = dataset_state_file(path, iteration)
    size = file_size(state)
    if not size:
        return False
    try:
        with open(state, "rb") as handle:
            head = handle.read(4)
        return zipfile.is_zipfile(state) if head == b"PK\x03\x04" else True
    except OSError:
        return False


def cursor_iterations(path):
    """The iterations of every data cursor file in `path`/rollout/, usable or not, sorted."""
    found = []
    for name in listdir(os.path.join(path, ROLLOUT_DIR)):
        match = DATASET_STATE_RE.match(name)
        if match:
            found.append(int(match.group(1)))
    return sorted(found)


def dataset_states(path):
    """The iterations whose data cursor is usable (dataset_state_ok), sorted."""
    return [it for it in cursor_iterations(path) if dataset_state_ok(path, it)]
