# How large a checkpoint of a model is, before it exists: the parameter count from the model's
# shape (Megatron's MODEL_ARGS, or a Hugging Face config.json), times the bytes each parameter
# takes in the save (from the precision and optimizer flags).
#
# What a Megatron save holds (slime.md §2-§4, real-programs.md "Megatron torch_dist saves"):
# - a training save (--save, distributed optimizer, which slime forces): the weights in the model
#   dtype (bf16: slime sets bf16 = not fp16, so 2 bytes) and, unless --no-save-optim, the
#   optimizer's state: fp32 main params and Adam's two moments (4 + 4 + 4 bytes; their dtypes
#   follow --main-params-dtype / --exp-avg-dtype / --exp-avg-sq-dtype under
#   --use-precision-aware-optimizer), or SGD's momentum (4 bytes, none with --sgd-momentum 0).
#   Qwen3-8B: 8.19e9 parameters x 14 bytes = 106.8 GiB. The RNG state (--no-save-rng leaves it
#   out) is a few KiB per rank and is not counted.
# - the converter's output (HF -> torch_dist): the weights in the model dtype only (2 bytes).
#
# Standard library only; Python 3.8+.
from __future__ import annotations

import math

from ansible_collections.mtslime.posttrain.plugins.module_utils.common import flag_on, human_bytes, norm_flag

GIB = 1024 ** 3
DTYPE_BYTES = {"fp32": 4, "float32": 4, "fp16": 2, "float16": 2, "bf16": 2, "bfloat16": 2, "fp8": 1, "uint8": 1}
# Megatron pads the vocabulary to a multiple of this times the tensor-parallel size (--make-vocab-size-divisible-by).
VOCAB_DIVISIBLE_BY = 128
KINDS = ("training", "converted")
UNTIE = "untie-embeddings-and-output-weights"


def _number(args, flag, default=None):
    value = args.get(flag)
    if value is None or value is False:
        if default is None:
            raise ValueError("slime_model_args has no %s: the checkpoint size cannot be estimated without it; add it "
                             "(scripts/models/<model>.sh) or set preflight_checkpoint_gib" % flag)
        return default
    try:
        return int(float(value))
    except (TypeError, ValueError):
        raise ValueError("slime_model_args %s is %r, not a number" % (flag, value)) from None


def _args(flags):
    return {norm_flag(k): v for k, v in (flags or {}).items()}


def padded_vocab(vocab, divisible_by=VOCAB_DIVISIBLE_BY, tensor_parallel=1):
    """Megatron's padded vocabulary: `vocab` rounded up to a multiple of divisible_by x tensor_parallel."""
    multiple = max(1, int(divisible_by)) * max(1, int(tensor_parallel))
    return int(math.ceil(vocab / float(multiple))) * multiple


