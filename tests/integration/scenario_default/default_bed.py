"""The `default` scenario's test bed (the guide's single node), as the scenario checks see it:
real Docker, real Ray in the training container, and the stand-in train.py / converter /
mthreads-gmi (tests/standins/, they replace the GPU programs)."""
from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request

from runner import run_playbook

INVENTORY = "molecule/default/inventory"
ROOT = "/tmp/mtslime-molecule-default"
DATA = ROOT + "/data"
SAVE = DATA + "/checkpoints/Qwen3-8B_slime"
MCORE = DATA + "/LLMs/MCORE/Qwen3-8B_slime"
MODEL = DATA + "/models/Qwen3-8B"
CONTROL = DATA + "/standin-control.json"
FIXTURES = ROOT + "/fixtures"
API = "http://127.0.0.1:8772"
CONTAINER = "slime_rl"
LOGS = "/home/slime/musa_example/qwen_32b_sherry/logs"
MANIFESTS = "/home/slime/musa_example/qwen_32b_sherry/manifests"


def jobs():
    with urllib.request.urlopen(API + "/api/jobs/", timeout=10) as answer:
        return json.load(answer)


def ours():
    return sorted((j for j in jobs() if (j.get("metadata") or {}).get("mtslime_experiment") == "qwen3-8B"),
                  key=lambda j: j.get("start_time") or 0)


def active():
    return [j for j in ours() if j["status"] in ("PENDING", "RUNNING")]


def wait(predicate, timeout=120, what="condition"):
    end = time.time() + timeout
    while time.time() < end:
        try:
            value = predicate()
        except (OSError, ValueError):  # a file read while the stand-in rewrites it in place, as Megatron does
            value = None
        if value:
            return value
        time.sleep(1)
    raise AssertionError("timed out waiting for " + what)


def in_container(command):
    return subprocess.run(["docker", "exec", CONTAINER, "bash", "-c", command],
                          capture_output=True, text=True, check=False)


def tracker():
    with open(os.path.join(SAVE, "latest_checkpointed_iteration.txt")) as handle:
        return int(handle.read().strip())


def control(**knobs):
    """The stand-ins' knobs: the job reads /data/standin-control.json (runtime_env), the
    converter run by the convert role reads the container's default /etc/mtslime-standin.json."""
    with open(CONTROL, "w") as handle:
        json.dump(knobs, handle)
    subprocess.run(["docker", "exec", "-i", CONTAINER, "bash", "-c", "cat > /etc/mtslime-standin.json"],
                   input=json.dumps(knobs), text=True, check=False)


def site(*args):
    return run_playbook("site.yml", INVENTORY, *args)


def first_step_of(submission_id):
    log = in_container("grep -m1 -oE 'step [0-9]+:' %s/qwen3-8B.%s.log" % (LOGS, submission_id)).stdout
    return int(log.split()[1].rstrip(":")) if log else None


def manifests():
    return set(in_container("ls %s" % MANIFESTS).stdout.split())


def container_id():
    found = subprocess.run(["docker", "inspect", "-f", "{{.Id}}", CONTAINER], capture_output=True, text=True,
                           check=False)
    return found.stdout.strip()
