# The smoke run's model: the configured model's architecture family with two layers and
# small dimensions, as MODEL_ARGS for the converter and as a Hugging Face config.json that
# matches them field for field (the converter's hf_validate_args and hf_model_check compare
# the same fields). Writing the files is transformers' job (write_model); this file decides
# what they hold, and the writer runs in the image's interpreter, a process of its own.
#
# Python 3.8+.
from __future__ import annotations

import json
import subprocess
import sys

from ansible_collections.mtslime.posttrain.plugins.module_utils.common import flag_on, norm_flag
from ansible_collections.mtslime.posttrain.plugins.module_utils.logs.scan import first_error

# Small dimensions that every Megatron and Hugging Face check accepts: heads * kv-channels need not equal
# the hidden size (Qwen3 has head_dim), query groups divide the heads, the vocabulary is a multiple of 128.
SMALL = {"hidden-size": 256, "ffn-hidden-size": 512, "num-attention-heads": 4, "kv-channels": 64,
         "vocab-size": 1024}
# Flags that only fit the full model's shape.
DROPPED = ("padded-vocab-size", "decoder-first-pipeline-num-layers", "decoder-last-pipeline-num-layers",
           "num-layers-per-virtual-pipeline-stage")
# MODEL_ARGS flag -> config.json field, the fields hf_validate_args compares (and hf_model_check).
CONFIG_FIELD = (
    ("num-layers", "num_hidden_layers"),
    ("hidden-size", "hidden_size"),
    ("ffn-hidden-size", "intermediate_size"),
    ("num-attention-heads", "num_attention_heads"),
    ("num-query-groups", "num_key_value_heads"),
    ("kv-channels", "head_dim"),
    ("vocab-size", "vocab_size"),
)
UNTIE = "untie-embeddings-and-output-weights"
# Per-layer lists of a config.json that would no longer have one entry per layer.
PER_LAYER = ("layer_types", "mlp_only_layers")
ARCHITECTURES = {"qwen3": "Qwen3ForCausalLM", "qwen2": "Qwen2ForCausalLM", "llama": "LlamaForCausalLM"}
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_end|>")  # pad/bos and eos, the last two ids of the vocabulary


def smoke_model_args(model_args, layers):
    """The configured MODEL_ARGS with `layers` layers and SMALL dimensions; every other flag (normalization,
    rotary base, qk-layernorm, untied output, ...) as configured."""
    if int(layers) < 1:
        raise ValueError("smoke_num_layers is %r: it must be at least 1" % (layers,))
    args = {norm_flag(k): v for k, v in (model_args or {}).items() if norm_flag(k) not in DROPPED}
    if "num-layers" not in args:
        raise ValueError("slime_model_args has no num-layers: it is not the MODEL_ARGS of a model "
                         "(scripts/models/<model>.sh)")
    heads = int(float(args.get("num-attention-heads") or SMALL["num-attention-heads"]))
    groups = int(float(args.get("num-query-groups") or heads))
    args["num-layers"] = int(layers)
    for flag, value in SMALL.items():
        if flag in args or flag in ("hidden-size", "ffn-hidden-size", "num-attention-heads", "vocab-size"):
            args[flag] = value
    if "num-query-groups" in args:
        # grouped-query attention stays grouped: 2 groups of the 4 heads; a model with one group per head keeps 4
        args["num-query-groups"] = SMALL["num-attention-heads"] if groups >= heads else 2
    return args


def model_type(model_args, base_config=None):
    """The architecture family: config.json's model_type when there is one, else from MODEL_ARGS (qk-layernorm:
    Qwen3, a QKV bias: Qwen2, else Llama)."""
    if base_config and base_config.get("model_type"):
        return str(base_config["model_type"])
    args = {norm_flag(k): v for k, v in (model_args or {}).items()}
    if flag_on(args.get("qk-layernorm")):
        return "qwen3"
    if flag_on(args.get("add-qkv-bias")):
        return "qwen2"
    return "llama"


