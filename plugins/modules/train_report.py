#!/usr/bin/python
# Copyright: mtslime.posttrain contributors
# Apache License 2.0
# Documentation only: the work is done by the action plugin of the same name, which runs
# mtslime.posttrain.train_metrics on the node and draws on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: train_report
short_description: Draw a run's curves across every attempt (PNG) and write an HTML page with its status
version_added: "0.1.0"
description:
  - "Runs M(mtslime.posttrain.train_metrics) on the node (the head of a training cluster, inside the training container)
    to read every attempt's log of the experiment, then, on the controller, draws one panel per metric with matplotlib
    (Agg backend): reward (C(rollout/raw_reward)), pass@k, the score and pass@k of each eval set, response length,
    rollout and training tokens/s, step time, plus O(extra_metrics)."
  - "Each panel shows the run as one line over the rollout ids, resumes joined; each attempt's span is shaded and
    its start marked C(attempt N from iter K, STATUS); a V(nan)/V(inf) value is a gap in the line with a black x at
    the bottom of the panel; faint circles are values that an attempt logged before a later attempt did those
    rollouts again."
  - "Writes C(<dest>/<name>.png) and C(<dest>/<name>.html): the page embeds the PNG (base64) and shows the status table
    (job, attempts with their ends and exception lines, last values, checkpoints, manifest, TensorBoard command) from
    O(status). A file whose content would not change is not rewritten."
  - "The controller needs matplotlib (a dependency in C(pyproject.toml); C(./bootstrap) installs it)."
options:
  log_dir:
    description: The job logs' directory on the node (C(slime_log_dir)).
    type: path
    required: true
  model_name:
    description: The log files' stem (C(slime_model_name)).
    type: str
    required: true
  experiment:
    description: The experiment (C(slime_experiment)).
    type: str
    required: true
  submission_ids:
    description: The attempts to draw, oldest first; default every log of the experiment.
    type: list
    elements: str
  extra_metrics:
    description: More metric keys to draw, one panel each (for example C(train/loss), C(train/grad_norm)).
    type: list
    elements: str
  max_points:
    description: Points per series before it is downsampled (see M(mtslime.posttrain.train_metrics)).
    type: int
    default: 4000
  dest:
    description: Directory on the controller for the PNG and the HTML page (C(report_dir)).
    type: path
    required: true
  name:
    description: File name stem; default the cluster's name from O(status), else the host's name.
    type: str
  status:
    description: The cluster's status, as status.yml builds it (the C(mtslime.posttrain.slime_status) filter), for
      the page's tables.
    type: dict
  title:
    description: The picture's title; default C(<experiment> on <name>).
    type: str
extends_documentation_fragment:
  - mtslime.posttrain.attributes
attributes:
  action:
    description: Indicates this has a corresponding action plugin that runs on the controller.
    support: full
    details: Reads the logs on the node with M(mtslime.posttrain.train_metrics); draws and writes on the controller.
  check_mode:
    support: full
    details:
      - Reads and draws, and says which files it would write, without writing them.
  diff_mode:
    support: none
  idempotent:
    support: full
    details:
      - The same logs give the same files, which are then not rewritten.
seealso:
  - module: mtslime.posttrain.train_metrics
  - module: mtslime.posttrain.train_progress
author:
  - mtslime.posttrain contributors (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Draw the run of this cluster
  mtslime.posttrain.train_report:
    log_dir: "{{ slime_log_dir }}"
    model_name: "{{ slime_model_name }}"
    experiment: "{{ slime_experiment }}"
    dest: "{{ playbook_dir }}/rendered/report"
    status: "{{ slime_status }}"  # the cluster's status, as playbooks/plays/report.yml sets it
  register: report

- name: Where it is
  ansible.builtin.debug:
    msg: "{{ report.png }} {{ report.html }}"
"""

RETURN = r"""
png:
  description: Path of the PNG on the controller.
  returned: always
  type: str
  sample: /home/me/posttrain/rendered/report/localhost.png
html:
  description: Path of the HTML page on the controller.
  returned: always
  type: str
panels:
  description: What was drawn, panel by panel.
  returned: always
  type: list
  elements: dict
  contains:
    title:
      description: The panel's title.
      type: str
    keys:
      description: The metric keys of the panel.
      type: list
      elements: str
    empty:
      description: None of its metrics is in the logs; the panel says so.
      type: bool
    bbox:
      description: The panel's plot area in pixels of the PNG, C([left, top, right, bottom]).
      type: list
      elements: int
    curves:
      description: One entry per curve, C({key, label, color, points, non_finite, superseded, downsampled}).
      type: list
      elements: dict
width:
  description: Width of the PNG in pixels.
  returned: always
  type: int
height:
  description: Height of the PNG in pixels.
  returned: always
  type: int
attempts:
  description: The attempts read (RV(mtslime.posttrain.train_metrics#module:attempts)).
  returned: always
  type: list
  elements: dict
missing_logs:
  description: Attempts of O(submission_ids) without a log.
  returned: always
  type: list
  elements: str
points:
  description: "Points per metric before downsampling, C({key: count})."
  returned: always
  type: dict
available_metrics:
  description: Every metric key in the logs, for O(extra_metrics).
  returned: always
  type: list
  elements: str
actions:
  description: The files written (or that would be, in check mode).
  returned: always
  type: list
  elements: str
"""
