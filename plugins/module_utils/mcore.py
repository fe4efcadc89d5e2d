# State of a Megatron-Core torch_dist checkpoint directory: a finished or
# interrupted HF -> torch_dist conversion (tools/convert_hf_to_torch_dist.py)
# or a training save dir (--save), plus a safe "move aside" for partial output.
#
# Facts relied on (docs/reference slime.md §1.3-1.4, §4.2-4.3):
# - tracker file `latest_checkpointed_iteration.txt` holds an iteration number
#   or `release`; Megatron writes it only after every rank finished saving.
# - a checkpoint dir (`iter_%07d/` or `release/`) is complete when it has
#   `metadata.json` (written last), `.metadata` (DCP) and >= 1 `*.distcp` shard.
#   `common.pt` is not required (newer Megatron keeps common state in DCP).
# - the converter saves `iter_0000001/`, then rank 0 writes tracker `release`
#   and renames `iter_0000001/` to `release/`; rerunning into a dir that has
#   `release/` moves the new dir *into* it (`release/iter_0000001/`).
# - training keeps the data cursor in `rollout/global_dataset_state_dict_<N>.pt`.
#
# Standard library only; Python 3.8+.
from __future__ import annotations

import os
import re
import time

TRACKER = "latest_checkpointed_iteration.txt"
RELEASE = "release"
METADATA_JSON = "metadata.json"
DCP_METADATA = ".metadata"
DISTCP_SUFFIX = ".distcp"
ROLLOUT_DIR = "rollout"
DATASET_STATE = "global_dataset_state_dict_%d.pt"
# Written by mtslime.posttrain.mcore_checkpoint (record_fingerprint) after a conversion.
CONVERSION_RECORD = ".mtslime_conversion.json"

ITER_RE = re.compile(r"^iter_(\d{7,})$")
DATASET_STATE_RE = re.compile(r"^global_dataset_state_dict_(\d+)\.pt$")

STATES = ("complete", "absent", "interrupted")
KINDS = ("release", "training")

# code -> (what it means, how to fix it). The message of a result combines them
# with the path; callers may show SIGNATURES[code] on their own.
SIGNATURES = {
    "not_a_directory": (
        "the path exists but is not a directory",
        "move it aside or point the path at the checkpoint directory",
    ),
    "empty_dir": (
        "the directory is empty: nothing was saved into it yet",
        "run the conversion (or training) into it, or move it aside",
    ),
    "no_tracker": (
        "latest_checkpointed_iteration.txt is missing: the process died before or while saving",
        "move the directory aside and rerun the conversion; a training run without a tracker starts from scratch",
    ),
    "tracker_unreadable": (
        "latest_checkpointed_iteration.txt cannot be read or holds neither an iteration number nor 'release'",
        "move the directory aside and rerun, or write the last complete iteration into the tracker by hand",
    ),
    "iter_dir_not_renamed": (
        "the converter saved iter_0000001/ but died before renaming it to release/",
        "move the directory aside and rerun the conversion into an empty --save directory",
    ),
    "release_dir_missing": (
        "the tracker says 'release' but there is no release/ directory: the converter died between writing the tracker and renaming iter_0000001/",
        "move the directory aside and rerun the conversion into an empty --save directory",
    ),
    "missing_metadata_json": (
        "the checkpoint directory the tracker names lacks metadata.json, .metadata or *.distcp shards: saving was interrupted",
        "move the directory aside and rerun the conversion (training: resume from the last complete iteration)",
    ),
    "nested_release": (
        "release/ contains iter_0000001/: the converter was rerun into a --save directory that already had release/",
        "move the directory aside and rerun the conversion into an empty --save directory",
    ),
    "tracker_points_to_missing_iter": (
        "the tracker names an iteration whose iter_XXXXXXX/ directory does not exist",
        "write the last complete iteration into latest_checkpointed_iteration.txt, or move the directory aside",
    ),
}


def iter_dirname(iteration):
    return "iter_%07d" % int(iteration)


def _listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def checkpoint_dir_missing(path):
    """What a Megatron checkpoint dir (iter_XXXXXXX/ or release/) lacks to be
    complete: a list drawn from metadata.json, .metadata, *.distcp; [] if complete."""
    if not os.path.isdir(path):
        return ["directory"]
    names = set(_listdir(path))
    missing = []
    if METADATA_JSON not in names or not os.path.isfile(os.path.join(path, METADATA_JSON)):
        missing.append(METADATA_JSON)
    if DCP_METADATA not in names:
        missing.append(DCP_METADATA)
    if not any(name.endswith(DISTCP_SUFFIX) for name in names):
        missing.append("*" + DISTCP_SUFFIX)
    return missing


