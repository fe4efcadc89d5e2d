"""The size of one checkpoint estimated from the model's shape (module_utils/checkpoint/size.py), the
slime_checkpoint_size filter that playbooks/plays/preflight.yml reads it through, and the preflight's disk
check and projection (node_preflight) with that estimate: a 2-layer model is no longer asked for 107 GiB."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.mtslime.posttrain.plugins.filter import slime as slime_filters
from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import size
from ansible_collections.mtslime.posttrain.plugins.module_utils.preflight import disk
from ansible_collections.mtslime.posttrain.plugins.modules import node_preflight as npf

GIB = 1024 ** 3
REPO = Path(__file__).parents[3]
# Qwen/Qwen3-8B's config.json (the fields the count reads; tests/fixtures/make_hf_model.py has the whole file)
QWEN3_8B_CONFIG = {
    "model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
    "tie_word_embeddings": False, "attention_bias": False, "torch_dtype": "bfloat16",
}
QWEN3_8B_PARAMETERS = 8190735360
# The guide's figure for one Qwen3-8B training checkpoint (the default the preflight assumed for every model).
QWEN3_8B_CHECKPOINT_GIB = 107


def inventory(name, key):
    return yaml.safe_load((REPO / "roles" / "settings" / "defaults" / "main" / name).read_text())[key]


def small_qwen3(layers=2):
    """MODEL_ARGS of a small Qwen3: the inventory's flags with small dimensions."""
    return dict(inventory("model.yml", "slime_model_args"), **{
        "num-layers": layers, "hidden-size": 256, "ffn-hidden-size": 512, "num-attention-heads": 4,
        "num-query-groups": 2, "kv-channels": 64, "vocab-size": 1024})


def small_qwen3_parameters(layers=2):
    """The same count by hand, part by part."""
    hidden, ffn, q, kv, vocab = 256, 512, 4 * 64, 2 * 64, 1024
    attention = hidden * q + 2 * hidden * kv + q * hidden + 2 * 64  # q, k, v, o, q-norm and k-norm
    mlp = 2 * hidden * ffn + ffn * hidden  # swiglu: gate and up, down
    layer = attention + mlp + 2 * hidden  # two RMSNorms
    return layers * layer + 2 * vocab * hidden + hidden  # untied embedding and output, final norm


def test_qwen3_8b_from_its_config_json():
    assert size.parameter_count(size.shape_from_hf_config(QWEN3_8B_CONFIG)) == QWEN3_8B_PARAMETERS


def test_qwen3_8b_from_the_inventorys_model_args():
    model_args = inventory("model.yml", "slime_model_args")
    assert size.parameter_count(size.shape_from_model_args(model_args)) == QWEN3_8B_PARAMETERS
    # Megatron pads the vocabulary to a multiple of 128 x TP: the guide's TP 4 pads 151936 to 152064 rows
    padded = size.parameter_count(size.shape_from_model_args(model_args, {"tensor-model-parallel-size": 4}))
    assert padded == QWEN3_8B_PARAMETERS + 2 * (152064 - 151936) * 4096


def test_a_qwen3_8b_training_save_is_within_20_percent_of_its_real_size():
    flags = {}
    for array in inventory("train.yml", "slime_train_args").values():
        flags.update(array)
    found = size.estimate(inventory("model.yml", "slime_model_args"), train_args=flags)
    assert found["bytes_per_parameter"] == 14
    assert abs(found["bytes"] / float(QWEN3_8B_CHECKPOINT_GIB * GIB) - 1) < 0.2
    assert found["basis"] == ("estimated from slime_model_args: 8,191,783,936 parameters x 14 bytes: bf16 weights 2, "
                              "fp32 main params 4, fp32 Adam moments 8")


def test_a_converted_qwen3_8b_holds_the_weights_only():
    found = size.estimate(hf_config=QWEN3_8B_CONFIG, kind="converted")
    assert found["bytes"] == 2 * QWEN3_8B_PARAMETERS and found["basis"].startswith("estimated from config.json")


def test_a_2_layer_qwen3_counted_by_hand_and_from_its_config_json():
    count = size.parameter_count(size.shape_from_model_args(small_qwen3()))
    assert count == small_qwen3_parameters() == 1705472
    config = dict(QWEN3_8B_CONFIG, num_hidden_layers=2, hidden_size=256, intermediate_size=512, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=64, vocab_size=1024)
    assert size.parameter_count(size.shape_from_hf_config(config)) == count
    # a real 2-layer Qwen3 converted with slime's converter on CPU measured 3,504,447 bytes (weights and metadata)
    assert abs(size.estimate(small_qwen3(), kind="converted")["bytes"] / 3504447.0 - 1) < 0.2


