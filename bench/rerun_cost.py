#!/usr/bin/env python
"""What a no-op rerun of site.yml costs on a converged fleet of simulated nodes.

For each fleet size N (default 1, 8, 32, 64) it builds an inventory of N nodes that are
local-connection aliases of this machine (container_enabled: false, each its own
single-node cluster with its own run directory and Ray ports), brings them to a converged
state with a first site.yml run, then measures:
  - the wall time of a second site.yml run (which must report changed=0),
  - the module calls per host in it, in total and per role,
  - the wall time of a bare play of 8 no-op module calls over the same hosts (noop8.yml),
and prints the figures and the ratio of the two times.

What stands in: the Ray heads (bench/ray/dashboard/fake_heads.py, recorded Ray 2.60 responses; a real
head is ~650 MiB) and mthreads-gmi (tests/standins). The data, the model and the converted
checkpoint are the test fixtures, shared by all nodes. Everything else is the collection
as users run it. Usage: .venv/bin/python bench/rerun_cost.py [N ...]
"""
from __future__ import annotations

import collections
import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import time

import ansible_runner
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
ROOT = "/tmp/mtslime-bench"
# Actions that run on the controller without executing a module.
CONTROLLER_ACTIONS = {
    "set_fact", "debug", "assert", "fail", "meta", "include_tasks", "import_tasks", "include_role",
    "import_role", "validate_argument_spec", "group_by", "add_host", "include_vars",
    "validate_config", "controller_files",
}


def sh(*argv, **kwargs):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kwargs)


def fixtures():
    """Data, HF model and a converted checkpoint, shared by every simulated node."""
    base = os.path.join(ROOT, "shared")
    if os.path.exists(os.path.join(base, "ready")):
        return base
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    py = sys.executable
    sh(py, os.path.join(REPO, "tests/fixtures/make_hf_model.py"), os.path.join(base, "model"))
    sh(py, os.path.join(REPO, "tests/fixtures/make_dataset.py"), os.path.join(base, "fixtures"))
    data = os.path.join(base, "data")
    os.makedirs(data)
    with tarfile.open(os.path.join(base, "fixtures", "AIME_data.tgz")) as archive:
        for member in archive.getmembers():
            if member.isfile():
                member.name = os.path.basename(member.name)
                archive.extract(member, data)
    # A converted checkpoint the judge accepts: the metadata of a real Megatron save (the unit-test
    # fixture) and zero-filled shards of its sizes (the judge reads the metadata, never the weights).
    mcore = os.path.join(base, "mcore")
    release = os.path.join(mcore, "release")
    real = os.path.join(REPO, "tests", "unit", "data", "dcp", "megatron_1dcf0dafa884")
    os.makedirs(release)
    for name in (".metadata", "metadata.json"):
        shutil.copy(os.path.join(real, name), release)
    with open(os.path.join(real, "files.json")) as handle:
        for name, size in json.load(handle)["files"].items():
            with open(os.path.join(release, name), "wb") as shard:
                shard.truncate(size)
    with open(os.path.join(mcore, "latest_checkpointed_iteration.txt"), "w") as handle:
        handle.write("release")
    os.makedirs(os.path.join(base, "slime"))
    with open(os.path.join(base, "slime", "train.py"), "w") as handle:
        handle.write("# the job runs on the stand-in Ray heads only\n")
    # Record which model the checkpoint came from, with the collection's own modules.
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"))
    check = sh(os.path.join(BIN, "ansible"), "localhost", "-c", "local", "-e",
               "ansible_python_interpreter=" + sys.executable, "-m", "mtslime.posttrain.hf_model_check",
               "-a", "path=%s" % os.path.join(base, "model"), "-o", env=env).stdout
    fingerprint = json.loads(check.split("=>", 1)[1])["fingerprint"]
    sh(os.path.join(BIN, "ansible"), "localhost", "-c", "local", "-e", "ansible_python_interpreter=" + sys.executable,
       "-m", "mtslime.posttrain.mcore_checkpoint", "-a",
       "path=%s expect=release record_fingerprint=%s" % (mcore, fingerprint), env=env)
    open(os.path.join(base, "ready"), "w").close()
    return base


