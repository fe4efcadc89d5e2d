# The one resume rule for a training save dir (--save D, later --load D), called as
# resume_plan(D) / apply_resume_plan(plan) by whoever submits the next attempt (job/plan.py).
#
# Rule (docs/architecture.md "Resuming from a damaged save"):
# - resume from the newest COMPLETE iteration (mcore.check_checkpoint_dir) that also has slime's data
#   cursor rollout/global_dataset_state_dict_<N>.pt; when none has one, from the newest complete one,
#   with a warning that the prompt order starts over; when none is complete, from the converted
#   checkpoint (resume_iteration None), saying so.
# - everything newer than that iteration (incomplete or torn iter dirs, complete ones without a data
#   cursor, their data cursors, a tracker naming them) is moved aside with aside.py, never deleted;
# - the tracker is rewritten (temp file + rename) to name the chosen iteration, so Megatron's
#   load_checkpoint (which reads it) and slime (start_rollout_id = loaded iteration + 1, data cursor of
#   start - 1) agree, also for a later plain --load. No --ckpt-step: see docs/architecture.md.
#
# Standard library only; Python 3.8+ (TypedDict from typing, no typing_extensions on the nodes).
from __future__ import annotations

import os
from typing import Dict, List, Optional, TypedDict

try:
    from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts import aside
    from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import layout, mcore
    from ansible_collections.mtslime.posttrain.plugins.module_utils.common import atomic_write
except ImportError:  # a standalone copy (the run directory's .mtslime/, see job/plan.py)
    from artifacts import aside
    from checkpoint import layout, mcore
    from common import atomic_write


class IterationReport(TypedDict):
    """One iter_XXXXXXX/ of the save dir as the rule sees it."""
    iteration: int
    complete: bool
    stage: str
    problems: List[str]
    data_state: bool


class Move(TypedDict):
    """A path the plan moves aside; `to` is the name aside.py would give now."""
    path: str
    reason: str
    to: str
    why: str


class TrackerChange(TypedDict):
    """The tracker's text before, and what it is rewritten to (None: moved aside, not rewritten)."""
    before: Optional[str]
    after: Optional[str]


class ResumePlan(TypedDict):
    """What resume_plan decided: resume_iteration None means the converted checkpoint."""
    save_dir: str
    resume_iteration: Optional[int]
    data_state: bool
    dataset_state_file: Optional[str]
    moves: List[Move]
    tracker: Optional[TrackerChange]
    warnings: List[str]
    message: str
    iterations: List[IterationReport]


class Applied(TypedDict):
    actions: List[str]
    moved: List[dict]


class ResumeError(RuntimeError):
    """apply_resume_plan could not finish; .actions and .moved say what it did before."""

    def __init__(self, message, actions=None, moved=None):
        super().__init__(message)
        self.actions = actions or []
        self.moved = moved or []


def _iteration_report(save_dir: str, iteration: int) -> IterationReport:
    check = mcore.check_checkpoint_dir(os.path.join(save_dir, layout.iter_dirname(iteration)))
    return IterationReport(iteration=iteration, complete=check["complete"], stage=check["stage"],
                           problems=check["problems"], data_state=layout.dataset_state_ok(save_dir, iteration))


def _plan(save_dir: str) -> ResumePlan:
    return ResumePlan(save_dir=save_dir, resume_iteration=None, data_state=False, dataset_state_file=None, moves=[],
                      tracker=None, warnings=[], message="", iterations=[])


def resume_point(save_dir: str) -> Optional[int]:
    """The one answer to "which iteration does a resume of `save_dir` load": resume_plan's resume_iteration
    (an int, or None: the job starts from the converted checkpoint its --load names). Reads, changes nothing.
    The checkpoint inspection (mcore_checkpoint expect=training), retention, status and the job plan ask this."""
    return resume_plan(save_dir)["resume_iteration"]


def _why(report):
    if not report["complete"]:
        return "incomplete: %s (%s)" % ("; ".join(report["problems"]), mcore.describe_stage(report))
    return "complete, but slime's data cursor %s/%s is missing or empty" % (
        layout.ROLLOUT_DIR, layout.DATASET_STATE % report["iteration"])