def is_complete_checkpoint_dir(path):
    return not checkpoint_dir_missing(path)


def read_tracker(path):
    """(raw_text or None, parsed) where parsed is an int, 'release', or None when
    the file is missing / unreadable / malformed. raw_text is whitespace-stripped."""
    tracker = os.path.join(path, TRACKER)
    if not os.path.lexists(tracker):
        return None, None
    try:
        with open(tracker, "rb") as handle:
            data = handle.read(4096)
    except OSError as exc:
        return "<unreadable: %s>" % exc.strerror, None
    text = data.decode("utf-8", "replace").strip()
    if text == RELEASE:
        return text, RELEASE
    if re.match(r"^\d+$", text):
        return text, int(text)
    return text, None


def _nested_iters(release_dir):
    return [name for name in _listdir(release_dir) if ITER_RE.match(name) and os.path.isdir(os.path.join(release_dir, name))]


def _dataset_states(path):
    found = []
    for name in _listdir(os.path.join(path, ROLLOUT_DIR)):
        match = DATASET_STATE_RE.match(name)
        if match:
            found.append(int(match.group(1)))
    return sorted(found)


def _infer_kind(path, parsed, iterations, names):
    """'training' when the dir looks like a training --save dir, else 'release'."""
    if ROLLOUT_DIR in names and os.path.isdir(os.path.join(path, ROLLOUT_DIR)):
        return "training"
    if isinstance(parsed, int) and parsed != 1:
        return "training"
    if any(it != 1 for it in iterations):
        return "training"
    return "release"


def _signature(code, detail=None):
    return {"code": code, "detail": detail or SIGNATURES[code][0]}


def inspect_checkpoint(path, expect=None):
    """Describe the torch_dist checkpoint directory at `path`.

    expect: 'release' (conversion output), 'training' (training --save dir),
    or None / 'auto' (infer). Returns a dict; see module mcore_checkpoint RETURN
    for the keys. Never changes anything."""
    if expect in (None, "auto"):
        expect = None
    elif expect not in KINDS:
        raise ValueError("expect must be 'release', 'training' or None, not %r" % (expect,))
    path = os.path.abspath(os.path.expanduser(path)).rstrip(os.sep) or os.sep

    result = {
        "path": path,
        "state": "absent",
        "kind": expect or "release",
        "signature": None,
        "message": "",
        "tracker": None,
        "iterations": [],
        "complete_iterations": [],
        "incomplete_iterations": [],
        "latest_iteration": None,
        "latest_complete_iteration": None,
        "release": False,
        "dataset_state": False,
        "dataset_state_file": None,
        "dataset_state_iterations": [],
    }

    if not os.path.lexists(path):
        result["message"] = "%s does not exist: no checkpoint has been written there yet." % path
        return result
    if not os.path.isdir(path):
        return _interrupted(result, _signature("not_a_directory"))

    names = [name for name in _listdir(path) if name != CONVERSION_RECORD]
    iterations = sorted(
        int(ITER_RE.match(name).group(1))
        for name in names
        if ITER_RE.match(name) and os.path.isdir(os.path.join(path, name))
    )
    complete = [it for it in iterations if is_complete_checkpoint_dir(os.path.join(path, iter_dirname(it)))]
    release_dir = os.path.join(path, RELEASE)
    release_missing = checkpoint_dir_missing(release_dir)
    raw, parsed = read_tracker(path)
    kind = expect or _infer_kind(path, parsed, iterations, names)

    result.update(
        kind=kind,
        tracker=raw,
        iterations=iterations,
        complete_iterations=complete,
        incomplete_iterations=[it for it in iterations if it not in complete],
        release=not release_missing,
        dataset_state_iterations=_dataset_states(path),
    )
    if parsed == RELEASE:
        result["latest_iteration"] = 0
    elif isinstance(parsed, int):
        result["latest_iteration"] = parsed
        state_file = os.path.join(path, ROLLOUT_DIR, DATASET_STATE % parsed)
        result["dataset_state_file"] = state_file
        result["dataset_state"] = os.path.isfile(state_file)
    # Largest complete iteration Megatron could resume from: bounded by the
    # tracker when there is a numeric one, else the largest complete one.
    bound = parsed if isinstance(parsed, int) else None
    candidates = [it for it in complete if bound is None or it <= bound]
    result["latest_complete_iteration"] = candidates[-1] if candidates else None

    if not names:
        return _interrupted(result, _signature("empty_dir"))

    nested = _nested_iters(release_dir) if os.path.isdir(release_dir) else []
    if raw is None:
        return _interrupted(result, _signature("no_tracker"))
    if parsed is None:
        return _interrupted(
            result,
            _signature(
                "tracker_unreadable",
                "latest_checkpointed_iteration.txt holds %r, which is neither an iteration number nor 'release'" % raw[:80],
            ),
        )

    if parsed == RELEASE:
        if nested:
            return _interrupted(
                result,
                _signature(
                    "nested_release",
                    "release/ contains %s/: the converter was rerun into a --save directory that already had release/"
                    % nested[0],
                ),
            )
        if not os.path.isdir(release_dir):
            return _interrupted(result, _signature("release_dir_missing"))
        if release_missing:
            return _interrupted(
                result,
                _signature(
                    "missing_metadata_json",
                    "release/ lacks %s: the converter was interrupted while saving" % ", ".join(release_missing),
                ),
            )
        if kind == "release" and 1 in iterations:
            return _interrupted(
                result,
                _signature(
                    "iter_dir_not_renamed",
                    "the tracker says 'release' but iter_0000001/ is still there next to release/: "
                    "a rerun of the converter died before its final rename",
                ),
            )
        result["state"] = "complete"
        result["message"] = "%s is a complete %s checkpoint (tracker 'release', release/ has metadata.json, .metadata and shards)." % (
            path,
            "converted" if kind == "release" else "release",
        )
        return result

    # numeric tracker
    name = iter_dirname(parsed)
    iter_dir = os.path.join(path, name)
    if kind == "release":
        if os.path.isdir(iter_dir):
            detail = "the tracker says %s and %s/ was not renamed to release/: the converter died before its final rename" % (raw, name)
            if parsed != 1:
                detail += " (a tracker other than 1 suggests a training save directory: use expect=training)"
            return _interrupted(result, _signature("iter_dir_not_renamed", detail))
        return _interrupted(
            result,
            _signature(
                "tracker_points_to_missing_iter",
                "the tracker says %s but %s/ does not exist%s"
                % (raw, name, "" if os.path.isdir(release_dir) else " and there is no release/ either"),
            ),
        )
    if not os.path.isdir(iter_dir):
        return _interrupted(
            result,
            _signature("tracker_points_to_missing_iter", "the tracker says %s but %s/ does not exist" % (raw, name)),
        )
    if parsed not in complete:
        return _interrupted(
            result,
            _signature(
                "missing_metadata_json",
                "%s/ (named by the tracker) lacks %s: saving iteration %d was interrupted"
                % (name, ", ".join(checkpoint_dir_missing(iter_dir)), parsed),
            ),
        )
    result["state"] = "complete"
    result["message"] = "%s is a complete training checkpoint at iteration %d (%s/), data state %s." % (
        path,
        parsed,
        name,
        "present" if result["dataset_state"] else "absent",
    )
    return result