def inventory(size, shared, ports):
    root = os.path.join(ROOT, "fleet-%d" % size)
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(root, "inventory", "group_vars"))
    os.symlink(
        os.path.join(REPO, "inventory", "group_vars", "all"), os.path.join(root, "inventory", "group_vars", "all")
    )
    hosts = {}
    for index in range(size):
        name = "sim-%03d" % index
        node = os.path.join(root, "nodes", name)
        hosts[name] = {
            "slime_work_dir": node + "/work",
            "slime_save_dir": node + "/save",
            "ray_dashboard_port": ports[index]["dashboard_port"],
            "ray_gcs_port": ports[index]["gcs_port"],
            "convert_master_port": 40000 + index,
        }
    common = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "container_enabled": False,
        "slime_node_ip": "127.0.0.1",
        "slime_dir": shared + "/slime",
        "slime_data_dir": shared + "/data",
        "slime_hf_model_dir": shared + "/model",
        "slime_mcore_dir": shared + "/mcore",
        "slime_accelerator_tool_dir": os.path.join(REPO, "tests/standins/rootfs/usr/local/bin"),
        "preflight_checkpoint_gib": 1,
        "train_job_follow_logs": False,
        "slime_render_dir": root + "/rendered",
    }
    # A group_vars file, not inline group vars: those rank below group_vars/all/.
    with open(os.path.join(root, "inventory", "group_vars", "slime_nodes.yml"), "w") as handle:
        yaml.safe_dump(common, handle)
    with open(os.path.join(root, "inventory", "hosts.yml"), "w") as handle:
        yaml.safe_dump({"all": {"children": {"slime_nodes": {"hosts": hosts}}}}, handle)
    return root


def run(playbook, root):
    env = {
        "PATH": BIN + os.pathsep + os.environ.get("PATH", ""),
        "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": os.path.join(REPO, "collections"),
        "ANSIBLE_CACHE_PLUGIN_CONNECTION": os.path.join(root, "facts"),
    }
    if os.environ.get("BENCH_PROFILE"):
        env["ANSIBLE_CALLBACKS_ENABLED"] = ("mtslime.posttrain.cluster_recap,mtslime.posttrain.preload,"
                                            "ansible.builtin.profile_tasks")
        # BENCH_PROFILE=all: every task in playbook order (profile_tasks' own options)
        if os.environ["BENCH_PROFILE"] == "all":
            env.update(PROFILE_TASKS_TASK_OUTPUT_LIMIT="all", PROFILE_TASKS_SORT_ORDER="none")
    # An opt-in strategy (for example mitogen's: ANSIBLE_STRATEGY=mitogen_linear ANSIBLE_STRATEGY_PLUGINS=...).
    for var in ("ANSIBLE_STRATEGY", "ANSIBLE_STRATEGY_PLUGINS", "PYTHONPATH"):
        if os.environ.get(var):
            env[var] = os.environ[var]
    os.makedirs(os.path.join(root, "runner"), exist_ok=True)
    start, cpu = time.monotonic(), controller_cpu()
    result = ansible_runner.run(private_data_dir=os.path.join(root, "runner"), playbook=playbook,
                                inventory=os.path.join(root, "inventory"), envvars=env, quiet=True,
                                # keep ansible.cfg's fact cache (runner would make one per run)
                                fact_cache_type="")
    elapsed = time.monotonic() - start
    if result.rc != 0:
        raise SystemExit("%s failed (rc %s):\n%s" % (playbook, result.rc, result.stdout.read()[-4000:]))
    result.cpu_s = controller_cpu() - cpu
    return elapsed, result