def resume_plan(save_dir: str, now=None) -> ResumePlan:
    """What the next attempt resumes from, and what has to move for it. Reads metadata only, changes nothing.
    `to` of each move is the name aside.py would give now; apply_resume_plan reports the names it used."""
    save_dir = os.path.abspath(os.path.expanduser(str(save_dir))).rstrip(os.sep) or os.sep
    plan = _plan(save_dir)
    if not os.path.lexists(save_dir):
        plan["message"] = ("%s does not exist yet: nothing to resume, the job starts from the checkpoint its --load "
                           "names." % save_dir)
        return plan
    if not os.path.isdir(save_dir):
        plan["warnings"].append("%s is not a directory: Megatron cannot save there; move it aside or change the save "
                                "directory." % save_dir)
        plan["message"] = plan["warnings"][0]
        return plan

    raw, parsed = layout.read_tracker(save_dir)
    tracker_present = os.path.lexists(os.path.join(save_dir, layout.TRACKER))
    reports = [_iteration_report(save_dir, it) for it in layout.iterations_of(save_dir)]
    plan["iterations"] = reports
    if parsed == layout.RELEASE:
        plan["message"] = ("%s has the tracker 'release' (a converted checkpoint, not a training save): nothing is "
                           "moved, the job starts from the checkpoint its --load names." % save_dir)
        if reports:
            plan["warnings"].append("%s has the tracker 'release' and iteration directories besides: it is used as "
                                    "both a conversion output and a training --save; nothing was moved." % save_dir)
        return plan

    complete = [r for r in reports if r["complete"]]
    with_data = [r for r in complete if r["data_state"]]
    candidates = with_data or complete
    chosen = candidates[-1] if candidates else None
    chosen_it = chosen["iteration"] if chosen else None

    for report in reversed(reports):
        if chosen_it is not None and report["iteration"] <= chosen_it:
            continue
        path = os.path.join(save_dir, layout.iter_dirname(report["iteration"]))
        reason = "incomplete" if not report["complete"] else "no-data-state"
        plan["moves"].append(Move(path=path, reason=reason, to=aside.aside_name(path, reason, now),
                                  why="%s/ is %s" % (layout.iter_dirname(report["iteration"]), _why(report))))
    moved_reason = {m["path"]: m["reason"] for m in plan["moves"]}
    for it in layout.cursor_iterations(save_dir):
        if chosen_it is not None and it <= chosen_it:
            continue
        path = layout.dataset_state_file(save_dir, it)
        reason = moved_reason.get(os.path.join(save_dir, layout.iter_dirname(it)), "incomplete")
        plan["moves"].append(Move(path=path, reason=reason, to=aside.aside_name(path, reason, now),
                                  why="the data cursor of iteration %d, newer than the resume point" % it))

    tracker_path = os.path.join(save_dir, layout.TRACKER)
    wanted = None if chosen_it is None else str(chosen_it)
    if tracker_present and (wanted is None or raw != wanted):
        named = parsed if isinstance(parsed, int) else None
        reason = "incomplete"
        if named is not None:
            reason = moved_reason.get(os.path.join(save_dir, layout.iter_dirname(named)), "incomplete")
            what = "names iteration %s" % raw
        else:
            what = "is empty" if raw is None else "holds %r" % raw[:80]
        plan["moves"].append(Move(path=tracker_path, reason=reason, to=aside.aside_name(tracker_path, reason, now),
                                  why="the tracker %s%s" % (what, "" if wanted is None else ", not %s" % wanted)))
    if wanted is not None and raw != wanted:
        plan["tracker"] = TrackerChange(before=raw, after=wanted)
    elif wanted is None and tracker_present:
        plan["tracker"] = TrackerChange(before=raw, after=None)

    plan["resume_iteration"] = chosen_it
    if chosen is not None:
        plan["data_state"] = chosen["data_state"]
        plan["dataset_state_file"] = layout.dataset_state_file(save_dir, chosen_it)
    _explain(plan, reports, chosen)
    return plan


