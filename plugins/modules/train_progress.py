#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: train_progress
short_description: Read slime's training log and report steps, reward, pass@k, eval, throughput, checkpoints and errors
version_added: "0.1.0"
description:
  - "Parses the log of a slime GRPO run: the metric lines C(step N:), C(rollout N:), C(passrate N:), C(eval N:) and
    C(perf N:) (Python dict reprs with single quotes and bare C(nan)/C(inf)/C(-inf)), behind slime's logger prefix
    C([YYYY-MM-DD HH:MM:SS] file.py:NNN - ) and Ray's actor prefix such as C((MegatronTrainRayActor pid=123) );
    ANSI codes removed."
  - "Reads O(log_file) (the guide's C(logs/qwen3-8B.log), or the link that M(mtslime.posttrain.ray_job) keeps there),
    or the job's log through the Jobs API (O(dashboard_url) + O(submission_id))."
  - "The metrics come from at most the last O(max_bytes) bytes; the errors are searched in the whole log.
    RV(first_error) is the first error-looking line, because a later C(scheduler is dead) is only the consequence
    of an earlier OOM, kernel, MCCL or graph-capture error (FAQ Q2). RV(fatal_error) is the exception line
    (C(Xxx: message), not the C(Traceback) header) of the last traceback that is not launcher noise and that no
    training step followed: under torch's launcher the rank prefix C([rank0]: ) is removed, c10d's
    C(destroy_process_group() was not called) warning and torchrun's C(ChildFailedError) are noise, and Ray's
    C(RayTaskError(XxxError): ray::Actor.method()) counts on its own, also when the log starts mid-traceback.
    RV(hint) gives the guide's advice (FAQ Q1-Q4, graph capture §4.3.2, placement-group wait from slime's qa.md)."
  - "An error line alone does not make the job failed: jobs print tracebacks and OOMs that they survive. Pass the
    job's Ray status as O(status) (read through the Jobs API it is the job's own): with C(FAILED) or C(STOPPED)
    RV(progress) names the fatal exception and the hint; otherwise it shows the run's progress and the error as a
    warning."
  - "Values that are not finite numbers are returned as the strings V(nan), V(inf) and V(-inf)."
options:
  log_file:
    description: The log file to read.
    type: path
  submission_id:
    description: The job whose log to read through the Jobs API at O(dashboard_url), instead of O(log_file).
    type: str
  max_bytes:
    description: Read at most this many bytes from the end of the log for the metrics (V(0) = all). The error scans
      always read the whole log.
    type: int
    default: 16777216
  tail_lines:
    description: How many last lines to return in RV(tail).
    type: int
    default: 20
  context_lines:
    description: Lines before the first error (and twice as many after it) to return in RV(first_error.context).
    type: int
    default: 5
  status:
    description:
      - The job's Ray status (V(PENDING), V(RUNNING), V(SUCCEEDED), V(FAILED), V(STOPPED)), which decides how
        RV(progress) speaks of an error. When the log is read through the Jobs API, the job's own status is used
        unless this is set.
    type: str
  request_timeout:
    default: 60
extends_documentation_fragment:
  - mtslime.posttrain.attributes
  - mtslime.posttrain.attributes.INFO_MODULE
  - mtslime.posttrain.ray
seealso:
  - module: mtslime.posttrain.ray_job
author:
  - mtslime.posttrain contributors
"""

EXAMPLES = r"""
- name: How far is the training?
  mtslime.posttrain.train_progress:
    log_file: /home/slime/musa_example/qwen_32b_sherry/logs/qwen3-8B.log
  register: progress

# __train_job: the registered result of mtslime.posttrain.ray_job (as in the train_job role)
- name: Show it, as the job's status says (an error of a RUNNING job is a warning)
  mtslime.posttrain.train_progress:
    log_file: /home/slime/musa_example/qwen_32b_sherry/logs/qwen3-8B.log
    status: "{{ __train_job.status }}"
  register: progress

- name: Print the line
  ansible.builtin.debug:
    msg: "{{ progress.progress }}"

- name: Read a job's log through the Jobs API instead
  mtslime.posttrain.train_progress:
    dashboard_url: "{{ ray_dashboard_port | mtslime.posttrain.ray_dashboard_url }}"
    submission_id: "{{ __train_job.submission_id }}"
"""

RETURN = r"""
first_step:
  description: Number of the first C(step N:) line of the log (a resumed run starts after its checkpoint).
  returned: always
  type: int
last_step:
  description: Number of the last C(step N:) line (slime counts from 0; a run loaded from the converted checkpoint
    starts at 1).
  returned: always
  type: int
steps:
  description: How many C(step) lines the log holds.
  returned: always
  type: int
