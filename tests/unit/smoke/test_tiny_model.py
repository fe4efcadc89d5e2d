"""module_utils/smoke/tiny_model.py: the small model's MODEL_ARGS and config.json agree field for field (the same
comparison hf_model_check and the converter's hf_validate_args make), from MODEL_ARGS alone or from the configured
model's config.json; the stand-in transformers writes files that hf_model_check accepts."""
from __future__ import annotations

import importlib.util
import json
import os
import sys

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.smoke import tiny_model
from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts import hf_model_check_task
from ansible_collections.mtslime.posttrain.plugins.modules import hf_model_check
from guide_values import defaults

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
STANDIN_SITE = os.path.join(REPO, "tests", "standins", "rootfs", "opt", "venv", "lib", "python3.11", "site-packages")


def guide_model_args():
    return defaults()["slime_model_args"]


def qwen3_8b_config():
    """The real Qwen3-8B config.json, as the model fixture writes it."""
    spec = importlib.util.spec_from_file_location("make_hf_model", os.path.join(REPO, "tests", "fixtures",
                                                                                "make_hf_model.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.CONFIG, layer_types=["full_attention"] * 36)


def problems_between(config, args):
    problems = []
    hf_model_check_task.compare_model_args(config, args, problems)
    return problems


def test_the_guide_model_shrinks_to_two_small_layers_keeping_its_flags():
    args = tiny_model.smoke_model_args(guide_model_args(), 2)
    assert args["num-layers"] == 2
    assert (args["hidden-size"], args["ffn-hidden-size"], args["num-attention-heads"], args["num-query-groups"],
            args["kv-channels"], args["vocab-size"]) == (256, 512, 4, 2, 64, 1024)
    for flag in ("swiglu", "qk-layernorm", "untie-embeddings-and-output-weights", "group-query-attention"):
        assert args[flag] is True
    assert args["normalization"] == "RMSNorm" and args["rotary-base"] == 1000000


def test_flags_of_the_full_shape_are_dropped_and_bad_input_is_named():
    args = tiny_model.smoke_model_args(dict(guide_model_args(), **{"padded-vocab-size": 152064}), 2)
    assert "padded-vocab-size" not in args
    with pytest.raises(ValueError, match="no num-layers"):
        tiny_model.smoke_model_args({"hidden-size": 4096}, 2)
    with pytest.raises(ValueError, match="smoke_num_layers is 0"):
        tiny_model.smoke_model_args(guide_model_args(), 0)


def test_a_model_without_grouped_queries_keeps_one_group_per_head():
    args = tiny_model.smoke_model_args({"num-layers": 24, "num-attention-heads": 16, "num-query-groups": 16}, 2)
    assert args["num-query-groups"] == args["num-attention-heads"] == 4


@pytest.mark.parametrize("flags,kind", [({"qk-layernorm": True}, "qwen3"), ({"add-qkv-bias": True}, "qwen2"),
                                        ({"qk-layernorm": False}, "llama")])
def test_the_family_comes_from_model_args_without_a_config(flags, kind):
    assert tiny_model.model_type(dict({"num-layers": 2}, **flags)) == kind
    assert tiny_model.hf_config(tiny_model.smoke_model_args(dict({"num-layers": 2}, **flags), 2))[0] == kind


def test_config_from_model_args_alone_passes_the_models_checks():
    args = tiny_model.smoke_model_args(guide_model_args(), 2)
    kind, config = tiny_model.hf_config(args)
    assert kind == "qwen3" and config["architectures"] == ["Qwen3ForCausalLM"]
    assert config["tie_word_embeddings"] is False and config["head_dim"] == 64
    assert config["eos_token_id"] == 1023 and config["pad_token_id"] == config["bos_token_id"] == 1022
    assert problems_between(config, args) == []


def test_config_from_the_models_config_json_keeps_its_settings_and_passes_the_checks():
    args = tiny_model.smoke_model_args(guide_model_args(), 2)
    base = dict(qwen3_8b_config(), rope_parameters={"rope_type": "default", "rope_theta": 1000000})
    kind, config = tiny_model.hf_config(args, base)
    assert kind == "qwen3"
    assert config["num_hidden_layers"] == config["max_window_layers"] == 2
    assert "layer_types" not in config and "transformers_version" not in config
    assert config["hidden_act"] == "silu" and config["max_position_embeddings"] == 40960
    assert config["rope_parameters"] == {"rope_type": "default", "rope_theta": 1000000}
    assert problems_between(config, args) == []
    assert base["num_hidden_layers"] == 36, "the configured model's config is not modified"


def test_a_config_json_that_disagrees_with_model_args_is_overruled_by_model_args():
    """The smoke model is described by MODEL_ARGS; a config.json with another rope_theta takes MODEL_ARGS' value."""
    args = tiny_model.smoke_model_args(guide_model_args(), 2)
    _kind, config = tiny_model.hf_config(args, dict(qwen3_8b_config(), rope_theta=10000, tie_word_embeddings=True))
    assert config["rope_theta"] == 1000000 and config["tie_word_embeddings"] is False


def test_the_tokenizer_vocabulary_has_exactly_the_models_size_with_the_special_tokens_last():
    vocab = tiny_model.tokenizer_vocab(1024)
    assert len(vocab) == 1024 and sorted(vocab.values()) == list(range(1024))
    assert vocab["<|im_end|>"] == 1023 and vocab["<|endoftext|>"] == 1022 and vocab["<unk>"] == 0


def test_the_written_model_passes_hf_model_check(tmp_path, run_module):
    args = tiny_model.smoke_model_args(guide_model_args(), 2)
    kind, config = tiny_model.hf_config(args)
    files = tiny_model.write_model(str(tmp_path / "hf"), kind, config, env=dict(os.environ, PYTHONPATH=STANDIN_SITE))
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= set(files)
    with open(tmp_path / "hf" / "config.json") as handle:
        written = json.load(handle)
    assert written["num_hidden_layers"] == 2 and written["architectures"] == ["Qwen3ForCausalLM"]
    result, failed = run_module(hf_model_check, {"path": str(tmp_path / "hf"), "model_args": args})
    assert not failed, result["msg"]


GUARD = """
import sys, types
if not isinstance(sys.intern, types.BuiltinFunctionType):  # what torch._dynamo refuses, as on an H200
    raise TypeError("substitute_in_graph expects a function but got %r" % type(sys.intern))
def deep(n):
    return deep(n - 1) if n else 1 / 0
deep(50)
"""


def test_the_writer_runs_apart_from_the_modules_patches_and_names_the_exception_that_ended_it(tmp_path):
    """A module's process has Ansible's sys.intern patch; transformers (torch._dynamo) refuses it. The writer's own
    process does not have it: the stand-in transformers here gets past that check and dies deeper, and the error
    names the exception at the end of its traceback."""
    import ansible.module_utils.basic  # noqa: F401  (installs the patch in this process, as in a module)
    import types

    assert not isinstance(sys.intern, types.BuiltinFunctionType)
    site = tmp_path / "site" / "transformers"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text(GUARD)
    (tmp_path / "site" / "tokenizers.py").write_text("")
    kind, config = tiny_model.hf_config(tiny_model.smoke_model_args(guide_model_args(), 2))
    with pytest.raises(tiny_model.WriteError) as caught:
        tiny_model.write_model(str(tmp_path / "hf"), kind, config,
                               env=dict(os.environ, PYTHONPATH=str(tmp_path / "site")))
    assert str(caught.value) == "ZeroDivisionError: division by zero (rc 1)"