@pytest.mark.parametrize(
    "flags, per",
    [
        ({}, 14),
        ({"optimizer": "adam", "no-save-rng": True}, 14),  # the RNG state is a few KiB per rank
        ({"no-save-optim": True}, 2),
        ({"optimizer": "sgd"}, 10),
        ({"optimizer": "sgd", "sgd-momentum": 0}, 6),
        ({"use-precision-aware-optimizer": True, "exp-avg-dtype": "bf16", "exp-avg-sq-dtype": "bf16"}, 10),
        ({"use-precision-aware-optimizer": True, "main-params-dtype": "fp16", "exp-avg-dtype": "fp8",
          "exp-avg-sq-dtype": "bf16"}, 7),
    ],
)
def test_bytes_per_parameter_follow_the_optimizer_and_precision_flags(flags, per):
    assert size.bytes_per_parameter(flags)[0] == per
    assert size.bytes_per_parameter(flags, kind="converted")[0] == 2


def test_a_missing_flag_or_an_unknown_dtype_is_named():
    args = {k: v for k, v in small_qwen3().items() if k != "hidden-size"}
    with pytest.raises(ValueError, match="slime_model_args has no hidden-size: .* or set preflight_checkpoint_gib"):
        size.estimate(args)
    with pytest.raises(ValueError, match="--exp-avg-dtype int4 is not a dtype"):
        size.bytes_per_parameter({"use-precision-aware-optimizer": True, "exp-avg-dtype": "int4"})


# -- the filter and the preflight -----------------------------------------------------------------------------
def test_the_filter_estimates_unless_preflight_checkpoint_gib_is_set():
    estimated = slime_filters.slime_checkpoint_size(small_qwen3(), {}, None)
    assert (estimated["bytes"], estimated["parameters"]) == (14 * 1705472, 1705472)
    override = slime_filters.slime_checkpoint_size(small_qwen3(), {}, 3)
    assert override == {"bytes": 3 * GIB, "gib": 3, "size": "3 GiB", "parameters": None, "bytes_per_parameter": None,
                        "basis": "preflight_checkpoint_gib"}
    with pytest.raises(AnsibleFilterError, match="preflight_checkpoint_gib is 'lots'"):
        slime_filters.slime_checkpoint_size(small_qwen3(), {}, "lots")
    with pytest.raises(AnsibleFilterError, match="slime_checkpoint_size: slime_model_args has no num-attention-heads"):
        slime_filters.slime_checkpoint_size({"hidden-size": 8}, {})


class _Disk:
    """os.statvfs of a disk with `free` bytes available."""

    def __init__(self, free):
        self.f_bavail, self.f_frsize = free, 1


def preflight(run_module, monkeypatch, tmp_path, checkpoint, free):
    """node_preflight's disk entry for the save dir as playbooks/plays/preflight.yml gives it."""
    monkeypatch.setattr(disk.os, "statvfs", lambda path: _Disk(free))
    args = {
        "accelerator": {"vendor": "musa", "tool_dir": str(tmp_path / "no-tools"), "required": False},
        "docker": {"required": False, "socket": "unix://%s" % (tmp_path / "no.sock")},
        "disk": [{"path": str(tmp_path / "save"), "need_bytes": checkpoint["bytes"],
                  "what": "one training checkpoint (~%s, %s)" % (checkpoint["size"], checkpoint["basis"]),
                  "projection": {"num_rollout": 3000, "save_interval": 200, "size_from": checkpoint["basis"]}}],
    }
    return run_module(npf, args)


def test_a_2_layer_model_is_not_refused_for_lack_of_107_gib(run_module, monkeypatch, tmp_path):
    checkpoint = slime_filters.slime_checkpoint_size(small_qwen3(), {"optimizer": "adam"}, None)
    result, failed = preflight(run_module, monkeypatch, tmp_path, checkpoint, 20 * GIB)
    assert not failed and result["ready"], result.get("msg")
    projection = result["checks"]["disk"]["items"][0]["projection"]
    assert projection["ok"] and projection["need_bytes"] == 15 * 14 * 1705472
    # the old fixed figure refused it
    fixed = slime_filters.slime_checkpoint_size(small_qwen3(), {}, QWEN3_8B_CHECKPOINT_GIB)
    result, failed = preflight(run_module, monkeypatch, tmp_path, fixed, 20 * GIB)
    assert failed and "needs 107.0 GiB for one training checkpoint (~107 GiB, preflight_checkpoint_gib)" in \
        result["msg"]
    assert checkpoint["size"] == "22.8 MiB"


def test_the_projection_warning_says_where_the_size_comes_from(run_module, monkeypatch, tmp_path):
    checkpoint = slime_filters.slime_checkpoint_size(inventory("model.yml", "slime_model_args"), {}, None)
    result, failed = preflight(run_module, monkeypatch, tmp_path, checkpoint, 900 * GIB)
    assert not failed, "the projection warns, it does not fail"
    warning = [w for w in result["preflight_warnings"] if w.startswith("disk: the run saves 15 checkpoints")][0]
    assert "of ~106.8 GiB each (estimated from slime_model_args: 8,190,735,360 parameters x 14 bytes" in warning
    assert os.path.basename(str(tmp_path / "save")) in warning
