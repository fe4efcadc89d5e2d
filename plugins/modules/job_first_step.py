#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
# Documentation only: the work is done by the action plugin of the same name, which polls
# mtslime.posttrain.ray_job (state=status) and mtslime.posttrain.train_progress on the node.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: job_first_step
short_description: Wait for a training job's first step, by its log and its own Ray status, with progress
version_added: "0.1.0"
description:
  - "Polls, every O(interval) seconds, the job's status through the Jobs API (M(mtslime.posttrain.ray_job)
    V(state=status)) and its log (M(mtslime.posttrain.train_progress) with that status) until the log has a
    C(step N:) line. Prints a progress line at least every 30 s: the job's status, the log's length, and while
    slime waits for its placement group how many GPUs are missing (not registered with Ray, or held by others)."
  - "The job's own status decides: the wait fails only when the job is C(FAILED) or C(STOPPED), naming the
    exception line of its last traceback (C(Xxx: message), not the C(Traceback) header; rank prefixes and launcher
    noise removed) and the guide's FAQ hint, or when O(timeout) runs out. An error-looking line in the log of a job
    that is still C(PENDING) or C(RUNNING) (a traceback printed and handled, an OOM that slime recovers from) is
    reported as a warning, once, and the wait goes on."
  - Reads only; the job is never stopped, also not on timeout.
options:
  experiment:
    description: The experiment (C(slime_experiment)) whose job to wait for.
    type: str
    required: true
  submission_id:
    description: The job to wait for; default the experiment's latest.
    type: str
  log_file:
    description: The job's log on the node (the guide's log file, the link M(mtslime.posttrain.ray_job) keeps).
    type: path
    required: true
  timeout:
    description: Seconds to wait for the first step (C(train_job_first_step_timeout)).
    type: int
    default: 1800
  interval:
    description: Seconds between two polls.
    type: int
    default: 15
extends_documentation_fragment:
  - mtslime.posttrain.attributes
  - mtslime.posttrain.attributes.INFO_MODULE
  - mtslime.posttrain.ray
seealso:
  - module: mtslime.posttrain.ray_job
  - module: mtslime.posttrain.train_progress
author:
  - mtslime.posttrain contributors
"""

EXAMPLES = r"""
- name: Wait for the first training step
  mtslime.posttrain.job_first_step:
    dashboard_url: "{{ ray_dashboard_port | mtslime.posttrain.ray_dashboard_url }}"
    experiment: qwen3-8B
    submission_id: "{{ train_job_result.submission_id }}"
    log_file: /home/slime/musa_example/qwen_32b_sherry/logs/qwen3-8B.log
    timeout: 1800
"""

RETURN = r"""
msg:
  description: C(job <id> reached step N (first step M)), or why the wait failed.
  returned: always
  type: str
submission_id:
  description: The job waited for.
  returned: always
  type: str
status:
  description: Its Ray status at the last poll.
  returned: always
  type: str
first_step:
  description: The first step the log shows, or null.
  returned: always
  type: int
last_step:
  description: The last step the log shows, or null.
  returned: always
  type: int
waited:
  description: Seconds waited.
  returned: always
  type: float
survived_errors:
  description: The error lines the job logged while it kept running, C({line, warning}) (C(line) where the traceback
    starts), each also a warning.
  returned: always
  type: list
  elements: dict
waiting_for_gpus:
  description: train_progress's placement-group wait (needed, registered, available, missing, message), or null.
  returned: always
  type: dict
hint:
  description: The guide's advice for the error or the wait, or null.
  returned: always
  type: str
"""
