"""hf_model_check: a Hugging Face model directory checked from its config and shard headers."""
from __future__ import annotations

import hashlib
import json
import os
import struct

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts import hf_model_check_task
from ansible_collections.mtslime.posttrain.plugins.modules import hf_model_check

SIZES = {"F32": 4, "BF16": 2, "F16": 2, "I64": 8, "U8": 1, "BOOL": 1, "F8_E4M3": 1}

QWEN3_8B_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096, "num_hidden_layers": 36,
    "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 12288, "vocab_size": 151936,
    "rms_norm_eps": 1e-06, "rope_theta": 1000000, "tie_word_embeddings": False, "head_dim": 128,
    "torch_dtype": "bfloat16",
}
MODEL_ARGS = {
    "swiglu": True, "num-layers": 36, "hidden-size": 4096, "ffn-hidden-size": 12288, "num-attention-heads": 32,
    "group-query-attention": True, "num-query-groups": 8, "use-rotary-position-embeddings": True,
    "disable-bias-linear": True, "normalization": "RMSNorm", "norm-epsilon": 1e-6, "rotary-base": 1000000,
    "vocab-size": 151936, "kv-channels": 128, "qk-layernorm": True, "untie-embeddings-and-output-weights": True,
}
# small stand-in tensors: the checks read headers only, so shapes need not be Qwen3-8B's
SHARDS = {
    "model-00001-of-00003.safetensors": {"model.embed_tokens.weight": ("BF16", [64, 16]),
                                         "model.layers.0.input_layernorm.weight": ("BF16", [16])},
    "model-00002-of-00003.safetensors": {"model.layers.0.mlp.up_proj.weight": ("BF16", [48, 16]),
                                         "model.layers.0.self_attn.q_proj.weight": ("F32", [16, 16])},
    "model-00003-of-00003.safetensors": {"lm_head.weight": ("BF16", [64, 16]), "model.norm.weight": ("F32", [16]),
                                         "step": ("I64", [])},
}
PARAMS = 64 * 16 + 16 + 48 * 16 + 16 * 16 + 64 * 16 + 16 + 1


def safetensors_bytes(tensors, pad=True):
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, (dtype, shape) in tensors.items():
        count = 1
        for dim in shape:
            count *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + count * SIZES[dtype]]}
        offset += count * SIZES[dtype]
    blob = json.dumps(header).encode()
    if pad:
        blob += b" " * (-len(blob) % 8)
    return struct.pack("<Q", len(blob)) + blob + bytes(range(256)) * (offset // 256) + bytes(offset % 256)


def make_model(root, shards=None, config=None, index=True):
    shards = SHARDS if shards is None else shards
    config = QWEN3_8B_CONFIG if config is None else config
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "config.json"), "w") as handle:
        json.dump(config, handle)
    for name, text in (("generation_config.json", "{}"), ("tokenizer_config.json", "{}"), ("tokenizer.json", "{}"),
                       ("vocab.json", "{}"), ("merges.txt", "#version: 0.2\n")):
        with open(os.path.join(root, name), "w") as handle:
            handle.write(text)
    weight_map = {}
    for shard, tensors in shards.items():
        with open(os.path.join(root, shard), "wb") as handle:
            handle.write(safetensors_bytes(tensors))
        weight_map.update({t: shard for t in tensors})
    if index:
        with open(os.path.join(root, "model.safetensors.index.json"), "w") as handle:
            json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, handle)
    return str(root)


@pytest.fixture
def model(tmp_path):
    return make_model(str(tmp_path / "Qwen3-8B"))


def check(run_module, path, check_mode=False, **extra):
    return run_module(hf_model_check, dict(path=path, **extra), check_mode=check_mode)


def test_good_model(run_module, model):
    result, failed = check(run_module, model, model_args=MODEL_ARGS)
    assert not failed, result.get("msg")
    assert result["changed"] is False and result["problems"] == []
    assert result["shards"] == 3
    assert result["parameters"] == PARAMS
    names = [f["name"] for f in result["files"]]
    assert "model-00002-of-00003.safetensors" in names and "config.json" in names
    assert result["total_bytes"] == sum(os.path.getsize(os.path.join(model, n)) for n in names)
    assert result["config"]["hidden_size"] == 4096 and result["config"]["tie_word_embeddings"] is False
    assert result["config"]["head_dim"] == 128


