# The run script's argument arrays as data: ordering, overrides, rendering to
# argv tokens, and the registry of flags train.py knows (slime.md §3).
from __future__ import annotations

import difflib
import re

# Order of the arrays on the guide's `ray job submit ... -- python3 train.py` line (§4.2).
SUBMIT_ORDER = (
    "MODEL_ARGS",
    "CKPT_ARGS",
    "ROLLOUT_ARGS",
    "OPTIMIZER_ARGS",
    "GRPO_ARGS",
    "PERF_ARGS",
    "EVAL_ARGS",
    "SGLANG_ARGS",
    "MISC_ARGS",
)
OVERRIDE_GROUP = "MISC_ARGS"


def format_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def flag_tokens(flag, value):
    """argv tokens of one flag: true -> bare flag, false/None -> nothing,
    list -> the flag followed by every value."""
    name = "--" + str(flag).lstrip("-")
    if value is None or value is False:
        return []
    if value is True:
        return [name]
    if isinstance(value, (list, tuple)):
        return [name] + [format_value(item) for item in value]
    return [name, format_value(value)]


def normalise_flag(flag):
    return str(flag).lstrip("-")


def apply_overrides(groups, overrides):
    """Copy of `groups` ({array name: {flag: value}}) with `overrides` ({flag: value})
    applied where each flag lives; a flag found in no array goes to MISC_ARGS.
    Returns (groups, located) where located maps flag -> array name."""
    merged = {}
    located = {}
    for name, flags in (groups or {}).items():
        merged[name] = {}
        for flag, value in (flags or {}).items():
            key = normalise_flag(flag)
            merged[name][key] = value
            located.setdefault(key, name)
    for flag, value in (overrides or {}).items():
        key = normalise_flag(flag)
        target = located.get(key, OVERRIDE_GROUP)
        merged.setdefault(target, {})
        if value is None:
            merged[target].pop(key, None)
        else:
            merged[target][key] = value
            located.setdefault(key, target)
    return merged, located


def ordered_groups(groups):
    """Array names in submit order: the guide's arrays first, then any others."""
    names = [name for name in SUBMIT_ORDER if name in groups]
    names += [name for name in groups if name not in SUBMIT_ORDER]
    return names


def group_tokens(flags):
    tokens = []
    for flag, value in (flags or {}).items():
        tokens.extend(flag_tokens(flag, value))
    return tokens


def effective_args(groups):
    """One {flag: value} view of all arrays (what train.py receives), dropping
    flags that are switched off."""
    result = {}
    for name in ordered_groups(groups):
        for flag, value in groups[name].items():
            if value is None or value is False:
                continue
            result[flag] = value
    return result


def argv(cluster_args, model_args, groups, overrides=None):
    """Full train.py argv after `python3 train.py`, in the guide's order."""
    merged, _located = apply_overrides(groups, overrides)
    merged = dict(merged)
    merged["MODEL_ARGS"] = dict(model_args or {})
    tokens = group_tokens(cluster_args)
    for name in ordered_groups(merged):
        tokens.extend(group_tokens(merged[name]))
    return tokens


# Flags train.py accepts that the collection knows of (slime.md §2, §3.2), so a
# misspelling is caught here: slime's Megatron parser ignores unknown flags.
KNOWN_FLAGS = frozenset(
    """
    actor-num-nodes actor-num-gpus-per-node rollout-num-gpus rollout-num-gpus-per-engine num-gpus-per-node
    colocate offload offload-train no-offload-train offload-rollout no-offload-rollout
    distributed-backend distributed-timeout-minutes train-backend
    hf-checkpoint ref-load load save save-interval async-save no-save-optim no-load-optim no-load-rng save-hf
    ref-ckpt-step ckpt-step start-rollout-id finetune
    prompt-data input-key label-key metadata-key tool-key apply-chat-template apply-chat-template-kwargs
    rollout-shuffle rm-type custom-rm-path rm-url reward-key num-rollout num-epoch rollout-batch-size
    n-samples-per-prompt rollout-max-prompt-len rollout-max-response-len rollout-max-context-len
    rollout-temperature rollout-top-p rollout-top-k rollout-seed global-batch-size num-steps-per-rollout
    micro-batch-size balance-data use-dynamic-batch-size max-tokens-per-gpu log-probs-max-tokens-per-gpu
    over-sampling-batch-size dynamic-sampling-filter-path
    eval-interval eval-prompt-data eval-config skip-eval-before-train n-samples-per-eval-prompt
    eval-temperature eval-top-p eval-top-k eval-max-response-len eval-input-key eval-label-key
    advantage-estimator use-kl-loss kl-loss-coef kl-coef kl-loss-type entropy-coef eps-clip eps-clip-high
    use-tis tis-clip tis-clip-low use-rollout-logprobs normalize-advantages calculate-per-token-loss seed
    optimizer lr min-lr lr-decay-style lr-warmup-iters lr-decay-iters weight-decay adam-beta1 adam-beta2
    adam-eps clip-grad
    use-wandb wandb-project wandb-group wandb-key wandb-host log-passrate use-tensorboard tb-project-name
    tb-experiment-name tensorboard-dir
    tensor-model-parallel-size sequence-parallel pipeline-model-parallel-size context-parallel-size
    expert-model-parallel-size expert-tensor-parallel-size decoder-first-pipeline-num-layers
    decoder-last-pipeline-num-layers recompute-granularity recompute-method recompute-num-layers
    attention-dropout hidden-dropout accumulate-allreduce-grads-in-fp32 attention-softmax-in-fp32
    attention-backend no-check-for-nan-in-loss-and-grad bf16 fp16 use-cpu-initialization
    no-rope-fusion no-masked-softmax-fusion no-gradient-accumulation-fusion moe-token-dispatcher-type
    swiglu num-layers hidden-size ffn-hidden-size num-attention-heads group-query-attention num-query-groups
    use-rotary-position-embeddings disable-bias-linear normalization norm-epsilon rotary-base vocab-size
    padded-vocab-size kv-channels qk-layernorm untie-embeddings-and-output-weights seq-length
    max-position-embeddings rotary-percent position-embedding-type make-vocab-size-divisible-by
    model-name custom-model-provider-path debug-rollout-only debug-train-only
    """.split()
)
# SGLang server flags pass through with this prefix (slime.md §3.1); router flags too.
PASSTHROUGH = re.compile(r"^(sglang|router)-[a-z0-9-]+$")


def unknown_flags(flags, extra=()):
    """[(flag, suggestion or None)] for flags train.py would not know."""
    known = KNOWN_FLAGS | frozenset(normalise_flag(flag) for flag in extra or ())
    result = []
    for flag in flags:
        key = normalise_flag(flag)
        if key in known or PASSTHROUGH.match(key):
            continue
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75)
        result.append((key, close[0] if close else None))
    return result
