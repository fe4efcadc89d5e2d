# The rules of one training cluster's job, as slime, Megatron and SGLang apply them at start-up, checked
# before anything runs. Each rule cites the source line it mirrors (docs/configuration.md lists them) and
# returns Problems naming the variable, the value, the rule and the fix.
from __future__ import annotations
# pylint: disable=bad-string-format-type  # pylint infers None where each %d follows a test that it is a number

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.training import known_flags
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.problems import Problem
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.schema import (
    PATH_RULE,
    Path,
    as_int,
    as_number,
)
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.training.args import (
    apply_overrides,
    effective_args,
    normalise_flag,
)

# Counts and sizes that must be whole numbers >= the bound (their parsers take any int; these are the
# values slime/Megatron/SGLang can start with).
FLAG_MINIMUM = {flag: 1 for flag in (
    "num-rollout", "rollout-batch-size", "n-samples-per-prompt", "num-steps-per-rollout", "global-batch-size",
    "micro-batch-size", "tensor-model-parallel-size", "pipeline-model-parallel-size", "context-parallel-size",
    "expert-model-parallel-size", "expert-tensor-parallel-size", "rollout-num-gpus-per-engine",
    "max-tokens-per-gpu", "log-probs-max-tokens-per-gpu", "save-interval", "eval-interval",
    "n-samples-per-eval-prompt", "rollout-max-prompt-len", "rollout-max-response-len", "rollout-max-context-len",
    "eval-max-response-len", "num-epoch", "num-layers", "hidden-size", "ffn-hidden-size", "num-attention-heads",
    "num-query-groups", "kv-channels", "vocab-size", "seq-length", "max-position-embeddings",
    "over-sampling-batch-size", "actor-num-nodes", "actor-num-gpus-per-node", "num-gpus-per-node",
    "distributed-timeout-minutes", "lr-warmup-iters", "lr-decay-iters")}
FLAG_MINIMUM.update({"rollout-num-gpus": 0, "seed": 0, "rollout-seed": 0, "start-rollout-id": 0})
# Numbers with a range: (low, high, low exclusive).
FLAG_RANGE = {
    "lr": (0, None, False), "min-lr": (0, None, False), "weight-decay": (0, None, False),
    "clip-grad": (0, None, False), "attention-dropout": (0, 1, False), "hidden-dropout": (0, 1, False),
    "adam-beta1": (0, 1, False), "adam-beta2": (0, 1, False), "kl-loss-coef": (0, None, False),
    "kl-coef": (0, None, False), "entropy-coef": (0, None, False), "eps-clip": (0, None, False),
    "eps-clip-high": (0, None, False),
    # slime raises ValueError for rollout_temperature <= 0 (arguments.py@624b824a8 L1770); eval may be
    # greedy: SGLang takes temperature >= 0 (sampling_params.py SamplingParams.verify, 0 = greedy).
    "rollout-temperature": (0, None, True), "eval-temperature": (0, None, False),
    # SGLang SamplingParams.verify: top_p in (0, 1].
    "rollout-top-p": (0, 1, True), "eval-top-p": (0, 1, True),
}
PATH_FLAGS = ("hf-checkpoint", "ref-load", "load", "save", "prompt-data", "tensorboard-dir")


class ClusterConfig:
    """The head's values the rules read, and where each flag comes from."""

    def __init__(self, config):
        self.name = config.get("cluster", "?")
        self.head = config.get("head")
        self.nodes = dict(config.get("nodes") or {})
        self.actor_num_nodes = config.get("actor_num_nodes")
        self.actor_gpus_per_node = config.get("actor_gpus_per_node")
        self.rollout_num_gpus = config.get("rollout_num_gpus")
        self.raw_groups = {k: dict(v or {}) for k, v in (config.get("train_args") or {}).items()}
        self.raw_overrides = dict(config.get("overrides") or {})
        self.model_args = {normalise_flag(k): v for k, v in (config.get("model_args") or {}).items()}
        self.overrides = {normalise_flag(k): v for k, v in self.raw_overrides.items()}
        self.groups, self.located = apply_overrides(self.raw_groups, self.overrides)
        self.args = effective_args(self.groups)
        self.known_flags_extra = list(config.get("known_flags_extra") or [])
        self.sglang_version = config.get("sglang_version") or known_flags.UNCHECKED
        self.tp_above_groups = bool(config.get("tp_above_query_groups"))

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
        value = self.model_args.get(flag)
        return default if value is None or value is False else value

    def integer(self, flag, default=None):
        value = as_int(self.arg(flag))
        return default if value is None else value

    def problem(self, variable, rule, fix, value=None, show_value=True):
        return Problem(variable, "cluster %s: %s" % (self.name, rule), fix, hosts=[self.head] if self.head else [],
                       value=value, clusters=[self.name], show_value=show_value)


