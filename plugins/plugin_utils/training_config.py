# Validation of one training cluster's configuration, before anything changes.
# Each rule returns messages that name the variable(s), the values and the fix.
from __future__ import annotations

import os

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.train_args import (
    apply_overrides,
    effective_args,
    normalise_flag,
    unknown_flags,
)


class ClusterConfig:
    """The values the rules read, with the variable each one comes from."""

    def __init__(self, config):
        self.name = config.get("cluster", "?")
        self.nodes = dict(config.get("nodes") or {})
        self.addresses = dict(config.get("addresses") or {})
        self.actor_num_nodes = config.get("actor_num_nodes")
        self.actor_gpus_per_node = config.get("actor_gpus_per_node")
        self.rollout_num_gpus = config.get("rollout_num_gpus")
        self.model_args = {normalise_flag(k): v for k, v in (config.get("model_args") or {}).items()}
        self.overrides = {normalise_flag(k): v for k, v in (config.get("overrides") or {}).items()}
        self.groups, self.located = apply_overrides(config.get("train_args") or {}, self.overrides)
        self.args = effective_args(self.groups)
        self.ports = dict(config.get("ports") or {})
        self.paths = dict(config.get("paths") or {})
        self.known_flags_extra = list(config.get("known_flags_extra") or [])

    def where(self, flag):
        flag = normalise_flag(flag)
        if flag in self.overrides:
            return "slime_train_args_overrides['%s']" % flag
        if flag in self.model_args:
            return "slime_model_args['%s']" % flag
        group = self.located.get(flag)
        if group:
            return "slime_train_args.%s['%s']" % (group, flag)
        return "slime_train_args_overrides['%s']" % flag

    def arg(self, flag, default=None):
        flag = normalise_flag(flag)
        if flag in self.args:
            return self.args[flag]
        return self.model_args.get(flag, default)

    def number(self, flag, default=None):
        value = self.arg(flag, default)
        if value is None or isinstance(value, bool):
            return default if value is None else None
        try:
            return float(value) if not isinstance(value, int) else value
        except (TypeError, ValueError):
            return None


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def rule_gpu_budget(c):
    nodes, actor_per_node, rollout = _int(c.actor_num_nodes), _int(c.actor_gpus_per_node), _int(c.rollout_num_gpus)
    if None in (nodes, actor_per_node, rollout):
        return ["cluster %s: the GPU split must be whole numbers: actor nodes %r, actor GPUs per node "
                "(slime_actor_gpus_per_node) %r, rollout GPUs %r (slime_rollout_gpus_per_node x nodes)"
                % (c.name, c.actor_num_nodes, c.actor_gpus_per_node, c.rollout_num_gpus)]
    errors = []
    total = sum(_int(g) or 0 for g in c.nodes.values())
    actor = nodes * actor_per_node
    colocate = bool(c.arg("colocate"))
    need = max(actor, rollout) if colocate else actor + rollout
    layout = ", ".join("%s=%s" % item for item in c.nodes.items())
    if need > total:
        how = "max(actor %d, rollout %d) with --colocate" % (actor, rollout) if colocate else \
            "actor %d x %d + rollout %d" % (nodes, actor_per_node, rollout)
        errors.append(
            "cluster %s: the job needs %d GPUs (%s) but the cluster has %d (slime_gpus_per_node: %s). "
            "Fix: lower slime_actor_gpus_per_node / slime_rollout_gpus_per_node, or add nodes to the cluster."
            % (c.name, need, how, total, layout))
    widest = max([_int(g) or 0 for g in c.nodes.values()] or [0])
    if actor_per_node > widest:
        errors.append(
            "cluster %s: slime_actor_gpus_per_node is %d but no node has more than %d GPUs "
            "(slime_gpus_per_node: %s). Fix: set slime_actor_gpus_per_node <= %d."
            % (c.name, actor_per_node, widest, layout, widest))
    if nodes > len(c.nodes):
        errors.append(
            "cluster %s: --actor-num-nodes is %d but the cluster has %d node(s). Fix: add nodes to the "
            "cluster or lower the actor node count." % (c.name, nodes, len(c.nodes)))
    return errors


