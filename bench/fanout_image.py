#!/usr/bin/env python
"""What the image fan-out costs for a real-sized image: the seed's docker save, its manifest, the spread, the load.

Runs tests/integration/playbooks/fanout_image_local.yml (the collection's playbooks/plays/fanout_image.yml and the
container role's image tasks) on N local "nodes" (loopback addresses 127.0.0.x, a storage directory each, this
machine's Docker engine) with the node-base test image (≈ 1 GB) under a tag of its own. The first run saves the
image on the seed and spreads the archive through the chain; then the tag is dropped and node N loads its copy
(the layers stay in the engine through node-base's own tag, so the load is a lower bound); a rerun must change
nothing. Prints the figures; no network shaping (loopback), so the spread is bound by disk and hashing.

Usage: flock /tmp/mtslime-docker.lock .venv/bin/python bench/fanout_image.py [--nodes 4] [--image IMAGE]
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from runner import run_playbook  # noqa: E402

PLAYBOOK = "tests/integration/playbooks/fanout_image_local.yml"
SAVE = "Save the image into its archive"
DESCRIBE = "Describe the seed's copy"


def inventory(root, count, image):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    hosts = {}
    for index in range(count):
        storage = "s%d" % (index + 1)
        hosts["n%d" % (index + 1)] = {
            "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "slime_node_ip": "127.0.0.%d" % (index + 2), "slime_storage": storage,
            "slime_fanout_image_archive": os.path.join(root, storage, "images", "training.tar")}
    values = {"slime_fanout_port": port, "slime_fanout_artifacts": ["image"], "container_enabled": True,
              "container_image": image, "container_pull": "never"}
    path = os.path.join(root, "hosts.yml")
    with open(path, "w", encoding="utf-8") as handle:
        yaml.safe_dump({"all": {"children": {"slime_nodes": {"hosts": hosts}}, "vars": values}}, handle)
    return path


def task_seconds(run, prefix):
    """The longest host's time in the tasks named `prefix...` (the hosts run them at once)."""
    return max([e["event_data"].get("duration", 0) for e in run.events if e.get("event") == "runner_on_ok"
                and (e["event_data"].get("task") or "").startswith(prefix)] or [0])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--image", default="mtslime-test/node-base:current")
    args = parser.parse_args()
    tag = "mtslime-test/fanout-image-bench:1"
    subprocess.run(["docker", "tag", args.image, tag], check=True)
    root = tempfile.mkdtemp(prefix="mtslime-fanout-image-bench-")
    hosts = inventory(root, args.nodes, tag)
    last = "n%d" % args.nodes
    try:
        start = time.time()
        first = run_playbook(PLAYBOOK, hosts, extravars={"drop_image": True, "load_on": last}, timeout=3600)
        first_s = time.time() - start
        if first.rc != 0:
            sys.exit("first run failed:\n" + first.stdout[-3000:])
        size = os.path.getsize(os.path.join(root, "s1", "images", "training.tar"))
        start = time.time()
        again = run_playbook(PLAYBOOK, hosts, extravars={"load_on": last}, timeout=3600)
        again_s = time.time() - start
        print("image %s: archive %.1f MB, %d storages (one chain)" % (args.image, size / 1e6, args.nodes))
        print("first run %.1f s: docker save on the seed %.1f s, its manifest (SHA-256 of %d pieces) %.1f s, "
              "the spread (its longest wait) %.1f s, docker load on %s %.1f s" % (
                  first_s, task_seconds(first, SAVE), -(-size // (4 << 20)), task_seconds(first, DESCRIBE),
                  task_seconds(first, "Wait for the spread"),
                  last, task_seconds(first, "Load the image archive")))
        print("rerun %.1f s, changed hosts %s (the seed's archive check %.1f s, manifest from its record %.1f s)" % (
            again_s, again.changed_hosts() or "none", task_seconds(again, SAVE), task_seconds(again, DESCRIBE)))
    finally:
        subprocess.run(["docker", "rmi", tag], check=False, capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