def rule_flag_types(c):
    """Every flag: known to train.py's parsers (slime ignores unknown ones: parse_known_args), and a value of
    the type its parser gives it (known_flags.json)."""
    problems = []
    seen = []
    for group, flags in c.raw_groups.items():
        seen += [("slime_train_args.%s['%s']" % (group, normalise_flag(f)), f, v) for f, v in flags.items()]
    seen += [("slime_train_args_overrides['%s']" % normalise_flag(f), f, v) for f, v in c.raw_overrides.items()]
    seen += [("slime_model_args['%s']" % f, f, v) for f, v in c.model_args.items()]
    for where, flag, value in seen:
        record = known_flags.spec(flag, c.known_flags_extra, c.sglang_version)
        if record is None:
            if value is None or value is False:
                continue
            problems.append(_unknown_flag(c, where, flag, value))
            continue
        rule = known_flags.value_problem(flag, value, record)
        if rule:
            problems.append(c.problem(where, "--%s %s" % (normalise_flag(flag), rule),
                                      known_flags.value_fix(flag, record), value))
            continue
        problems += _range_problem(c, where, normalise_flag(flag), value)
    return problems


def _unknown_flag(c, where, flag, value):
    name = normalise_flag(flag)
    hint = known_flags.suggestion(flag, c.known_flags_extra, c.sglang_version)
    fix = ("did you mean --%s? " % hint if hint else "") + "correct it, or list it in slime_train_known_flags_extra"
    if known_flags.PASSTHROUGH.fullmatch(name):
        # slime hands --sglang-*/--router-* to SGLang's server args and router (parse_known_args).
        return c.problem(where, "--%s is not a flag that SGLang %s or its router accepts (slime_sglang_version); "
                         "slime drops unknown flags silently" % (name, c.sglang_version),
                         fix + " if your image's SGLang has it, or set slime_sglang_version to your image's SGLang "
                         "(%s)" % ", ".join(known_flags.SGLANG_VERSIONS + (known_flags.UNCHECKED,)), value)
    return c.problem(where, "--%s is not a flag train.py knows (slime %s and Megatron %s); slime ignores unknown "
                     "flags silently" % (name, "/".join(known_flags.DATA["sources"]["slime"]["revisions"]),
                                         known_flags.DATA["sources"]["megatron"]["commit"][:12]),
                     fix + " if your slime fork has it", value)


def _range_problem(c, where, flag, value):
    if value is None or value is False or value is True or isinstance(value, (list, tuple)):
        return []
    if flag in FLAG_MINIMUM and as_int(value) is not None and as_int(value) < FLAG_MINIMUM[flag]:
        return [c.problem(where, "--%s must be >= %d" % (flag, FLAG_MINIMUM[flag]),
                          "set --%s to %d or more" % (flag, FLAG_MINIMUM[flag]), value)]
    if flag in FLAG_RANGE and as_number(value) is not None:
        low, high, exclusive = FLAG_RANGE[flag]
        number = as_number(value)
        if (number <= low if exclusive else number < low) or (high is not None and number > high):
            text = "%s%g%s" % ("> " if exclusive else ">= ", low, "" if high is None else " and <= %g" % high)
            why = " (greedy eval, 0, is fine; only the rollout temperature must be > 0)" \
                if flag == "rollout-temperature" else ""
            return [c.problem(where, "--%s must be %s%s" % (flag, text, why), "set --%s in that range" % flag, value)]
    return []


