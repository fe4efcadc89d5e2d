# State of a Megatron-Core torch_dist checkpoint directory: a finished or
# interrupted HF -> torch_dist conversion (tools/convert_hf_to_torch_dist.py)
# or a training save dir (--save). The names and listings of the save dir are
# layout.py's; the resume rule for a training save dir is resume.py's.
#
# Facts relied on (shared/reference real-programs.md, slime.md §1.3-1.4, §4.2-4.3):
# - one save writes, per checkpoint dir (`iter_%07d/` or `release/`): the dir,
#   optionally `common.pt` (recent Megatron keeps common state inside DCP), the
#   shards `__<rank>_<k>.distcp` (two per rank by default), `.metadata` (torch
#   DCP, temp file + rename), `metadata.json` (plain write, no fsync), then on
#   rank 0 after a barrier the tracker `latest_checkpointed_iteration.txt`
#   (plain write): a kill can leave metadata.json or the tracker 0 bytes.
# - a checkpoint dir is complete when `.metadata` and `metadata.json` are
#   non-empty and parse and every shard `.metadata` names is at least as long
#   as the byte ranges it records there (dcp_metadata.py); weights are never read.
# - the converter saves `iter_0000001/`, then rank 0 writes tracker `release`
#   and renames `iter_0000001/` to `release/`; rerunning into a dir that has
#   `release/` moves the new dir *into* it (`release/iter_0000001/`).
# - training keeps slime's data cursor in `rollout/global_dataset_state_dict_<N>.pt`,
#   written after the tracker.
#
# Standard library only; Python 3.8+.
from __future__ import annotations

import json
import os

try:
    from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import dcp_metadata, layout
except ImportError:  # a standalone copy (the run directory's .mtslime/, see job/plan.py)
    from checkpoint import dcp_metadata, layout

METADATA_JSON = "metadata.json"
DCP_METADATA = dcp_metadata.METADATA_FILE
DISTCP_SUFFIX = ".distcp"
# Written by mtslime.posttrain.mcore_checkpoint (record_fingerprint) after a conversion.
CONVERSION_RECORD = ".mtslime_conversion.json"

STATES = ("complete", "absent", "interrupted")
KINDS = ("release", "training")

# code -> (what it means, how to fix it). The message of a result combines them
# with the path; callers may show SIGNATURES[code] on their own. TRAINING_FIXES
# replaces the fix for a training save dir, where the next job resumes by itself.
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
        "latest_checkpointed_iteration.txt is missing or empty: the process died before or while saving",
        "move the directory aside and rerun the conversion",
    ),
    "tracker_unreadable": (
        "latest_checkpointed_iteration.txt cannot be read or holds neither an iteration number nor 'release'",
        "move the directory aside and rerun the conversion",
    ),
    "iter_dir_not_renamed": (
        "the converter saved iter_0000001/ but died before renaming it to release/",
        "move the directory aside and rerun the conversion into an empty --save directory",
    ),
    "release_dir_missing": (
        "the tracker says 'release' but there is no release/ directory: the converter died between writing the "
        "tracker and renaming iter_0000001/",
        "move the directory aside and rerun the conversion into an empty --save directory",
    ),
    "missing_metadata_json": (
        "the checkpoint directory the tracker names lacks a readable metadata.json or .metadata: saving was cut",
        "move the directory aside and rerun the conversion",
    ),
    "torn_shards": (
        "a shard that .metadata names is missing or shorter than the byte ranges .metadata records for it",
        "move the directory aside and rerun the conversion",
    ),
    "nested_release": (
        "release/ contains iter_0000001/: the converter was rerun into a --save directory that already had release/",
        "move the directory aside and rerun the conversion into an empty --save directory",
    ),
    "tracker_points_to_missing_iter": (
        "the tracker names an iteration whose iter_XXXXXXX/ directory does not exist",
        "move the directory aside and rerun the conversion",
    ),
}
_RESUME_FIX = (
    "nothing to do by hand: the next job (site.yml) resumes by the resume rule (checkpoint/resume.py: the newest "
    "complete iteration with its data cursor), moving the newer ones aside, or starts from the converted checkpoint "
    "when none is complete"
)
TRAINING_FIXES = {
    code: _RESUME_FIX
    for code in ("no_tracker", "tracker_unreadable", "missing_metadata_json", "torn_shards",
                 "tracker_points_to_missing_iter")
}