def rule_addresses(c):
    missing = sorted(node for node, address in c.addresses.items() if not address)
    if not missing:
        return []
    return ["cluster %s: no IP address known for node(s) %s; the hostfile and the Ray workers need it. Fix: set "
            "slime_node_ip in their host_vars (or ansible_host to an IP), or include them in the run so their "
            "facts are gathered." % (c.name, ", ".join(missing))]


def rule_parallelism(c):
    errors = []
    tp = _int(c.arg("tensor-model-parallel-size", 1)) or 1
    pp = _int(c.arg("pipeline-model-parallel-size", 1)) or 1
    cp = _int(c.arg("context-parallel-size", 1)) or 1
    actor = (_int(c.actor_num_nodes) or 0) * (_int(c.actor_gpus_per_node) or 0)
    if actor and actor % (tp * pp * cp):
        errors.append(
            "cluster %s: TP x PP x CP = %d x %d x %d = %d does not divide the %d actor GPUs. Fix: change %s, "
            "%s or %s, or slime_actor_gpus_per_node, so that the product divides the actor GPUs."
            % (c.name, tp, pp, cp, tp * pp * cp, actor, c.where("tensor-model-parallel-size"),
               c.where("pipeline-model-parallel-size"), c.where("context-parallel-size")))
    for flag in ("num-attention-heads", "num-query-groups"):
        count = _int(c.model_args.get(flag))
        if count and count % tp:
            errors.append(
                "cluster %s: tensor parallel size %d (%s) does not divide %s = %d (%s). Fix: pick a TP that "
                "divides it (%s)." % (c.name, tp, c.where("tensor-model-parallel-size"), flag, count,
                                      c.where(flag), ", ".join(str(d) for d in range(1, count + 1) if count % d == 0)))
    return errors


def rule_rollout_engines(c):
    per_engine = _int(c.arg("rollout-num-gpus-per-engine", 1)) or 1
    rollout = _int(c.rollout_num_gpus) or 0
    if rollout and rollout % per_engine:
        return [
            "cluster %s: %d rollout GPUs are not divisible by %d GPUs per engine (%s); slime would leave %d GPU(s) "
            "idle. Fix: make slime_rollout_gpus_per_node x nodes a multiple of %d, or change the engine size."
            % (c.name, rollout, per_engine, c.where("rollout-num-gpus-per-engine"), rollout % per_engine, per_engine)]
    return []


