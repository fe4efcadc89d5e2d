#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
module: train_metrics
short_description: Read every attempt's log of an experiment and return its curves (reward, pass@k, eval, speed)
version_added: "0.1.0"
description:
  - "Reads the log of every attempt of O(experiment) in O(log_dir), C(<model_name>.<submission_id>.log), oldest first,
    with the parser of M(mtslime.posttrain.train_progress), and returns one series per metric over the rollout ids:
    C(rollout/raw_reward), C(passrate/pass@k), C(eval/<name>) and C(eval/<name>-pass@k) per eval set,
    C(rollout/response_len/mean) and C(rollout/response_lengths), C(perf/tokens_per_gpu_per_sec),
    C(perf/actor_train_tok_per_s), C(perf/step_time), plus O(extra_metrics)."
  - "Attempt order: O(submission_ids) when given (the attempts of M(mtslime.posttrain.ray_job) C(state=status));
    otherwise the files found: C(<experiment>-attempt-<n>) by number, the run script's C(<experiment>_<YYYYmmdd-HHMMSS>)
    by date. A run started with the guide's own script (no per-attempt log, C(<model_name>.log) a plain file) is
    read as one attempt."
  - "Resumes are joined: a resumed attempt starts after the checkpoint it loaded, so for an id logged by several
    attempts the latest one's value is in RV(series.points) and the earlier ones in RV(series.superseded)."
  - "Values that are not finite numbers are kept, as the strings V(nan), V(inf) and V(-inf), so that a plot shows a gap
    there; RV(series.non_finite) counts them."
  - "The result is bounded: a series longer than O(max_points) keeps every k-th point plus every non-finite value and
    each attempt's first and last point, and says so in RV(series.downsampled)."
  - Used by M(mtslime.posttrain.train_report), which draws the curves on the controller.
options:
  log_dir:
    description: The job logs' directory (C(slime_log_dir), the guide's C(<work dir>/logs)).
    type: path
    required: true
  model_name:
    description: The log files' stem (C(slime_model_name)).
    type: str
    required: true
  experiment:
    description: The experiment (C(slime_experiment)); its jobs are C(<experiment>-attempt-<n>) or
      C(<experiment>_<date>).
    type: str
    required: true
  submission_ids:
    description: The attempts to read, oldest first; default every log of the experiment found in O(log_dir).
    type: list
    elements: str
    default: []
  extra_metrics:
    description: More metric keys to return, exactly as slime logs them (for example C(train/loss),
      C(train/grad_norm)); at most 20.
    type: list
    elements: str
    default: []
  max_points:
    description: Most points returned per series before it is downsampled (V(0) = no limit).
    type: int
    default: 4000
extends_documentation_fragment:
  - mtslime.posttrain.attributes
  - mtslime.posttrain.attributes.INFO_MODULE
seealso:
  - module: mtslime.posttrain.train_progress
  - module: mtslime.posttrain.train_report
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: The curves of the experiment
  mtslime.posttrain.train_metrics:
    log_dir: /home/slime/musa_example/qwen_32b_sherry/logs
    model_name: qwen3-8B
    experiment: qwen3-8B
    extra_metrics: [train/grad_norm]
  register: curves

- name: The reward at the last rollout
  ansible.builtin.debug:
    msg: "{{ curves.series['rollout/raw_reward'].points[-1] }}"
"""

RETURN = r"""
attempts:
  description: The logs read, oldest first.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: Position in this list (the attempt index of the series' points).
      type: int
    submission_id:
      description: The job's submission id.
      type: str
    attempt:
      description: Its attempt number (null for a job started by hand).
      type: int
    log:
      description: The log file.
      type: str
    started:
      description: The first time logged in it (the node's local time, C(YYYY-MM-DD HH:MM:SS)).
      type: str
    first_rollout:
      description: Smallest rollout id it logged.
      type: int
    last_rollout:
      description: Largest rollout id it logged.
      type: int
    first_step:
      description: Smallest step id it logged.
      type: int
    last_step:
      description: Largest step id it logged.
      type: int
    lines:
      description: Lines read.
      type: int
    bytes:
      description: Bytes read.
      type: int
    metric_lines:
      description: Metric lines parsed.
      type: int
    unparsed_metric_lines:
      description: Lines that looked like metric lines but whose dict did not parse (a torn last line).
      type: int
    loaded_iteration:
      description: Iteration of Megatron's C(successfully loaded checkpoint ... at iteration N) line (0 for the
        converted checkpoint).
      type: int
    loaded_from:
      description: The directory named on that line.
      type: str
missing_logs:
  description: Ids of O(submission_ids) that have no log in O(log_dir).
  returned: always
  type: list
  elements: str
series:
  description: "One entry per metric key, C({key: series})."
  returned: always
  type: dict
  contains:
    kind:
      description: The line it comes from (C(rollout), C(passrate), C(eval), C(perf), C(step)).
      type: str
    axis:
      description: V(rollout) (rollout ids) or V(step) (step ids).
      type: str
    points:
      description: "C([id, value, attempt index]) sorted by id, one per id; value a number or V(nan), V(inf), V(-inf)."
      type: list
      elements: list
    superseded:
      description: Values of ids that a later attempt logged again, C([id, value, attempt index]).
      type: list
      elements: list
    count:
      description: Points before downsampling.
      type: int
    non_finite:
      description: Points whose value is V(nan), V(inf) or V(-inf).
      type: int
    downsampled:
      description: "Null, or C({from, to, every, superseded_every}) when the series was longer than O(max_points)."
      type: dict
available_metrics:
  description: Every metric key the logs hold (at most 500), for O(extra_metrics).
  returned: always
  type: list
  elements: str
log_dir:
  description: The directory read.
  returned: always
  type: str
max_points:
  description: O(max_points).
  returned: always
  type: int
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.mtslime.posttrain.plugins.module_utils.logs.metric_series import MAX_EXTRA, experiment_series


def main():
    module = AnsibleModule(
        argument_spec=dict(
            log_dir=dict(type="path", required=True),
            model_name=dict(type="str", required=True),
            experiment=dict(type="str", required=True),
            submission_ids=dict(type="list", elements="str", default=[]),
            extra_metrics=dict(type="list", elements="str", default=[]),
            max_points=dict(type="int", default=4000),
        ),
        supports_check_mode=True,
    )
    params = module.params
    problems = []
    if params["max_points"] < 0:
        problems.append("max_points is %d; give a number >= 0 (0 = no limit)" % params["max_points"])
    if len(params["extra_metrics"]) > MAX_EXTRA:
        problems.append("extra_metrics has %d keys; give at most %d" % (len(params["extra_metrics"]), MAX_EXTRA))
    for name in ("model_name", "experiment"):
        if not params[name] or "/" in params[name]:
            problems.append("%s %r is not a file name stem; use the value of slime_%s" % (name, params[name], name))
    log_dir = os.path.abspath(params["log_dir"])
    if not os.path.isdir(log_dir):
        problems.append(
            "log_dir %s is not a directory: no job of the experiment has logged yet, or slime_log_dir points "
            "elsewhere (inside the training container it is <slime_work_dir>/logs)" % log_dir
        )
    if problems:
        module.fail_json(msg="train_metrics: " + "; ".join(problems))
    try:
        result = experiment_series(
            log_dir,
            params["model_name"],
            params["experiment"],
            submission_ids=params["submission_ids"],
            extra_metrics=params["extra_metrics"],
            max_points=params["max_points"],
        )
    except OSError as exc:
        module.fail_json(msg="train_metrics: cannot read %s: %s" % (exc.filename or log_dir, exc.strerror or exc))
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
