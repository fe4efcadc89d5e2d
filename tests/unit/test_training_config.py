"""Every validation rule, on the guide's configuration and on a failing case, through the
validate_config action plugin's logic (plugin_utils/training_config.py)."""
from __future__ import annotations

import copy
import os

import pytest
import yaml

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.training_config import validate

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _inventory(name):
    with open(os.path.join(REPO, "inventory", "group_vars", "all", name)) as handle:
        return yaml.safe_load(handle)


def guide_config():
    """The default inventory's values, with the Jinja references resolved by hand."""
    train = _inventory("train.yml")
    groups = copy.deepcopy(train["slime_train_args"])
    resolved = {
        "hf-checkpoint": "/data/models/Qwen3-8B",
        "ref-load": "/data/LLMs/MCORE/Qwen3-8B_slime",
        "load": "/data/LLMs/MCORE/Qwen3-8B_slime",
        "save": "/data/checkpoints/Qwen3-8B_slime",
        "prompt-data": "/data/models/data/amt_math17k_d_qweninstruct.parquet",
        "eval-prompt-data": "/data/models/data/aime_2025.parquet",
        "tensorboard-dir": "/home/slime/musa_example/qwen_32b_sherry/qwen3-8b_tensorboard",
        "rollout-max-response-len": 512,
        "eval-max-response-len": 512,
    }
    for flags in groups.values():
        for flag in flags:
            if flag in resolved:
                flags[flag] = resolved[flag]
    return {
        "cluster": "localhost",
        "nodes": {"localhost": 8},
        "addresses": {"localhost": "10.0.0.1"},
        "actor_num_nodes": 1,
        "actor_gpus_per_node": train["slime_actor_gpus_per_node"],
        "rollout_num_gpus": train["slime_rollout_gpus_per_node"],
        "train_args": groups,
        "overrides": {},
        "model_args": _inventory("model.yml")["slime_model_args"],
        "ports": {"ray_gcs_port": 64379, "ray_dashboard_port": 8772, "convert_master_port": 12355},
        "paths": {"slime_dir": "/home/slime", "slime_save_dir": "/data/checkpoints/Qwen3-8B_slime"},
    }


def problems(**changes):
    config = guide_config()
    overrides = changes.pop("overrides", None)
    config.update(changes)
    if overrides:
        config["overrides"] = overrides
    return validate(config)


def one(**changes):
    found = problems(**changes)
    assert len(found) == 1, found
    return found[0]


def test_the_guide_is_valid():
    assert problems() == []


def test_gpu_budget_not_colocated():
    msg = one(rollout_num_gpus=8)
    assert "needs 12 GPUs" in msg and "has 8" in msg and "slime_rollout_gpus_per_node" in msg


def test_gpu_budget_colocated_uses_the_larger_side():
    assert problems(rollout_num_gpus=8, overrides={"colocate": True}) == []
    msg = one(actor_gpus_per_node=4, rollout_num_gpus=12, overrides={"colocate": True})
    assert "max(actor 4, rollout 12) with --colocate" in msg


def test_actor_gpus_per_node_larger_than_a_node():
    found = problems(actor_gpus_per_node=16, rollout_num_gpus=0, nodes={"a": 8, "b": 8}, actor_num_nodes=1,
                     addresses={"a": "1.1.1.1", "b": "1.1.1.2"})
    assert any("no node has more than 8" in m for m in found)


def test_more_actor_nodes_than_nodes():
    msg = [m for m in problems(actor_num_nodes=2, actor_gpus_per_node=2) if "--actor-num-nodes" in m]
    assert msg and "has 1 node" in msg[0]


def test_tp_pp_cp_must_divide_actor_gpus():
    msg = one(overrides={"pipeline-model-parallel-size": 3})
    assert "TP x PP x CP = 4 x 3 x 1 = 12 does not divide the 4 actor GPUs" in msg
    assert "slime_train_args_overrides['pipeline-model-parallel-size']" in msg


