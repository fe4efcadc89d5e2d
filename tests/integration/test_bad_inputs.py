"""Issue 12's acceptance: each bad input is refused by playbooks/render.yml before any node is touched (no fact
gathering, nothing rendered), with a message naming the variable; the valid variants render."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
EXAMPLES = os.path.join(REPO, "inventory", "examples")


def render(tmp_path, inventory, extra, *args):
    out = tmp_path / "rendered"
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ["PATH"], ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"))
    command = [os.path.join(BIN, "ansible-playbook"), "playbooks/render.yml", "-i", inventory,
               "-e", "render_dir=%s" % out, "-e", "ansible_connection=local",
               "-e", "ansible_python_interpreter=%s" % sys.executable, *args]
    if extra:
        command += ["-e", json.dumps(extra)]
    proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    return proc, out


def inventory(tmp_path, hosts_yml, group_vars=None):
    """A temporary inventory with the default group_vars/all and the given hosts and group files."""
    root = tmp_path / "inventory"
    (root / "group_vars").mkdir(parents=True)
    (root / "group_vars" / "all").symlink_to(os.path.join(REPO, "inventory", "group_vars", "all"))
    (root / "hosts.yml").write_text(textwrap.dedent(hosts_yml))
    for name, text in (group_vars or {}).items():
        (root / "group_vars" / name).write_text(textwrap.dedent(text))
    return str(root)


def escaped_host(tmp_path):
    return inventory(tmp_path, """\
        all:
          children:
            slime_nodes:
              hosts:
                "../../escaped": {}
        """)


def two_nodes(worker_vars):
    def build(tmp_path):
        return inventory(tmp_path, """\
            all:
              children:
                slime_nodes:
                  children:
                    big:
                      hosts:
                        n1: {slime_node_ip: 10.0.0.1}
                        n2: %s
            """ % json.dumps(dict({"slime_node_ip": "10.0.0.2"}, **worker_vars)),
                         {"big.yml": "slime_cluster: big\n"})
    return build


def node_in_two_clusters(tmp_path):
    return inventory(tmp_path, """\
        all:
          children:
            slime_nodes:
              children:
                cluster_a:
                  hosts:
                    a1: {slime_node_ip: 10.0.0.1}
                    shared: {slime_node_ip: 10.0.0.9}
                cluster_b:
                  hosts:
                    b1: {slime_node_ip: 10.0.1.1}
                    shared: {}
        """, {"cluster_a.yml": "slime_cluster: cluster_a\n", "cluster_b.yml": "slime_cluster: cluster_b\n"})


def shared_storage(second):
    def build(tmp_path):
        return inventory(tmp_path, """\
            all:
              children:
                slime_nodes:
                  vars: {}
                  hosts:
                    s1: {slime_node_ip: 10.0.0.1, container_name: slime_s1}
                    s2: %s
            """ % json.dumps(dict({"slime_node_ip": "10.0.0.2", "container_name": "slime_s2",
                                   "slime_experiment": "other"}, **second)),
                         {"slime_nodes.yml": "slime_storage: nfs\n"})
    return build


def example(name):
    return lambda tmp_path: os.path.join(EXAMPLES, name)


def DEFAULT(tmp_path):
    return "inventory/"


OVERRIDE = "slime_train_args_overrides"

# (id, inventory, extra vars, the variable the message names, words it says)
BAD = [
    ("experiment runs code", DEFAULT, {"slime_experiment": "$(curl x | sh)"}, "slime_experiment", "must be a name"),
    ("model name runs code", DEFAULT, {"slime_model_name": "q`id`"}, "slime_model_name", "must be a name"),
    ("newline in the log dir", DEFAULT, {"slime_log_dir": "/data/logs\ntouch /tmp/x"}, "slime_log_dir",
     "control characters"),
    ("newline in the work dir", DEFAULT, {"slime_work_dir": "/home/slime/w\nid"}, "slime_work_dir",
     "control characters"),
    ("container name rewrites YAML", DEFAULT, {"container_name": "slime_rl\nconnection: local"}, "container_name",
     "must be a name"),
    ("host name escapes render_dir", escaped_host, {}, "inventory_hostname", "render_dir/<host>"),
    (".. leaves the mount", DEFAULT, {"slime_data_dir": "/data/../etc/x"}, "slime_data_dir", "normalised"),
    ("save dir is the converted dir", DEFAULT, {"slime_save_dir": "/data/LLMs/MCORE/Qwen3-8B_slime"},
     "slime_save_dir", "the converted checkpoint dir"),
    ("save dir is the model dir", DEFAULT, {"slime_save_dir": "/data/models/Qwen3-8B"}, "slime_save_dir",
     "the Hugging Face model dir"),
    ("model dir is the data dir", DEFAULT, {"slime_hf_model_dir": "/data/models/data"}, "slime_hf_model_dir",
     "the data dir"),
    ("converted dir is the model dir", DEFAULT, {"slime_mcore_dir": "/data/models/Qwen3-8B"}, "slime_mcore_dir",
     "the Hugging Face model dir"),
    ("save set through the overrides", DEFAULT, {OVERRIDE: {"save": "/data/LLMs/MCORE/Qwen3-8B_slime/"}},
     "slime_train_args_overrides['save']", "the converted checkpoint dir"),
    ("clash across clusters, trailing /", shared_storage({"slime_save_dir": "/data/checkpoints/Qwen3-8B_slime/"}),
     {}, "slime_save_dir", "all use it as their save dir"),
    ("clash across clusters, overrides", shared_storage({"slime_save_dir": "/data/checkpoints/x",
                                                         OVERRIDE: {"save": "/data/checkpoints/Qwen3-8B_slime"}}),
     {}, "save", "all use it as their save dir"),
    ("clusters share a container's run dir", example("mixed-shared-storage"), {"container_name": "slime_rl"},
     "container_run_volumes", "all use it as their run dir"),
    ("port 8772.5", DEFAULT, {"ray_gcs_port": 8772.5}, "ray_gcs_port", "not a float"),
    ("port true", DEFAULT, {"ray_dashboard_port": True}, "ray_dashboard_port", "not a boolean"),
    ("rollout-batch-size 16.5", DEFAULT, {OVERRIDE: {"rollout-batch-size": 16.5}}, "['rollout-batch-size']",
     "integer flag"),
    ("lr fast", DEFAULT, {OVERRIDE: {"lr": "fast"}}, "['lr']", "number flag"),
    ("sequence-parallel 'false'", DEFAULT, {OVERRIDE: {"sequence-parallel": "false"}}, "['sequence-parallel']",
     "which turns it ON"),
    ("num-rollout -5", DEFAULT, {OVERRIDE: {"num-rollout": -5}}, "['num-rollout']", "must be >= 1"),
    ("global batch vs micro-batch x DP", DEFAULT, {OVERRIDE: {"tensor-model-parallel-size": 1, "micro-batch-size": 3}},
     "['micro-batch-size']", "not divisible by micro-batch-size 3 x data-parallel size 4"),
    ("engine TP vs heads", DEFAULT, {"slime_rollout_gpus_per_node": 3, OVERRIDE: {"rollout-num-gpus-per-engine": 3}},
     "['rollout-num-gpus-per-engine']", "cannot split num-attention-heads 32"),
    ("rollout temperature 0", DEFAULT, {OVERRIDE: {"rollout-temperature": 0}}, "['rollout-temperature']",
     "must be > 0"),
    ("TP above the groups, older Megatron", example("two-four-node-clusters"),
     {OVERRIDE: {"tensor-model-parallel-size": 16}}, "['tensor-model-parallel-size']",
     "does not divide num-query-groups 8"),
    ("MUSA head, CUDA worker", two_nodes({"slime_accelerator": "cuda"}), {}, "slime_accelerator", "homogeneous"),
    ("a node in two clusters", node_in_two_clusters, {}, "slime_cluster", "groups that name different clusters"),
    ("a worker's own override", two_nodes({OVERRIDE: {"lr": "2e-6"}}), {}, OVERRIDE,
     "differs between the nodes of cluster big"),
    ("non-IP slime_node_ip", DEFAULT, {"slime_node_ip": "node1.example"}, "slime_node_ip", "must be an IP address"),
    ("a list for a dict", DEFAULT, {OVERRIDE: ["lr", 1]}, OVERRIDE, "must be a dict"),
    ("rocm", DEFAULT, {"slime_accelerator": "rocm"}, "slime_accelerator", "slime_accelerator_profiles (musa, cuda)"),
    ("unknown flag", DEFAULT, {OVERRIDE: {"rollout-temprature": 1}}, "['rollout-temprature']",
     "did you mean --rollout-temperature"),
    ("misspelt SGLang flag", DEFAULT, {OVERRIDE: {"sglang-mem-fraction-statc": 0.7}},
     "['sglang-mem-fraction-statc']", "did you mean --sglang-mem-fraction-static"),
    ("0 GPUs per node", DEFAULT, {"slime_gpus_per_node": 0}, "slime_gpus_per_node", "must be an integer >= 1, <= 1024"),
    ("negative lock timeout", DEFAULT, {"data_lock_timeout": -1}, "data_lock_timeout", "must be an integer >= 1"),
    ("a number for a path", DEFAULT, {"container_archive_dir": -1}, "container_archive_dir",
     "must be an absolute path (a string), not an integer"),
    ("a number among the volumes", DEFAULT, {"container_volumes": ["/data:/data", 5]}, "container_volumes",
     "item 1 (5) must be a string host:container[:mode], not an integer"),
]


@pytest.mark.parametrize("build,extra,variable,words", [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_bad_input_is_refused_before_any_node_is_touched(tmp_path, build, extra, variable, words):
    proc, out = render(tmp_path, build(tmp_path), extra)
    assert proc.returncode != 0, proc.stdout[-3000:]
    messages = [line for line in proc.stdout.splitlines() if line.startswith("(") and variable in line]
    assert any(words in line for line in messages), proc.stdout[-6000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "Gathering Facts" not in proc.stdout, "facts were gathered: a node was touched"
    assert not out.exists(), "something was rendered: %s" % list(out.rglob("*"))


def script(out, node, name="run-qwen3-8B.sh"):
    return (out / node / name).read_text()


def test_greedy_eval_renders(tmp_path):
    proc, out = render(tmp_path, "inventory/", {OVERRIDE: {"eval-temperature": 0}})
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "--eval-temperature 0" in script(out, "localhost")


def test_tp_a_multiple_of_the_query_groups_renders_on_a_new_megatron(tmp_path):
    proc, out = render(tmp_path, os.path.join(EXAMPLES, "two-four-node-clusters"),
                       {OVERRIDE: {"tensor-model-parallel-size": 16}, "slime_megatron_tp_above_query_groups": True})
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "--tensor-model-parallel-size 16" in script(out, "a1")


def test_a_flag_of_slime_v031_renders(tmp_path):
    proc, out = render(tmp_path, "inventory/", {OVERRIDE: {"update-weight-buffer-size": 536870912}})
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "--update-weight-buffer-size 536870912" in script(out, "localhost")


def test_every_problem_at_once_in_one_message(tmp_path):
    proc, out = render(tmp_path, "inventory/", {"slime_experiment": "a b", "ray_gcs_port": True,
                                                OVERRIDE: {"lr": "fast", "sequence-parallel": "false"}})
    assert proc.returncode != 0 and not out.exists()
    assert "4 problem(s) in the configuration of cluster localhost (nothing was changed)" in proc.stdout
