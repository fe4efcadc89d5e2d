"""Node containers on a private network for the fan-out test and benchmark (bench/fanout.py).

Each node is a container of the node-base test image (Debian's python3 and iproute2) with its own host directory
as /data (nothing shared), NET_ADMIN for `tc`, and the collection's fanout/agent.py and fanout/pieces.py mounted
read-only. Agents run
with `docker exec`; their configuration comes from module_utils/fanout/plan.py, as the play's does."""
from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AGENT = os.path.join(REPO, "plugins", "module_utils", "fanout", "agent.py")
PIECES = os.path.join(REPO, "plugins", "module_utils", "fanout", "pieces.py")
IMAGE = "mtslime-test/node-base:current"
PORT = 8765


def sh(*argv, check=True, **kwargs):
    return subprocess.run(list(argv), check=check, text=True, capture_output=True, **kwargs)


class Bed:
    """`count` nodes named <prefix>-node<i> at <subnet>.<10+i> on the network <prefix>."""

    def __init__(self, prefix, subnet, root, count, image=IMAGE):
        self.prefix, self.subnet, self.root, self.count, self.image = prefix, subnet, root, count, image
        self.token = secrets.token_hex(16)
        self.names = ["%s-node%d" % (prefix, i) for i in range(1, count + 1)]

    def ip(self, name):
        return "%s.%d" % (self.subnet, 10 + self.names.index(name) + 1)

    def data(self, name):
        return os.path.join(self.root, name)

    def up(self):
        self.down()
        sh("docker", "network", "create", "--subnet", self.subnet + ".0/24", self.prefix)
        for name in self.names:
            os.makedirs(self.data(name), exist_ok=True)
            sh("docker", "run", "-d", "--name", name, "--network", self.prefix, "--ip", self.ip(name),
               "--cap-add", "NET_ADMIN", "-v", "%s:/data" % self.data(name),
               "-v", "%s:/opt/fanout/agent.py:ro" % AGENT, "-v", "%s:/opt/fanout/pieces.py:ro" % PIECES,
               "--label", "org.mtslime.test=" + self.prefix,
               self.image, "sleep", "infinity")
        return self

    def down(self):
        for name in self.names:
            if sh("docker", "inspect", name, check=False).returncode == 0:
                # files the containers wrote as root go back to this user before the directory is removed
                sh("docker", "exec", name, "chown", "-R", "%d:%d" % (os.getuid(), os.getgid()), "/data", check=False)
                sh("docker", "rm", "-f", name, check=False)
        sh("docker", "network", "rm", self.prefix, check=False)

    def limit(self, name, rate, burst="32kbit", latency="400ms"):
        """Shape the node's outgoing link (tbf, as a slow NIC or a shared uplink)."""
        sh("docker", "exec", name, "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", rate,
           "burst", burst, "latency", latency)

    def cut(self, name):
        sh("docker", "network", "disconnect", "-f", self.prefix, name)

    def reconnect(self, name):
        sh("docker", "network", "connect", "--ip", self.ip(name), self.prefix, name)

    def configs(self, plan, manifest, path, sources=None, **knobs):
        """{node: agent config} for a plan of fanout_plan.plan over storages named like the nodes. `path` is the
        artifact's path under /data; sources: {seed name: source path in its container} (default: `path`)."""
        result = {}
        for name, server in plan["servers"].items():
            if name in plan["pullers"]:
                continue
            result[name] = {"role": "seed", "src": (sources or {}).get(name, path), "children": server["children"]}
        for name, puller in plan["pullers"].items():
            result[name] = {"role": "pull", "dest": path, "children": puller["children"],
                            "upstreams": [{"name": u["name"], "url": "http://%s:%d" % (u["address"], PORT)}
                                          for u in puller["upstreams"]]}
        for name, cfg in result.items():
            cfg.update({"name": name, "manifest": manifest, "token": self.token, "bind": self.ip(name),
                        "port": PORT, "progress_file": "/data/fanout-progress.json", "progress_interval": 2})
            cfg.update(knobs)
        return result

    def start(self, configs):
        """Start every node's agent at once; returns {node: Popen}."""
        procs = {}
        for name, cfg in configs.items():
            with open(os.path.join(self.data(name), "fanout-config.json"), "w", encoding="utf-8") as handle:
                json.dump(cfg, handle)
            procs[name] = subprocess.Popen(
                ["docker", "exec", name, "python3", "/opt/fanout/agent.py", "run", "/data/fanout-config.json"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return procs

    @staticmethod
    def finish(procs, timeout=300):
        """{node: (returncode, result dict or None, stderr)} once every agent has exited."""
        out = {}
        end = time.time() + timeout
        for name, proc in procs.items():
            try:
                stdout, stderr = proc.communicate(timeout=max(1, end - time.time()))
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, stderr = proc.communicate()
            try:
                result = json.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else None
            except ValueError:
                result = None
            out[name] = (proc.returncode, result, stderr)
        return out

    def progress(self, name):
        try:
            with open(os.path.join(self.data(name), "fanout-progress.json"), encoding="utf-8") as handle:
                return json.load(handle)
        except (OSError, ValueError):
            return None

    def clear(self, name, path):
        """Remove what a node received under /data (the bench's own copies; never user data)."""
        sh("docker", "exec", name, "rm", "-rf", path, path + ".fanout-partial", "/data/fanout-progress.json")


def make_artifact(root, megabytes, seed=0):
    """A model-like directory: config.json, a tokenizer and safetensors-sized shards of random bytes."""
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    with open(os.path.join(root, "config.json"), "w", encoding="utf-8") as handle:
        json.dump({"architectures": ["Qwen3ForCausalLM"], "seed": seed}, handle)
    with open(os.path.join(root, "tokenizer.json"), "w", encoding="utf-8") as handle:
        handle.write("{}")
    shards = max(1, megabytes // 64)
    left = megabytes << 20
    for index in range(shards):
        size = left // (shards - index)
        left -= size
        with open(os.path.join(root, "model-%05d-of-%05d.safetensors" % (index + 1, shards)), "wb") as handle:
            while size:
                chunk = min(size, 1 << 20)
                handle.write(os.urandom(chunk))
                size -= chunk
    return root
