# Checkpoint retention for a training save directory (--save): which iterations may go,
# decided by one pure rule (plan), and how they go (apply).
#
# The rule (train_job_keep_checkpoints = N > 0; 0 keeps everything, as the guide does):
# - only complete iterations are candidates (mcore.inspect_checkpoint's
#   complete_iterations); incomplete ones are the resume rule's to move aside;
# - kept: the newest N complete iterations, the one the tracker names, the newest complete
#   one, the one a resume would load now (resume.resume_point, the resume rule's own
#   answer, whose data cursor stays with it), and every iteration the running job loaded
#   from (`protect`);
# - nothing at all while a save may be in progress: an iteration directory numbered above
#   the tracker, an incomplete iteration directory newer than the tracker, or a tracker
#   older than the newest iteration directory.
# Pruned iterations go to <save>.trash/<name>.pruned-<UTC> (aside.py naming, the same
# filesystem, so it is a rename), with their data cursor
# rollout/global_dataset_state_dict_<N>.pt beside them; deleted only with prune=delete.
#
# Standard library only; Python 3.8+.
from __future__ import annotations

import os
import shutil

from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts import aside
from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import layout, mcore, resume
from ansible_collections.mtslime.posttrain.plugins.module_utils.common import tree_bytes

TRASH_SUFFIX = ".trash"
REASON = "pruned"


def default_trash_dir(save_dir):
    return os.path.abspath(save_dir).rstrip(os.sep) + TRASH_SUFFIX


def _mtime(path):
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def scan(save_dir):
    """What the rule needs to know about `save_dir`, read without changing anything."""
    inspection = mcore.inspect_checkpoint(save_dir, expect="training")
    path = inspection["path"]
    _raw, parsed = layout.read_tracker(path) if os.path.isdir(path) else (None, None)
    iterations = []
    for number in inspection["iterations"]:
        directory = os.path.join(path, layout.iter_dirname(number))
        iterations.append({"iteration": number, "complete": number in inspection["complete_iterations"],
                           "mtime": _mtime(directory), "path": directory})
    return {
        "save_dir": path,
        "exists": os.path.isdir(path),
        "tracker_iteration": parsed if isinstance(parsed, int) else None,
        "tracker_mtime": _mtime(os.path.join(path, layout.TRACKER)),
        "resume_iteration": resume.resume_point(path),
        "iterations": iterations,
    }


def save_in_progress(facts):
    """Why a save may be running now (a sentence), or None."""
    tracker, tracker_mtime = facts["tracker_iteration"], facts["tracker_mtime"]
    for item in facts["iterations"]:
        name = layout.iter_dirname(item["iteration"])
        if tracker is None:
            if not item["complete"]:
                return "%s/ lacks metadata.json or .metadata and there is no numeric tracker yet: the first save may " \
                       "be running" % name
            continue
        if item["iteration"] > tracker:
            return "%s/ is newer than the tracker (%d): a save may be running" % (name, tracker)
        if not item["complete"] and tracker_mtime is not None and (item["mtime"] or 0) > tracker_mtime:
            return "%s/ lacks metadata.json or .metadata and is newer than the tracker: a save may be running" % name
    newest = max((i["mtime"] or 0 for i in facts["iterations"]), default=None)
    if tracker is not None and newest is not None and tracker_mtime is not None and tracker_mtime < newest:
        return "the tracker (%d) is older than the newest iteration directory: a save may be running" % tracker
    return None