def _explain(plan: ResumePlan, reports: List[IterationReport], chosen: Optional[IterationReport]) -> None:
    save_dir = plan["save_dir"]
    if chosen is None and not reports and plan["tracker"] is None:
        plan["message"] = "%s holds no checkpoint yet: the job starts from the checkpoint its --load names." % save_dir
        return
    if chosen is None:
        plan["message"] = ("%s holds no complete iteration: the job starts from the converted checkpoint (the --load "
                           "of its arguments), not from %s." % (save_dir, save_dir))
        plan["warnings"].append(plan["message"])
    elif chosen["data_state"]:
        plan["message"] = ("resuming from iteration %d of %s: the newest complete iteration with slime's data cursor."
                           % (chosen["iteration"], save_dir))
    else:
        plan["message"] = ("resuming from iteration %d of %s: the newest complete iteration; it has no data cursor."
                           % (chosen["iteration"], save_dir))
        plan["warnings"].append(
            "no complete iteration of %s has slime's data cursor (%s/%s): the job resumes the model and optimizer from "
            "iteration %d, and the prompt order starts over from the beginning of the dataset."
            % (save_dir, layout.ROLLOUT_DIR, layout.DATASET_STATE % chosen["iteration"], chosen["iteration"]))
    if plan["moves"]:
        plan["message"] += " Moving aside: %s." % "; ".join(
            "%s -> %s (%s)" % (m["path"], m["to"], m["why"]) for m in plan["moves"])
    tracker = plan["tracker"]
    if tracker and tracker["after"] is not None:
        plan["message"] += " The tracker is rewritten from %s to %s." % (
            "nothing" if tracker["before"] is None else repr(tracker["before"]), tracker["after"])


def describe_actions(plan: ResumePlan, check_mode: bool = False) -> List[str]:
    """The actions apply_resume_plan would take, in its words (for check mode)."""
    actions = ["%s %s aside to %s (%s)" % ("would move" if check_mode else "move", m["path"], m["to"], m["why"])
               for m in plan["moves"]]
    if plan["tracker"] and plan["tracker"]["after"] is not None:
        actions.append("%s %s/%s: %s" % ("would write" if check_mode else "write", plan["save_dir"], layout.TRACKER,
                                         plan["tracker"]["after"]))
    return actions


def apply_resume_plan(plan: ResumePlan) -> Applied:
    """Move aside what resume_plan listed (aside.py: renamed, never deleted) and write the tracker it wants
    (temp file + rename). Returns the actions and the moves made ({path, to}). Raises ResumeError, naming the path
    and the fix, when the save dir changed since the plan (a job saved meanwhile) or a move fails."""
    actions: List[str] = []
    moved: List[Dict[str, str]] = []
    save_dir = plan["save_dir"]
    tracker = plan.get("tracker")
    if tracker is not None:
        now_raw = layout.read_tracker(save_dir)[0]
        if now_raw != tracker["before"]:
            raise ResumeError(
                "%s/%s changed since the resume plan (it was %r, it is %r): a job is saving into %s; stop it "
                "(playbooks/stop.yml) or rerun" % (save_dir, layout.TRACKER, tracker["before"], now_raw, save_dir))
    for move in plan["moves"]:
        if not os.path.lexists(move["path"]):
            actions.append("%s is already gone, nothing to move" % move["path"])
            continue
        try:
            target = aside.move_aside(move["path"], move["reason"])
        except OSError as exc:
            raise ResumeError(
                "cannot move %s aside: %s; check the permissions of %s" % (
                    move["path"], exc.strerror or exc, os.path.dirname(move["path"])), actions, moved) from None
        moved.append({"path": move["path"], "to": target})
        actions.append("moved %s aside to %s (%s)" % (move["path"], target, move["why"]))
    if tracker is not None and tracker["after"] is not None:
        path = os.path.join(save_dir, layout.TRACKER)
        try:
            atomic_write(path, tracker["after"])
            _fsync_dir(save_dir)
        except OSError as exc:
            raise ResumeError("cannot write %s: %s; check the permissions of %s" % (
                path, exc.strerror or exc, save_dir), actions, moved) from None
        actions.append("wrote %s: %s (was %s)" % (
            path, tracker["after"], "missing or empty" if tracker["before"] is None else repr(tracker["before"])))
    return Applied(actions=actions, moved=moved)


def _fsync_dir(path):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
