"""Each training rule (plugins/plugin_utils/training/config.py) on the guide's configuration, which passes, and
on a configuration that slime, Megatron or SGLang would refuse at start-up, which fails naming the variable."""
from __future__ import annotations

import copy
import os

import pytest
import yaml

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.training.config import check, validate

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _inventory(name):
    with open(os.path.join(REPO, "roles", "settings", "defaults", "main", name)) as handle:
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
        "head": "localhost",
        "nodes": {"localhost": 8},
        "actor_num_nodes": 1,
        "actor_gpus_per_node": train["slime_actor_gpus_per_node"],
        "rollout_num_gpus": train["slime_rollout_gpus_per_node"],
        "train_args": groups,
        "overrides": {},
        "model_args": _inventory("model.yml")["slime_model_args"],
        "tp_above_query_groups": train["slime_megatron_tp_above_query_groups"],
        "sglang_version": train["slime_sglang_version"],
    }


def problems(**changes):
    config = guide_config()
    overrides = changes.pop("overrides", None)
    model = changes.pop("model", None)
    config.update(changes)
    if overrides:
        config["overrides"] = overrides
    if model:
        config["model_args"] = dict(config["model_args"], **model)
    return check(config)


def one(**changes):
    found = problems(**changes)
    assert len(found) == 1, [p.text() for p in found]
    return found[0]


def test_the_guide_is_valid():
    assert validate(guide_config()) == []


def test_messages_name_the_variable_the_value_and_the_fix():
    problem = one(overrides={"rollout-batch-size": 16.5})
    text = problem.text()
    assert text.startswith("slime_train_args_overrides['rollout-batch-size'] = 16.5")
    assert "integer flag (type=int" in text and "Fix: give --rollout-batch-size a whole number" in text
    assert problem.clusters == {"localhost"} and problem.hosts == ["localhost"]


# -- types from the parsers (known_flags.json) ---------------------------------------------------------------
@pytest.mark.parametrize("flag,value,words", [
    ("sequence-parallel", "false", "is a switch (store_true"),
    ("sequence-parallel", 1, "is a switch"),
    ("rollout-batch-size", 16.5, "integer flag"),
    ("rollout-batch-size", "16x", "integer flag"),
    ("rollout-batch-size", True, "takes a value"),
    ("lr", "fast", "number flag"),
    ("lr", [1e-6, 2e-6], "takes one value, not a list"),
    ("advantage-estimator", "grpo2", "must be one of grpo, gspo"),
    ("attention-backend", "flashy", "must be one of flash, fused, unfused, local, auto"),
    ("input-key", {"a": 1}, "takes a single value, not a dict"),
    ("eval-prompt-data", ["aime", "/a.parquet", "/b\nc"], "control characters"),
])
def test_flag_values_have_their_parsers_types(flag, value, words):
    found = [p.text() for p in problems(overrides={flag: value})]
    assert any(words in text and "slime_train_args_overrides['%s']" % flag in text for text in found), found


@pytest.mark.parametrize("flag,value", [
    ("sequence-parallel", False), ("sequence-parallel", None), ("lr", "2e-6"), ("lr", 2e-6), ("lr", 1),
    ("rollout-batch-size", "16"), ("update-weight-buffer-size", 536870912), ("offload-train", True),
    ("no-offload-train", True), ("eval-prompt-data", ["aime", "/a.parquet"]), ("attention-backend", "fused"),
    ("sglang-enable-dp-attention", True), ("router-policy", "round_robin"),
])
def test_valid_flag_values_pass(flag, value):
    assert validate(dict(guide_config(), overrides={flag: value})) == []


def test_a_flag_of_slime_v031_is_known():
    """slime's own scripts pass --update-weight-buffer-size (slime/utils/arguments.py@v0.3.1): not refused."""
    assert problems(overrides={"update-weight-buffer-size": 2 ** 29}) == []


def test_unknown_flag_with_suggestion_and_the_extra_list():
    text = one(overrides={"rollout-temprature": 0.8}).text()
    assert "--rollout-temprature is not a flag train.py knows" in text and "did you mean --rollout-temperature?" in text
    assert "slime_train_known_flags_extra" in text
    assert problems(overrides={"my-fork-flag": 1}, known_flags_extra=["my-fork-flag"]) == []
    assert problems(overrides={"rollout-temprature": None}) == []  # null leaves it out


def test_a_misspelt_sglang_or_router_flag_names_the_nearest_known_one():
    assert validate(dict(guide_config(), overrides={"sglang-mem-fraction-statc": 0.7})) == [
        "slime_train_args_overrides['sglang-mem-fraction-statc'] = 0.7 (host localhost): cluster localhost: "
        "--sglang-mem-fraction-statc is not a flag that SGLang 0.5.15.post1 or its router accepts "
        "(slime_sglang_version); slime drops unknown flags silently. Fix: did you mean --sglang-mem-fraction-static? "
        "correct it, or list it in slime_train_known_flags_extra if your image's SGLang has it, or set "
        "slime_sglang_version to your image's SGLang (0.5.15.post1, unchecked)."]
    text = one(overrides={"router-polcy": "round_robin"}).text()
    assert "--router-polcy is not a flag that SGLang 0.5.15.post1" in text and "did you mean --router-policy?" in text