def rule_gpu_budget(c):
    nodes, per_node, rollout = as_int(c.actor_num_nodes), as_int(c.actor_gpus_per_node), as_int(c.rollout_num_gpus)
    counts = [as_int(g) for g in c.nodes.values()]
    if None in (nodes, per_node, rollout) or None in counts:
        return []  # the schema reports the variable itself
    problems = []
    total, actor = sum(counts), nodes * per_node
    colocate = c.arg("colocate") is True
    # slime/ray/placement_group.py L100-117: colocate -> max(actor, rollout), else actor + rollout.
    need = max(actor, rollout) if colocate else actor + rollout
    layout = ", ".join("%s=%s" % item for item in c.nodes.items())
    if need > total:
        how = "max(actor %d, rollout %d) with --colocate" % (actor, rollout) if colocate else \
            "actor %d x %d + rollout %d" % (nodes, per_node, rollout)
        problems.append(c.problem(
            "slime_actor_gpus_per_node", "the job needs %d GPUs (%s) but the cluster has %d (slime_gpus_per_node: "
            "%s); slime waits for them forever" % (need, how, total, layout),
            "lower slime_actor_gpus_per_node / slime_rollout_gpus_per_node, or add nodes", per_node))
    if counts and per_node > max(counts):
        problems.append(c.problem("slime_actor_gpus_per_node", "no node has more than %d GPUs" % max(counts),
                                  "set slime_actor_gpus_per_node <= %d" % max(counts), per_node))
    if nodes > len(c.nodes):
        problems.append(c.problem("slime_actor_num_nodes", "--actor-num-nodes is %d but the cluster has %d node(s)"
                                  % (nodes, len(c.nodes)), "add nodes to the cluster or lower it", nodes))
    return problems


def _parallel(c):
    tp = c.integer("tensor-model-parallel-size", 1)
    pp = c.integer("pipeline-model-parallel-size", 1)
    cp = c.integer("context-parallel-size", 1)
    actor = (as_int(c.actor_num_nodes) or 0) * (as_int(c.actor_gpus_per_node) or 0)
    return max(tp, 1), max(pp, 1), max(cp, 1), actor


def rule_parallelism(c):
    problems = []
    tp, pp, cp, actor = _parallel(c)
    # megatron/training/arguments.py@1dcf0dafa884 L317: world_size % (TP x PP x CP) == 0.
    if actor and actor % (tp * pp * cp):
        problems.append(c.problem(
            c.where("tensor-model-parallel-size"), "TP x PP x CP = %d x %d x %d = %d does not divide the %d actor GPUs "
            "(Megatron asserts world_size %% (TP x PP x CP) == 0)" % (tp, pp, cp, tp * pp * cp, actor),
            "change %s, %s or %s, or slime_actor_gpus_per_node" % (
                c.where("tensor-model-parallel-size"), c.where("pipeline-model-parallel-size"),
                c.where("context-parallel-size")), tp))
    heads = as_int(c.arg("num-attention-heads"))
    groups = as_int(c.arg("num-query-groups")) or heads
    # megatron/core/transformer/transformer_config.py@1dcf0dafa884 L939: heads % TP == 0.
    if heads and heads % tp:
        problems.append(c.problem(
            c.where("tensor-model-parallel-size"), "tensor parallel size %d does not divide num-attention-heads %d "
            "(%s)" % (tp, heads, c.where("num-attention-heads")), "pick a TP that divides it (%s)" % _divisors(heads),
            tp))
    if groups and c.arg("group-query-attention") is True:
        if c.tp_above_groups:
            # transformer_config.py@1dcf0dafa884 L954-961 (megatron-core >= 0.16, f7dfb99795): a divisor or a multiple.
            if groups % tp and tp % groups:
                problems.append(c.problem(
                    c.where("tensor-model-parallel-size"), "tensor parallel size %d is neither a divisor nor a "
                    "multiple of num-query-groups %d (%s)" % (tp, groups, c.where("num-query-groups")),
                    "pick a TP that divides %d or is a multiple of it" % groups, tp))
        elif groups % tp:
            # transformer_config.py before f7dfb99795 (megatron-core < 0.16) L782: groups % TP == 0.
            problems.append(c.problem(
                c.where("tensor-model-parallel-size"), "tensor parallel size %d does not divide num-query-groups %d "
                "(%s), which the image's Megatron requires (megatron-core < 0.16)" % (
                    tp, groups, c.where("num-query-groups")),
                "pick a TP that divides it (%s), or set slime_megatron_tp_above_query_groups: true when the image's "
                "Megatron is megatron-core >= 0.16 (slime's own image is)" % _divisors(groups), tp))
    return problems


def _divisors(number):
    return ", ".join(str(d) for d in range(1, number + 1) if number % d == 0)


