# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""The ray_job module's work (plugins/modules/ray_job.py holds its documentation): main(module) runs it
for an AnsibleModule made with module_kwargs(). The supervisor runs the same function with the arguments the
role gave the module (module_utils/supervise)."""
from __future__ import annotations

import os
import re
import shlex

from ansible_collections.mtslime.posttrain.plugins.module_utils.job import (
    logs as job_logs,
    plan as job_plan,
    stop as job_stop,
    submit as job_submit,
    run_files,
)
from ansible_collections.mtslime.posttrain.plugins.module_utils.job.result import (
    JobError,
    base_result,
    combine,
    experiment_jobs,
    outcome,
    reported,
)
from ansible_collections.mtslime.posttrain.plugins.module_utils.job.manifest import manifest_dir
from ansible_collections.mtslime.posttrain.plugins.module_utils.job import crash_loop
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.api import RayApiError, RayClient, normalize_url
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.common import ray_argument_spec
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.processes import ray_processes
from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import lease

EXPERIMENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
RESTART_NOTE = "the running job keeps its arguments; stop it with playbooks/stop.yml to apply"


def module_kwargs():
    return dict(
        argument_spec=dict(
            state=dict(type="str", choices=["running", "stopped", "status"], default="running"),
            experiment=dict(type="str", required=True),
            argv=dict(type="list", elements="str"),
            entrypoint_prefix=dict(type="list", elements="str", default=["python3", "train.py"]),
            entrypoint=dict(type="str"),
            runtime_env=dict(type="dict"),
            metadata=dict(type="dict"),
            resume=dict(
                type="dict",
                options=dict(save_dir=dict(type="path", required=True), load_flag=dict(type="str", default="--load")),
            ),
            files=dict(
                type="list",
                elements="dict",
                options=dict(
                    path=dict(type="path", required=True),
                    content=dict(type="str", required=True),
                    mode=dict(type="raw"),
                ),
            ),
            manifest=dict(type="dict"),
            manifest_dir=dict(type="path"),
            manifest_commands=dict(type="dict"),
            log_file=dict(type="path"),
            log_follower=dict(type="str", choices=["auto", "ray", "python", "none"], default="auto"),
            follow_interval=dict(type="int", default=5),
            stop_timeout=dict(type="int", default=60, aliases=["job_timeout"]),
            max_failures_at_step=dict(type="int", default=2),
            retry=dict(type="bool", default=False),
            lease_dir=dict(type="path"),
            lease_wait=dict(type="int", default=300),
            **ray_argument_spec()
        ),
        mutually_exclusive=[("argv", "entrypoint")],
        supports_check_mode=True,
    )


def validate(params):
    """(dashboard url, problems): every bad option at once."""
    problems = []
    if not EXPERIMENT_RE.match(params["experiment"] or ""):
        problems.append(
            "experiment %r may hold only letters, digits, '.', '_' and '-' (it is part of submission ids and file "
            "names)" % params["experiment"]
        )
    try:
        url = normalize_url(params["dashboard_url"])
    except ValueError as exc:
        problems.append("dashboard_url: %s" % exc)
        url = None
    for name in ("stop_timeout", "request_timeout", "follow_interval"):
        if params[name] < 1:
            problems.append("%s is %d; give seconds >= 1" % (name, params[name]))
    for index, item in enumerate(params["files"] or []):
        try:
            run_files.parse_mode(item.get("mode"), "files[%d] (%s)" % (index, item["path"]))
        except ValueError as exc:
            problems.append(str(exc))
        if not os.path.isabs(item["path"]):
            problems.append("files[%d]: path %s is relative; give an absolute path" % (index, item["path"]))
    if params["manifest"] is not None and not params["manifest_dir"] and not params["files"]:
        problems.append(
            "manifest is set but there is neither manifest_dir nor files to put manifests/ next to; set manifest_dir"
        )
    if params["entrypoint"] is not None:
        try:
            shlex.split(params["entrypoint"])
        except ValueError as exc:
            problems.append("entrypoint: %s; give the arguments as a list in argv" % exc)
    return url, problems


def request_of(params):
    """The task's job as data: the argv list (entrypoint, the older form, is split once here)."""
    if params["entrypoint"] is not None:
        argv, prefix = shlex.split(params["entrypoint"]), []
    else:
        argv, prefix = params["argv"] or [], params["entrypoint_prefix"]
    return job_submit.Request(
        params["experiment"], argv, prefix, resume=params["resume"], runtime_env=params["runtime_env"],
        metadata=params["metadata"], files=params["files"], facts=params["manifest"],
        manifest_dir=params["manifest_dir"], manifest_commands=params["manifest_commands"])


