"""Retention runs from the train_job role, through site.yml: `--tags retention` on the default inventory's node
(container_enabled false, so the stage runs on this machine; no Docker, no Ray: the job task is not selected) over
a save dir laid out with real torch_dist metadata (tests/unit/data/dcp/). Check mode predicts and changes
nothing; the run moves what the rule prunes to the trash dir, keeps the iteration a resume loads with its data
cursor; a rerun changes nothing; a save in progress blocks it. The docker-marked test runs the same through a
node whose stages run in the training container (the training-suite test image)."""
from __future__ import annotations

import os
import sys
import time

import pytest
from runner import run_playbook

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "unit"))
import ckpt_layouts  # noqa: E402

from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint.resume import resume_point  # noqa: E402

TASK = "Keep the newest train_job_keep_checkpoints"


@pytest.fixture
def bed(tmp_path):
    """Iterations 1-6 complete; the data cursors of 5 and 6 were never written, so a resume loads 4."""
    save = tmp_path / "save"
    for number in range(1, 7):
        ckpt_layouts.ckpt_dir(str(save / ("iter_%07d" % number)))
        if number <= 4:
            ckpt_layouts.data_state(str(save), number)
    ckpt_layouts.tracker(str(save), "6")
    later = time.time() + 5  # the tracker is written after its iteration's files
    os.utime(save / "latest_checkpointed_iteration.txt", (later, later))
    extravars = {"container_enabled": False, "container_extra_volumes": ["%s:%s" % (tmp_path, tmp_path)],
                 "slime_save_dir": str(save), "slime_log_dir": str(tmp_path / "logs"), "train_job_keep_checkpoints": 2}
    return save, extravars


def site(extravars, *args):
    run = run_playbook("site.yml", "inventory/", "--tags", "retention", *args, extravars=extravars, timeout=600)
    assert run.rc == 0, run.stdout[-3000:]
    found = run.results(TASK)
    assert len(found) == 1, run.stdout[-3000:]
    return found[0]


def iterations(save):
    return sorted(p.name for p in save.iterdir() if p.name.startswith("iter_"))


def test_site_prunes_through_the_role_keeping_what_a_resume_loads(bed):
    save, extravars = bed
    assert resume_point(str(save)) == 4
    before = iterations(save)

    predicted = site(extravars, "--check")
    assert predicted["changed"] and predicted["pruned"] == [1, 2, 3], predicted
    assert all(a.startswith("would move ") for a in predicted["actions"])
    assert iterations(save) == before and not os.path.exists(str(save) + ".trash")

    done = site(extravars)
    assert done["changed"] and done["pruned"] == [1, 2, 3] and done["kept"] == [4, 5, 6], done
    assert "a resume would load it" in done["protected"]["4"]
    assert iterations(save) == ["iter_0000004", "iter_0000005", "iter_0000006"]
    assert (save / "rollout" / "global_dataset_state_dict_4.pt").is_file()
    trash = sorted(os.listdir(str(save) + ".trash"))
    assert len(trash) == 6 and all(".pruned-" in name for name in trash), trash

    again = site(extravars)
    assert not again["changed"] and again["pruned"] == [], again


def test_a_save_in_progress_blocks_the_role_and_keep_zero_makes_no_call(bed):
    save, extravars = bed
    partial = save / "iter_0000007"  # Megatron writing the next save: shards, no metadata yet
    partial.mkdir()
    (partial / "__0_0.distcp").write_bytes(b"s")
    blocked = site(extravars)
    assert not blocked["changed"] and "iter_0000007/ is newer than the tracker (6)" in blocked["blocked"], blocked
    assert len(iterations(save)) == 7

    run = run_playbook("site.yml", "inventory/", "--tags", "retention", timeout=600,
                       extravars=dict(extravars, train_job_keep_checkpoints=0))
    assert run.rc == 0 and not run.results(TASK), "keep 0 keeps every checkpoint without a module call"


@pytest.mark.docker
def test_inside_the_training_container_as_site_runs_it(bed):
    """The same task through the stage target of a node with a container (community.docker.docker into the
    training-suite test image): the save dir is mounted at a /data path that exists only in the container, so a
    prune proves the module ran there."""
    import subprocess

    image, name = "mtslime-test/training-suite:current", "mtslime-retention-test"
    save, extravars = bed
    root = save.parent
    if subprocess.run(["docker", "image", "inspect", image], capture_output=True, check=False).returncode != 0:
        pytest.fail("the test image is missing: run tests/images/build first")
    subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
    subprocess.run(["docker", "run", "-d", "--name", name, "-v", "%s:/data/retention-test" % root, "--entrypoint",
                    "sleep", image, "inf"], check=True, capture_output=True)
    try:
        inside = {"container_enabled": True, "container_name": name, "slime_save_dir": "/data/retention-test/save",
                  "slime_log_dir": "/data/retention-test/logs", "train_job_keep_checkpoints": 2}
        done = site(inside)
        assert done["changed"] and done["pruned"] == [1, 2, 3] and done["kept"] == [4, 5, 6], done
        assert done["trash_dir"] == "/data/retention-test/save.trash"
        assert iterations(save) == ["iter_0000004", "iter_0000005", "iter_0000006"]
        assert not site(inside)["changed"]
    finally:
        subprocess.run(["docker", "exec", name, "chown", "-R", "%d:%d" % (os.getuid(), os.getgid()),
                        "/data/retention-test"], capture_output=True, check=False)
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