def shape_from_model_args(model_args, train_args=None):
    """The model's shape from Megatron's MODEL_ARGS ({flag: value}, as slime_model_args); `train_args`
    (the run's other flags) give the tensor-parallel size and the vocabulary padding."""
    args = dict(_args(train_args), **_args(model_args))
    hidden = _number(args, "hidden-size")
    heads = _number(args, "num-attention-heads")
    groups = _number(args, "num-query-groups", heads) if flag_on(args.get("group-query-attention")) else heads
    vocab = _number(args, "padded-vocab-size", 0) or padded_vocab(
        _number(args, "vocab-size"), _number(args, "make-vocab-size-divisible-by", VOCAB_DIVISIBLE_BY),
        _number(args, "tensor-model-parallel-size", 1))
    rotary = flag_on(args.get("use-rotary-position-embeddings")) or str(
        args.get("position-embedding-type") or "learned_absolute") != "learned_absolute"
    ffn = _number(args, "ffn-hidden-size", 4 * hidden)
    return {
        "layers": _number(args, "num-layers"),
        "hidden": hidden,
        "ffn": ffn,
        "heads": heads,
        "groups": groups,
        "head_dim": _number(args, "kv-channels", hidden // heads),
        "vocab": vocab,
        "tied": not flag_on(args.get(UNTIE)),
        "gated": flag_on(args.get("swiglu")),
        "linear_bias": not flag_on(args.get("disable-bias-linear")),
        "qkv_bias": flag_on(args.get("add-qkv-bias")),
        "qk_norm": flag_on(args.get("qk-layernorm")),
        "layernorm": str(args.get("normalization") or "LayerNorm") == "LayerNorm",
        "positions": 0 if rotary else _number(args, "max-position-embeddings", 0),
        "experts": _number(args, "num-experts", 0),
        "expert_ffn": _number(args, "moe-ffn-hidden-size", ffn),
        "shared_expert_ffn": _number(args, "moe-shared-expert-intermediate-size", 0),
    }



def shape_from_hf_config(config):
    """The model's shape from a Hugging Face config.json (Llama / Qwen2 / Qwen3 family, dense or MoE)."""
    def field(name, default=None):
        value = config.get(name, default)
        if value is None:
            raise ValueError("config.json has no %s: the checkpoint size cannot be estimated without it" % name)
        return int(value)

    hidden, heads = field("hidden_size"), field("num_attention_heads")
    kind = str(config.get("model_type") or "")
    experts = field("num_experts", 0) or field("num_local_experts", 0)
    return {
        "layers": field("num_hidden_layers"),
        "hidden": hidden,
        "ffn": field("intermediate_size"),
        "heads": heads,
        "groups": field("num_key_value_heads", heads),
        "head_dim": field("head_dim", hidden // heads),
        "vocab": field("vocab_size"),
        # transformers' PretrainedConfig ties them unless the config says otherwise
        "tied": bool(config.get("tie_word_embeddings", True)),
        "gated": True,
        "linear_bias": bool(config.get("mlp_bias", False)),
        "qkv_bias": bool(config.get("attention_bias", kind == "qwen2")),
        "qk_norm": kind.startswith("qwen3"),
        "layernorm": False,
        "positions": 0,
        "experts": experts,
        "expert_ffn": field("moe_intermediate_size", field("intermediate_size")),
        "shared_expert_ffn": field("shared_expert_intermediate_size", 0),
    }


def _mlp(shape, ffn):
    up = (2 if shape["gated"] else 1) * ffn * shape["hidden"]
    down = ffn * shape["hidden"]
    bias = ((2 if shape["gated"] else 1) * ffn + shape["hidden"]) if shape["linear_bias"] else 0
    return up + down + bias


def parameter_count(shape):
    """Parameters of a decoder-only transformer of `shape` (shape_from_model_args / shape_from_hf_config)."""
    hidden, head_dim = shape["hidden"], shape["head_dim"]
    norm = 2 if shape["layernorm"] else 1  # LayerNorm has a bias, RMSNorm only a weight
    q, kv = shape["heads"] * head_dim, shape["groups"] * head_dim
    attention = hidden * (q + 2 * kv) + q * hidden
    if shape["linear_bias"] or shape["qkv_bias"]:
        attention += q + 2 * kv
    if shape["linear_bias"]:
        attention += hidden
    if shape["qk_norm"]:
        attention += 2 * norm * head_dim
    if shape["experts"]:
        mlp = shape["experts"] * _mlp(shape, shape["expert_ffn"]) + shape["experts"] * hidden  # experts and router
        if shape["shared_expert_ffn"]:
            mlp += _mlp(shape, shape["shared_expert_ffn"])
    else:
        mlp = _mlp(shape, shape["ffn"])
    layer = attention + mlp + 2 * norm * hidden
    embeddings = shape["vocab"] * hidden * (1 if shape["tied"] else 2) + shape["positions"] * hidden
    return shape["layers"] * layer + embeddings + norm * hidden


def _dtype(args, flag, default):
    name = str(args.get(flag) or default).lower()
    if name not in DTYPE_BYTES:
        raise ValueError("--%s %s is not a dtype the estimate knows (%s)"
                         % (flag, name, ", ".join(sorted(DTYPE_BYTES))))
    return DTYPE_BYTES[name]


def bytes_per_parameter(train_args, kind="training"):
    """(bytes, what) one parameter takes in a save of `kind` (training: slime's --save; converted: the
    HF -> torch_dist converter's output) under the run's flags ({flag: value}); `what` lists the parts."""
    if kind not in KINDS:
        raise ValueError("kind is %r: give one of %s" % (kind, ", ".join(KINDS)))
    args = _args(train_args)
    # bf16 (slime sets bf16 = not fp16) or fp16: 2 bytes either way
    parts = [("fp16 weights" if flag_on(args.get("fp16")) else "bf16 weights", 2)]
    if kind == "training" and not flag_on(args.get("no-save-optim")):
        aware = flag_on(args.get("use-precision-aware-optimizer"))
        main = _dtype(args, "main-params-dtype", "fp32") if aware else 4
        parts.append(("fp32 main params" if main == 4 else "main params", main))
        if str(args.get("optimizer") or "adam").lower() == "sgd":
            momentum = args.get("sgd-momentum")
            if momentum is None or float(momentum) != 0:
                parts.append(("SGD momentum", 4))
        elif aware:
            parts.append(("Adam moments", _dtype(args, "exp-avg-dtype", "fp32") + _dtype(args, "exp-avg-sq-dtype",
                                                                                           "fp32")))
        else:
            parts.append(("fp32 Adam moments", 8))
    elif kind == "training":
        parts.append(("no optimizer state (--no-save-optim)", 0))
    return sum(part[1] for part in parts), ", ".join("%s %d" % part if part[1] else part[0] for part in parts)


def estimate(model_args=None, hf_config=None, train_args=None, kind="training"):
    """{parameters, bytes_per_parameter, bytes, gib, size, basis} of one checkpoint (size: the bytes for
    people): the shape from `model_args` (MODEL_ARGS) or else `hf_config` (config.json), the bytes per
    parameter from `train_args`. ValueError names what is missing."""
    if model_args:
        shape, source = shape_from_model_args(model_args, train_args), "slime_model_args"
    elif hf_config:
        shape, source = shape_from_hf_config(hf_config), "config.json"
    else:
        raise ValueError("neither slime_model_args nor a config.json: nothing to estimate the checkpoint size from")
    parameters = parameter_count(shape)
    per, what = bytes_per_parameter(train_args, kind)
    total = parameters * per
    return {
        "parameters": parameters,
        "bytes_per_parameter": per,
        "bytes": total,
        "gib": round(total / float(GIB), 1),
        "size": human_bytes(total),
        "basis": "estimated from %s: %s parameters x %d bytes: %s" % (source, "{:,}".format(parameters), per, what),
    }