def test_sglang_flags_slime_sets_itself_are_not_passed_through():
    """slime registers SGLang's server args less its skipped_args (tp_size, port, ...): --sglang-tp-size is unknown."""
    text = one(overrides={"sglang-tp-size": 2}).text()
    assert "--sglang-tp-size is not a flag that SGLang 0.5.15.post1" in text


def test_an_unlisted_sglang_is_not_checked_and_the_extra_list_applies():
    assert problems(overrides={"sglang-mem-fraction-statc": 0.7}, sglang_version="unchecked") == []
    assert problems(overrides={"sglang-fork-flag": 1}, known_flags_extra=["sglang-fork-flag"]) == []
    assert problems(overrides={"sglang-mem-fraction-statc": None}) == []  # null leaves it out


def test_model_args_are_typed_too():
    text = one(model={"num-layers": "36 layers"}).text()
    assert text.startswith("slime_model_args['num-layers']") and "integer flag" in text


@pytest.mark.parametrize("flag,value,rule", [
    ("num-rollout", -5, ">= 1"), ("n-samples-per-prompt", 0, ">= 1"), ("lr", -1e-6, ">= 0"),
    ("rollout-top-p", 0, "> 0 and <= 1"), ("eval-top-p", 1.5, "> 0 and <= 1"), ("hidden-dropout", 2, "<= 1"),
])
def test_counts_and_numbers_in_range(flag, value, rule):
    text = one(overrides={flag: value}).text()
    assert "--%s must be" % flag in text and rule in text


# -- sampling: slime raises for rollout_temperature <= 0 (arguments.py@624b824a8 L1770); SGLang takes 0 (greedy) --
def test_rollout_temperature_must_be_positive():
    text = one(overrides={"rollout-temperature": 0}).text()
    assert "--rollout-temperature must be > 0" in text


def test_greedy_eval_is_valid():
    assert problems(overrides={"eval-temperature": 0}) == []
    assert "--eval-temperature must be >= 0" in one(overrides={"eval-temperature": -0.1}).text()


# -- GPU split (slime/ray/placement_group.py L100-117) ------------------------------------------------------
def test_gpu_budget_not_colocated():
    text = one(rollout_num_gpus=8).text()
    assert "needs 12 GPUs" in text and "has 8" in text


def test_gpu_budget_colocated_uses_the_larger_side():
    assert problems(rollout_num_gpus=8, overrides={"colocate": True}) == []
    assert "max(actor 4, rollout 12) with --colocate" in one(rollout_num_gpus=12, overrides={"colocate": True}).text()


def test_more_actor_nodes_than_nodes():
    found = [p.text() for p in problems(actor_num_nodes=2, actor_gpus_per_node=2)]
    assert any("--actor-num-nodes is 2 but the cluster has 1 node" in t for t in found), found


# -- Megatron parallelism (arguments.py L317; transformer_config.py L939, L954-961 / before f7dfb99795 L782) ----
def test_tp_pp_cp_must_divide_actor_gpus():
    text = one(overrides={"pipeline-model-parallel-size": 3}).text()
    assert "TP x PP x CP = 4 x 3 x 1 = 12 does not divide the 4 actor GPUs" in text


def test_tp_must_divide_the_heads():
    found = [p.text() for p in problems(actor_gpus_per_node=3, rollout_num_gpus=4,
                                        overrides={"tensor-model-parallel-size": 3})]
    assert any("does not divide num-attention-heads 32" in t for t in found), found


def tp16_cluster(tp_above):
    """Two 8-GPU nodes, actor 16 GPUs, TP 16 = 2 x the 8 query groups of Qwen3-8B."""
    return dict(guide_config(), nodes={"a": 8, "b": 8}, actor_num_nodes=2, actor_gpus_per_node=8, rollout_num_gpus=16,
                overrides={"tensor-model-parallel-size": 16, "colocate": True}, tp_above_query_groups=tp_above)


def test_tp_a_multiple_of_the_query_groups_on_a_new_megatron():
    assert validate(tp16_cluster(True)) == []


def test_tp_a_multiple_of_the_query_groups_on_an_older_megatron():
    texts = validate(tp16_cluster(False))
    assert len(texts) == 1 and "does not divide num-query-groups 8" in texts[0]
    assert "slime_megatron_tp_above_query_groups: true" in texts[0]


def test_tp_neither_divisor_nor_multiple_of_the_groups_fails_on_a_new_megatron():
    config = dict(tp16_cluster(True), model_args=dict(guide_config()["model_args"], **{"num-query-groups": 6}),
                  overrides={"tensor-model-parallel-size": 4})
    config["model_args"]["num-attention-heads"] = 24
    texts = validate(config)
    assert any("neither a divisor nor a multiple of num-query-groups 6" in t for t in texts), texts