last_rollout:
  description: Id of the last C(rollout N:) line.
  returned: always
  type: int
reward:
  description: C(rollout/raw_reward) of the last C(rollout N:) line (the unnormalised reward).
  returned: always
  type: float
pass_at_k:
  description: The last C(passrate N:) line without the C(passrate/) prefix, for example C({pass@1, pass@8}).
  returned: always
  type: dict
eval:
  description: The last C(eval N:) line (C(eval/<name>), C(eval/<name>-pass@k), ...).
  returned: always
  type: dict
eval_rollout:
  description: The rollout id of that eval line.
  returned: always
  type: int
throughput:
  description: From the last C(perf) lines, those of C(perf/tokens_per_gpu_per_sec), C(perf/actor_train_tok_per_s),
    C(perf/step_time) and C(perf/wait_time_ratio) that are present.
  returned: always
  type: dict
train:
  description: The whole last C(step N:) dict (loss, grad norm, learning rate...).
  returned: always
  type: dict
last_checkpoint:
  description: Iteration of Megatron's last C(successfully saved checkpoint from iteration N) line.
  returned: always
  type: int
last_checkpoint_dir:
  description: The directory named on that line.
  returned: always
  type: str
loaded_checkpoint:
  description: Iteration and path of Megatron's C(successfully loaded checkpoint) line (a resumed run shows its save
    dir here).
  returned: always
  type: dict
waiting_for_gpus:
  description:
    - "slime's last C(Waiting for placement group of N GPUs (elapsed Ts): X GPUs registered with Ray, Y available.)
      line (printed every 30 s; slime waits without a time limit) when no training step and no placed bundle
      followed it; null otherwise."
  returned: always
  type: dict
  contains:
    needed:
      description: GPUs the placement group needs.
      type: int
    registered:
      description: GPUs registered with Ray.
      type: float
    available:
      description: GPUs available in Ray.
      type: float
    missing:
      description: GPUs missing for the group (needed - available).
      type: float
    unregistered:
      description: Of those, how many Ray does not know at all (needed - registered).
      type: float
    busy:
      description: Of those, how many are registered but in use.
      type: float
    elapsed:
      description: Seconds slime has waited.
      type: int
    lineno:
      description: The wait line's number.
      type: int
    message:
      description: A sentence saying all of the above.
      type: str
first_error:
  description: The first error line from the beginning of the log (null when there is none).
  returned: always
  type: dict
  contains:
    lineno:
      description: Its line number (1-based).
      type: int
    line:
      description: The line (ANSI codes removed).
      type: str
    kind:
      description: V(graph_capture), V(oom), V(hf_validate), V(ray_ports), V(router_connect), V(missing_path),
        V(collective), V(scheduler_dead), V(device_error) or V(error).
      type: str
    faq:
      description: The guide's FAQ entry for it.
      type: str
    exception:
      description: The exception line that ends the traceback it starts, however long the traceback (the last
        exception of a chain; the rank prefix removed), or the line itself when it is one.
      type: str
    exception_lineno:
      description: Line number of RV(first_error.exception) (null when the log ends before it).
      type: int
    rank:
      description: "The rank whose traceback it is (its C([rankN]: ) prefix under torch's launcher)."
      type: int
    context:
      description: The lines around it.
      type: list
      elements: str
    context_start:
      description: Line number of the first line of RV(first_error.context).
      type: int
fatal_error:
  description:
    - The exception of the last traceback that is not launcher noise and that no training step followed; null when
      there is none (a traceback that steps followed was survived and is only a RV(first_error)).
  returned: always
  type: dict
  contains:
    lineno:
      description: Line number of the exception line.
      type: int
    line:
      description: That line as logged (ANSI codes removed).
      type: str
    exception:
      description: "The C(Xxx: message) line with Ray's, slime's and the rank prefix removed; for a C(RayTaskError) the
        remote exception that ends it."
      type: str
    type:
      description: The exception's type, for example C(torch.OutOfMemoryError).
      type: str
    kind:
      description: As RV(first_error.kind).
      type: str
    faq:
      description: The guide's FAQ entry for it.
      type: str
    rank:
      description: The rank whose traceback it ends (torchrun's root-cause rank when it names one).
      type: int
    actor_pid:
      description: The pid of the Ray actor whose traceback it ends.
      type: int
    task:
      description: The C(ray::Actor.method()) of a C(RayTaskError).
      type: str
    traceback_start:
      description: Line of its C(Traceback (most recent call last):) header; null when the log starts mid-traceback.
      type: int
hint:
  description: The guide's advice for the fatal error, or for the first error when that is the cause (a dead scheduler
    after an OOM) or when there is no fatal error, or for a long placement-group wait.
  returned: always
  type: str