def hf_config(args, base_config=None):
    """config.json of the small model: the configured model's (base_config) with the fields of CONFIG_FIELD,
    the norm epsilon, the rotary base and tie_word_embeddings taken from `args` (smoke_model_args), so the
    converter's checks pass; or built from `args` alone."""
    kind = model_type(args, base_config)
    config = dict(base_config or {})
    for key in PER_LAYER + ("transformers_version", "quantization_config", "auto_map"):
        config.pop(key, None)
    config["model_type"] = kind
    config.setdefault("architectures", [ARCHITECTURES.get(kind, "%sForCausalLM" % kind.capitalize())])
    for flag, field in CONFIG_FIELD:
        if flag in args:
            config[field] = int(float(args[flag]))
    if "num-query-groups" not in args:
        config["num_key_value_heads"] = config["num_attention_heads"]
    if "head_dim" not in config:
        config["head_dim"] = config["hidden_size"] // config["num_attention_heads"]
    if "max_window_layers" in config:
        config["max_window_layers"] = config["num_hidden_layers"]
    if "norm-epsilon" in args:
        config["rms_norm_eps"] = float(args["norm-epsilon"])
    if "rotary-base" in args:
        theta = float(args["rotary-base"])
        config["rope_theta"] = int(theta) if theta.is_integer() else theta
        if isinstance(config.get("rope_parameters"), dict):
            config["rope_parameters"] = dict(config["rope_parameters"], rope_theta=config["rope_theta"])
    config["tie_word_embeddings"] = not flag_on(args.get(UNTIE))
    config.setdefault("hidden_act", "silu")
    config.setdefault("max_position_embeddings", int(float(args.get("max-position-embeddings") or 4096)))
    vocab = config["vocab_size"]
    config["bos_token_id"] = config["pad_token_id"] = vocab - len(SPECIAL_TOKENS)
    config["eos_token_id"] = vocab - 1
    return kind, config


def tokenizer_vocab(vocab_size):
    """A word-level vocabulary of exactly `vocab_size` ids: <unk>, plain words, then SPECIAL_TOKENS."""
    words = ["<unk>"] + ["w%d" % i for i in range(1, vocab_size - len(SPECIAL_TOKENS))]
    return {token: index for index, token in enumerate(words + list(SPECIAL_TOKENS))}


# Run by the image's interpreter in a process of its own, with the job as JSON on stdin: a module's own process
# carries Ansible's patches (ansible.module_utils replaces sys.intern, which torch._dynamo, imported with
# transformers, refuses: "substitute_in_graph expects a function", seen on an H200 with torch 2.11).
WRITE_SCRIPT = r"""
import json, os, sys
job = json.load(sys.stdin)
import tokenizers
import transformers
config = job["config"]
fields = {k: v for k, v in config.items() if k not in ("model_type", "architectures")}
model_config = transformers.AutoConfig.for_model(job["kind"], **fields)
model_config.architectures = list(config["architectures"])
transformers.AutoModelForCausalLM.from_config(model_config).save_pretrained(job["path"])
special = job["special"]
word_level = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab=job["vocab"], unk_token="<unk>"))
word_level.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
tokenizer = transformers.PreTrainedTokenizerFast(
    tokenizer_object=word_level, unk_token="<unk>", pad_token=special[0], bos_token=special[0], eos_token=special[1])
tokenizer.save_pretrained(job["path"])
print(json.dumps(sorted(os.listdir(job["path"]))))
"""


class WriteError(Exception):
    """The writer failed; the message is the exception that ended it (or its last output line)."""


def write_model(path, kind, config, python=None, env=None, timeout=600):
    """Writes the small model with the image's transformers and tokenizers (importing them is part of what the
    smoke run tries), in a process of `python` with `env`: config.json, model.safetensors, the tokenizer files.
    Returns the file names written; raises WriteError naming the exception that ended the writer."""
    job = {"path": path, "kind": kind, "config": config, "vocab": tokenizer_vocab(config["vocab_size"]),
           "special": list(SPECIAL_TOKENS)}
    try:
        done = subprocess.run([python or sys.executable, "-c", WRITE_SCRIPT], input=json.dumps(job), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise WriteError("the writer did not finish in %d s" % timeout) from None
    if done.returncode:
        lines = done.stderr.splitlines()
        found = first_error(lines)
        why = (found.get("exception") or found["line"]) if found else (lines[-1] if lines else "no output")
        raise WriteError("%s (rc %d)" % (why, done.returncode))
    return json.loads(done.stdout.strip().splitlines()[-1])