# -- SGLang engines (slime sglang_utils/arguments.py L159-166; sglang models/qwen3.py Qwen3Attention) --------
def test_engine_tp_must_divide_the_heads():
    config = dict(guide_config(), rollout_num_gpus=3, actor_gpus_per_node=4, nodes={"localhost": 8})
    config["overrides"] = {"rollout-num-gpus-per-engine": 3}
    texts = validate(config)
    assert any("SGLang engine of tensor parallel size 3 cannot split num-attention-heads 32" in t for t in texts), texts


def test_engine_tp_must_split_or_replicate_the_kv_heads():
    texts = validate(dict(guide_config(), model_args=dict(guide_config()["model_args"], **{"num-query-groups": 3,
                                                                                           "num-attention-heads": 24}),
                          overrides={"tensor-model-parallel-size": 1}))
    assert any("cannot split or replicate num-query-groups (KV heads) 3" in t for t in texts), texts


def test_engine_gpus_must_be_a_multiple_of_the_sglang_pp_size():
    texts = validate(dict(guide_config(), overrides={"sglang-pp-size": 3}))
    assert any("not divisible by sglang-pp-size 3" in t for t in texts), texts


def test_rollout_gpus_divisible_by_engine_size():
    text = one(rollout_num_gpus=3).text()
    assert "3 rollout GPUs are not divisible by 2 GPUs per engine" in text and "1 GPU(s) idle" in text


# -- batches (slime arguments.py@v0.3.1 L1907-1915; Megatron num_microbatches_calculator.py L340) -------------
def test_samples_divisible_by_steps():
    assert "16 x 8 = 128 is not divisible by num-steps-per-rollout 3" in one(
        overrides={"num-steps-per-rollout": 3}).text()


def test_global_batch_size_must_match():
    assert problems(overrides={"global-batch-size": 128}) == []
    text = one(overrides={"global-batch-size": 64}).text()
    assert "64 x 1 = 64" in text and "set it to 128" in text


def test_global_batch_divisible_by_micro_batch_times_data_parallel():
    # TP 1: data-parallel size 4; micro-batch 3 x 4 = 12 does not divide the global batch 128.
    text = one(overrides={"tensor-model-parallel-size": 1, "micro-batch-size": 3}).text()
    assert text.startswith("slime_train_args_overrides['micro-batch-size']")
    assert "global batch 128 is not divisible by micro-batch-size 3 x data-parallel size 4" in text
    assert problems(overrides={"tensor-model-parallel-size": 1, "micro-batch-size": 2}) == []
    assert problems(overrides={"tensor-model-parallel-size": 1, "micro-batch-size": 3,
                               "decrease-batch-size-if-needed": True}) == []


def test_dynamic_batches_need_max_tokens():
    assert "--use-dynamic-batch-size needs --max-tokens-per-gpu" in one(overrides={"max-tokens-per-gpu": None}).text()


def test_rollout_batch_size_is_required():
    assert "--rollout-batch-size is required" in one(overrides={"rollout-batch-size": None}).text()


# -- slime_validate_args (arguments.py@v0.3.1 L1717-1796) ---------------------------------------------------
def test_eval_interval_needs_eval_data():
    assert "--eval-interval is set" in one(overrides={"eval-prompt-data": None}).text()


def test_save_interval_needs_save_dir():
    assert "--save-interval is set but --save is not" in one(overrides={"save": None}).text()


def test_kl_terms_and_tis():
    assert "only one of --kl-coef and --kl-loss-coef" in one(overrides={"kl-coef": 0.1, "kl-loss-coef": 0.1}).text()
    assert "--use-rollout-logprobs and --use-tis" in one(overrides={"use-rollout-logprobs": True}).text()
    assert "needs --ref-load" in one(overrides={"use-kl-loss": True, "ref-load": None}).text()


# -- path flags -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["train.parquet", "/data/../etc/x", "/data/$(id)", "/data/a b"])
def test_path_flags(value):
    text = one(overrides={"prompt-data": value}).text()
    assert text.startswith("slime_train_args_overrides['prompt-data']") and "--prompt-data must be" in text


def test_prompt_data_row_slices_are_fine():
    assert problems(overrides={"prompt-data": "/data/models/data/train.parquet@[0:1000]"}) == []


def test_eval_prompt_data_pairs():
    assert "name/path pairs" in one(overrides={"eval-prompt-data": ["aime", "/a.parquet", "/b.parquet"]}).text()


def test_all_problems_reported_at_once():
    found = problems(rollout_num_gpus=7, overrides={"rollout-top-p": 2, "rollout-temprature": 1, "lr": "x"})
    assert len(found) >= 4


@pytest.mark.parametrize("flag", ["--lr", "lr"])
def test_overrides_accept_dashes(flag):
    assert problems(overrides={flag: "2e-6"}) == []