class CrashLoopHook:
    """What the crash-loop hooks (module_utils/job/crash_loop.py) write into: an outcome of their own."""

    def __init__(self, params, check):
        self.params, self.check = params, check
        self.actions, self.warnings, self.result = [], [], {}

    def warn(self, text):
        self.warnings.append(text)

    def fail(self, msg):
        raise JobError(msg, actions=self.actions, **self.result)

    def outcome(self):
        return outcome(fields=self.result, actions=self.actions, warnings=self.warnings)


def state_running(module, client, url, jobs, follower):
    params = module.params
    check = module.check_mode
    files = run_files.sync(params["files"], check)
    record_dirs = [d for d in (manifest_dir(params["manifest_dir"], params["files"]),
                               follower.log_dir if follower else None) if d]
    decision = job_plan.decide(jobs, params["experiment"], record_dirs)
    parts = [files]
    if decision["action"] == job_plan.KEEP:
        job = decision["active"][-1]
        part = reported(job)
        part["fields"]["message"] = part["fields"]["message"] or "running"
        if len(decision["active"]) > 1:
            part["warnings"].append(
                "experiment %s has %d active jobs: %s; only one should run (stop the extra ones with state=stopped or "
                "`ray job stop <id>`)" % (params["experiment"], len(decision["active"]),
                                          ", ".join(j["submission_id"] for j in decision["active"])))
        if files["fields"]["files_changed"]:
            note = "%s changed while %s is %s: %s" % (", ".join(files["fields"]["files_changed"]),
                                                      job["submission_id"], job.get("status"), RESTART_NOTE)
            part["actions"].append(note)
            part["warnings"].append(note)
        if decision["foreign_active"]:
            part["warnings"].append("other jobs run train.py on this cluster: %s"
                                    % "; ".join(job_plan.job_description(j) for j in decision["foreign_active"]))
        parts.append(part)
    elif decision["action"] == job_plan.FINISHED:
        latest = decision["latest"]
        part = reported(latest)
        part["fields"]["message"] = "finished: %s succeeded%s" % (
            latest["submission_id"], " at %s" % part["fields"]["end_time"] if part["fields"]["end_time"] else "")
        parts.append(part)
    elif decision["action"] == job_plan.REFUSE:
        raise JobError(job_plan.nothing_to_submit(decision, params["experiment"], url))
    else:
        request = request_of(params)
        if not request.argv:
            latest = decision["latest"]
            raise JobError("entrypoint is required to submit attempt %d of experiment %s (latest job: %s); give argv"
                           % (decision["attempt"], params["experiment"],
                              "%s %s" % (latest["submission_id"], latest.get("status")) if latest else "none"))
        # the crash-loop rule, before anything is moved or submitted
        hook = CrashLoopHook(params, check)
        crash_loop.before_submit(hook, decision["ours"], manifest_dir(params["manifest_dir"], params["files"]),
                                 follower.attempt_file if follower else None, client.job_logs, decision["attempt"])
        submitted = job_submit.submit(client, url, request, decision, module.run_command, check)
        # the job diff first, then the files'
        parts = [outcome(diffs=submitted["diffs"]), hook.outcome(), dict(files, diffs=[]),
                 dict(submitted, diffs=files["diffs"])]
    job = combine(parts)["job"]
    parts.append(job_logs.follow(follower, job, params["log_follower"], check))
    return parts, decision


