"""What the local stage tests share (tests/integration/playbooks/stage_local.yml): an inventory of two local nodes
on one storage, and the tasks a node ran."""
from __future__ import annotations

import sys

import yaml

PLAYBOOK = "tests/integration/playbooks/stage_local.yml"


def inventory(tmp_path, stage, values):
    """hosts.yml of nodes n1 and n2 (local connection, this Python) running role `stage` with `values`."""
    node = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {
        "children": {"slime_nodes": {"hosts": {"n1": dict(node), "n2": dict(node)}}},
        "vars": dict(values, stage=stage)}}))
    return str(path)


def ran(run, host, task):
    """The ok results of the tasks named with `task` that ran on `host`."""
    return [e for e in run.events if e.get("event") == "runner_on_ok" and e["event_data"].get("host") == host
            and task in (e["event_data"].get("task") or "")]
