"""The stand-in train.py saves as Megatron and slime do (tests/standins/README.md), and the collection's
checkpoint judge and resume rule read what it leaves at every named kill point. No Docker: train.py runs
here with the stand-in torch on its path and without Ray."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import dcp_metadata, layout, mcore
from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint.resume import resume_plan

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROOTFS = os.path.join(REPO, "tests", "standins", "rootfs")
SITE = os.path.join(ROOTFS, "opt", "venv", "lib", "python3.11", "site-packages")
TRAIN = os.path.join(ROOTFS, "home", "slime", "train.py")


@pytest.fixture
def bed(tmp_path):
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text("{}")
    with open(tmp_path / "prompts.jsonl", "w") as handle:
        for number in range(32):
            handle.write(json.dumps({"input": "question %d" % number, "label": "1"}) + "\n")
    return tmp_path


def train(bed, *extra, **knobs):
    env = dict(os.environ, PYTHONPATH=SITE, MTSLIME_STANDIN_NO_RAY="1", MTSLIME_STANDIN_STEP_SECONDS="0",
               MTSLIME_STANDIN_CONTROL=str(bed / "no-control.json"))
    env.update({"MTSLIME_STANDIN_" + key.upper(): str(value) for key, value in knobs.items()})
    save = str(bed / "save")
    argv = [sys.executable, TRAIN, "--hf-checkpoint", str(bed / "hf"), "--prompt-data", str(bed / "prompts.jsonl"),
            "--rollout-batch-size", "4", "--actor-num-gpus-per-node", "4", "--tensor-model-parallel-size", "2",
            "--load", save, "--save", save] + list(extra)
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)


def iter_dir(bed, iteration):
    return str(bed / "save" / ("iter_%07d" % iteration))


def test_saves_like_megatron_two_shards_per_rank_then_the_data_cursor(bed):
    run = train(bed, "--num-rollout", "4", "--save-interval", "2")
    assert run.returncode == 0, run.stderr
    assert layout.iterations_of(str(bed / "save")) == [1, 3]  # (r+1) % 2 == 0, and the last rollout
    names = sorted(os.listdir(iter_dir(bed, 3)))
    assert names == [".metadata"] + ["__%d_%d.distcp" % (r, k) for r in range(4) for k in (0, 1)] + [
        "common.pt", "metadata.json"]
    check = mcore.check_checkpoint_dir(iter_dir(bed, 3))
    assert check["complete"] and check["shards"] == 8
    extents = dcp_metadata.read_extents(os.path.join(iter_dir(bed, 3), ".metadata"))["extents"]
    assert extents == {n: os.path.getsize(os.path.join(iter_dir(bed, 3), n)) for n in names if n.endswith(".distcp")}
    with open(os.path.join(iter_dir(bed, 3), "metadata.json")) as handle:
        assert json.load(handle)["common_backend"] == "torch"
    order = [os.path.join(iter_dir(bed, 3), ".metadata"), os.path.join(iter_dir(bed, 3), "metadata.json"),
             str(bed / "save" / layout.TRACKER), str(bed / "save" / "rollout" / "global_dataset_state_dict_3.pt")]
    stamps = [os.stat(path).st_mtime_ns for path in order]
    assert stamps == sorted(stamps), "Megatron's order: .metadata, metadata.json, tracker, then slime's cursor"
    assert not os.path.exists(os.path.join(iter_dir(bed, 3), ".metadata.tmp"))
    assert resume_plan(str(bed / "save"))["resume_iteration"] == 3
    lines = re.findall(r"^\(MegatronTrainRayActor pid=\d+\) (?:  )?\[[\d\- :]+\.\d{6}\] (.*)$", run.stdout, re.M)
    assert lines == ["saving checkpoint at iteration       1 to %s in torch_dist format" % (bed / "save"),
                     "successfully saved checkpoint from iteration       1 to %s [ t 1/2, p 1/1 ]" % (bed / "save"),
                     "saving checkpoint at iteration       3 to %s in torch_dist format" % (bed / "save"),
                     "successfully saved checkpoint from iteration       3 to %s [ t 1/2, p 1/1 ]" % (bed / "save")]


def test_the_recent_layout_has_no_common_pt(bed):
    run = train(bed, "--num-rollout", "2", "--save-interval", "2", common_pt=0)
    assert run.returncode == 0, run.stderr
    assert "common.pt" not in os.listdir(iter_dir(bed, 1)) and mcore.is_complete_checkpoint_dir(iter_dir(bed, 1))
    with open(os.path.join(iter_dir(bed, 1), "metadata.json")) as handle:
        assert json.load(handle) == {"sharded_backend": "torch_dist", "sharded_backend_version": 1}
    root = dcp_metadata.load(os.path.join(iter_dir(bed, 1), ".metadata"))
    assert any(key.fields()["fqn"] == "common_state/shard_0_1" for key in root.fields()["storage_data"])


def test_no_save_without_save_interval(bed):
    run = train(bed, "--num-rollout", "3")
    assert run.returncode == 0, run.stderr
    assert not os.path.exists(str(bed / "save"))


@pytest.mark.parametrize("point,stage,resume,moved", [
    ("mid_shards", "shards", 1, [("iter_0000003", "incomplete")]),
    ("before_metadata", "shards", 1, [("iter_0000003", "incomplete")]),
    ("before_metadata_json", "no_metadata_json", 1, [("iter_0000003", "incomplete")]),
    ("before_tracker", "complete", 1, [("iter_0000003", "no-data-state")]),
    ("before_data_state", "complete", 1, [("iter_0000003", "no-data-state"), (layout.TRACKER, "no-data-state")]),
])
def test_a_kill_at_each_point_of_the_save(bed, point, stage, resume, moved):
    run = train(bed, "--num-rollout", "6", "--save-interval", "2", die_in_save=point, die_in_save_iteration=3)
    assert run.returncode == -9, run.stderr  # SIGKILL: no traceback, no cleanup
    assert "stand-in: killed at %s of the save of iteration 3" % point in run.stderr
    assert mcore.check_checkpoint_dir(iter_dir(bed, 3))["stage"] == stage
    plan = resume_plan(str(bed / "save"))
    assert plan["resume_iteration"] == resume
    assert [(os.path.basename(m["path"]), m["reason"]) for m in plan["moves"]] == moved
    if point == "mid_shards":
        assert sorted(n for n in os.listdir(iter_dir(bed, 3)) if n.endswith(".distcp")) == [
            "__0_0.distcp", "__0_1.distcp", "__1_0.distcp", "__1_1.distcp"]


def test_resuming_from_a_torn_iteration_fails_like_megatron(bed):
    assert train(bed, "--num-rollout", "2", "--save-interval", "2").returncode == 0
    with open(os.path.join(iter_dir(bed, 1), "__1_0.distcp"), "r+b") as handle:
        handle.truncate(5)
    run = train(bed, "--num-rollout", "4", "--save-interval", "2")
    assert run.returncode == 1
    assert ("torch.distributed.checkpoint.api.CheckpointException: CheckpointException ranks:dict_keys([0])"
            in run.stderr)
    assert ("RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory"
            in run.stderr)


def test_resume_reads_the_tracker_and_the_data_cursor(bed):
    assert train(bed, "--num-rollout", "2", "--save-interval", "2").returncode == 0
    run = train(bed, "--num-rollout", "4", "--save-interval", "2")
    assert run.returncode == 0, run.stderr
    assert " loading distributed checkpoint from %s at iteration 1" % (bed / "save") in run.stdout
    assert "load metadata from %s/rollout/global_dataset_state_dict_1.pt" % (bed / "save") in run.stdout
    assert re.findall(r" - step (\d+): ", run.stdout) == ["2", "3"]
    assert "start_rollout_id" not in run.stdout and "training finished" not in run.stdout


def test_an_empty_tracker_makes_megatron_exit(bed):
    assert train(bed, "--num-rollout", "2", "--save-interval", "2").returncode == 0
    open(str(bed / "save" / layout.TRACKER), "w").close()
    run = train(bed, "--num-rollout", "4", "--save-interval", "2")
    assert run.returncode == 0
    assert "ERROR: Invalid metadata file %s. Exiting" % (bed / "save" / layout.TRACKER) in run.stdout
    assert " - step " not in run.stdout


def test_errors_the_job_survives(bed):
    run = train(bed, "--num-rollout", "3", handled_traceback_at_step=1, oom_recovered_at_step=2)
    assert run.returncode == 0, run.stderr
    assert re.search(r"^\(RolloutManager pid=\d+\) \[.*\] fully_async_rollout\.py:191 - fully-async: process task "
                     r"raised\n\(RolloutManager pid=\d+\) Traceback \(most recent call last\):$", run.stdout, re.M)
    assert re.search(r"^\(RolloutManager pid=\d+\) httpx\.ReadTimeout: timed out$", run.stdout, re.M)
    assert "Decode out of memory happened. #retracted_reqs: 3" in run.stdout
    assert re.findall(r" - step (\d+): ", run.stdout) == ["0", "1", "2"]


def test_unknown_kill_point_is_refused(bed):
    run = train(bed, "--num-rollout", "2", die_in_save="halfway")
    assert run.returncode == 1 and "die_in_save='halfway': expected one of mid_shards" in run.stderr


def convert(tmp_path, save, **env_extra):
    """The guide's conversion with the stand-in torchrun (8 ranks) and converter, MUSA route."""
    model = tmp_path / "Qwen3-8B"
    if not model.exists():
        subprocess.run([sys.executable, os.path.join(REPO, "tests", "fixtures", "make_hf_model.py"), str(model)],
                       check=True, capture_output=True)
    home = os.path.join(ROOTFS, "home")
    env = dict(os.environ, MUSA_PATCH_PATH=os.path.join(home, "megatron-lm-musa-patch"),
               PYTHONPATH=":".join([SITE, os.path.join(home, "slime"), os.path.join(home, "Megatron-LM")]),
               MTSLIME_STANDIN_CONVERT_SECONDS="0.1", MTSLIME_STANDIN_CONTROL=str(tmp_path / "no-control.json"),
               MTSLIME_STANDIN_PG_LOG=str(tmp_path / "pg.jsonl"))
    env.update(env_extra)
    script = ('source scripts/models/qwen3-8B.sh && exec "$0" "$1" --nproc-per-node 8 --master-port 29779 '
              'tools/convert_hf_to_torch_dist.py "${MODEL_ARGS[@]}" --hf-checkpoint "$2" --save "$3" '
              '--use-cpu-initialization')
    torchrun = os.path.join(ROOTFS, "usr", "local", "bin", "torchrun")
    return subprocess.run(["bash", "-c", script, sys.executable, torchrun, str(model), str(save)],
                          cwd=os.path.join(home, "slime"), env=env, capture_output=True, text=True, timeout=120,
                          check=False)


