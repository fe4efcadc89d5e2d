# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""The job's plan, decided in one place: from Ray's job list, the node's own records and the save
directory, which attempt comes next (or none: one is active, or the experiment finished, or a
foreign training job holds the cluster), whether it resumes and from where (the resume rule of
checkpoint/resume.py), and the argv to submit, as a list, with --load set in the list.

Used by the ray_job module and, as a program, by the rendered run script (a copy of this file and
the files it imports sits in the run directory's .mtslime/, laid out as under module_utils/), so a job
started by hand is planned by the same rule:

    python3 .mtslime/job/plan.py next --dashboard URL --experiment NAME [--save-dir DIR] \\
        [--load-flag --load] [--record-dir DIR]... [--check] -- python3 train.py ARG...

prints the submission id and then the argv to submit, each followed by a NUL byte (read them with
`mapfile -d ''`), and what it decided on stderr. Exit 0: submit it; 3: nothing to submit (a job of
the experiment is active, or it finished), 4: refused (another training job holds the cluster),
1: the dashboard did not answer or the save directory could not be put right, 64: bad usage.

Standard library only, Python 3.8+ (TypedDict from typing, no typing_extensions on the nodes).
"""
from __future__ import annotations
# pylint: disable=bad-string-format-type  # pylint infers None where each %d follows a test that it is a number
# pylint: disable=ansible-bad-function  # also a program (python3 FILE, outside any module): prints, exits

import os
import re
import shlex
import sys
from typing import List, Optional, TypedDict

try:
    from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import mcore
    from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint.resume import (
        ResumeError, ResumePlan, apply_resume_plan, describe_actions, resume_plan)
    from ansible_collections.mtslime.posttrain.plugins.module_utils.job import rules as job_rules
except ImportError:  # the standalone copy, .mtslime/job/plan.py: the other copies are imported from .mtslime/
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from checkpoint import mcore
    from checkpoint.resume import ResumeError, ResumePlan, apply_resume_plan, describe_actions, resume_plan
    from job import rules as job_rules

KEEP, FINISHED, REFUSE, SUBMIT = "keep", "finished", "refuse", "submit"
EXIT_NOTHING, EXIT_REFUSED, EXIT_USAGE = 3, 4, 64


class PlanError(Exception):
    pass


class Decision(TypedDict):
    """decide's answer: the action (KEEP, FINISHED, REFUSE, SUBMIT), the jobs it saw, the next attempt."""
    action: str
    ours: List[dict]
    active: List[dict]
    foreign_active: List[dict]
    latest: Optional[dict]
    attempt: int
    submission_id: str


class ResumeInfo(TypedDict):
    """What the save dir held before any move and what the resume rule decided (ray_job's RV resume)."""
    save_dir: str
    state: Optional[str]
    latest_iteration: Optional[int]
    iterations: List[int]
    dataset_state: bool
    dataset_state_file: Optional[str]
    message: str
    warnings: List[str]
    moved_to: List[dict]
    plan: ResumePlan
    load_flag: str
    resumed_from_iteration: Optional[int]


class Resumed(TypedDict):
    """resume's answer: the argv to submit (load_flag set when it resumes), the info, what to say and what it did."""
    argv: List[str]
    info: ResumeInfo
    warnings: List[str]
    actions: List[str]


def local_max_attempt(experiment, directories):
    """Highest attempt number recorded on this node (manifests, per-attempt logs): Ray forgets its
    jobs when the head restarts, and a reused id would overwrite an attempt's files."""
    pattern = re.compile(r"(?:^|\.)%s-attempt-(\d+)\.(?:json|log)$" % re.escape(experiment))
    highest = 0
    for directory in directories or ():
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            match = pattern.search(name)
            if match:
                highest = max(highest, int(match.group(1)))
    return highest


def decide(jobs, experiment: str, record_dirs=()) -> Decision:
    """What to do about the experiment's job; attempt and submission_id are the next attempt's."""
    found = job_rules.classify(jobs, experiment)
    latest = found["ours"][-1] if found["ours"] else None
    if found["active"]:
        action = KEEP
    elif latest is not None and latest.get("status") == job_rules.SUCCEEDED:
        action = FINISHED
    elif found["foreign_active"]:
        action = REFUSE
    else:
        action = SUBMIT
    attempt = max(found["max_attempt"], local_max_attempt(experiment, record_dirs)) + 1
    return Decision(action=action, ours=found["ours"], active=found["active"],
                    foreign_active=found["foreign_active"], latest=latest, attempt=attempt,
                    submission_id=job_rules.submission_id(experiment, attempt))


def set_flag(argv, flag, value):
    """A copy of the argv list with every value of `flag` (`flag X` or `flag=X`) replaced by
    `value`, or `flag value` appended when the flag is absent. Tokens, not text: nothing is parsed."""
    out = []
    found = False
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == flag:
            out.extend([flag, value])
            found = True
            has_value = index + 1 < len(argv) and not argv[index + 1].startswith("--")
            index += 2 if has_value else 1
            continue
        if token.startswith(flag + "="):
            out.append("%s=%s" % (flag, value))
            found = True
        else:
            out.append(token)
        index += 1
    if not found:
        out.extend([flag, value])
    return out


def entrypoint(prefix, argv):
    """The one place the argv becomes text: Ray's entrypoint is a shell command line."""
    return shlex.join(list(prefix or []) + list(argv))


def resume(save_dir: str, load_flag: str, argv: List[str], check_mode: bool = False) -> Resumed:
    """Apply the resume rule (checkpoint/resume.py) to the save dir and set `load_flag` in the argv.
    In check mode the moves are only predicted."""
    save_dir = os.path.abspath(os.path.expanduser(save_dir))
    found = mcore.inspect_checkpoint(save_dir, expect="training")
    plan = resume_plan(save_dir)
    if check_mode:
        actions = describe_actions(plan, check_mode=True)
        moved = [{"path": m["path"], "to": m["to"]} for m in plan["moves"]]
    else:
        try:
            done = apply_resume_plan(plan)
        except ResumeError as exc:
            raise PlanError("resume.save_dir: %s" % exc) from None
        actions, moved = done["actions"], done["moved"]
    iteration = plan["resume_iteration"]
    info = ResumeInfo(save_dir=save_dir, state=found.get("state"), latest_iteration=found.get("latest_iteration"),
                      iterations=found.get("iterations") or [], dataset_state=plan["data_state"],
                      dataset_state_file=plan["dataset_state_file"], message=plan["message"],
                      warnings=plan["warnings"], moved_to=moved, plan=plan, load_flag=load_flag,
                      resumed_from_iteration=iteration)
    warnings = list(plan["warnings"])
    if moved:
        # Moving user data is said in the output, not only in the result.
        why = {m["path"]: m["why"] for m in plan["moves"]}
        warnings.append("resume.save_dir %s: %s aside, never deleted: %s; %s" % (
            save_dir, "would move" if check_mode else "moved",
            "; ".join("%s -> %s (%s)" % (m["path"], m["to"], why.get(m["path"], "")) for m in moved),
            "the job resumes from iteration %d" % iteration if iteration is not None
            else "the job starts from the converted checkpoint"))
    new_argv = set_flag(argv, load_flag, save_dir) if iteration is not None else list(argv)
    return Resumed(argv=new_argv, info=info, warnings=warnings, actions=actions)


def how(info):
    """The plan's resume in words, for the diff, the actions and the run script."""
    if info and info["resumed_from_iteration"] is not None:
        return "resuming from iteration %d of %s" % (info["resumed_from_iteration"], info["save_dir"])
    return "from the checkpoint in its entrypoint"


def nothing_to_submit(decision, experiment, url):
    """The message for a decision other than SUBMIT."""
    if decision["action"] == KEEP:
        return "a job of experiment %s is already active: %s" % (
            experiment, ", ".join("%s (%s)" % (j["submission_id"], j.get("status")) for j in decision["active"]))
    if decision["action"] == FINISHED:
        return "experiment %s finished: %s succeeded; choose a new experiment name to train again" % (
            experiment, decision["latest"]["submission_id"])
    return ("refusing to submit a job for experiment %s: another job runs train.py on %s without this experiment's "
            "metadata: %s. Stop it first (RAY_ADDRESS=%s ray job stop <id>) or wait for it to end."
            % (experiment, url, "; ".join(job_description(j) for j in decision["foreign_active"]), url))


def job_description(job):
    who = job.get("submission_id") or "driver job %s" % job.get("job_id")
    metadata = job.get("metadata") or {}
    text = "%s (%s" % (who, job.get("status"))
    if metadata.get(job_rules.EXPERIMENT_KEY):
        text += ", experiment %s" % metadata[job_rules.EXPERIMENT_KEY]
    entry = job.get("entrypoint") or ""
    return text + ", entrypoint: %s)" % (entry if len(entry) <= 120 else entry[:117] + "...")


# -- the program ---------------------------------------------------------------------------
USAGE = ("usage: job/plan.py next --dashboard URL --experiment NAME [--save-dir DIR] [--load-flag FLAG] "
         "[--record-dir DIR]... [--check] -- ARGV...\n")


def parse_args(args):
    if not args or args[0] != "next" or "--" not in args:
        raise PlanError("")
    split = args.index("--")
    options, argv = args[1:split], args[split + 1:]
    found = {"dashboard": None, "experiment": None, "save_dir": None, "load_flag": "--load", "record_dirs": [],
             "check": False}
    index = 0
    while index < len(options):
        name = options[index]
        if name == "--check":
            found["check"] = True
            index += 1
            continue
        key = {"--dashboard": "dashboard", "--experiment": "experiment", "--save-dir": "save_dir",
               "--load-flag": "load_flag", "--record-dir": "record_dirs"}.get(name)
        if key is None or index + 1 >= len(options):
            raise PlanError("unknown option or missing value: %s" % name)
        if key == "record_dirs":
            found[key].append(options[index + 1])
        else:
            found[key] = options[index + 1]
        index += 2
    if not found["dashboard"] or not found["experiment"] or not argv:
        raise PlanError("--dashboard, --experiment and the argv after -- are required")
    found["argv"] = argv
    return found


def main(args, out=None, err=None, fetch=None):
    out = out or sys.stdout.buffer
    err = err or sys.stderr
    fetch = fetch or job_rules.fetch_jobs
    try:
        options = parse_args(args)
    except PlanError as exc:
        err.write("%s%s" % ("%s\n" % exc if str(exc) else "", USAGE))
        return EXIT_USAGE
    url = options["dashboard"]
    try:
        jobs = fetch(url)
    except (OSError, ValueError) as exc:
        err.write("cannot list the jobs at %s: %s\n" % (url, exc))
        return 1
    decision = decide(jobs, options["experiment"], options["record_dirs"])
    if decision["action"] != SUBMIT:
        err.write(nothing_to_submit(decision, options["experiment"], url) + "\n")
        return EXIT_NOTHING if decision["action"] in (KEEP, FINISHED) else EXIT_REFUSED
    argv = options["argv"]
    info = None
    if options["save_dir"]:
        try:
            planned = resume(options["save_dir"], options["load_flag"], argv, options["check"])
        except PlanError as exc:
            err.write("%s\n" % exc)
            return 1
        argv, info = planned["argv"], planned["info"]
        for line in planned["warnings"] + planned["actions"]:
            err.write("%s\n" % line)
    err.write("attempt %d: %s %s\n" % (decision["attempt"], decision["submission_id"], how(info)))
    for token in [decision["submission_id"]] + argv:
        out.write(token.encode("utf-8", "surrogateescape") + b"\0")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
