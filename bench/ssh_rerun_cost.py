#!/usr/bin/env python
"""What a no-op rerun of site.yml costs on a converged fleet of SSH nodes with training containers.

N node containers of the ssh-node test image (sshd on port 2222, only the benchmark's key, the non-root
user `tester` with passwordless sudo, the Docker CLI on this machine's engine) on a private network; the
collection creates each node's training container (training-suite image, in the node's network
namespace) through the node's SSH + Docker, and runs every stage inside it over the node's SSH
connection (mtslime.posttrain.ssh_docker). After a converging site.yml run it measures, in the same run:
  - a no-op rerun of site.yml (must report changed=0),
  - the bare play of 8 no-op module calls (bench/noop8.yml) over the same SSH hosts,
  - the same 8 calls inside the training containers (bench/noop8_container.yml), for the exec's share,
and prints, per host: wall time, module calls, SSH connections and sessions (counted from each node's
sshd log: "Accepted publickey" = a TCP connection, "Starting session" = a command on it), and the ratio.
Both runs start with no SSH master (as a user's rerun the next morning), so each pays its connections.

What stands in: the Ray heads (bench/ray/dashboard/fake_heads.py, run inside each node's network
namespace) and the GPU tools (tests/standins). The data, the model and the converted checkpoint are the
test fixtures (bench/rerun_cost.py), shared by every training container (/data/fixtures).

BENCH_PROFILE=1 prints the rerun's slowest tasks. Options: --strategy NAME (for example mitogen_linear,
with ANSIBLE_STRATEGY_PLUGINS pointing at it); --set NAME=VALUE (repeatable) sets an inventory variable of every
node (VALUE read as YAML), for an A/B of one setting, for example --set train_job_supervise=false; --env NAME=VALUE
(repeatable) sets an environment variable of every ansible-playbook run, for an A/B of an Ansible setting, for example
--env ANSIBLE_CALLBACKS_ENABLED=mtslime.posttrain.cluster_recap (without the preload callback); --keep leaves the
converged fleet up and prints the environment that runs site.yml on it by hand (to profile one rerun, e.g. under
py-spy); --down takes a kept fleet down; --repeat N measures the rerun and the bare play N times, alternating, and
prints the median of each (a shared machine drifts by more than the cuts measured) with every pair's ratio.
Usage (Docker, under the shared lock): .venv/bin/python bench/ssh_rerun_cost.py [N] [--strategy NAME] [--set NAME=VALUE]
[--env NAME=VALUE] [--repeat N] [--keep | --down]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import statistics
import subprocess
import sys
import time

import ansible_runner
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rerun_cost import CONTROLLER_ACTIONS, controller_cpu, fixtures  # noqa: E402  (the local benchmark's shared pieces)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
ROOT = "/tmp/mtslime-bench-ssh"
NETWORK, SUBNET, PREFIX = "mtslime-bench-ssh", "172.31.249.0/24", "172.31.249."
PORT = 2222


def sh(*argv, check=True, **kwargs):
    return subprocess.run(argv, check=check, capture_output=True, text=True, **kwargs)


def node_name(index):
    return "mtslime-bench-ssh-node%d" % index


def train_name(index):
    return "mtslime-bench-ssh-train%d" % index


def close_masters():
    cp = ROOT + "/cp"
    for name in os.listdir(cp) if os.path.isdir(cp) else []:
        path = os.path.join(cp, name)
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            sh("ssh", "-o", "ControlPath=" + path, "-O", "exit", "x", check=False)


def down(size):
    close_masters()
    # Each training container's supervisor keeper (train_job_supervise, on by default) too.
    names = [train_name(i) for i in range(size)] + [train_name(i) + "-supervisor" for i in range(size)]
    names += [node_name(i) for i in range(size)]
    sh("docker", "rm", "-f", *names, check=False)
    sh("docker", "network", "rm", NETWORK, check=False)
    # The training containers wrote as root into the shared run directories: remove them too.
    shutil.rmtree(ROOT, ignore_errors=True)


def up(size, shared):
    down(size)
    os.makedirs(ROOT + "/ssh", mode=0o700)
    os.makedirs(ROOT + "/data")
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", ROOT + "/ssh/key")
    shutil.copy(ROOT + "/ssh/key.pub", ROOT + "/ssh/authorized_keys")
    sh("docker", "network", "create", "--subnet", SUBNET, NETWORK)
    ports = []
    for index in range(size):
        sh("docker", "run", "-d", "--name", node_name(index), "--hostname", node_name(index), "--pid", "host",
           "--network", NETWORK, "--ip", PREFIX + str(11 + index),
           "-v", "/var/run/docker.sock:/var/run/docker.sock",
           "-v", ROOT + "/ssh/authorized_keys:/run/ssh-node/authorized_keys:ro",
           "-v", "%s/data:%s/data" % (ROOT, ROOT),
           "-v", "%s:%s:ro" % (REPO, REPO),
           "-v", "%s/tests/standins/rootfs/usr/local/bin:/opt/standins/bin:ro" % REPO,
           "mtslime-test/ssh-node:current", "/usr/local/sbin/ssh-node", str(PORT))
        # One stand-in Ray head per node, in the node's network namespace (the training container's too).
        sh("docker", "exec", "-d", node_name(index), "python3", REPO + "/bench/ray/dashboard/fake_heads.py", "1",
           "/tmp/fake-heads.json")
    for index in range(size):
        for dummy in range(100):  # sshd answers
            banner = sh("bash", "-c", "timeout 1 bash -c 'head -c 20 < /dev/tcp/%s%d/%d'" % (PREFIX, 11 + index, PORT),
                        check=False)
            if "OpenSSH" in banner.stdout:
                break
            time.sleep(0.2)
        for dummy in range(100):
            found = sh("docker", "exec", node_name(index), "cat", "/tmp/fake-heads.json", check=False)
            if found.returncode == 0 and found.stdout:
                ports.append(json.loads(found.stdout)["nodes"][0])
                break
            time.sleep(0.2)
        else:
            raise SystemExit("the stand-in Ray head of %s did not start" % node_name(index))
    return ports


def inventory(size, shared, ports, settings):
    os.makedirs(ROOT + "/inventory/group_vars")
    os.symlink(os.path.join(REPO, "inventory", "group_vars", "all"), ROOT + "/inventory/group_vars/all")
    hosts = {}
    for index in range(size):
        hosts["ssh-%02d" % index] = {
            "ansible_host": PREFIX + str(11 + index),
            "container_name": train_name(index),
            "container_network_mode": "container:" + node_name(index),
            "slime_save_dir": "/data/save/ssh-%02d" % index,
            "ray_dashboard_port": ports[index]["dashboard_port"],
            "ray_gcs_port": ports[index]["gcs_port"],
            "convert_master_port": 40000 + index,
        }
    common = {
        "ansible_connection": "ssh", "ansible_port": PORT, "ansible_user": "tester",
        "ansible_ssh_private_key_file": ROOT + "/ssh/key",
        "ansible_ssh_common_args": "-o UserKnownHostsFile=%s/ssh/known_hosts" % ROOT,
        "ansible_become": True, "ansible_python_interpreter": "/usr/bin/python3",
        "container_image": "mtslime-test/training-suite:current", "container_pull": "never",
        "container_privileged": False, "container_shm_size": "1g",
        # Each run's own /data (run directories, checkpoints), and the shared fixtures inside it.
        "container_volumes": ["%s/data:/data" % ROOT, "%s:/data/fixtures" % shared],
        "slime_node_ip": "127.0.0.1",
        "slime_data_dir": "/data/fixtures/data", "slime_hf_model_dir": "/data/fixtures/model",
        "slime_mcore_dir": "/data/fixtures/mcore",
        "slime_accelerator_tool_dir": "/opt/standins/bin",
        "preflight_checkpoint_gib": 1,
        "train_job_follow_logs": False,
        "slime_render_dir": ROOT + "/rendered",
    }
    common.update(settings)
    with open(ROOT + "/inventory/group_vars/slime_nodes.yml", "w") as handle:
        yaml.safe_dump(common, handle)
    with open(ROOT + "/inventory/hosts.yml", "w") as handle:
        yaml.safe_dump({"all": {"children": {"slime_nodes": {"hosts": hosts}}}}, handle)
    return sorted(hosts)


def sshd_counts(size):
    counts = {}
    for index in range(size):
        log = sh("docker", "exec", node_name(index), "cat", "/var/log/sshd.log").stdout.splitlines()
        counts["ssh-%02d" % index] = (sum("Accepted publickey" in line for line in log),
                                      sum("Starting session" in line for line in log))
    return counts


def environment():
    """The environment every ansible-playbook run of the benchmark gets."""
    return {
        "PATH": BIN + os.pathsep + os.environ.get("PATH", ""),
        "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": os.path.join(REPO, "collections"),
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": ROOT + "/facts",
        "ANSIBLE_SSH_CONTROL_PATH_DIR": ROOT + "/cp",
    }


ENV_SETTINGS = {}  # --env NAME=VALUE


def run(playbook, strategy=None):
    env = environment()
    if os.environ.get("BENCH_PROFILE"):
        env["ANSIBLE_CALLBACKS_ENABLED"] = ("mtslime.posttrain.cluster_recap,mtslime.posttrain.preload,"
                                            "ansible.builtin.profile_tasks")
        env["PROFILE_TASKS_TASK_OUTPUT_LIMIT"] = "40"
        # BENCH_PROFILE=all: every task in playbook order (profile_tasks' own options)
        if os.environ["BENCH_PROFILE"] == "all":
            env.update(PROFILE_TASKS_TASK_OUTPUT_LIMIT="all", PROFILE_TASKS_SORT_ORDER="none")
    if strategy:
        env["ANSIBLE_STRATEGY"] = strategy
        for var in ("ANSIBLE_STRATEGY_PLUGINS", "PYTHONPATH"):
            if os.environ.get(var):
                env[var] = os.environ[var]
    env.update(ENV_SETTINGS)
    os.makedirs(ROOT + "/runner", exist_ok=True)
    start, cpu = time.monotonic(), controller_cpu()
    result = ansible_runner.run(private_data_dir=ROOT + "/runner", playbook=playbook,
                                inventory=ROOT + "/inventory", envvars=env, quiet=True, fact_cache_type="")
    elapsed = time.monotonic() - start
    if result.rc != 0:
        raise SystemExit("%s failed (rc %s):\n%s" % (playbook, result.rc, result.stdout.read()[-4000:]))
    result.cpu_s = controller_cpu() - cpu
    return elapsed, result


def module_calls(result, hosts):
    total = 0
    for event in result.events:
        if event.get("event") not in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable"):
            continue
        data = event["event_data"]
        action = (data.get("resolved_action") or data.get("task_action") or "").rsplit(".", 1)[-1]
        if action not in CONTROLLER_ACTIONS and data.get("host") in hosts:
            total += 1
    return total / len(hosts)


def measured(playbook, hosts, size, strategy):
    close_masters()
    before = sshd_counts(size)
    elapsed, result = run(playbook, strategy)
    after = sshd_counts(size)
    connections = sum(after[h][0] - before[h][0] for h in hosts) / len(hosts)
    sessions = sum(after[h][1] - before[h][1] for h in hosts) / len(hosts)
    return elapsed, result, module_calls(result, hosts), connections, sessions


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("size", nargs="?", type=int, default=8)
    parser.add_argument("--strategy")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--down", action="store_true")
    args = parser.parse_args()
    if args.down:
        down(args.size)
        return
    ENV_SETTINGS.update(item.split("=", 1) for item in args.env)
    shared = fixtures()
    try:
        ports = up(args.size, shared)
        settings = {name: yaml.safe_load(value) for name, value in (item.split("=", 1) for item in args.set)}
        hosts = inventory(args.size, shared, ports, settings)
        converge, dummy = run(os.path.join(REPO, "site.yml"), args.strategy)
        pairs = []
        for dummy in range(max(1, args.repeat)):
            rerun, result, calls, connections, sessions = measured(os.path.join(REPO, "site.yml"), hosts, args.size,
                                                                   args.strategy)
            changed = {h: c for h, c in (result.stats.get("changed") or {}).items() if c}
            if changed:
                raise SystemExit("the rerun changed %s" % changed)
            bare, bare_result, bare_calls, bare_connections, bare_sessions = measured(
                os.path.join(REPO, "bench", "noop8.yml"), hosts, args.size, args.strategy)
            pairs.append((rerun, result.cpu_s, bare, bare_result.cpu_s))
        if os.environ.get("BENCH_PROFILE"):
            print(result.stdout.read()[-5000 if os.environ["BENCH_PROFILE"] != "all" else -60000:])
        rerun, result.cpu_s, bare, bare_result.cpu_s = (statistics.median(p[i] for p in pairs) for i in range(4))
        inside = measured(os.path.join(REPO, "bench", "noop8_container.yml"), hosts, args.size, args.strategy)[0]
        row = {"nodes": args.size, "strategy": args.strategy or "linear", "settings": settings, "env": ENV_SETTINGS,
               "converge_s": round(converge, 1),
               "rerun_s": round(rerun, 1), "rerun_calls_per_host": round(calls, 2),
               "rerun_connections_per_host": round(connections, 2), "rerun_sessions_per_host": round(sessions, 2),
               "noop8_s": round(bare, 1), "noop8_calls_per_host": round(bare_calls, 2),
               "noop8_connections_per_host": round(bare_connections, 2),
               "noop8_sessions_per_host": round(bare_sessions, 2), "ratio": round(rerun / bare, 2),
               "noop8_in_container_s": round(inside, 1),
               "rerun_controller_cpu_s": round(result.cpu_s, 1), "noop8_controller_cpu_s": round(bare_result.cpu_s, 1),
               "pairs": [{"rerun_s": round(r, 1), "rerun_cpu_s": round(rc, 1), "noop8_s": round(b, 1),
                          "noop8_cpu_s": round(bc, 1), "ratio": round(r / b, 2)} for r, rc, b, bc in pairs]}
        shown = "".join(", %s=%s" % item for item in list(settings.items()) + list(ENV_SETTINGS.items()))
        print("%d SSH nodes (%s%s): converge %.1f s" % (args.size, row["strategy"], shown, converge))
        print("  site.yml rerun: %6.1f s, per host %.2f module calls, %.2f SSH connections, %.2f sessions"
              % (rerun, calls, connections, sessions))
        print("  noop8 play:     %6.1f s, per host %.2f module calls, %.2f SSH connections, %.2f sessions"
              % (bare, bare_calls, bare_connections, bare_sessions))
        print("  noop8 play in the training containers: %6.1f s" % inside)
        print("  ratio rerun / noop8: %.2f" % row["ratio"])
        print("  controller CPU (user + system): rerun %.1f s, noop8 %.1f s"
              % (row["rerun_controller_cpu_s"], row["noop8_controller_cpu_s"]))
        if len(pairs) > 1:
            print("  medians of %d alternating pairs; each (rerun s / CPU s, noop8 s / CPU s, ratio): %s" % (
                len(pairs), "; ".join("%.1f/%.1f, %.1f/%.1f, %.2f" % (r, rc, b, bc, r / b) for r, rc, b, bc in pairs)))
        out = "/tmp/mtslime-bench-ssh-%d-%s.json" % (args.size, row["strategy"])
        with open(out, "w") as handle:
            json.dump(row, handle, indent=2)
        print("results: " + out)
    finally:
        if args.keep:
            env = " ".join("%s=%s" % item for item in sorted(dict(environment(), **ENV_SETTINGS).items()))
            print("kept; a rerun by hand: env %s ansible-playbook -i %s/inventory %s/site.yml\n"
                  "take it down: %s %s %d --down"
                  % (env, ROOT, REPO, sys.executable, os.path.abspath(__file__), args.size))
        else:
            down(args.size)


if __name__ == "__main__":
    main()