def test_parameter_count_of_one_file(run_module, tmp_path):
    shards = {"model.safetensors": {"a": ("BF16", [3, 5, 7]), "b": ("F32", [11]), "c": ("BOOL", [2, 2]),
                                    "d": ("F8_E4M3", [4, 4]), "scalar": ("F16", [])}}
    path = make_model(str(tmp_path / "m"), shards=shards, index=False)
    result, failed = check(run_module, path)
    assert not failed, result.get("msg")
    assert result["shards"] == 1 and result["parameters"] == 105 + 11 + 4 + 16 + 1


def test_model_args_as_strings_and_dashes(run_module, model):
    args = {"--num-layers": "36", "hidden_size": "4096", "norm-epsilon": "1e-06", "rotary-base": "1e6",
            "untie-embeddings-and-output-weights": "true"}
    result, failed = check(run_module, model, model_args=args)
    assert not failed, result.get("msg")


def test_left_out_flags_are_not_compared(run_module, model):
    result, failed = check(run_module, model, model_args=dict(MODEL_ARGS, **{"kv-channels": None, "vocab-size": False}))
    assert not failed, result.get("msg")


def test_rope_theta_from_rope_parameters(run_module, tmp_path):
    config = dict(QWEN3_8B_CONFIG)
    del config["rope_theta"]
    config["rope_parameters"] = {"rope_theta": 1000000, "rope_type": "default"}
    path = make_model(str(tmp_path / "m"), config=config)
    result, failed = check(run_module, path, model_args=MODEL_ARGS)
    assert not failed and result["config"]["rope_theta"] == 1000000


@pytest.mark.parametrize("change,expected", [
    ({"hidden-size": 5120}, "config.json hidden_size is 4096 but model_args hidden-size is 5120; "),
    ({"num-layers": 28}, "config.json num_hidden_layers is 36 but model_args num-layers is 28"),
    ({"num-query-groups": 4}, "config.json num_key_value_heads is 8 but model_args num-query-groups is 4"),
    ({"ffn-hidden-size": 9728}, "config.json intermediate_size is 12288 but model_args ffn-hidden-size is 9728"),
    ({"num-attention-heads": 16}, "config.json num_attention_heads is 32 but model_args num-attention-heads is 16"),
    ({"vocab-size": 152064}, "config.json vocab_size is 151936 but model_args vocab-size is 152064"),
    ({"norm-epsilon": 1e-5}, "config.json rms_norm_eps is 1e-06 but model_args norm-epsilon is 1e-05"),
    ({"rotary-base": 10000}, "config.json rope_theta is 1000000 but model_args rotary-base is 10000"),
    ({"kv-channels": 64}, "config.json head_dim is 128 but model_args kv-channels is 64"),
    ({"hidden-size": "big"}, "model_args hidden-size is 'big', not a number; set it to config.json's hidden_size"),
])
def test_config_mismatch(run_module, model, change, expected):
    result, failed = check(run_module, model, model_args=dict(MODEL_ARGS, **change))
    assert failed
    assert expected in result["msg"]
    if "not a number" not in expected:
        assert "set model_args %s to" % list(change)[0] in result["msg"]
        assert "or point path at the model that MODEL_ARGS describe" in result["msg"]
    assert len(result["problems"]) == 1


def test_untie_flag_must_match_tie_word_embeddings(run_module, model, tmp_path):
    args = {k: v for k, v in MODEL_ARGS.items() if k != "untie-embeddings-and-output-weights"}
    result, failed = check(run_module, model, model_args=args)
    assert failed
    assert ("config.json tie_word_embeddings is false but model_args lacks untie-embeddings-and-output-weights; "
            "add 'untie-embeddings-and-output-weights: true' to model_args") in result["msg"]
    for off in (False, None):  # the inventory's "left out"
        result, failed = check(run_module, model, model_args=dict(args, **{"untie-embeddings-and-output-weights": off}))
        assert failed and "lacks untie-embeddings-and-output-weights" in result["msg"]
    tied = make_model(str(tmp_path / "tied"), config=dict(QWEN3_8B_CONFIG, tie_word_embeddings=True))
    result, failed = check(run_module, tied, model_args=MODEL_ARGS)
    assert failed
    assert "config.json tie_word_embeddings is true but model_args sets untie-embeddings-and-output-weights; " \
           "remove untie-embeddings-and-output-weights" in result["msg"]


