"""The example inventories are valid, each in its own test, and render valid clusters: every node's
hostfile lists its cluster's nodes (head first), the GPU split follows the cluster size; two clusters
that would share a save dir or a container's run dir on one storage are refused. The hosts are reached with a
local connection (facts from this machine); addresses come from the inventory."""
from __future__ import annotations

import os
import re

import pytest

from runner import REPO, run_playbook

EXAMPLES = os.path.join("inventory", "examples")


def render(example, tmp_path, *extra):
    out = tmp_path / "rendered"
    interpreter = os.path.join(os.path.dirname(os.sys.executable), "python")
    run = run_playbook("playbooks/render.yml", os.path.join(EXAMPLES, example), "-e", "ansible_connection=local",
                       *extra, extravars={"render_dir": str(out), "ansible_python_interpreter": interpreter})
    return run, out


def argv_value(script, flag):
    match = re.search(r"^\s*%s (\S+)" % re.escape(flag), script, re.MULTILINE)
    return match.group(1) if match else None


def test_two_four_node_clusters(tmp_path):
    run, out = render("two-four-node-clusters", tmp_path)
    assert run.rc == 0, run.stdout[-3000:]
    for cluster, prefix in (("a", "10.31.1."), ("b", "10.31.2.")):
        expected = ["%s%d slots=8" % (prefix, n) for n in range(11, 15)]
        for node in range(1, 5):
            hostfile = (out / ("%s%d" % (cluster, node)) / "hostfile").read_text().splitlines()
            assert hostfile == expected
        script = (out / ("%s1" % cluster) / "run-qwen3-8B.sh").read_text()
        assert "--actor-num-nodes 4 \\" in script and "--rollout-num-gpus 16 \\" in script
        assert argv_value(script, "--save") == "/data/checkpoints/qwen3-8B-%s" % cluster


def test_sixteen_experiments(tmp_path):
    run, out = render("sixteen-experiments", tmp_path)
    assert run.rc == 0, run.stdout[-3000:]
    rates = set()
    for n in range(1, 17):
        node = out / ("gpu%02d" % n)
        assert (node / "hostfile").read_text() == "10.20.0.%d slots=8\n" % (10 + n)
        script = (node / "run-qwen3-8B.sh").read_text()
        rates.add((argv_value(script, "--lr"), argv_value(script, "--seed")))
        assert "qwen3-8B-gpu%02d" % n in script
    assert len(rates) == 16


def test_mixed_shared_storage(tmp_path):
    run, out = render("mixed-shared-storage", tmp_path)
    assert run.rc == 0, run.stdout[-3000:]
    assert (out / "n02" / "hostfile").read_text() == "10.40.0.11 slots=8\n10.40.0.12 slots=8\n"
    saves = {argv_value((out / n / "run-qwen3-8B.sh").read_text(), "--save")
             for n in ("n01", "n03", "n04", "n05", "n06")}
    assert len(saves) == 5


def test_clusters_sharing_a_save_dir_on_one_storage_are_refused(tmp_path):
    run, out = render("mixed-shared-storage", tmp_path, "-e", "slime_save_dir=/data/checkpoints/same")
    assert run.rc != 0 and not out.exists()
    assert "on storage lustre, the node directory /data/checkpoints/same is shared: clusters big, n03, n04, n05, " \
           "n06 all use it as their save dir" in run.stdout
    assert "slime_save_dir" in run.stdout


def test_clusters_sharing_a_containers_run_dir_are_refused(tmp_path):
    """Without the example's container_name per cluster (the default name for all), the clusters' containers
    would share /data/mtslime/runs/slime_rl: refused, so the example's own setting is what keeps them apart."""
    run, out = render("mixed-shared-storage", tmp_path, "-e", "container_name=slime_rl")
    assert run.rc != 0 and not out.exists()
    assert "the node directory /data/mtslime/runs/slime_rl/logs is shared: clusters big, n03, n04, n05, n06 all " \
           "use it as their run dir" in run.stdout


@pytest.mark.parametrize("example", ["sixteen-experiments", "two-four-node-clusters", "mixed-shared-storage"])
def test_examples_are_not_part_of_the_default_inventory(example):
    assert os.path.isdir(os.path.join(REPO, EXAMPLES, example))
    with open(os.path.join(REPO, "ansible.cfg")) as handle:
        assert re.search(r"^ignore_patterns = .*\^examples\$", handle.read(), re.MULTILINE)