def rule_rollout_engines(c):
    problems = []
    per_engine = max(c.integer("rollout-num-gpus-per-engine", 1), 1)
    pp = max(c.integer("sglang-pp-size", c.integer("sglang-pipeline-parallel-size", 1)), 1)
    rollout = as_int(c.rollout_num_gpus) or 0
    if rollout and rollout % per_engine:
        # Not a slime assert: slime starts rollout_num_gpus // per_engine engines and leaves the rest idle
        # (slime/ray/rollout.py L1033-1035); the collection refuses the waste.
        problems.append(c.problem(
            c.where("rollout-num-gpus-per-engine"), "%d rollout GPUs are not divisible by %d GPUs per engine; slime "
            "would leave %d GPU(s) idle" % (rollout, per_engine, rollout % per_engine),
            "make slime_rollout_gpus_per_node x nodes a multiple of %d, or change the engine size" % per_engine,
            per_engine))
    # slime/backends/sglang_utils/arguments.py@v0.3.1 L159-166: engine TP = GPUs per engine / SGLang PP size.
    if per_engine % pp:
        problems.append(c.problem(c.where("rollout-num-gpus-per-engine"), "GPUs per engine %d are not divisible by "
                                  "sglang-pp-size %d (slime asserts it)" % (per_engine, pp),
                                  "make them a multiple of the SGLang pipeline size", per_engine))
        return problems
    tp = per_engine // pp
    heads = as_int(c.arg("num-attention-heads"))
    kv = (as_int(c.arg("num-query-groups")) if c.arg("group-query-attention") is True else None) or heads
    # sglang python/sglang/srt/models/qwen3.py Qwen3Attention.__init__ (as Qwen2's, Llama's): the heads split
    # across the engine's TP ranks; KV heads split when >= TP, else TP must be a multiple of them.
    if heads and heads % tp:
        problems.append(c.problem(c.where("rollout-num-gpus-per-engine"), "an SGLang engine of tensor parallel size "
                                  "%d cannot split num-attention-heads %d" % (tp, heads),
                                  "use GPUs per engine (x sglang-pp-size) that divide the heads: %s" % _divisors(heads),
                                  per_engine))
    elif kv and (kv % tp if kv >= tp else tp % kv):
        problems.append(c.problem(c.where("rollout-num-gpus-per-engine"), "an SGLang engine of tensor parallel size "
                                  "%d cannot split or replicate num-query-groups (KV heads) %d" % (tp, kv),
                                  "use an engine TP that divides %d or is a multiple of it" % kv, per_engine))
    return problems


