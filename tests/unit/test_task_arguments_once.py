"""A task's arguments that the supervisor runs again (config.json, docs/architecture.md "Unattended recovery") are
computed once, in one variable of the role; the task passes each of its keys and nothing else, so the task and
the supervisor cannot drift apart."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
# (task file, module, the variable its arguments come from, arguments of the task's own)
CASES = [
    ("roles/ray_head/tasks/main.yml", "mtslime.posttrain.ray_start", "_ray_head_start_args", set()),
    ("roles/ray_head/tasks/worker.yml", "mtslime.posttrain.ray_start", "_ray_head_join_args",
     {"cluster_nodes", "cluster_active_jobs"}),
    ("roles/train_job/tasks/main.yml", "mtslime.posttrain.ray_job", "_train_job_job_args", set()),
    ("roles/train_job/tasks/main.yml", "mtslime.posttrain.checkpoint_retention", "_train_job_retention_args",
     {"protect"}),
    ("roles/train_job/tasks/notify.yml", "mtslime.posttrain.job_notify", "_train_job_notify_args",
     {"job", "preflight"}),
    ("roles/train_job/tasks/main.yml", "mtslime.posttrain.job_supervise", "_train_job_supervisor_args", set()),
]


def variable_keys(role, name):
    value = yaml.safe_load((REPO / "roles" / role / "vars" / "main.yml").read_text())[name]
    if isinstance(value, dict):
        return set(value)
    # a dict built by a template, {'key': ...} | combine({'key': ...}): the keys at the first level of braces
    text = value.strip()[2:-2]
    return {m.group(1) for m in re.finditer(r"'([a-z_]+)': ", text)
            if text[:m.start()].count("{") - text[:m.start()].count("}") == 1}


@pytest.mark.parametrize("path, module, variable, own", CASES, ids=[c[2] + ":" + c[1].split(".")[-1] for c in CASES])
def test_the_task_passes_every_key_of_its_variable_and_only_those(path, module, variable, own):
    tasks = [t for t in yaml.safe_load((REPO / path).read_text()) if module in t]
    assert len(tasks) == 1, "one %s task in %s" % (module, path)
    arguments = tasks[0][module]
    from_variable = {key for key, value in arguments.items() if "%s.%s" % (variable, key) in str(value)}
    assert set(arguments) - from_variable == own, "arguments not taken from %s" % variable
    assert from_variable == variable_keys(path.split("/")[1], variable)
