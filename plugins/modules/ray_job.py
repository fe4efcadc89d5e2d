#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_job
short_description: Keep one slime training job per experiment on a Ray cluster (submit, resume, stop, follow its log)
version_added: "0.1.0"
description:
  - Manages the training job of one experiment through the Ray Jobs REST API of the dashboard
    (C(ray start --dashboard-port), 8772 in the guide). It needs no Ray on the controller.
  - "The jobs of the experiment are the jobs whose metadata C(mtslime_experiment) equals O(experiment),
    whatever their submission id (a job submitted by hand with that metadata counts; the role's run script plans
    with the same module_utils job/plan.py and submits C(<experiment>-attempt-<N>) too), and the jobs whose
    submission id is C(<experiment>-attempt-<N>), the ids this module submits."
  - "O(state=running): when a job of the experiment is PENDING or RUNNING, nothing is submitted (several active
    jobs are all reported, with a warning). When the latest one SUCCEEDED, nothing is submitted (the experiment
    is finished). Otherwise (no job yet, or the latest FAILED or was STOPPED) attempt N+1 is submitted, N being the
    highest attempt number seen. Before that it refuses to submit, naming the job, when another active job on the
    cluster runs C(train.py) without this experiment's metadata (a job started by hand)."
  - "Resume: with O(resume), the save directory goes through the resume rule (module_utils checkpoint/resume.py, see
    docs/architecture.md): the newest complete iteration that has slime's data cursor (else the newest complete one,
    with a warning that the prompt order starts over). Newer iterations (incomplete, torn, or without a data cursor),
    their data cursors and a tracker naming them are moved aside (never deleted) and the tracker is rewritten to the
    chosen iteration; then the value of C(--load) in O(argv) becomes the save directory (C(--load <save_dir>) is
    appended when absent; the list is edited, never a string), so Megatron loads that iteration and slime continues at
    the next rollout (slime.md §4.3);
    RV(resumed_from_iteration) says which. The decision (attempt, resume, argv) is module_utils job/plan.py, the same
    program the rendered run script calls. With no complete iteration the argv is submitted unchanged and
    training starts from the converted checkpoint, as in the guide, with a warning. In check mode the moves are only
    predicted."
  - "A local O(runtime_env) C(working_dir) is zipped (files at the root, Unix modes kept; C(excludes), C(.gitignore),
    C(.rayignore) and C(.git/) left out), named C(_ray_pkg_<sha256 of the zip>.zip), uploaded with
    C(GET)/C(PUT /api/packages/gcs/<name>) when Ray does not have it yet, and the job is submitted with
    C(working_dir: gcs://<name>), as C(ray job submit --runtime-env) does. The entrypoint runs in the unpacked
    directory."
  - "O(files) (run script, runtime_env.yaml, hostfile rendered by the role) are written atomically when their content or
    mode differs. When that happens while a job is active, the job keeps running with its old arguments: the change is
    reported in RV(actions) and as a warning (stop it with playbooks/stop.yml to apply it); the job is never stopped
    or resubmitted for it."
  - "At each submission the O(manifest) facts, the submission id, entrypoint, runtime_env, resume details and the time
    are written as JSON to C(<manifest_dir>/<submission_id>.json) (mode 0640), and the path goes into the job metadata
    as C(mtslime_manifest)."
  - "O(log_file): a detached follower copies the active job's log to C(<log dir>/<stem>.<submission_id>.log) with ANSI
    codes removed, and O(log_file) is a symbolic link to the current attempt's file, so an earlier attempt's log is
    never overwritten. The follower is the guide's pipeline C(RAY_ADDRESS=<url> ray job logs <id> -f 2>&1 | sed -u -E
    's/\\x1B\\[[0-9;?]*[ -/]*[@-~]//g' > <file>) when the C(ray) CLI and C(sed) are on E(PATH), else the
    standard-library
    program module_utils/job/log_follower.py, copied next to the log (C(.<stem>.follower.py)), that polls C(GET
    /api/jobs/<id>/logs). It runs in its
    own session, survives the end of the playbook, ends when the job ends, and its pid is kept in
    C(<log dir>/.<stem>.follower.pid). An alive follower of the active job is left alone; a dead one is restarted
    (that is a change). A regular file found at O(log_file) (the guide's script writes one) is moved aside first."
  - "O(state=stopped) stops every active job of the experiment and waits until each has ended; when nothing answers
    at a dashboard on this node (V(127.0.0.1), V(localhost)) and no Ray process runs here, no job can run, and it
    says so in RV(message) and succeeds. O(state=status) reports the latest job and changes nothing."
options:
  state:
    description: What to ensure.
    type: str
    choices: [running, stopped, status]
    default: running
  experiment:
    description: Name of the experiment, for example V(qwen3-8B). Letters, digits, C(.), C(_) and C(-).
    type: str
    required: true
  argv:
    description:
      - The arguments of the job after O(entrypoint_prefix), one list item per word, for example
        V([--actor-num-nodes, "1", --load, /data/ckpt]). Needed to submit (or O(entrypoint)).
      - They stay a list until the submission, where C(shlex.join) makes Ray's entrypoint string of
        O(entrypoint_prefix) + O(argv).
    type: list
    elements: str
  entrypoint_prefix:
    description: The command before O(argv).
    type: list
    elements: str
    default: [python3, train.py]
  entrypoint:
    description:
      - The older form of the command, one shell string, for example C(python3 train.py --actor-num-nodes 1 ...).
        It is split once (C(shlex.split)) into the argv list, and O(entrypoint_prefix) is not used.
        Mutually exclusive with O(argv).
    type: str
  runtime_env:
    description:
      - "The job's runtime environment, for example C({working_dir: /home/slime, excludes: [...], env_vars: {...}})
        (the content of the guide's runtime_env.yaml)."
      - A relative local C(working_dir) is taken relative to the directory of the first file in O(files).
    type: dict
  metadata:
    description:
      - Extra metadata for the job (values become strings).
      - The module adds C(mtslime_experiment), C(mtslime_attempt), C(mtslime_manifest) and C(mtslime_resumed_from).
    type: dict
  resume:
    description: Resume from the training save directory when it holds a complete checkpoint.
    type: dict
    suboptions:
      save_dir:
        description: The C(--save) directory of the training run.
        type: path
        required: true
      load_flag:
        description: The flag whose value is replaced by O(resume.save_dir).
        type: str
        default: --load
  files:
    description: Files of the run directory to keep as given.
    type: list
    elements: dict
    suboptions:
      path:
        description: Absolute path of the file.
        type: path
        required: true
      content:
        description: The whole content.
        type: str
        required: true
      mode:
        description: Octal mode such as V('0755'). When unset an existing file keeps its mode, a new one gets 0644.
        type: raw
  manifest:
    description: Facts to record with each submission (image id/digest, versions, accelerators, rendered arguments).
    type: dict
  manifest_dir:
    description: Directory of the manifests. Default C(manifests/) next to the first file of O(files); without
      either, no manifest is written.
    type: path
  manifest_commands:
    description:
      - "Shell commands run on the node at each submission only, C({name: command}); their output goes into the
        manifest under C(found), for example the versions of slime, Megatron, SGLang and torch as installed."
    type: dict
  log_file:
    description: The log path people read (the guide's C(.../logs/qwen3-8B.log)); becomes a link to the current
      attempt's log.
    type: path
  log_follower:
    description: Which follower to run. V(auto) uses the C(ray) CLI when it and C(sed) are on E(PATH), else V(python).
      V(none) starts none.
    type: str
    choices: [auto, ray, python, none]
    default: auto
  follow_interval:
    description: Seconds between two polls of the Python follower.
    type: int
    default: 5
  stop_timeout:
    description: Seconds to wait, after asking Ray to stop a job, for it to reach a terminal state.
    type: int
    default: 60
    aliases: [job_timeout]
  max_failures_at_step:
    description:
      - "The crash-loop rule (C(module_utils/job/crash_loop.py)): when this many attempts in a row FAILED without
        passing the furthest step the earlier ones reached, no new attempt is submitted and the module fails with
        their history (status, step, exception line, FAQ hint). An attempt that gets past that step, or one that
        SUCCEEDED, resets the count. V(0) means no limit."
      - "Ended attempts are recorded as C(<manifest_dir>/<submission_id>.end.json), so the history survives a
        restart of the Ray head."
    type: int
    default: 2
  retry:
    description: Submit one more attempt although the crash-loop rule of O(max_failures_at_step) would refuse.
    type: bool
    default: false
  lease_dir:
    description:
      - "The job's lease (a lock directory; the supervisor's C(job.lease), module_utils supervise/lease.py): with
        O(state=running) or O(state=stopped) the task takes it before it plans and releases it after, so it and the
        supervisor of M(mtslime.posttrain.job_supervise) never act on the job at once. A holder whose process is
        gone, or whose lease ran out, is taken over."
      - Unset, no lease is taken.
    type: path
  lease_wait:
    description: Seconds to wait for a live holder of O(lease_dir) before the task fails naming it.
    type: int
    default: 300
extends_documentation_fragment:
  - mtslime.posttrain.attributes
  - mtslime.posttrain.ray
attributes:
  check_mode:
    support: full
    details:
      - Predicts the submission (attempt and resume iteration) or the stop, and the files and follower it would write;
        writes and submits nothing.
  diff_mode:
    support: full
  idempotent:
    support: full
    details:
      - A second run finds the job it submitted active (or finished) and changes nothing, unless the follower died.
seealso:
  - module: mtslime.posttrain.ray_cluster
  - module: mtslime.posttrain.train_progress
  - module: mtslime.posttrain.mcore_checkpoint
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Keep the training job of qwen3-8B running (resume from the save dir after a failure)
  mtslime.posttrain.ray_job:
    dashboard_url: "{{ ray_dashboard_port | mtslime.posttrain.ray_dashboard_url }}"
    experiment: qwen3-8B
    argv: [--actor-num-nodes, "1", --load, /data/LLMs/MCORE/Qwen3-8B_slime, --save, /tmp/Qwen3-8B_slime]
    runtime_env: "{{ lookup('file', 'runtime_env.yaml') | from_yaml }}"
    resume:
      save_dir: /tmp/Qwen3-8B_slime
    files:
      - path: /home/slime/musa_example/qwen_32b_sherry/run-qwen3-8B.sh
        content: "{{ lookup('template', 'run-qwen3-8B.sh.j2') }}"
        mode: "0755"
      - path: /home/slime/musa_example/qwen_32b_sherry/hostfile
        content: "10.121.38.2 slots=8\n"
    manifest:
      image: "{{ container_image }}"
    log_file: /home/slime/musa_example/qwen_32b_sherry/logs/qwen3-8B.log
  register: train_job

- name: Stop it (playbooks/stop.yml)
  mtslime.posttrain.ray_job:
    experiment: qwen3-8B
    state: stopped
    stop_timeout: 120

- name: Where is it?
  mtslime.posttrain.ray_job:
    experiment: qwen3-8B
    state: status
  register: job_status
"""

RETURN = r"""
submission_id:
  description: The job reported (the active one, the one submitted, or the latest).
  returned: always
  type: str
  sample: qwen3-8B-attempt-2
attempt:
  description: Its attempt number; null for a job submitted under another id (by hand, with the experiment's metadata).
  returned: always
  type: int
status:
  description: Its Ray status (PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED); in check mode V(WOULD_SUBMIT) for a
    predicted submission.
  returned: always
  type: str
message:
  description: Ray's message for the job (for a failed one, the end of its log), or what the module found.
  returned: always
  type: str
start_time:
  description: Start time, ISO 8601 UTC.
  returned: always
  type: str
start_time_ms:
  description: Start time, milliseconds since the epoch (as Ray gives it).
  returned: always
  type: int
end_time:
  description: End time, ISO 8601 UTC; null while the job runs.
  returned: always
  type: str
end_time_ms:
  description: End time in milliseconds since the epoch.
  returned: always
  type: int
driver_exit_code:
  description: Exit code of the entrypoint, once it ended.
  returned: always
  type: int
dashboard_url:
  description: The dashboard URL used.
  returned: always
  type: str
jobs:
  description: Every job of the experiment, oldest first.
  returned: always
  type: list
  elements: dict
  contains:
    submission_id:
      description: Submission id.
      type: str
    attempt:
      description: Attempt number, or null.
      type: int
    status:
      description: Ray status.
      type: str
    start_time:
      description: ISO 8601 start time.
      type: str
    end_time:
      description: ISO 8601 end time.
      type: str
active:
  description: Submission ids of the experiment's PENDING or RUNNING jobs (after the task).
  returned: always
  type: list
  elements: str
resumed_from_iteration:
  description: The checkpoint iteration a submission resumes from; null when it starts from the converted checkpoint
    or nothing was submitted.
  returned: always
  type: int
resume:
  description: >-
    What the save directory held (state, latest_iteration, iterations, as found before any move),
    what the resume rule decided (resumed_from_iteration, dataset_state of that iteration, message, warnings, the
    whole plan) and moved_to, the list of C({path, to}) moved aside (in check mode: that would be).
  returned: when O(resume) is set and a submission was planned
  type: dict
entrypoint:
  description: The entrypoint of the reported job (for a submission, after the C(--load) change).
  returned: always
  type: str
argv:
  description: The argv submitted after O(entrypoint_prefix), with the resume's C(--load).
  returned: when a job was submitted (or would be, in check mode)
  type: list
  elements: str
runtime_env:
  description: The runtime_env submitted (C(working_dir) as the C(gcs://) URI).
  returned: when a job was submitted
  type: dict
working_dir_package:
  description: The package made of a local working_dir (uri, uploaded, bytes, files, directory).
  returned: when a job was submitted with a local working_dir
  type: dict
manifest_file:
  description: Path of the manifest written for the submission.
  returned: always
  type: str
log_file:
  description: O(log_file), when set.
  returned: always
  type: str
metadata:
  description: The reported job's metadata (C(mtslime_experiment), C(mtslime_attempt), C(mtslime_manifest), ...).
  returned: when a job is reported
  type: dict
attempt_log:
  description: The log file of the reported attempt (the target of the O(log_file) link).
  returned: always
  type: str
follower_pid:
  description: Pid of the log follower of the reported job, when one is alive.
  returned: always
  type: int
follower:
  description: The follower's kind (ray or python), and what was done (kept, started, restarted, none).
  returned: always
  type: dict
moved_to:
  description: Where a regular file found at O(log_file) was moved.
  returned: when one was moved
  type: str
files_changed:
  description: Paths of O(files) written (or that would be).
  returned: always
  type: list
  elements: str
previous_attempt:
  description: >-
    Before a submission: how the latest ended attempt ended (submission_id, attempt, status, status_from
    C(ray)/C(log)/C(none), step, first_step, exception, exception_line, hint, faq, survived, log, end_time_ms);
    status V(LOST) when Ray forgot it and nothing recorded its end.
  returned: when a submission was planned and an earlier attempt ended
  type: dict
attempts_history:
  description: Every ended attempt of the experiment, oldest first, in the shape of RV(previous_attempt).
  returned: when a submission was planned
  type: list
  elements: dict
crash_loop:
  description: >-
    The crash-loop count: count (attempts that FAILED in a row without passing step), step (the furthest step
    they reached, null when none logged one), attempts (their ids), limit; before a submission also retry and
    blocked.
  returned: when a submission was planned, and with O(state=status)
  type: dict
attempts:
  description: >-
    With O(state=status): every attempt of the experiment, oldest first (from Ray, the end records and the attempt
    logs): submission_id, attempt, status, submitted_at, ended_at, first_step, last_step, exception (the C(Xxx:
    message) line of the last traceback that no step followed), exception_line, hint, faq, resumed_from_iteration,
    data_state, log.
  returned: with O(state=status)
  type: list
  elements: dict
actions:
  description: Sentences saying what was done (or would be done in check mode).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.job import ray_job_task


def main():
    ray_job_task.main(AnsibleModule(**ray_job_task.module_kwargs()))


if __name__ == "__main__":
    main()
