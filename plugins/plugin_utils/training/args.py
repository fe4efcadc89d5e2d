# The run script's argument arrays as data: ordering, overrides and rendering to argv tokens
# (slime.md §3). The flags' types are known_flags.py's.
from __future__ import annotations

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.training import known_flags

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
    list -> the flag followed by every value. A switch (store_true in its parser) given
    anything but a boolean is refused: "false" would render `--flag false`, which turns it on."""
    name = "--" + str(flag).lstrip("-")
    record = known_flags.spec(flag)
    if known_flags.is_switch(record) and not (value is None or isinstance(value, bool)):
        raise ValueError("%s is a switch: give true or false, not %r" % (name, value))
    if value is None or value is False:
        return []
    if value is True:
        return [name]
    if isinstance(value, (list, tuple)):
        return [name] + [format_value(item) for item in value]
    return [name, format_value(value)]


normalise_flag = known_flags.normalise_flag


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