def test_tp_must_divide_heads_and_query_groups():
    found = problems(actor_gpus_per_node=3, rollout_num_gpus=4, overrides={"tensor-model-parallel-size": 3})
    heads = [m for m in found if "num-attention-heads = 32" in m]
    groups = [m for m in found if "num-query-groups = 8" in m]
    assert heads and groups
    assert "slime_model_args['num-query-groups']" in groups[0] and "1, 2, 4, 8" in groups[0]


def test_rollout_gpus_divisible_by_engine_size():
    msg = one(rollout_num_gpus=3, actor_gpus_per_node=4)
    assert "3 rollout GPUs are not divisible by 2 GPUs per engine" in msg
    assert "slime_train_args.SGLANG_ARGS['rollout-num-gpus-per-engine']" in msg and "1 GPU(s) idle" in msg


def test_samples_divisible_by_steps():
    msg = one(overrides={"num-steps-per-rollout": 3})
    assert "16 x 8 = 128 is not divisible by num-steps-per-rollout = 3" in msg


def test_global_batch_size_must_match():
    assert problems(overrides={"global-batch-size": 128}) == []
    msg = one(overrides={"global-batch-size": 64})
    assert "global-batch-size x num-steps-per-rollout = 64 x 1 = 64" in msg and "set" in msg and "128" in msg


def test_temperatures_must_be_positive():
    msg = one(overrides={"rollout-temperature": 0})
    assert "rollout-temperature = 0 must be > 0" in msg
    assert "eval-temperature" in one(overrides={"eval-temperature": -1})


def test_top_p_range():
    assert "rollout-top-p = 0 must be in (0, 1]" in one(overrides={"rollout-top-p": 0})
    assert "eval-top-p = 1.5" in one(overrides={"eval-top-p": 1.5})


def test_ports_distinct_and_in_range():
    msg = one(ports={"ray_gcs_port": 8772, "ray_dashboard_port": 8772})
    assert "ray_gcs_port and ray_dashboard_port are both 8772" in msg
    assert "ray_gcs_port = 70000 is not a port number" in one(ports={"ray_gcs_port": 70000})


def test_eval_interval_needs_eval_data():
    msg = one(overrides={"eval-prompt-data": None})
    assert "--eval-interval is set" in msg and "slime_eval_file" in msg


def test_save_interval_needs_save_dir():
    msg = one(overrides={"save": None})
    assert "--save-interval is set" in msg and "slime_save_dir" in msg


def test_paths_must_be_absolute():
    assert "slime_save_dir = 'data/ckpt' must be an absolute path" in one(
        paths={"slime_save_dir": "data/ckpt"})
    assert "--prompt-data = 'train.parquet' must be an absolute path" in one(
        overrides={"prompt-data": "train.parquet"})


def test_eval_prompt_data_pairs():
    msg = one(overrides={"eval-prompt-data": ["aime", "/a.parquet", "/b.parquet"]})
    assert "name/path pairs" in msg


def test_unknown_flag_with_suggestion():
    msg = one(overrides={"rollout-temprature": 0.8})
    assert "--rollout-temprature" in msg and "did you mean --rollout-temperature?" in msg
    assert "slime_train_known_flags_extra" in msg


def test_unknown_flag_allowed_by_extra_list_and_sglang_passthrough():
    assert problems(overrides={"my-new-flag": 1}, known_flags_extra=["my-new-flag"]) == []
    assert problems(overrides={"sglang-enable-dp-attention": True, "router-policy": "round_robin"}) == []


def test_missing_node_address():
    msg = one(addresses={"localhost": None})
    assert "no IP address known for node(s) localhost" in msg and "slime_node_ip" in msg


def test_all_problems_reported_at_once():
    found = problems(rollout_num_gpus=7, overrides={"rollout-top-p": 2, "rollout-temprature": 1})
    assert len(found) >= 3


@pytest.mark.parametrize("flag", ["--lr", "lr"])
def test_overrides_accept_dashes(flag):
    assert problems(overrides={flag: "2e-6"}) == []