def test_kv_channels_ignored_without_head_dim(run_module, tmp_path):
    config = {k: v for k, v in QWEN3_8B_CONFIG.items() if k != "head_dim"}
    path = make_model(str(tmp_path / "m"), config=config)
    result, failed = check(run_module, path, model_args=dict(MODEL_ARGS, **{"kv-channels": 64}))
    assert not failed


def test_config_missing_unreadable_or_incomplete(run_module, model):
    os.rename(os.path.join(model, "config.json"), os.path.join(model, "config.bak"))
    result, failed = check(run_module, model, model_args=MODEL_ARGS)
    assert failed and "config.json missing in %s; the download is incomplete" % model in result["msg"]
    with open(os.path.join(model, "config.json"), "w") as handle:
        handle.write('{"hidden_size": 40')
    result, failed = check(run_module, model)
    assert failed and "config.json is not readable JSON" in result["msg"]
    with open(os.path.join(model, "config.json"), "w") as handle:
        json.dump({"hidden_size": 4096, "vocab_size": 151936}, handle)
    result, failed = check(run_module, model)
    assert failed
    assert "config.json has no num_hidden_layers, num_attention_heads, num_key_value_heads, intermediate_size, " \
           "rms_norm_eps, rope_theta, tie_word_embeddings" in result["msg"]


def test_missing_shard(run_module, model):
    os.unlink(os.path.join(model, "model-00002-of-00003.safetensors"))
    result, failed = check(run_module, model)
    assert failed
    assert "model-00002-of-00003.safetensors missing (named in model.safetensors.index.json); the download was " \
           "interrupted — rerun the model stage to resume it" in result["msg"]


def test_truncated_shard(run_module, model):
    shard = os.path.join(model, "model-00003-of-00003.safetensors")
    data = open(shard, "rb").read()
    with open(shard, "wb") as handle:
        handle.write(data[:-700])
    result, failed = check(run_module, model)
    assert failed
    expected = "model-00003-of-00003.safetensors is truncated: %s of %s; the download was interrupted — rerun the " \
               "model stage to resume it" % (hf_model_check_task.human_bytes(len(data) - 700),
                                             hf_model_check_task.human_bytes(len(data)))
    assert expected in result["msg"]
    with open(shard, "wb") as handle:
        handle.write(data[:100])  # cut inside the header
    result, failed = check(run_module, model)
    assert failed and "model-00003-of-00003.safetensors is truncated: its" in result["msg"]
    with open(shard, "wb") as handle:
        handle.write(data[:5])
    result, failed = check(run_module, model)
    assert failed and "is truncated: only 5 bytes" in result["msg"]


def test_shard_longer_than_header(run_module, model):
    with open(os.path.join(model, "model-00001-of-00003.safetensors"), "ab") as handle:
        handle.write(b"junk")
    result, failed = check(run_module, model)
    assert failed and "model-00001-of-00003.safetensors is 4 bytes longer than its header describes" in result["msg"]


@pytest.mark.parametrize("payload,why", [
    (struct.pack("<Q", 1 << 40) + b"{}", "header length 1099511627776 is not sane"),
    (struct.pack("<Q", 10) + b"not json!!" + b"\0" * 10, "its header is not JSON"),
    (struct.pack("<Q", 8) + b"[1,2,3] " + b"\0" * 10, "its header is not a JSON object"),
])
def test_corrupt_header(run_module, model, payload, why):
    with open(os.path.join(model, "model-00001-of-00003.safetensors"), "wb") as handle:
        handle.write(payload)
    result, failed = check(run_module, model)
    assert failed
    assert "model-00001-of-00003.safetensors has a corrupt header: %s" % why in result["msg"]
    assert "delete it and rerun the model stage" in result["msg"]


def test_tensor_size_must_fit_dtype(run_module, model):
    shard = os.path.join(model, "model-00002-of-00003.safetensors")
    header = {"model.layers.0.mlp.up_proj.weight": {"dtype": "BF16", "shape": [48, 16], "data_offsets": [0, 100]},
              "model.layers.0.self_attn.q_proj.weight": {"dtype": "F32", "shape": [16, 16],
                                                         "data_offsets": [100, 1124]}}
    blob = json.dumps(header).encode()
    with open(shard, "wb") as handle:
        handle.write(struct.pack("<Q", len(blob)) + blob + bytes(1124))
    result, failed = check(run_module, model)
    assert failed
    assert "model-00002-of-00003.safetensors has a corrupt header: model.layers.0.mlp.up_proj.weight " \
           "(BF16 [48, 16]) spans 100 bytes, not 1536" in result["msg"]