def check_checkpoint_dir(path):
    """Whether a Megatron checkpoint dir (iter_XXXXXXX/ or release/) is complete, by its metadata.

    Returns {complete, problems: [str], stage, shards, shard_bytes, metadata_tmp}. `stage` says where in
    Megatron's write order the files stop (keys of _STAGES, or 'complete')."""
    result = {"complete": False, "problems": [], "stage": "no_directory", "shards": 0, "shard_bytes": 0,
              "metadata_tmp": False}
    if not os.path.isdir(path):
        result["problems"].append("the directory does not exist")
        return result
    names = set(layout.listdir(path))
    problems = result["problems"]
    extents = None
    metadata_size = layout.file_size(os.path.join(path, DCP_METADATA))
    if metadata_size is None:
        problems.append("%s is missing" % DCP_METADATA)
    else:
        try:
            extents = dcp_metadata.read_extents(os.path.join(path, DCP_METADATA))["extents"]
        except dcp_metadata.MetadataError as exc:
            problems.append(str(exc))
        else:
            if not extents:
                problems.append("%s names no shard file" % DCP_METADATA)
                extents = None
    json_size = layout.file_size(os.path.join(path, METADATA_JSON))
    if json_size is None:
        problems.append("%s is missing" % METADATA_JSON)
    elif json_size == 0:
        problems.append("%s is empty (0 bytes)" % METADATA_JSON)
    else:
        try:
            with open(os.path.join(path, METADATA_JSON), encoding="utf-8") as handle:
                parsed = json.load(handle)
            if not isinstance(parsed, dict):
                problems.append("%s is not a JSON object" % METADATA_JSON)
        except (OSError, ValueError) as exc:
            problems.append("%s is not valid JSON (%s)" % (METADATA_JSON, getattr(exc, "msg", exc)))
    torn = []
    for name in sorted(extents or {}):
        size = layout.file_size(os.path.join(path, name))
        if size is None:
            torn.append("%s is missing" % name)
        elif size < extents[name]:
            torn.append("%s is %d bytes, %s records %d bytes in it" % (name, size, DCP_METADATA, extents[name]))
    problems.extend(torn)
    shards = [name for name in names if name.endswith(DISTCP_SUFFIX)]
    result["shards"] = len(extents) if extents else len(shards)
    result["shard_bytes"] = sum((extents or {}).values())
    if not problems:
        stage = "complete"
    elif metadata_size is None:
        stage = "shards" if shards else "no_shards"
    elif extents is None:
        stage = "damaged_metadata"
    elif torn:
        stage = "torn"
    else:
        stage = "no_metadata_json"
    result.update(complete=stage == "complete", stage=stage, metadata_tmp=DCP_METADATA + ".tmp" in names)
    return result


_STAGES = {
    "no_directory": "the directory does not exist",
    "no_shards": "the save stopped before any shard was written",
    "shards": "the save stopped while writing the shards, before .metadata",
    "damaged_metadata": ".metadata is damaged (it is written through a temp file and a rename, so a kill does "
                        "not leave it like this: the disk or a copy did)",
    "no_metadata_json": "the save stopped between .metadata and metadata.json",
    "torn": "shards are torn: cut after they were written, e.g. by a full disk, a killed copy or a truncation",
}


def describe_stage(check):
    """One phrase: where in Megatron's write order the files stop, or what is damaged."""
    return _STAGES.get(check["stage"], "complete")


def checkpoint_dir_missing(path):
    """What keeps a checkpoint dir from being complete: check_checkpoint_dir's problems ([] if complete)."""
    return check_checkpoint_dir(path)["problems"]


def is_complete_checkpoint_dir(path):
    return check_checkpoint_dir(path)["complete"]


def _nested_iters(release_dir):
    return [name for name in layout.listdir(release_dir)
            if layout.ITER_RE.match(name) and os.path.isdir(os.path.join(release_dir, name))]


def _infer_kind(path, parsed, iterations, names):
    """'training' when the dir looks like a training --save dir, else 'release'."""
    if layout.ROLLOUT_DIR in names and os.path.isdir(os.path.join(path, layout.ROLLOUT_DIR)):
        return "training"
    if isinstance(parsed, int) and parsed != 1:
        return "training"
    if any(it != 1 for it in iterations):
        return "training"
    return "release"


def _signature(code, detail=None):
    return {"code": code, "detail": detail or SIGNATURES[code][0]}


