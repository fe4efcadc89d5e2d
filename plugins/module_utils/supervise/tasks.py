# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""The modules' work the supervisor runs, each in a process of its own as Ansible runs a module: the task's
arguments as JSON on stdin, an AnsibleModule made as the module makes it, the result as the JSON it prints.
The arguments are the ones the roles gave the modules (config.json), so a check decides by the same code
with the same inputs as a site.yml run.
Standard library only; Python 3.8+."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts import dataset_check_task, hf_model_check_task
from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import mcore_checkpoint_task, retention_task
from ansible_collections.mtslime.posttrain.plugins.module_utils.fanout import fanout_task
from ansible_collections.mtslime.posttrain.plugins.module_utils.job import notify_task, ray_job_task
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray import ray_start_task

TASKS = {
    "ray_start": ray_start_task,
    "ray_job": ray_job_task,
    "checkpoint_retention": retention_task,
    "job_notify": notify_task,
    "dataset_check": dataset_check_task,
    "hf_model_check": hf_model_check_task,
    "mcore_checkpoint": mcore_checkpoint_task,
    "fanout": fanout_task,
}
TIMEOUT = 1800


def run_here(name):
    """`python3 lib.zip task NAME`: the module's main() on the arguments read from stdin."""
    from ansible.module_utils.basic import AnsibleModule

    task = TASKS[name]
    sys.argv = sys.argv[:1]  # Ansible's argument loader then reads stdin
    task.main(AnsibleModule(**task.module_kwargs()))


def result_of(name, stdout, stderr, rc):
    """The module's result: the last JSON object it printed, or a failure that says how it ended."""
    for line in reversed((stdout or "").splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                found = json.loads(line)
            except ValueError:
                continue
            if isinstance(found, dict):
                return found
    tail = " / ".join((stderr or stdout or "").strip().splitlines()[-3:]) or "no output"
    return {"failed": True, "msg": "%s ended with rc %s and no result: %s" % (name, rc, tail)}


def run(library, name, args, environment=None, timeout=TIMEOUT, runner=subprocess.run):
    """The result of task `name` on `args`, run by `library` (lib.zip) in a process of its own."""
    env = dict(os.environ, **{str(k): str(v) for k, v in (environment or {}).items()})
    try:
        done = runner([sys.executable, library, "task", name], input=json.dumps({"ANSIBLE_MODULE_ARGS": args}),
                      capture_output=True, text=True, timeout=timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        return {"failed": True, "msg": "%s did not end within %d s" % (name, timeout)}
    return result_of(name, done.stdout, done.stderr, done.returncode)