hint_from:
  description: Which of V(fatal_error), V(first_error) or V(waiting_for_gpus) RV(hint) is for; null without a hint.
  returned: always
  type: str
tail:
  description: The last O(tail_lines) lines.
  returned: always
  type: list
  elements: str
progress:
  description: One line for people; with a O(status) of V(FAILED) or V(STOPPED) the fatal exception and the hint.
  returned: always
  type: str
  sample: "RUNNING: step 6 (6 steps logged), reward 0.4062, pass@8 0.7719, eval aime 0.2667 @ rollout 4, 1221 tok/s/GPU,
    checkpoint 5"
lines:
  description: Number of lines in the log.
  returned: always
  type: int
bytes:
  description: Size of the log.
  returned: always
  type: int
bytes_read:
  description: Bytes read for the metrics.
  returned: always
  type: int
source:
  description: The file or the Jobs API URL read.
  returned: always
  type: str
status:
  description: The status that RV(progress) was written for (O(status), or the job's own through the Jobs API); null
    when unknown.
  returned: always
  type: str
job_status:
  description: The job's Ray status, when read through the Jobs API.
  returned: when O(submission_id) is set
  type: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.api import RayApiError, RayClient, normalize_url
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.common import ray_argument_spec
from ansible_collections.mtslime.posttrain.plugins.module_utils.logs.slime import summarize_file, summarize_text


RAY_STATUSES = ("PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            log_file=dict(type="path"),
            submission_id=dict(type="str"),
            max_bytes=dict(type="int", default=16 * 1024 * 1024),
            tail_lines=dict(type="int", default=20),
            context_lines=dict(type="int", default=5),
            status=dict(type="str"),
            **ray_argument_spec(request_timeout=60)
        ),
        required_one_of=[("log_file", "submission_id")],
        mutually_exclusive=[("log_file", "submission_id")],
        supports_check_mode=True,
    )
    params = module.params
    problems = []
    for name in ("max_bytes", "tail_lines", "context_lines"):
        if params[name] < 0:
            problems.append("%s is %d; give a number >= 0" % (name, params[name]))
    if params["status"] is not None:
        if params["status"].strip().upper() not in RAY_STATUSES:
            problems.append("status is %r; give one of Ray's job statuses (%s) or leave it unset"
                            % (params["status"], ", ".join(RAY_STATUSES)))
        params["status"] = params["status"].strip().upper()
    if problems:
        module.fail_json(msg="train_progress: " + "; ".join(problems))

    if params["log_file"]:
        path = os.path.abspath(os.path.expanduser(params["log_file"]))
        if not os.path.exists(path):
            module.fail_json(
                msg="train_progress: log_file %s does not exist (yet): the job has not started, or its log follower "
                "writes elsewhere; see the log_file of mtslime.posttrain.ray_job" % path
            )
        if os.path.isdir(path):
            module.fail_json(msg="train_progress: log_file %s is a directory; give the log file's path" % path)
        try:
            result = summarize_file(
                path,
                max_bytes=params["max_bytes"],
                tail_lines=params["tail_lines"],
                context_lines=params["context_lines"],
                status=params["status"],
            )
        except OSError as exc:
            module.fail_json(msg="train_progress: cannot read log_file %s: %s" % (path, exc.strerror or exc))
        result["source"] = path
    else:
        try:
            client = RayClient(
                normalize_url(params["dashboard_url"]), timeout=params["request_timeout"], use_proxy=params["use_proxy"]
            )
        except ValueError as exc:
            module.fail_json(msg="train_progress: dashboard_url: %s" % exc)
        sid = params["submission_id"]
        try:
            job = client.get_job(sid)
            if job is None:
                module.fail_json(
                    msg="train_progress: submission_id %s is not known to %s (GET /api/jobs/%s answered 404); list the "
                    "jobs with `RAY_ADDRESS=%s ray job list`" % (sid, client.url, sid, client.url)
                )
            text = client.job_logs(sid)
        except RayApiError as exc:
            module.fail_json(msg="train_progress: reading the log of %s failed: %s" % (sid, exc), error=exc.to_dict())
        result = summarize_text(
            text,
            max_bytes=params["max_bytes"],
            tail_lines=params["tail_lines"],
            context_lines=params["context_lines"],
            status=params["status"] or job.get("status"),
        )
        result["source"] = "%s/api/jobs/%s/logs" % (client.url, sid)
        result["job_status"] = job.get("status")
    result["status"] = params["status"] or result.get("job_status")
    result["changed"] = False
    module.exit_json(**result)


if __name__ == "__main__":
    main()
