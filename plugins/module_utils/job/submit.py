# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""state=running when the plan says submit: put the save dir right (the plan's resume), package
a local working_dir, write the manifest, submit the attempt, and handle a submission that raced
with another run."""
from __future__ import annotations

import copy
import os

from ansible_collections.mtslime.posttrain.plugins.module_utils.job import plan as job_plan, manifest
from ansible_collections.mtslime.posttrain.plugins.module_utils.job.result import (
    JobError,
    job_summary,
    now_iso,
    outcome,
    reported,
)
from ansible_collections.mtslime.posttrain.plugins.module_utils.job.rules import ACTIVE, EXPERIMENT_KEY, PENDING
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.api import RayApiError, is_local_working_dir


class Request:
    """What the module was asked to run (the task's options, as data)."""

    def __init__(self, experiment, argv, prefix, resume=None, runtime_env=None, metadata=None, files=None,
                 facts=None, manifest_dir=None, manifest_commands=None):
        self.experiment = experiment
        self.argv = list(argv)
        self.prefix = list(prefix or [])
        self.resume = resume
        self.runtime_env = runtime_env
        self.metadata = metadata
        self.files = files or []
        self.facts = facts
        self.manifest_dir = manifest_dir
        self.manifest_commands = manifest_commands


def local_working_dir(runtime_env, files):
    """The absolute local directory of runtime_env.working_dir (relative to the run files), or None."""
    working_dir = (runtime_env or {}).get("working_dir")
    if not is_local_working_dir(working_dir):
        return None
    base = os.path.dirname(os.path.abspath(os.path.expanduser(files[0]["path"]))) if files else os.getcwd()
    local_dir = os.path.abspath(os.path.join(base, os.path.expanduser(working_dir)))
    if not os.path.isdir(local_dir):
        raise JobError("runtime_env.working_dir %s is not a directory on this node (%s)" % (working_dir, local_dir))
    return local_dir


def job_metadata(request, attempt, manifest_file, resumed):
    metadata = {str(k): str(v) for k, v in (request.metadata or {}).items()}
    metadata.update({EXPERIMENT_KEY: request.experiment, "mtslime_attempt": str(attempt)})
    if manifest_file:
        metadata["mtslime_manifest"] = manifest_file
    if resumed is not None:
        metadata["mtslime_resumed_from"] = str(resumed)
    return metadata


def submit(client, url, request, decision, run_command, check_mode):
    attempt, sid, latest = decision["attempt"], decision["submission_id"], decision["latest"]
    actions, warnings, info = [], [], None
    argv = request.argv
    if request.resume:
        try:
            planned = job_plan.resume(request.resume["save_dir"], request.resume.get("load_flag") or "--load",
                                      argv, check_mode)
        except job_plan.PlanError as exc:
            raise JobError(str(exc)) from None
        argv, info = planned["argv"], planned["info"]
        warnings.extend(planned["warnings"])
        actions.extend(planned["actions"])
    resumed = info["resumed_from_iteration"] if info else None
    entrypoint = job_plan.entrypoint(request.prefix, argv)
    how = job_plan.how(info)
    after = "experiment %s: %s submitted, %s\n" % (request.experiment, sid, how)
    for move in (info or {}).get("moved_to") or []:
        after += "moved aside: %s -> %s\n" % (move["path"], move["to"])
    diff = {
        "before": "experiment %s: %s\n" % (
            request.experiment, "latest job %s %s" % (latest["submission_id"], latest.get("status")) if latest
            else "no job"),
        "after": after,
        "before_header": "ray job",
        "after_header": "ray job",
    }
    fields = dict.fromkeys(("start_time", "start_time_ms", "end_time", "end_time_ms", "driver_exit_code"))
    fields.update(submission_id=sid, attempt=attempt, entrypoint=entrypoint, argv=argv, resumed_from_iteration=resumed)
    if info is not None:
        fields["resume"] = info
    runtime_env = copy.deepcopy(request.runtime_env) if request.runtime_env else None
    local_dir = local_working_dir(runtime_env, request.files)
    directory = manifest.manifest_dir(request.manifest_dir, request.files)
    manifest_file = os.path.join(directory, "%s.json" % sid) if directory else None
    fields["manifest_file"] = manifest_file

    if check_mode:
        if local_dir:
            actions.append("would upload working_dir %s as a gcs:// package" % local_dir)
        if manifest_file:
            actions.append("would write the manifest %s" % manifest_file)
        actions.append("would submit %s (attempt %d) %s" % (sid, attempt, how))
        fields.update(status="WOULD_SUBMIT", message="would submit %s %s" % (sid, how))
        return outcome(changed=True, fields=fields, actions=actions, warnings=warnings, diffs=[diff],
                       job={"submission_id": sid, "status": PENDING, "_attempt": attempt})

    package = None
    if local_dir:
        try:
            package = client.upload_working_dir(local_dir, runtime_env.get("excludes"))
        except RayApiError as exc:
            raise JobError("runtime_env.working_dir %s: %s" % (local_dir, exc), error=exc.to_dict()) from None
        runtime_env["working_dir"] = package["uri"]
        fields["working_dir_package"] = package
        actions.append("%s working_dir %s as %s (%d files, %d bytes)" % (
            "uploaded" if package["uploaded"] else "reused", local_dir, package["uri"], package["files"],
            package["bytes"]))
    metadata = job_metadata(request, attempt, manifest_file, resumed)
    if manifest_file:
        manifest.write(manifest_file, {
            "experiment": request.experiment,
            "submission_id": sid,
            "attempt": attempt,
            "submitted_at": now_iso(),
            "dashboard_url": url,
            "entrypoint": entrypoint,
            "argv": list(request.prefix) + argv,
            "argv_given": list(request.prefix) + request.argv,
            "entrypoint_given": job_plan.entrypoint(request.prefix, request.argv),
            "runtime_env": runtime_env,
            "working_dir": local_dir,
            "working_dir_package": dict(package) if package else None,
            "metadata": metadata,
            "resume": info,
            "resumed_from_iteration": resumed,
            "previous_job": job_summary(latest) if latest else None,
            "files": manifest.file_records(request.files),
            "manifest": request.facts or {},
            "found": manifest.found_in_container(run_command, request.manifest_commands),
        })
        actions.append("wrote the manifest %s" % manifest_file)

    try:
        answer = client.submit_job(entrypoint, sid, runtime_env=runtime_env, metadata=metadata)
    except RayApiError as exc:
        raise JobError("submitting %s to %s failed: %s" % (sid, url, exc), error=exc.to_dict(), actions=actions) \
            from None
    job = dict(answer.get("job") or {"submission_id": sid, "status": PENDING}, _attempt=attempt)
    if answer["duplicate"]:
        ours = (job.get("metadata") or {}).get(EXPERIMENT_KEY) == request.experiment
        if ours and job.get("status") in ACTIVE:
            # another run submitted it between our listing and our submission: report it, change nothing
            part = reported(job, resumed_from_iteration=resumed, manifest_file=manifest_file)
            part["actions"] = actions
            part["warnings"] = warnings + [
                "%s appeared on the cluster between listing and submitting (another run submitted it); it was not "
                "submitted again" % sid]
            return part
        raise JobError(
            "submission id %s already exists on %s (status %s) although the job list did not show it: another run is "
            "submitting for experiment %s at the same time; rerun the task"
            % (sid, url, job.get("status"), request.experiment), actions=actions)
    actions.append("submitted %s (attempt %d) %s" % (sid, attempt, how))
    part = reported(job)
    part["fields"] = dict(fields, **part["fields"])
    part["fields"].update(entrypoint=entrypoint, runtime_env=runtime_env, message=job.get("message") or "submitted")
    part.update(changed=True, actions=actions, warnings=warnings, diffs=[diff])
    return part