def _incomplete_signature(label, check, why):
    """missing_metadata_json or torn_shards for an incomplete checkpoint dir, in the words of the write order."""
    code = "torn_shards" if check["stage"] == "torn" else "missing_metadata_json"
    return _signature(code, "%s %s: %s (%s)" % (label, why, "; ".join(check["problems"]), describe_stage(check)))


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
        "tracker_empty": False,
        "iterations": [],
        "complete_iterations": [],
        "incomplete_iterations": [],
        "iteration_problems": {},
        "latest_iteration": None,
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

    names = [name for name in layout.listdir(path) if name != CONVERSION_RECORD]
    iterations = layout.iterations_of(path)
    checks = {it: check_checkpoint_dir(os.path.join(path, layout.iter_dirname(it))) for it in iterations}
    complete = [it for it in iterations if checks[it]["complete"]]
    release_dir = os.path.join(path, layout.RELEASE)
    release_check = check_checkpoint_dir(release_dir)
    raw, parsed = layout.read_tracker(path)
    late = os.path.join(path, layout.iter_dirname(parsed)) if isinstance(parsed, int) and parsed not in checks else None
    if late and os.path.isdir(late):  # saved, and named by the tracker, by a live run after the listing above
        iterations.append(parsed)
        checks[parsed] = check_checkpoint_dir(late)
        if checks[parsed]["complete"]:
            complete.append(parsed)
    kind = expect or _infer_kind(path, parsed, iterations, names)

    result.update(
        kind=kind,
        tracker=raw,
        tracker_empty=layout.tracker_is_empty(path),
        iterations=iterations,
        complete_iterations=complete,
        incomplete_iterations=[it for it in iterations if it not in complete],
        iteration_problems={str(it): checks[it]["problems"] for it in iterations if not checks[it]["complete"]},
        release=release_check["complete"],
        dataset_state_iterations=layout.dataset_states(path),
    )
    if parsed == layout.RELEASE:
        result["latest_iteration"] = 0
    elif isinstance(parsed, int):
        result["latest_iteration"] = parsed
        result["dataset_state_file"] = layout.dataset_state_file(path, parsed)
        result["dataset_state"] = layout.dataset_state_ok(path, parsed)

    if not names:
        return _interrupted(result, _signature("empty_dir"))

    nested = _nested_iters(release_dir) if os.path.isdir(release_dir) else []
    if raw is None:
        return _interrupted(result, _no_tracker_signature(result, kind, checks))
    if parsed is None:
        return _interrupted(
            result,
            _signature(
                "tracker_unreadable",
                "latest_checkpointed_iteration.txt holds %r, which is neither an iteration number nor 'release'"
                % raw[:80],
            ),
        )

    if parsed == layout.RELEASE:
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
        if not release_check["complete"]:
            return _interrupted(result, _incomplete_signature("release/", release_check, "is incomplete"))
        if kind == "release" and 1 in iterations:
            return _interrupted(
                result,
                _signature(
                    "iter_dir_not_renamed",
                    "the tracker says 'release' but iter_0000001/ is still there next to release/: "
                    "a second conversion into this directory died before moving its iter_0000001/",
                ),
            )
        result["state"] = "complete"
        result["message"] = (
            "%s is a complete %s checkpoint (tracker 'release'; release/ has .metadata, metadata.json and the %d "
            "shards .metadata names, none short)." % (path, "converted" if kind == "release" else "release",
                                                      release_check["shards"])
        )
        return result

    # numeric tracker
    name = layout.iter_dirname(parsed)
    iter_dir = os.path.join(path, name)
    if kind == "release":
        if os.path.isdir(iter_dir):
            if not checks[parsed]["complete"]:
                return _interrupted(
                    result, _incomplete_signature(name + "/", checks[parsed], "(named by the tracker) is incomplete"))
            detail = (
                "the tracker says %s and the complete %s/ was not renamed to release/: the converter died after "
                "saving, before its final rename" % (raw, name)
            )
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
            result, _incomplete_signature(name + "/", checks[parsed], "(named by the tracker) is incomplete")
        )
    result["state"] = "complete"
    result["message"] = "%s is a complete training checkpoint at iteration %d (%s/), data state %s." % (
        path,
        parsed,
        name,
        "present" if result["dataset_state"] else "absent",
    )
    return result


def _no_tracker_signature(result, kind, checks):
    what = "latest_checkpointed_iteration.txt is %s" % ("empty (0 bytes)" if result["tracker_empty"] else "missing")
    if kind == "release":
        if 1 in checks:
            return _signature("no_tracker", "%s and iter_0000001/ is incomplete: %s (%s)" % (
                what, "; ".join(checks[1]["problems"]) or "no problem found", describe_stage(checks[1]))
                if not checks[1]["complete"] else
                "%s but iter_0000001/ is complete: the converter died between metadata.json and the tracker" % what)
        return _signature("no_tracker", "%s: the converter died before or while saving" % what)
    if result["complete_iterations"]:
        return _signature("no_tracker", "%s: a kill came while Megatron wrote it (newest complete iteration: %d)"
                          % (what, result["complete_iterations"][-1]))
    return _signature("no_tracker", "%s and no iteration is complete: no save finished" % what)


def _interrupted(result, signature):
    result["state"] = "interrupted"
    result["signature"] = signature
    fix = SIGNATURES[signature["code"]][1]
    if result.get("kind") == "training":
        fix = TRAINING_FIXES.get(signature["code"], fix)
    message = "%s is not a usable checkpoint (%s): %s; fix: %s." % (
        result["path"], signature["code"], signature["detail"], fix)
    result["message"] = message
    return result


def read_conversion_record(path):
    """The dict stored in <path>/.mtslime_conversion.json, or None (missing or unreadable)."""
    try:
        with open(os.path.join(path, CONVERSION_RECORD), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