def test_index_names_a_tensor_the_shard_lacks(run_module, model):
    index_path = os.path.join(model, "model.safetensors.index.json")
    index = json.load(open(index_path))
    index["weight_map"]["model.layers.1.mlp.up_proj.weight"] = "model-00002-of-00003.safetensors"
    json.dump(index, open(index_path, "w"))
    result, failed = check(run_module, model)
    assert failed
    assert "model-00002-of-00003.safetensors lacks 1 tensor that model.safetensors.index.json places in it " \
           "(first: model.layers.1.mlp.up_proj.weight)" in result["msg"]


def test_unreadable_index(run_module, model):
    with open(os.path.join(model, "model.safetensors.index.json"), "w") as handle:
        handle.write('{"weight_map": {')
    result, failed = check(run_module, model)
    assert failed and "model.safetensors.index.json is not a readable index" in result["msg"]


def test_index_required_for_several_shards(run_module, model, tmp_path):
    os.unlink(os.path.join(model, "model.safetensors.index.json"))
    result, failed = check(run_module, model)
    assert failed
    assert "model.safetensors.index.json missing (3 .safetensors files present)" in result["msg"]
    result, failed = check(run_module, model, require_index=False)
    assert not failed and result["shards"] == 3 and result["parameters"] == PARAMS
    single = make_model(str(tmp_path / "single"), shards={"model.safetensors": SHARDS[
        "model-00001-of-00003.safetensors"]}, index=False)
    result, failed = check(run_module, single, require_index=True)
    assert failed and "model.safetensors.index.json missing (1 .safetensors files present)" in result["msg"]


def test_no_weights(run_module, tmp_path):
    path = make_model(str(tmp_path / "m"), shards={}, index=False)
    result, failed = check(run_module, path)
    assert failed and "no weights: neither model.safetensors.index.json nor any .safetensors file" in result["msg"]


def test_missing_tokenizer(run_module, model):
    os.unlink(os.path.join(model, "tokenizer.json"))
    os.unlink(os.path.join(model, "merges.txt"))
    result, failed = check(run_module, model)
    assert failed
    assert "neither tokenizer.json nor vocab.json + merges.txt present; the download is incomplete" in result["msg"]
    os.unlink(os.path.join(model, "tokenizer_config.json"))
    result, failed = check(run_module, model)
    assert failed and "(1) tokenizer_config.json missing; the download is incomplete" in result["msg"]
    assert len(result["problems"]) == 2
    result, failed = check(run_module, model, tokenizer_files=["vocab.json", "merges.txt", "tokenizer.model"])
    assert failed and "tokenizer files merges.txt, tokenizer.model missing" in result["msg"]
    result, failed = check(run_module, model, tokenizer_files=["vocab.json"])
    assert not failed


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_manifest_match_and_mismatch(run_module, model, tmp_path, monkeypatch):
    names = sorted(SHARDS) + ["config.json"]
    manifest = {n: sha(os.path.join(model, n)) for n in names}
    workers = []
    real_pool = hf_model_check_task.ThreadPoolExecutor

    def spy_pool(max_workers):
        workers.append(max_workers)
        return real_pool(max_workers=max_workers)

    monkeypatch.setattr(hf_model_check_task, "ThreadPoolExecutor", spy_pool)
    result, failed = check(run_module, model, sha256_manifest=manifest, hash_workers=3)
    assert not failed, result.get("msg")
    assert workers == [3]
    hashed = {f["name"]: f.get("sha256") for f in result["files"]}
    assert hashed["model-00001-of-00003.safetensors"] == manifest["model-00001-of-00003.safetensors"]

    wrong = dict(manifest, **{"model-00002-of-00003.safetensors": "0" * 64})
    result, failed = check(run_module, model, sha256_manifest=wrong)
    assert failed
    assert "model-00002-of-00003.safetensors sha256 is %s but sha256_manifest says %s; the file is corrupt" % (
        manifest["model-00002-of-00003.safetensors"], "0" * 64) in result["msg"]

    # sha256sum output in a file, with a missing file
    listing = tmp_path / "Qwen3-8B.sha256"
    listing.write_text("".join("%s  %s\n" % (manifest[n], n) for n in names) + "%s  extra.bin\n" % ("a" * 64))
    result, failed = check(run_module, model, sha256_manifest=str(listing))
    assert failed
    assert result["problems"] == ["extra.bin is in sha256_manifest but missing; the download was interrupted — "
                                  "rerun the model stage to resume it"]