def rule_batch(c):
    rbs = as_int(c.arg("rollout-batch-size"))
    if rbs is None:
        if c.arg("rollout-batch-size") is not None:
            return []  # its type is reported
        return [c.problem(c.where("rollout-batch-size"), "--rollout-batch-size is required by slime",
                          "set it in slime_train_args.ROLLOUT_ARGS", None, show_value=False)]
    n = c.integer("n-samples-per-prompt", 1)
    steps = as_int(c.arg("num-steps-per-rollout"))
    gbs = as_int(c.arg("global-batch-size"))
    samples = rbs * n
    problems = []
    if steps:
        # slime/utils/arguments.py@v0.3.1 L1907-1915 (@624b824a8 L1971): GBS = rbs x n // steps, equal if given.
        if samples % steps:
            problems.append(c.problem(c.where("num-steps-per-rollout"), "rollout-batch-size x n-samples-per-prompt = "
                                      "%d x %d = %d is not divisible by num-steps-per-rollout %d" % (
                                          rbs, n, samples, steps), "change one of them", steps))
            return problems
        if gbs is not None and gbs * steps != samples:
            problems.append(c.problem(c.where("global-batch-size"), "global-batch-size x num-steps-per-rollout = %d x "
                                      "%d = %d but rollout-batch-size x n-samples-per-prompt = %d (slime asserts "
                                      "they are equal)" % (gbs, steps, gbs * steps, samples),
                                      "set it to %d or remove it (slime derives it)" % (samples // steps), gbs))
            return problems
        gbs = samples // steps
    elif gbs is not None and samples % gbs:
        problems.append(c.problem(c.where("global-batch-size"), "rollout-batch-size x n-samples-per-prompt = %d is "
                                  "not a multiple of global-batch-size %d" % (samples, gbs),
                                  "make the samples of a rollout a whole number of steps", gbs))
        return problems
    tp, pp, cp, actor = _parallel(c)
    mbs = c.integer("micro-batch-size", 1)
    dp = actor // (tp * pp * cp) if actor and not actor % (tp * pp * cp) else 0
    # megatron/core/num_microbatches_calculator.py@1dcf0dafa884 L340, called by slime's
    # backends/megatron_utils/initialize.py L79-86: GBS % (micro-batch x data-parallel size) == 0.
    if gbs and dp and mbs > 0 and gbs % (mbs * dp) and c.arg("decrease-batch-size-if-needed") is not True:
        problems.append(c.problem(
            c.where("micro-batch-size"), "the global batch %d is not divisible by micro-batch-size %d x data-parallel "
            "size %d (actor GPUs %d / (TP %d x PP %d x CP %d)); Megatron asserts it"
            % (gbs, mbs, dp, actor, tp, pp, cp),
            "make the global batch (rollout-batch-size x n-samples-per-prompt / num-steps-per-rollout) a multiple of "
            "%d" % (mbs * dp), mbs))
    # slime/utils/arguments.py@v0.3.1 L1809: dynamic batches need --max-tokens-per-gpu.
    if c.arg("use-dynamic-batch-size") is True and c.arg("max-tokens-per-gpu") is None:
        problems.append(c.problem(c.where("max-tokens-per-gpu"), "--use-dynamic-batch-size needs --max-tokens-per-gpu",
                                  "set max-tokens-per-gpu (the guide: 8192)", None, show_value=False))
    return problems


def rule_slime_dependencies(c):
    problems = []
    # slime/utils/arguments.py@v0.3.1 L1781-1786: eval_interval needs eval data, save_interval needs --save.
    if c.arg("eval-interval") is not None and not (c.arg("eval-prompt-data") or c.arg("eval-config")):
        problems.append(c.problem(c.where("eval-interval"), "--eval-interval is set but there is no --eval-prompt-data "
                                  "or --eval-config", "set slime_eval_file, or remove eval-interval",
                                  c.arg("eval-interval")))
    if c.arg("save-interval") is not None and not c.arg("save"):
        problems.append(c.problem(c.where("save-interval"), "--save-interval is set but --save is not",
                                  "set slime_save_dir", c.arg("save-interval")))
    # L1787: only one of kl_coef and kl_loss_coef.
    if as_number(c.arg("kl-coef")) and as_number(c.arg("kl-loss-coef")):
        problems.append(c.problem(c.where("kl-coef"), "only one of --kl-coef and --kl-loss-coef may be non-zero",
                                  "set one of them to 0", c.arg("kl-coef")))
    # L1795-1796: --use-rollout-logprobs and --use-tis exclude each other.
    if c.arg("use-rollout-logprobs") is True and c.arg("use-tis") is True:
        problems.append(c.problem(c.where("use-rollout-logprobs"), "--use-rollout-logprobs and --use-tis cannot be "
                                  "set together (slime asserts it)", "drop one of them", True))
    # L1717-1719: a KL term loads the reference model from --ref-load.
    if (c.arg("use-kl-loss") is True or as_number(c.arg("kl-coef"))) and not c.arg("ref-load"):
        problems.append(c.problem(c.where("use-kl-loss"), "a KL term (--use-kl-loss or --kl-coef) needs --ref-load",
                                  "keep ref-load (slime_mcore_dir) in slime_train_args.CKPT_ARGS", True))
    return problems


def rule_path_flags(c):
    problems = []
    for flag in PATH_FLAGS:
        value = c.arg(flag)
        if not isinstance(value, str) or not value:
            continue
        path = value.split("@[", 1)[0] if flag == "prompt-data" else value
        rule = Path().check(path)
        if rule:
            problems.append(c.problem(c.where(flag), "--%s %s" % (flag, rule), "give an absolute path (%s)" % PATH_RULE,
                                      value))
    eval_data = c.arg("eval-prompt-data")
    values = eval_data if isinstance(eval_data, (list, tuple)) else [eval_data] if eval_data else []
    # slime/utils/arguments.py _resolve_eval_datasets: name/path pairs, or one path (named aime).
    if len(values) > 1 and len(values) % 2:
        problems.append(c.problem(c.where("eval-prompt-data"), "--eval-prompt-data takes name/path pairs; %d values "
                                  "given" % len(values), "give 'name path' pairs or a single path", eval_data))
    paths = values[1::2] if len(values) > 1 else values
    for path in paths:
        rule = Path().check(str(path))
        if rule:
            problems.append(c.problem(c.where("eval-prompt-data"), "--eval-prompt-data path %s" % rule,
                                      "give absolute paths", path))
    return problems


RULES = (rule_flag_types, rule_gpu_budget, rule_parallelism, rule_rollout_engines, rule_batch,
         rule_slime_dependencies, rule_path_flags)


def check(config):
    """Problems of one cluster's training configuration."""
    cluster = ClusterConfig(config)
    problems = []
    for rule in RULES:
        problems.extend(rule(cluster))
    return problems


def validate(config):
    """Messages of check(): the text of each problem."""
    return [problem.text() for problem in check(config)]