def plan(facts, keep, protect=()):
    """The pure rule: {keep: [...], prune: [...], protected: {iteration: [reasons]}, blocked, message}."""
    complete = sorted(i["iteration"] for i in facts["iterations"] if i["complete"])
    result = {"keep": complete, "prune": [], "protected": {}, "blocked": None, "message": ""}
    if keep <= 0:
        result["message"] = "keeping every checkpoint (train_job_keep_checkpoints is 0)"
        return result
    if not complete:
        result["message"] = "no complete iteration in %s yet" % facts["save_dir"]
        return result
    blocked = save_in_progress(facts)
    if blocked:
        result.update(blocked=blocked, message="nothing pruned: %s" % blocked)
        return result
    reasons = {}

    def hold(iteration, why):
        if iteration is not None:
            reasons.setdefault(iteration, []).append(why)

    for iteration in complete[-keep:]:
        hold(iteration, "one of the newest %d" % keep)
    hold(complete[-1], "the newest complete one")
    hold(facts["tracker_iteration"], "the tracker names it")
    hold(facts["resume_iteration"], "a resume would load it")
    for iteration in protect or ():
        hold(int(iteration), "the running job loaded it")
    result["protected"] = {it: reasons[it] for it in sorted(reasons)}
    result["keep"] = [it for it in complete if it in reasons]
    result["prune"] = [it for it in complete if it not in reasons]
    result["message"] = "keeping %d of %d complete iterations (%s)%s" % (
        len(result["keep"]), len(complete), ", ".join(str(i) for i in result["keep"]),
        "; pruning %s" % ", ".join(str(i) for i in result["prune"]) if result["prune"] else "; nothing to prune",
    )
    return result


def _data_state(save_dir, iteration):
    path = os.path.join(save_dir, layout.ROLLOUT_DIR, layout.DATASET_STATE % iteration)
    return path if os.path.isfile(path) else None


def trash_problem(save_dir, trash_dir):
    """Why `trash_dir` cannot take pruned iterations by a rename, or None."""
    save_dir, trash_dir = os.path.abspath(save_dir), os.path.abspath(trash_dir)
    if trash_dir == save_dir or trash_dir.startswith(save_dir.rstrip(os.sep) + os.sep):
        return "the trash dir %s is inside the save dir %s" % (trash_dir, save_dir)
    probe = trash_dir
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    try:
        same = os.stat(probe).st_dev == os.stat(save_dir).st_dev
    except OSError as exc:
        return "cannot look at %s: %s" % (probe, exc.strerror or exc)
    if not same:
        return "the trash dir %s is on another filesystem than the save dir %s (moving would copy)" % (
            trash_dir, save_dir)
    return None


def targets(facts, prune, trash_dir, now=None):
    """[(source, target)] for the pruned iterations and their data states (trash names)."""
    pairs = []
    for iteration in prune:
        source = os.path.join(facts["save_dir"], layout.iter_dirname(iteration))
        pairs.append((source, aside.aside_name(os.path.join(trash_dir, os.path.basename(source)), REASON, now)))
        state = _data_state(facts["save_dir"], iteration)
        if state:
            pairs.append((state, aside.aside_name(os.path.join(trash_dir, os.path.basename(state)), REASON, now)))
    return pairs


def apply(facts, prune, mode, trash_dir, check_mode=False, now=None):
    """Move (mode 'trash') or delete (mode 'delete') the pruned iterations.
    Returns {actions, moved: [{path, to}], deleted: [path], bytes}."""
    done = {"actions": [], "moved": [], "deleted": [], "bytes": 0}
    would = "would " if check_mode else ""
    for iteration in prune:
        done["bytes"] += tree_bytes(os.path.join(facts["save_dir"], layout.iter_dirname(iteration)))
    if mode == "delete":
        for iteration in prune:
            paths = [os.path.join(facts["save_dir"], layout.iter_dirname(iteration)), _data_state(facts["save_dir"],
                                                                                                  iteration)]
            for path in filter(None, paths):
                done["actions"].append("%sdelete %s (train_job_prune: delete)" % (would, path))
                done["deleted"].append(path)
                if not check_mode:
                    if os.path.isdir(path) and not os.path.islink(path):
                        shutil.rmtree(path)
                    else:
                        os.remove(path)
        return done
    if not check_mode and prune:
        os.makedirs(trash_dir, mode=0o750, exist_ok=True)
    for source, target in targets(facts, prune, trash_dir, now):
        if not check_mode:
            # aside_name gave a free name; look again right before (rename replaces an empty dir)
            if os.path.lexists(target):
                target = aside.aside_name(os.path.join(trash_dir, os.path.basename(source)), REASON, now)
            os.rename(source, target)
        done["actions"].append("%smove %s to %s" % (would, source, target))
        done["moved"].append({"path": source, "to": target})
    return done