def _interrupted(result, signature):
    result["state"] = "interrupted"
    result["signature"] = signature
    fix = SIGNATURES[signature["code"]][1]
    message = "%s is not a usable checkpoint (%s): %s; fix: %s." % (result["path"], signature["code"], signature["detail"], fix)
    if result.get("latest_complete_iteration") is not None and result.get("kind") == "training":
        message = message[:-1] + " (last complete iteration: %d)." % result["latest_complete_iteration"]
    result["message"] = message
    return result


def _clean_reason(reason):
    reason = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(reason or "aside")).strip("-.")
    return reason or "aside"


def aside_name(path, reason, now=None):
    """The name move_aside would use for `path` now (first free one)."""
    path = os.path.abspath(os.path.expanduser(path)).rstrip(os.sep)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.localtime(now if now is not None else time.time()))
    base = "%s.%s-%s" % (path, _clean_reason(reason), stamp)
    candidate = base
    n = 1
    while os.path.lexists(candidate):
        candidate = "%s.%d" % (base, n)
        n += 1
    return candidate


def move_aside(path, reason, now=None):
    """Rename `path` to `<path>.<reason>-<YYYYmmddTHHMMSS>` (suffix `.1`, `.2`…
    when taken) and return the new path. Never deletes anything."""
    path = os.path.abspath(os.path.expanduser(path)).rstrip(os.sep)
    if not os.path.lexists(path):
        raise FileNotFoundError("cannot move aside %s: it does not exist" % path)
    for _attempt in range(100):
        target = aside_name(path, reason, now=now)
        # os.rename would silently replace an empty directory; re-check right before.
        if os.path.lexists(target):
            continue
        os.rename(path, target)
        return target
    raise FileExistsError("cannot find a free name to move %s aside" % path)


def read_conversion_record(path):
    """The dict stored in <path>/.mtslime_conversion.json, or None (missing or unreadable)."""
    import json

    try:
        with open(os.path.join(path, CONVERSION_RECORD), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