@pytest.mark.parametrize("common_pt", ["1", "0"])
def test_the_converter_saves_through_the_same_format(tmp_path, common_pt):
    save = tmp_path / "Qwen3-8B_slime"
    run = convert(tmp_path, save, MTSLIME_STANDIN_COMMON_PT=common_pt)
    assert run.returncode == 0, run.stderr[-3000:]
    info = mcore.inspect_checkpoint(str(save), expect="release")
    assert info["state"] == "complete", info["message"]
    names = os.listdir(str(save / "release"))
    assert sorted(n for n in names if n.endswith(".distcp")) == [
        "__%d_%d.distcp" % (r, k) for r in range(8) for k in (0, 1)]
    assert ("common.pt" in names) == (common_pt == "1")


def test_a_conversion_killed_mid_shards_is_judged_by_the_write_order(tmp_path):
    save = tmp_path / "Qwen3-8B_slime"
    run = convert(tmp_path, save, MTSLIME_STANDIN_CONVERT_DIE_AT="mid_shards")
    assert run.returncode == 1 and "RuntimeError: stand-in conversion killed at mid_shards" in run.stderr
    info = mcore.inspect_checkpoint(str(save), expect="release")
    assert info["signature"]["code"] == "no_tracker"
    assert "the save stopped while writing the shards, before .metadata" in info["message"]
