#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: job_notify
short_description: Send word of a training job's events (failed, resubmitted, crash loop, finished, disk) once each
version_added: "0.1.0"
description:
  - "Reads the events that a result of M(mtslime.posttrain.ray_job) (O(job)) or of
    M(mtslime.posttrain.node_preflight) (O(preflight)) holds, as the job's own rules decided them
    (module_utils job/notify.py): C(attempt_failed) (an attempt of the history FAILED), C(resubmitted) (an attempt was
    submitted after one that did not succeed), C(crash_loop_stopped) (the crash-loop rule refused to submit),
    C(finished) (the job SUCCEEDED), C(disk_projection_exceeded) (the run's checkpoints will not fit on a node),
    and C(worker_lost) for each node of O(lost_workers)."
  - "Each event goes to every O(webhooks) URL as a JSON POST whose C(text) reads well in Slack, Mattermost and Teams
    incoming webhooks, with the fields C(event), C(experiment), C(cluster), C(host), C(node), C(job_id),
    C(attempt), C(step), C(exception) and C(time); and to O(command), run with the same JSON on its stdin."
  - "An event is sent once: C(<manifest_dir>/<experiment>.notified.json) (mode 0600) records which targets got
    which event (targets by a hash, never their URL), so a rerun sends nothing again."
  - "A webhook that fails (network error, HTTP 408, 425, 429 or 5xx) is tried O(retries) times more with backoff;
    a failure is a warning, never a failed task, and the event is tried again at the next run."
options:
  experiment:
    description: The experiment, as given to M(mtslime.posttrain.ray_job).
    type: str
    required: true
  cluster:
    description: The training cluster's name, for the message.
    type: str
    default: ""
  host:
    description: The head's inventory name, for the message.
    type: str
    required: true
  manifest_dir:
    description: The directory of the job's attempt records (C(manifests/) next to the run script), where the
      sent-once record is kept.
    type: path
    required: true
  job:
    description: A registered result of M(mtslime.posttrain.ray_job) (state running, failed or not, or status).
    type: dict
  preflight:
    description: "Registered results of M(mtslime.posttrain.node_preflight) by node, C({node: result})."
    type: dict
  lost_workers:
    description: "Nodes the supervisor found gone from the Ray head, C([{ip, since}]); each loss is a
      C(worker_lost) event."
    type: list
    elements: dict
    default: []
  webhooks:
    description: Incoming-webhook URLs. Secrets, never shown or logged.
    type: list
    elements: str
    default: []
  command:
    description: A shell command run on this host for each event, with the event's JSON on stdin.
    type: str
  retries:
    description: Tries more after a webhook's first failure (waiting 1, 2, 4 ... seconds).
    type: int
    default: 3
  timeout:
    description: Seconds one POST, or the command, may take.
    type: int
    default: 10
extends_documentation_fragment:
  - mtslime.posttrain.attributes
attributes:
  check_mode:
    support: full
    details:
      - Says which events would be sent to which targets (RV(events[].would_send)); sends and writes nothing.
  diff_mode:
    support: none
  idempotent:
    support: full
    details:
      - A second run finds every event in the sent-once record and sends nothing.
seealso:
  - module: mtslime.posttrain.ray_job
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Keep the training job running
  mtslime.posttrain.ray_job:
    experiment: qwen3-8B
    argv: [--load, /data/LLMs/MCORE/Qwen3-8B_slime]
    manifest_dir: /home/slime/musa_example/qwen_32b_sherry/manifests
  register: train_job
  ignore_errors: true

- name: Send word of its events (attempt failed, resubmitted, crash loop stopped, finished), once each
  mtslime.posttrain.job_notify:
    experiment: qwen3-8B
    cluster: node1
    host: "{{ inventory_hostname }}"
    manifest_dir: /home/slime/musa_example/qwen_32b_sherry/manifests
    job: "{{ train_job }}"
    webhooks: "{{ train_job_notify.webhooks }}"
    command: logger -t mtslime
"""

RETURN = r"""
events:
  description: One item per event found, oldest first.
  returned: always
  type: list
  elements: dict
  contains:
    event:
      description: C(attempt_failed), C(resubmitted), C(crash_loop_stopped), C(finished),
        C(disk_projection_exceeded) or C(worker_lost).
      type: str
    key:
      description: Its sent-once key (event and submission id, or node and path).
      type: str
    job_id:
      description: The attempt's submission id, when the event is about one.
      type: str
    text:
      description: The message's text.
      type: str
    delivered:
      description: Targets (C(webhook:<hash>), C(command:<hash>)) it was delivered to by this run.
      type: list
      elements: str
    already:
      description: Targets that had it from an earlier run.
      type: list
      elements: str
    would_send:
      description: In check mode, the targets it would go to.
      type: list
      elements: str
    failed:
      description: C({target, error}) for each target that failed after its retries.
      type: list
      elements: dict
state_file:
  description: The sent-once record.
  returned: always
  type: str
actions:
  description: Sentences saying what was sent (or would be).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.job import notify_task


def main():
    notify_task.main(AnsibleModule(**notify_task.module_kwargs()))


if __name__ == "__main__":
    main()