def no_ray_here(url, exc):
    """Nothing answers at a dashboard on this node and no Ray process runs here: no job can run."""
    host = url.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
    return exc.kind == "connect" and host in ("127.0.0.1", "localhost", "::1") and not ray_processes()


def run(module, url, parts):
    """The task's steps; each returns its outcome into `parts` (kept on failure too)."""
    params = module.params
    client = RayClient(url, timeout=params["request_timeout"], use_proxy=params["use_proxy"])
    try:
        jobs = client.list_jobs()
    except RayApiError as exc:
        if params["state"] == "stopped" and no_ray_here(url, exc):
            parts.append(outcome(fields={"message": "no Ray runs on this node (no Ray process, nothing answers at "
                                                    "%s): no job can run, nothing to stop" % url}))
            return []
        raise JobError("cannot list the jobs at %s: %s" % (url, exc), error=exc.to_dict()) from None
    follower = (job_logs.Follower(module.get_bin_path, params["log_file"], url, params["log_follower"],
                                  params["follow_interval"]) if params["log_file"] else None)
    decision = job_plan.decide(jobs, params["experiment"])
    if params["state"] == "status":
        latest = decision["latest"]
        part = reported(latest)
        if latest is None:
            part["fields"]["message"] = "no job of experiment %s at %s" % (params["experiment"], url)
        hook = CrashLoopHook(params, module.check_mode)
        crash_loop.for_status(hook, decision["ours"], manifest_dir(params["manifest_dir"], params["files"]),
                              follower.attempt_file if follower else None)
        parts.extend([part, job_logs.status(follower, latest), hook.outcome()])
    elif params["state"] == "stopped":
        parts.append(run_files.sync(params["files"], module.check_mode))
        parts.append(job_stop.stop(client, url, params["experiment"], decision["active"], decision["latest"],
                                   params["stop_timeout"], module.check_mode))
    else:
        done, decision = state_running(module, client, url, jobs, follower)
        parts.extend(done)
    return decision["ours"]


def run_under_lease(module, url, parts):
    """run(), holding the job's lease (supervise/lease.py) when lease_dir is set and the task may act."""
    params = module.params
    if not params["lease_dir"] or params["state"] == "status" or module.check_mode:
        return run(module, url, parts)
    try:
        with lease.held(params["lease_dir"], "ansible-playbook ray_job state=%s" % params["state"],
                        "keeping experiment %s %s" % (params["experiment"], params["state"]),
                        wait=params["lease_wait"]):
            return run(module, url, parts)
    except lease.LeaseBusy as busy:
        raise JobError("%s, longer than lease_wait (%d s); rerun when it is done, or remove %s if its holder is "
                       "gone" % (busy, params["lease_wait"], params["lease_dir"])) from None


def result_of(url, params, total, ours):
    result = base_result(url, os.path.abspath(params["log_file"]) if params["log_file"] else None)
    result.update(total["fields"])
    result["jobs"], result["active"] = experiment_jobs(ours, total["seen"])
    result["changed"] = total["changed"]
    result["actions"] = total["actions"]
    return result


def main(module):
    params = module.params
    url, problems = validate(params)
    if problems:
        module.fail_json(msg="ray_job: " + "; ".join(problems), actions=[])
    parts = []
    try:
        ours = run_under_lease(module, url, parts)
    except JobError as exc:
        extra = dict(exc.extra)
        total = combine(parts + [outcome(actions=extra.pop("actions", []))])
        for warning in total["warnings"]:
            module.warn(warning)
        result = result_of(url, params, total, [])
        result.pop("changed")
        result.update(extra)
        module.fail_json(msg="ray_job: %s" % exc, **result)
    total = combine(parts)
    for warning in total["warnings"]:
        module.warn(warning)
    result = result_of(url, params, total, ours)
    if module._diff and total["diffs"]:
        result["diff"] = total["diffs"]
    module.exit_json(**result)
