"""A stand-in cluster for status.yml without Docker: the machine is the node
(container_enabled: false, local connection), Ray's Jobs API is the fake dashboard of
tests/unit/fake_ray.py (recorded Ray 2.60 answers), the job logs are the fixture logs
of two attempts (tests/unit/data/report/, real line format, nan included), and the save
directory holds torch_dist iterations laid out as Megatron writes them."""
from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "unit"))

import ckpt_layouts  # noqa: E402  (tests/unit is not a package)
from fake_ray import FakeRay  # noqa: E402

REPORT_DATA = os.path.join(REPO, "tests", "unit", "data", "report")
EXPERIMENT = "qwen3-8B"


def write_iteration(save, iteration, complete=True):
    """An iteration from real torch_dist metadata (tests/unit/data/dcp/); incomplete: no metadata.json."""
    return ckpt_layouts.ckpt_dir(os.path.join(save, "iter_%07d" % iteration), metadata_json=complete)


@dataclass
class Bed:
    root: str
    inventory: str
    logs: str
    save: str
    work: str
    rendered: str
    ray: FakeRay


def make_bed(root, ray=None):
    """Build the stand-in under `root`; the caller closes bed.ray."""
    root = str(root)
    logs = os.path.join(root, "work", "logs")
    save = os.path.join(root, "save")
    work = os.path.join(root, "work")
    manifests = os.path.join(work, "manifests")
    for path in (logs, save, manifests):
        os.makedirs(path, exist_ok=True)
    for name in sorted(os.listdir(REPORT_DATA)):
        if name.endswith(".log.txt"):
            shutil.copy(os.path.join(REPORT_DATA, name), os.path.join(logs, name[: -len(".txt")]))
    os.symlink("%s.%s-attempt-2.log" % (EXPERIMENT, EXPERIMENT), os.path.join(logs, "%s.log" % EXPERIMENT))
    for iteration in (4, 9, 14, 19, 24, 29, 34, 39, 44):
        write_iteration(save, iteration)
    with open(os.path.join(save, "latest_checkpointed_iteration.txt"), "w") as handle:
        handle.write("44")
    os.makedirs(os.path.join(save, "rollout"))
    with open(os.path.join(save, "rollout", "global_dataset_state_dict_44.pt"), "wb") as handle:
        handle.write(b"state")
    manifest = os.path.join(manifests, "%s-attempt-2.json" % EXPERIMENT)
    with open(manifest, "w") as handle:
        json.dump({"experiment": EXPERIMENT, "image": "mtslime-test/training-suite:current",
                   "versions": {"slime": "624b824a8", "ray": "2.60.0"}}, handle)

    ray = ray or FakeRay()
    ray.add_job("%s-attempt-1" % EXPERIMENT, status="FAILED",
                metadata={"mtslime_experiment": EXPERIMENT, "mtslime_attempt": "1"})
    ray.add_job("%s-attempt-2" % EXPERIMENT, status="RUNNING",
                metadata={"mtslime_experiment": EXPERIMENT, "mtslime_attempt": "2", "mtslime_manifest": manifest})

    inventory = os.path.join(root, "inventory")
    os.makedirs(os.path.join(inventory, "group_vars"))
    os.symlink(os.path.join(REPO, "inventory", "group_vars", "all"), os.path.join(inventory, "group_vars", "all"))
    rendered = os.path.join(root, "rendered")
    values = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "container_enabled": False,
        "slime_node_ip": "127.0.0.1",
        "slime_work_dir": work,
        "slime_save_dir": save,
        "slime_render_dir": rendered,
        "ray_dashboard_port": int(ray.url.rsplit(":", 1)[1]),
    }
    with open(os.path.join(inventory, "group_vars", "slime_nodes.yml"), "w") as handle:
        yaml.safe_dump(values, handle)
    with open(os.path.join(inventory, "hosts.yml"), "w") as handle:
        yaml.safe_dump({"all": {"children": {"slime_nodes": {"hosts": {"localhost": {}}}}}}, handle)
    return Bed(root=root, inventory=inventory, logs=logs, save=save, work=work, rendered=rendered, ray=ray)