def controller_cpu():
    """CPU seconds (user + system) of the finished ansible-playbook runs and everything they waited for.

    On a shared machine wall time varies with the load; this does not. With local nodes it includes the
    modules (they run on the controller), with SSH nodes only the controller's side (and the ssh clients)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def module_calls(result, hosts):
    per_role = collections.Counter()
    total = 0
    for event in result.events:
        if event.get("event") not in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable"):
            continue
        data = event["event_data"]
        action = (data.get("resolved_action") or data.get("task_action") or "").rsplit(".", 1)[-1]
        if action in CONTROLLER_ACTIONS or data.get("host") not in hosts:
            continue
        total += 1
        per_role[data.get("role") or data.get("play", "(play)")] += 1
    return total / len(hosts), {role: count / len(hosts) for role, count in sorted(per_role.items())}


def measure(size, shared):
    root = os.path.join(ROOT, "fleet-%d" % size)
    os.makedirs(root, exist_ok=True)
    ports_file = os.path.join(ROOT, "ports-%d.json" % size)
    if os.path.exists(ports_file):
        os.remove(ports_file)
    fake = subprocess.Popen([sys.executable, os.path.join(REPO, "bench", "ray", "dashboard", "fake_heads.py"),
                             str(size), ports_file])
    try:
        while not os.path.exists(ports_file):
            if fake.poll() is not None:
                raise SystemExit("the stand-in Ray heads exited with rc %s" % fake.returncode)
            time.sleep(0.1)
        with open(ports_file) as handle:
            ports = json.load(handle)["nodes"]
        root = inventory(size, shared, ports)
        hosts = ["sim-%03d" % i for i in range(size)]
        converge, dummy = run(os.path.join(REPO, "site.yml"), root)
        rerun, result = run(os.path.join(REPO, "site.yml"), root)
        if os.environ.get("BENCH_PROFILE"):
            print(result.stdout.read()[-6000 if os.environ["BENCH_PROFILE"] != "all" else -60000:])
        changed = {h: c for h, c in (result.stats.get("changed") or {}).items() if c}
        if changed:
            raise SystemExit("the rerun of %d nodes changed %s" % (size, changed))
        calls, per_role = module_calls(result, hosts)
        baseline, base_result = run(os.path.join(REPO, "bench", "noop8.yml"), root)
        base_calls, dummy = module_calls(base_result, hosts)
        return {"nodes": size, "converge_s": round(converge, 1), "rerun_s": round(rerun, 1),
                "calls_per_host": round(calls, 2), "per_role": per_role, "noop8_s": round(baseline, 1),
                "noop8_calls_per_host": round(base_calls, 2), "ratio": round(rerun / baseline, 2),
                "rerun_cpu_s": round(result.cpu_s, 1), "noop8_cpu_s": round(base_result.cpu_s, 1),
                "cpu_ratio": round(result.cpu_s / base_result.cpu_s, 2)}
    finally:
        fake.terminate()
        fake.wait()


def main():
    sizes = [int(arg) for arg in sys.argv[1:]] or [1, 8, 32, 64]
    os.makedirs(ROOT, exist_ok=True)
    shared = fixtures()
    rows = []
    print("%6s %10s %10s %14s %10s %7s %10s %10s %9s" % ("nodes", "converge", "rerun", "calls/host", "noop8", "ratio",
                                                         "rerun CPU", "noop8 CPU", "CPU ratio"))
    for size in sizes:
        row = measure(size, shared)
        rows.append(row)
        print("%6d %9.1fs %9.1fs %14.2f %9.1fs %7.2f %9.1fs %9.1fs %9.2f" % (
            row["nodes"], row["converge_s"], row["rerun_s"], row["calls_per_host"], row["noop8_s"], row["ratio"],
            row["rerun_cpu_s"], row["noop8_cpu_s"], row["cpu_ratio"]))
        print("       module calls per host and role in the rerun: %s" %
              ", ".join("%s %.2f" % item for item in row["per_role"].items()))
        sys.stdout.flush()
    with open(os.path.join(ROOT, "results.json"), "w") as handle:
        json.dump(rows, handle, indent=2)
    print("results: %s" % os.path.join(ROOT, "results.json"))


if __name__ == "__main__":
    main()