def test_manifest_unreadable_or_malformed(run_module, model, tmp_path):
    result, failed = check(run_module, model, sha256_manifest=str(tmp_path / "none.sha256"))
    assert failed and "sha256_manifest %s cannot be read" % (tmp_path / "none.sha256") in result["msg"]
    bad = tmp_path / "bad.sha256"
    bad.write_text("nothing useful here\n")
    result, failed = check(run_module, model, sha256_manifest=str(bad))
    assert failed and "line 'nothing useful here' is not '<sha256>  <file name>'" in result["msg"]
    result, failed = check(run_module, model, sha256_manifest={"config.json": "abc"})
    assert failed and "sha256_manifest entry config.json is 'abc', not a sha256" in result["msg"]
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    result, failed = check(run_module, model, sha256_manifest=str(listed))
    assert failed and "is not a JSON object of file name to sha256" in result["msg"]


def test_missing_path(run_module, tmp_path):
    result, failed = check(run_module, str(tmp_path / "nope"))
    assert failed
    assert "hf_model_check: %s does not exist; download the model first" % (tmp_path / "nope") in result["msg"]


def test_every_problem_in_one_message(run_module, model):
    os.unlink(os.path.join(model, "tokenizer_config.json"))
    os.unlink(os.path.join(model, "model-00001-of-00003.safetensors"))
    result, failed = check(run_module, model, model_args=dict(MODEL_ARGS, **{"hidden-size": 1}), check_mode=True)
    assert failed
    assert result["msg"].startswith("hf_model_check: %s: 3 problems: (1) config.json hidden_size" % model)
    assert "(2) tokenizer_config.json missing" in result["msg"]
    assert "(3) model-00001-of-00003.safetensors missing" in result["msg"]


def test_path_is_a_file(run_module, model):
    config = os.path.join(model, "config.json")
    result, failed = check(run_module, config)
    assert failed and "hf_model_check: %s is a file, not a directory" % config in result["msg"]


def test_config_not_an_object(run_module, model):
    with open(os.path.join(model, "config.json"), "w") as handle:
        handle.write("[1, 2]")
    result, failed = check(run_module, model)
    assert failed and "config.json holds list, not a JSON object" in result["msg"]


def test_bad_tensor_entries(run_module, model):
    header = {"a": {"dtype": "BF16", "shape": [2]}, "b": {"dtype": "BF16", "shape": [2], "data_offsets": [8, 4]},
              "c": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}
    blob = json.dumps(header).encode()
    with open(os.path.join(model, "model-00001-of-00003.safetensors"), "wb") as handle:
        handle.write(struct.pack("<Q", len(blob)) + blob + bytes(4))
    result, failed = check(run_module, model)
    assert failed
    assert "model-00001-of-00003.safetensors has a corrupt header: a has no valid dtype/shape/data_offsets; " \
           "b has data_offsets [8, 4]" in result["msg"]


def test_fingerprint_identifies_config_and_weights(tmp_path, run_module):
    """Same model -> same fingerprint; a changed config or shard -> a different one."""
    from ansible_collections.mtslime.posttrain.plugins.modules import hf_model_check as module
    import json as _json
    import struct as _struct

    def shard(path, n):
        header = _json.dumps({"w": {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]}}).encode()
        path.write_bytes(_struct.pack("<Q", len(header)) + header + b"\0" * (4 * n))

    model = tmp_path / "m"
    model.mkdir()
    config = {"hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 1, "num_key_value_heads": 1,
              "intermediate_size": 8, "vocab_size": 8, "rms_norm_eps": 1e-6, "rope_theta": 10000,
              "tie_word_embeddings": False}
    (model / "config.json").write_text(_json.dumps(config))
    (model / "tokenizer_config.json").write_text("{}")
    (model / "tokenizer.json").write_text("{}")
    shard(model / "model.safetensors", 4)
    args = {"path": str(model)}
    first, failed = run_module(module, args)
    assert not failed and len(first["fingerprint"]) == 64
    again, dummy = run_module(module, args)
    assert again["fingerprint"] == first["fingerprint"]
    shard(model / "model.safetensors", 5)
    changed, dummy = run_module(module, args)
    assert changed["fingerprint"] != first["fingerprint"]
    (model / "config.json").write_text(_json.dumps(dict(config, hidden_size=16)))
    config_changed, dummy = run_module(module, args)
    assert config_changed["fingerprint"] not in (first["fingerprint"], changed["fingerprint"])