def rule_batch(c):
    rbs = _int(c.arg("rollout-batch-size"))
    n = _int(c.arg("n-samples-per-prompt", 1)) or 1
    steps = _int(c.arg("num-steps-per-rollout"))
    gbs = _int(c.arg("global-batch-size"))
    errors = []
    if rbs is None:
        return ["cluster %s: --rollout-batch-size is required by slime (%s)." % (c.name, c.where("rollout-batch-size"))]
    samples = rbs * n
    if steps:
        if samples % steps:
            errors.append(
                "cluster %s: rollout-batch-size x n-samples-per-prompt = %d x %d = %d is not divisible by "
                "num-steps-per-rollout = %d (%s). Fix: change one of them so the samples split evenly into steps."
                % (c.name, rbs, n, samples, steps, c.where("num-steps-per-rollout")))
        elif gbs is not None and gbs * steps != samples:
            errors.append(
                "cluster %s: global-batch-size x num-steps-per-rollout = %d x %d = %d but rollout-batch-size x "
                "n-samples-per-prompt = %d. Fix: set %s to %d or remove it (slime derives it)."
                % (c.name, gbs, steps, gbs * steps, samples, c.where("global-batch-size"), samples // steps))
    elif gbs is not None and samples % gbs:
        errors.append(
            "cluster %s: rollout-batch-size x n-samples-per-prompt = %d is not a multiple of global-batch-size %d "
            "(%s)." % (c.name, samples, gbs, c.where("global-batch-size")))
    return errors


def rule_sampling(c):
    errors = []
    for flag in ("rollout-temperature", "eval-temperature"):
        value = c.number(flag)
        if c.arg(flag) is not None and (value is None or value <= 0):
            errors.append("cluster %s: %s = %r must be > 0 (slime raises ValueError). Fix: set %s to a positive "
                          "number." % (c.name, flag, c.arg(flag), c.where(flag)))
    for flag in ("rollout-top-p", "eval-top-p"):
        value = c.number(flag)
        if c.arg(flag) is not None and (value is None or not 0 < value <= 1):
            errors.append("cluster %s: %s = %r must be in (0, 1]. Fix: set %s between 0 (exclusive) and 1."
                          % (c.name, flag, c.arg(flag), c.where(flag)))
    return errors


def rule_ports(c):
    errors = []
    seen = {}
    for var, port in c.ports.items():
        number = _int(port)
        if number is None or not 1 <= number <= 65535:
            errors.append("%s = %r is not a port number (1-65535). Fix: set %s to a free port." % (var, port, var))
            continue
        if number in seen:
            errors.append("%s and %s are both %d; each needs its own port. Fix: change one of them."
                          % (seen[number], var, number))
        seen.setdefault(number, var)
    return errors


def rule_eval_and_save(c):
    errors = []
    if c.arg("eval-interval") is not None and not (c.arg("eval-prompt-data") or c.arg("eval-config")):
        errors.append("cluster %s: --eval-interval is set (%s) but there is no --eval-prompt-data or --eval-config. "
                      "Fix: set slime_eval_file, or remove eval-interval." % (c.name, c.where("eval-interval")))
    if c.arg("save-interval") is not None and not c.arg("save"):
        errors.append("cluster %s: --save-interval is set (%s) but --save is not. Fix: set slime_save_dir."
                      % (c.name, c.where("save-interval")))
    return errors


PATH_FLAGS = ("hf-checkpoint", "ref-load", "load", "save", "prompt-data", "tensorboard-dir")


def rule_paths(c):
    errors = []
    for var, path in c.paths.items():
        if not isinstance(path, str) or not path or not os.path.isabs(path):
            errors.append("%s = %r must be an absolute path (the run script and runtime_env.yaml use absolute "
                          "paths inside the container). Fix: set %s to an absolute path." % (var, path, var))
    for flag in PATH_FLAGS:
        value = c.arg(flag)
        if isinstance(value, str) and value and not os.path.isabs(value):
            errors.append("cluster %s: --%s = %r must be an absolute path. Fix: %s." % (c.name, flag, value, c.where(flag)))
    eval_data = c.arg("eval-prompt-data")
    values = eval_data if isinstance(eval_data, (list, tuple)) else [eval_data] if eval_data else []
    if len(values) > 1 and len(values) % 2:
        errors.append("cluster %s: --eval-prompt-data takes name/path pairs; %d values given (%s). Fix: give "
                      "'name path' pairs or a single path." % (c.name, len(values), c.where("eval-prompt-data")))
    return errors


def rule_known_flags(c):
    flags = list(c.args) + list(c.model_args)
    errors = []
    for flag, suggestion in unknown_flags(flags, c.known_flags_extra):
        hint = "did you mean --%s? " % suggestion if suggestion else ""
        errors.append(
            "cluster %s: --%s (%s) is not a flag train.py knows; slime ignores unknown flags silently. %sFix: correct "
            "it, or list it in slime_train_known_flags_extra if your slime version has it."
            % (c.name, flag, c.where(flag), hint))
    return errors


RULES = (
    rule_addresses,
    rule_gpu_budget,
    rule_parallelism,
    rule_rollout_engines,
    rule_batch,
    rule_sampling,
    rule_ports,
    rule_eval_and_save,
    rule_paths,
    rule_known_flags,
)


def validate(config):
    """All problems of one cluster's configuration, as a list of messages."""
    cluster = ClusterConfig(config)
    errors = []
    for rule in RULES:
        errors.extend(rule(cluster))
    return errors
