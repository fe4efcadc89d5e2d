# Stand-in for slime's train.py (real: THUDM/slime train.py, /home/slime/train.py in the MT image).
# Speaks slime's CLI, input checks, Ray placement group, resume rules, metric log lines and
# checkpoint layout without a GPU. Test knobs: see tests/standins/README.md.
import argparse
import datetime
import json
import math
import os
import random
import signal
import sys
import time


# ---------------------------------------------------------------- command line
def build_parser():
    p = argparse.ArgumentParser(description="slime (stand-in)", allow_abbrev=False)

    def flags(*names):
        for n in names:
            p.add_argument(n, action="store_true")

    def opts(kind, default, *names):
        for n in names:
            p.add_argument(n, type=kind, default=default)

    # cluster / placement
    opts(int, 1, "--actor-num-nodes")
    opts(int, 8, "--actor-num-gpus-per-node", "--num-gpus-per-node")
    opts(int, None, "--rollout-num-gpus")
    opts(int, 1, "--rollout-num-gpus-per-engine")
    flags("--colocate", "--offload", "--debug-rollout-only", "--debug-train-only")
    p.add_argument("--offload-train", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--offload-rollout", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--train-backend", choices=["megatron", "fsdp"], default="megatron")
    opts(str, "nccl", "--distributed-backend")
    opts(int, 10, "--distributed-timeout-minutes")
    # checkpoints
    opts(str, None, "--hf-checkpoint", "--ref-load", "--load", "--save", "--save-hf")
    opts(int, None, "--save-interval", "--start-rollout-id", "--ckpt-step", "--ref-ckpt-step")
    flags("--async-save", "--no-save-optim", "--no-save-rng", "--no-load-optim", "--no-load-rng", "--finetune")
    # rollout / data
    opts(str, None, "--prompt-data", "--label-key", "--rm-type", "--custom-rm-path", "--reward-key", "--rm-url",
         "--dynamic-sampling-filter-path", "--apply-chat-template-kwargs", "--rollout-function-path")
    opts(str, "input", "--input-key")
    opts(str, "metadata", "--metadata-key")
    opts(str, "tools", "--tool-key")
    flags("--apply-chat-template", "--rollout-shuffle", "--balance-data", "--use-dynamic-batch-size",
          "--group-rm")
    opts(int, None, "--num-rollout", "--num-epoch", "--rollout-max-prompt-len", "--rollout-max-response-len",
         "--rollout-max-context-len", "--global-batch-size", "--num-steps-per-rollout", "--max-tokens-per-gpu",
         "--over-sampling-batch-size", "--rollout-seed", "--log-probs-max-tokens-per-gpu")
    p.add_argument("--rollout-batch-size", type=int, required=True)
    opts(int, 1, "--n-samples-per-prompt", "--micro-batch-size")
    opts(float, 1.0, "--rollout-temperature", "--rollout-top-p")
    opts(int, -1, "--rollout-top-k")
    # eval
    opts(int, None, "--eval-interval", "--eval-max-response-len", "--eval-top-k")
    p.add_argument("--eval-prompt-data", nargs="+", default=None)
    opts(str, None, "--eval-config", "--eval-input-key", "--eval-label-key")
    flags("--skip-eval-before-train")
    opts(int, 1, "--n-samples-per-eval-prompt")
    opts(float, None, "--eval-temperature", "--eval-top-p")
    # GRPO / loss
    p.add_argument("--advantage-estimator", default="grpo",
                   choices=["grpo", "gspo", "cispo", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "ppo"])
    flags("--use-kl-loss", "--use-tis", "--use-rollout-logprobs", "--normalize-advantages",
          "--calculate-per-token-loss", "--no-check-for-nan-in-loss-and-grad")
    opts(float, 0.0, "--kl-loss-coef", "--kl-coef", "--entropy-coef", "--tis-clip-low")
    p.add_argument("--kl-loss-type", choices=["k1", "k2", "k3", "low_var_kl"], default="k1")
    opts(float, 0.2, "--eps-clip")
    opts(float, None, "--eps-clip-high")
    opts(float, 2.0, "--tis-clip")
    opts(int, 1234, "--seed")
    # optimizer
    opts(str, "adam", "--optimizer")
    opts(float, 1e-6, "--lr")
    opts(float, None, "--min-lr", "--weight-decay", "--adam-beta1", "--adam-beta2", "--adam-eps")
    opts(str, None, "--lr-decay-style")
    opts(int, 0, "--lr-warmup-iters")
    opts(int, None, "--lr-decay-iters")
    opts(float, 1.0, "--clip-grad")
    # parallelism / perf / misc (Megatron)
    opts(int, 1, "--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--context-parallel-size",
         "--expert-model-parallel-size")
    opts(int, None, "--expert-tensor-parallel-size", "--recompute-num-layers")
    opts(str, None, "--recompute-granularity", "--recompute-method", "--attention-backend", "--tensorboard-dir")
    flags("--sequence-parallel", "--accumulate-allreduce-grads-in-fp32", "--attention-softmax-in-fp32", "--bf16",
          "--fp16", "--use-distributed-optimizer", "--no-rope-fusion", "--no-gradient-accumulation-fusion",
          "--no-masked-softmax-fusion", "--no-bias-dropout-fusion")
    opts(float, None, "--attention-dropout", "--hidden-dropout")
    # logging
    flags("--use-wandb", "--log-passrate", "--use-tensorboard")
    opts(str, None, "--wandb-project", "--wandb-group", "--wandb-key", "--wandb-host", "--wandb-mode",
         "--wandb-dir", "--tb-project-name", "--tb-experiment-name")
    # SGLang passthrough (--sglang-<ServerArgs flag>) and router
    opts(float, None, "--sglang-mem-fraction-static")
    opts(str, None, "--sglang-attention-backend", "--sglang-log-level", "--sglang-router-ip",
         "--sglang-sampling-backend")
    opts(int, None, "--sglang-cuda-graph-max-bs", "--sglang-dp-size", "--sglang-pp-size", "--sglang-router-port",
         "--sglang-router-request-timeout-secs", "--sglang-server-concurrency", "--sglang-chunked-prefill-size",
         "--sglang-context-length", "--sglang-max-running-requests", "--sglang-ep-size")
    flags("--sglang-disable-overlap-schedule", "--sglang-disable-cuda-graph", "--sglang-enable-dp-attention",
          "--sglang-disable-radix-cache", "--sglang-enable-metrics")
    # MODEL_ARGS (scripts/models/qwen3-8B.sh)
    flags("--swiglu", "--group-query-attention", "--use-rotary-position-embeddings", "--disable-bias-linear",
          "--qk-layernorm", "--untie-embeddings-and-output-weights", "--use-cpu-initialization", "--add-qkv-bias")
    opts(int, None, "--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads",
         "--num-query-groups", "--vocab-size", "--kv-channels", "--rotary-base", "--seq-length")
    opts(float, 1e-5, "--norm-epsilon")
    opts(float, 1.0, "--rotary-percent")
    p.add_argument("--normalization", default="LayerNorm", choices=["LayerNorm", "RMSNorm"])
    p.add_argument("--position-embedding-type", default="learned_absolute",
                   choices=["learned_absolute", "rope", "none"])
    return p


# ---------------------------------------------------------------- logging
_PIDS = {"train": os.getpid() + 101, "rollout": os.getpid() + 57}


def log(where, message, actor=None):
    name, dummy, line = where.partition(":")
    text = "[%s] %s:%s - %s" % (time.strftime("%Y-%m-%d %H:%M:%S"), name, line, message)
    if actor == "train":
        text = "(MegatronTrainRayActor pid=%d) %s" % (_PIDS["train"], text)
    elif actor == "rollout":
        text = "(RolloutManager pid=%d) %s" % (_PIDS["rollout"], text)
    print(text, flush=True)


KNOBS = {
    # name: (default, type)
    "step_seconds": (1.0, float),
    "wait_log_seconds": (30.0, float),
    "crash_at_step": (None, int),
    "ray_crash_at_step": (None, int),
    "handled_traceback_at_step": (None, int),
    "oom_recovered_at_step": (None, int),
    "die_in_save": (None, str),
    "die_in_save_iteration": (None, int),
    "common_pt": (True, lambda v: str(v).lower() not in ("0", "false", "no")),
    "shard_bytes": (8192, int),
}
SAVE_POINTS = ("mid_shards", "before_metadata", "before_metadata_json", "before_tracker", "before_data_state")


def control():
    """Knobs re-read every step: env MTSLIME_STANDIN_<KNOB> first, then the JSON control file, then defaults."""
    path = os.environ.get("MTSLIME_STANDIN_CONTROL", "/etc/mtslime-standin.json")
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        data = {}
    result = {}
    for key, (default, kind) in KNOBS.items():
        value = os.environ.get("MTSLIME_STANDIN_" + key.upper(), data.get(key))
        result[key] = default if value is None or value == "" else kind(value)
    if result["die_in_save"] is not None and result["die_in_save"] not in SAVE_POINTS:
        raise ValueError("die_in_save=%r: expected one of %s" % (result["die_in_save"], ", ".join(SAVE_POINTS)))
    return result


# ---------------------------------------------------------------- validation (slime_validate_args subset)
def strip_slice(path):
    return path.split("@[", 1)[0] if path else path


def read_columns(path):
    if path.endswith(".jsonl"):
        with open(path) as f:
            first = f.readline()
        rows = sum(1 for dummy in open(path))
        return list(json.loads(first).keys()) if first.strip() else [], rows
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path)
    return meta.schema_arrow.names, meta.metadata.num_rows


def check_data(path, key, what):
    path = strip_slice(path)
    if not os.path.exists(path):
        raise FileNotFoundError("%s not found: %s" % (what, path))
    columns, rows = read_columns(path)
    if key not in columns:
        raise ValueError("%s %s has no column %r (columns: %s); check --input-key" % (what, path, key, columns))
    return rows


def eval_datasets(args):
    data = args.eval_prompt_data or []
    if len(data) == 1:
        return [("aime", data[0])]
    if len(data) % 2:
        raise ValueError("--eval-prompt-data takes name/path pairs, got an odd number of values: %s" % data)
    return list(zip(data[::2], data[1::2]))


def validate(args):
    if args.num_rollout is None and args.num_epoch is None:
        raise ValueError("either --num-rollout or --num-epoch must be set")
    if not args.rollout_temperature > 0:
        raise ValueError("--rollout-temperature must be > 0, got %s" % args.rollout_temperature)
    if args.save_interval is not None and not args.save:
        raise ValueError("--save-interval is set (%d) but --save is not" % args.save_interval)
    if args.hf_checkpoint is None or not os.path.isfile(os.path.join(args.hf_checkpoint, "config.json")):
        raise FileNotFoundError("--hf-checkpoint %s has no config.json" % args.hf_checkpoint)
    if args.ref_load is not None and not os.path.exists(args.ref_load):
        raise FileNotFoundError("--ref-load %s does not exist" % args.ref_load)
    if (args.use_kl_loss or args.kl_coef != 0) and args.ref_load is None:
        raise FileNotFoundError("--use-kl-loss / --kl-coef need --ref-load, which is not set")
    if args.kl_coef != 0 and args.kl_loss_coef != 0:
        raise ValueError("only one of --kl-coef and --kl-loss-coef may be non-zero")
    if args.use_tis and args.use_rollout_logprobs:
        raise ValueError("--use-tis and --use-rollout-logprobs are mutually exclusive")
    if args.use_dynamic_batch_size and args.max_tokens_per_gpu is None:
        raise ValueError("--use-dynamic-batch-size requires --max-tokens-per-gpu")
    if args.prompt_data is None:
        raise ValueError("--prompt-data is required")
    args.dataset_rows = check_data(args.prompt_data, args.input_key, "--prompt-data")
    if args.eval_config and not os.path.exists(args.eval_config):
        raise FileNotFoundError("--eval-config %s does not exist" % args.eval_config)
    args.eval_sets = eval_datasets(args)
    if args.eval_interval is not None and not args.eval_sets and not args.eval_config:
        raise ValueError("--eval-interval is set but no eval dataset (--eval-prompt-data / --eval-config)")
    for dummy, path in args.eval_sets:
        check_data(path, args.eval_input_key or args.input_key, "--eval-prompt-data")
    samples = args.rollout_batch_size * args.n_samples_per_prompt
    if args.num_steps_per_rollout is not None:
        gbs = samples // args.num_steps_per_rollout
        if args.global_batch_size is not None and args.global_batch_size != gbs:
            raise ValueError("--global-batch-size %d != rollout_batch_size * n_samples_per_prompt / "
                             "num_steps_per_rollout = %d" % (args.global_batch_size, gbs))
        args.global_batch_size = gbs
    if args.global_batch_size is None:
        args.global_batch_size = samples
    args.steps_per_rollout = max(1, samples // args.global_batch_size)
    args.num_rollout_per_epoch = None
    if args.num_rollout is None:  # slime/ray/placement_group.py L240-243
        args.num_rollout_per_epoch = max(1, args.dataset_rows // args.rollout_batch_size)
        args.num_rollout = args.num_epoch * args.num_rollout_per_epoch
    if args.colocate and args.rollout_num_gpus is None:
        args.rollout_num_gpus = args.actor_num_nodes * args.actor_num_gpus_per_node


# ---------------------------------------------------------------- Ray placement group
def ray_wanted():
    if os.environ.get("MTSLIME_STANDIN_NO_RAY") == "1":
        return False
    return bool(os.environ.get("RAY_ADDRESS") or os.environ.get("RAY_JOB_SUBMISSION_ID"))


def create_placement_group(args):
    """slime/ray/placement_group.py _create_placement_group: PACK bundles of {"GPU": 1, "CPU": 1}, waited for
    without a time limit, one line every 30 s (L57-67; the interval is the wait_log_seconds knob here)."""
    import ray
    from ray.util.placement_group import placement_group

    ray.init(logging_level="warning", log_to_driver=False)
    actor = args.actor_num_nodes * args.actor_num_gpus_per_node
    rollout = args.rollout_num_gpus or 0
    num_gpus = max(actor, rollout) if args.colocate else actor + rollout
    pg = placement_group([{"GPU": 1, "CPU": 1} for dummy in range(num_gpus)], strategy="PACK")
    ready_ref = pg.ready()
    elapsed = 0
    while True:
        interval = control()["wait_log_seconds"]
        if ray.wait([ready_ref], timeout=interval)[0]:
            break
        elapsed += interval
        log("placement_group.py:64",
            "Waiting for placement group of %d GPUs (elapsed %gs): %g GPUs registered with Ray, %g available."
            % (num_gpus, elapsed, ray.cluster_resources().get("GPU", 0), ray.available_resources().get("GPU", 0)))
    return pg


# ---------------------------------------------------------------- resume
TRACKER = "latest_checkpointed_iteration.txt"


def now():
    return datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")


def megatron_print(message):
    """Megatron's print_rank_0 in the train actor: no logger prefix, Ray's actor prefix."""
    print("(MegatronTrainRayActor pid=%d) %s" % (_PIDS["train"], message), flush=True)


def check_loadable(checkpoint_dir):
    """What Megatron's load of a torch_dist dir trips over (checkpointing.py _get_checkpoint_format L1134-1157,
    core.py maybe_load_config, torch's FileSystemReader reading each item's byte range)."""
    names = os.listdir(checkpoint_dir)  # a missing dir: FileNotFoundError, as in _get_checkpoint_format
    if "metadata.json" not in names:
        if ".metadata" not in names:
            raise NotImplementedError("unknown checkpoint format in %s" % checkpoint_dir)
        raise RuntimeError("%s has no metadata.json: Megatron reads it as a plain torch DCP checkpoint and fails "
                           "to map its keys" % checkpoint_dir)
    with open(os.path.join(checkpoint_dir, "metadata.json")) as handle:
        json.load(handle)  # 0 bytes: json.decoder.JSONDecodeError, as in maybe_load_config
    import torch.distributed.checkpoint as dcp

    dcp.load(None, checkpoint_id=checkpoint_dir)


def megatron_load(args, load):
    """Megatron's load_checkpoint as slime calls it: the loaded iteration (0 without a checkpoint)."""
    tp_pp = "[ t 1/%d, p 1/%d ]" % (args.tensor_model_parallel_size, args.pipeline_model_parallel_size)
    tracker = os.path.join(load, TRACKER) if load else "because load directory is not defined"
    if not load or not os.path.isfile(tracker):
        megatron_print("WARNING: could not find the metadata file %s" % tracker)
        megatron_print("    will not load any checkpoints and will start from random")
        return 0
    with open(tracker) as handle:
        text = handle.read().strip()
    if text != "release" and not text.isdigit():
        megatron_print("ERROR: Invalid metadata file %s. Exiting" % tracker)  # read_metadata: sys.exit()
        sys.exit()
    release = text == "release"
    iteration = 0 if release else int(text)
    name = "release" if release else "iter_{:07d}".format(iteration)
    check_loadable(os.path.join(load, name))
    if release:
        megatron_print(" loading release distributed checkpoint from %s" % load)
    else:
        megatron_print(" loading distributed checkpoint from %s at iteration %d" % (load, iteration))
    megatron_print("  successfully loaded checkpoint from %s %s at iteration %d" % (load, tp_pp, iteration))
    return iteration


def load_torch_file(path):
    try:
        import torch
        return torch.load(path)
    except ImportError:
        import pickle
        with open(path, "rb") as f:
            return pickle.load(f)


def resolve_start(args):
    """slime: arguments.py L1817-1838 (no tracker under --load: load --ref-load as finetune, start 0), then
    actor.py L114 start_rollout_id = loaded iteration + 1 unless --start-rollout-id, then
    placement_group.py L221-222 the data cursor of start - 1 (data_source.py L138-152). Prints no line of its own."""
    load, start = args.load, args.start_rollout_id
    if not (load and os.path.exists(os.path.join(load, TRACKER))):
        if not (load and os.path.isfile(os.path.join(load, "config.json"))):
            load = args.ref_load
        if start is None:
            start = 0
    iteration = megatron_load(args, load)
    if start is None:
        start = iteration + 1
    state = None
    if load is not None:
        path = os.path.join(load, "rollout", "global_dataset_state_dict_%d.pt" % (start - 1))
        if not os.path.exists(path):
            log("data_source.py:147", "Checkpoint %s does not exist." % path, actor="rollout")
        else:
            log("data_source.py:150", "load metadata from %s" % path, actor="rollout")
            log("data_source.py:151", "load metadata: {}", actor="rollout")
            state = load_torch_file(path)
    return start, state


# ---------------------------------------------------------------- metrics
def reward_at(args, r):
    rng = random.Random(args.seed * 1000003 + r)
    value = 0.12 + 0.6 * (1 - math.exp(-r / 40.0)) + rng.uniform(-0.005, 0.005)
    return min(1.0, max(0.0, value)), rng


def pass_at(p, k):
    return 1 - (1 - p) ** k


def powers_of_two(n):
    k, out = 1, []
    while k <= n:
        out.append(k)
        k *= 2
    return out


def log_rollout(args, r):
    reward, rng = reward_at(args, r)
    resp = (args.rollout_max_response_len or 1024) * (0.55 + 0.2 * rng.random())
    truncated = max(0.0, 0.25 - r * 0.002) * rng.random()
    gpus = args.rollout_num_gpus or 1
    rollout_time = 20 + 5 * rng.random()
    tokens = resp * args.rollout_batch_size * args.n_samples_per_prompt
    log("rollout_metrics.py:268", "perf %d: %r" % (r, {
        "rollout/response_len/mean": resp, "rollout/response_len/median": resp * 0.97,
        "rollout/response_len/max": float(args.rollout_max_response_len or 1024),
        "rollout/response_len/min": resp * 0.2,
        "rollout/truncated_ratio": truncated, "rollout/repetition_frac": 0.01 * rng.random(),
        "perf/rollout_time": rollout_time, "perf/tokens_per_gpu_per_sec": tokens / rollout_time / gpus}),
        actor="rollout")
    metrics = {"rollout/response_lengths": resp, "rollout/total_lengths": resp + 180.0, "rollout/raw_reward": reward,
               "rollout/rewards": 0.0 if args.n_samples_per_prompt > 1 else reward, "rollout/truncated": truncated,
               "rollout/log_probs": -0.35 - 0.1 * rng.random(), "rollout/advantages": 0.0, "rollout/returns": 0.0,
               "rollout/rollout_log_probs": -0.35 - 0.1 * rng.random()}
    if args.use_kl_loss or args.kl_coef:
        metrics["rollout/ref_log_probs"] = -0.36 - 0.1 * rng.random()
    log("train_metric_utils.py:135", "rollout %d: %r" % (r, metrics), actor="train")
    if args.log_passrate:
        log("train_metric_utils.py:160", "passrate %d: %r" % (r, {
            "passrate/pass@%d" % k: pass_at(reward, k) for k in powers_of_two(args.n_samples_per_prompt)}),
            actor="train")
    return tokens


def log_step(args, r, i):
    step = r * args.steps_per_rollout + i
    rng = random.Random(args.seed * 7919 + step)
    lr = args.lr * min(1.0, (step + 1) / args.lr_warmup_iters) if args.lr_warmup_iters else args.lr
    metrics = {"train/loss": rng.uniform(-0.02, 0.02), "train/pg_loss": rng.uniform(-0.02, 0.02),
               "train/entropy_loss": 0.55 - 0.1 * (1 - math.exp(-step / 60.0)) + 0.01 * rng.random(),
               "train/pg_clipfrac": 0.0 if args.eps_clip == 0 else 0.02 * rng.random(),
               "train/ppo_kl": float("nan") if step == 0 else 1e-4 * rng.random()}
    if args.use_kl_loss:
        metrics["train/kl_loss"] = 1e-3 * rng.random()
    if args.use_tis:
        metrics.update({"train/ois": 1.0, "train/tis": 1.0 + 0.01 * rng.random(), "train/tis_clipfrac": 0.0,
                        "train/tis_abs": 0.01 * rng.random()})
    metrics.update({"train/train_rollout_logprob_abs_diff": 0.01 * rng.random(), "train/grad_norm": 0.1 + rng.random(),
                    "train/lr-pg_0": lr, "train/global_batch_size": float(args.global_batch_size),
                    "train/step": step})
    log("model.py:918", "step %d: %r" % (step, metrics), actor="train")


def log_train_perf(args, r, tokens, seconds):
    rng = random.Random(args.seed * 31 + r)
    train_time = seconds * 0.6
    log("train_metric_utils.py:401", "perf %d: %r" % (r, {
        "perf/update_weights_time": 2.0 + rng.random(), "perf/data_preprocess_time": 0.1 * rng.random(),
        "perf/train_wait_time": seconds * 0.4, "perf/log_probs_time": 3.0 + rng.random(),
        "perf/actor_train_time": train_time, "perf/actor_train_tflops": 80 + 10 * rng.random(),
        "perf/actor_train_tok_per_s": tokens / max(train_time, 1e-3), "perf/step_time": seconds,
        "perf/wait_time_ratio": 0.4 + 0.05 * rng.random()}), actor="train")


def log_eval(args, r):
    reward, rng = reward_at(args, r)
    acc = reward * 0.35
    metrics = {}
    for name, dummy in args.eval_sets or [("eval", None)]:
        metrics["eval/%s" % name] = acc
        metrics["eval/%s/response_len/mean" % name] = (args.eval_max_response_len or 1024) * 0.7
        metrics["eval/%s-truncated_ratio" % name] = 0.1 * rng.random()
        if args.log_passrate:
            for k in powers_of_two(args.n_samples_per_eval_prompt):
                metrics["eval/%s-pass@%d" % (name, k)] = pass_at(acc, k)
    log("rollout_metrics.py:247", "eval %d: %r" % (r, metrics), actor="rollout")


# ---------------------------------------------------------------- checkpoints
METADATA_JSON_LEGACY = {"sharded_backend": "torch_dist", "sharded_backend_version": 1,
                        "common_backend": "torch", "common_backend_version": 1}
METADATA_JSON_RECENT = {"sharded_backend": "torch_dist", "sharded_backend_version": 1}


def save_torch_file(obj, path):
    try:
        import torch
        torch.save(obj, path)
    except ImportError:
        import pickle
        with open(path, "wb") as f:
            pickle.dump(obj, f)


def killed(point, iteration):
    """A kill at a named point of the save (knob die_in_save): no traceback, the process is gone."""
    print("stand-in: killed at %s of the save of iteration %d (die_in_save)" % (point, iteration),
          file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def rank_state(args, rank, ranks, knobs, iteration):
    """One actor rank's sharded state: its TP chunk of the model (DP rank 0 only, Megatron keeps the main
    replica), its distributed-optimizer shard (unless --no-save-optim) and its RNG state; rank 0 also the
    common state when there is no common.pt (recent Megatron: the sharded object common_state)."""
    import io

    import torch
    import torch.distributed.checkpoint as dcp

    tp = max(1, args.tensor_model_parallel_size)
    tp_rank, dp_rank = rank % tp, rank // tp
    unit = max(1, knobs["shard_bytes"] // 16)  # bf16 elements per tensor, about shard_bytes per rank
    state = {}
    if dp_rank == 0:
        for name in ("self_attention.linear_qkv.weight", "mlp.linear_fc1.weight"):
            state["decoder.layers." + name] = dcp.Shard(torch.empty(unit, 4, dtype=torch.bfloat16),
                                                        (unit * tp, 4), (unit * tp_rank, 0))
    if not args.no_save_optim:
        for name in ("exp_avg", "exp_avg_sq"):
            state["optimizer.state.%s.decoder.layers" % name] = dcp.Shard(
                torch.empty(unit, dtype=torch.float32), (unit * ranks,), (unit * rank,))
    state["rng_state/shard_%d_%d" % (rank, ranks)] = io.BytesIO(b"rng of rank %d at iteration %d" % (rank, iteration))
    if rank == 0 and not knobs["common_pt"]:
        state["common_state/shard_0_1"] = io.BytesIO(b"common state at iteration %d" % iteration)
    return state


def save(args, r, knobs):
    """Megatron's save_checkpoint under slime (actor.save_model -> model.py save -> checkpointing.py L471-798 at
    slime's pinned Megatron): the dir, common.pt (legacy layout), every rank's shards two per rank through
    torch.distributed.checkpoint (thread_count 2), .metadata (temp + rename), metadata.json (plain write), a
    barrier, the tracker (plain write); then slime's data cursor (train.py L78-79, data_source.py L123-136)."""
    import torch.distributed.checkpoint as dcp

    die = knobs["die_in_save"] if knobs["die_in_save_iteration"] in (None, r) else None
    iter_dir = os.path.join(args.save, "iter_{:07d}".format(r))
    megatron_print("[{}] saving checkpoint at iteration {:7d} to {} in torch_dist format".format(now(), r, args.save))
    os.makedirs(iter_dir, exist_ok=True)
    if os.listdir(iter_dir):
        log("serialization.py:74", "Overwriting old incomplete / corrupted checkpoint...", actor="train")
    if knobs["common_pt"]:
        save_torch_file({"iteration": r, "checkpoint_version": 3.0, "args": {"seed": args.seed}},
                        os.path.join(iter_dir, "common.pt"))
    ranks = args.actor_num_nodes * args.actor_num_gpus_per_node

    def hook(point, rank):
        if die == "mid_shards" and point == "after_write" and rank == ranks // 2 - 1:
            killed(die, r)
        if die == "before_metadata" and point == "before_metadata":
            killed(die, r)

    dcp.save_ranks({rank: rank_state(args, rank, ranks, knobs, r) for rank in range(ranks)},
                   dcp.FileSystemWriter(iter_dir, thread_count=2), standin_hook=hook)
    if die == "before_metadata_json":
        killed(die, r)
    with open(os.path.join(iter_dir, "metadata.json"), "w") as f:
        json.dump(METADATA_JSON_LEGACY if knobs["common_pt"] else METADATA_JSON_RECENT, f)
    if die == "before_tracker":
        killed(die, r)
    with open(os.path.join(args.save, TRACKER), "w") as f:
        f.write(str(r))
    megatron_print("  [{}] successfully saved checkpoint from iteration {:7d} to {} [ t 1/{}, p 1/{} ]".format(
        now(), r, args.save, args.tensor_model_parallel_size, args.pipeline_model_parallel_size))
    if die == "before_data_state":
        killed(die, r)
    os.makedirs(os.path.join(args.save, "rollout"), exist_ok=True)
    offset = (r + 1) * args.rollout_batch_size
    rows = max(1, args.dataset_rows)
    save_torch_file({"sample_offset": offset % rows, "epoch_id": offset // rows, "sample_group_index": offset,
                     "sample_index": offset * args.n_samples_per_prompt, "metadata": {}},
                    os.path.join(args.save, "rollout", "global_dataset_state_dict_%d.pt" % r))


def check_placement(pg):
    """slime's actors live in the placement group's bundles: when a node of the group
    dies, they die with it and the driver fails. The stand-in has no actors, so it
    watches the group's state instead."""
    from ray.util.placement_group import placement_group_table
    state = placement_group_table(pg).get("state")
    if state != "CREATED":
        raise RuntimeError(
            "ray.exceptions.ActorDiedError: The actor died because its node has died (placement group is %s)" % state)


def periodic(r, interval, num_rollout_per_epoch=None, num_rollout=None):
    """slime/utils/misc.py should_run_periodic_action (L107-128)."""
    if interval is None:
        return False
    if num_rollout is not None and r == num_rollout - 1:
        return True
    return (r + 1) % interval == 0 or (num_rollout_per_epoch is not None and (r + 1) % num_rollout_per_epoch == 0)


# ---------------------------------------------------------------- errors a job prints (the crash knobs)
def ray_crash(step):
    """A train actor's assertion, as slime's driver meets it: ray.get raises RayTaskError(AssertionError)
    (real: loss.py L255 in MegatronTrainRayActor.train, surfacing in train.py's ray.get). A real Ray actor."""
    import ray

    @ray.remote(num_cpus=0)
    class MegatronTrainRayActor:
        def train(self, rollout_id, response_length):
            got = response_length - 1
            assert got == response_length, f"Expected {response_length}, got {got}"

    actor = MegatronTrainRayActor.remote()
    ray.get(actor.train.remote(step, 512))


class ReadTimeout(Exception):
    """httpx's ReadTimeout, named as httpx prints it."""


ReadTimeout.__module__ = "httpx"


def handled_traceback():
    """logger.exception in the rollout manager, then the job goes on (real: slime/rollout/fully_async_rollout.py
    L187-192, 'fully-async: process task raised'). Ray prefixes every line of the actor's output."""
    import traceback

    def post():
        raise ReadTimeout("timed out")

    lines = []
    try:
        post()
    except ReadTimeout:
        lines = traceback.format_exc().rstrip("\n").split("\n")
    log("fully_async_rollout.py:191", "fully-async: process task raised", actor="rollout")
    for line in lines:
        print("(RolloutManager pid=%d) %s" % (_PIDS["rollout"], line), flush=True)


def oom_recovered():
    """SGLang's scheduler retracting requests when decode runs out of KV cache, then going on (real:
    sglang/srt/managers/scheduler.py, logger.info 'Decode out of memory happened. ...'), as Ray shows the
    engine's output."""
    print("(SGLangEngine pid=%d) [%s TP0] Decode out of memory happened. #retracted_reqs: 3, "
          "#new_token_ratio: 0.4950 -> 0.6500" % (_PIDS["rollout"] + 7, time.strftime("%Y-%m-%d %H:%M:%S")),
          flush=True)


# ---------------------------------------------------------------- main
def main():
    args = build_parser().parse_args()
    validate(args)
    pg = create_placement_group(args) if ray_wanted() else None
    start, _state = resolve_start(args)
    if start == 0 and args.eval_interval and not args.skip_eval_before_train:
        log_eval(args, 0)
    for r in range(start, args.num_rollout):
        if pg is not None:
            check_placement(pg)
        knobs = control()
        begin = time.time()
        time.sleep(knobs["step_seconds"] / 2)
        tokens = log_rollout(args, r)
        for i in range(args.steps_per_rollout):
            step = r * args.steps_per_rollout + i
            if step == knobs["handled_traceback_at_step"]:
                handled_traceback()
            if step == knobs["oom_recovered_at_step"]:
                oom_recovered()
            if step == knobs["crash_at_step"]:
                raise RuntimeError("stand-in crash at step %d" % step)
            if step == knobs["ray_crash_at_step"]:
                if pg is None:
                    raise AssertionError("Expected 512, got 511")
                ray_crash(step)
            log_step(args, r, i)
        time.sleep(knobs["step_seconds"] / 2)
        log_train_perf(args, r, tokens, time.time() - begin)
        if args.save and periodic(r, args.save_interval, args.num_rollout_per_epoch, args.num_rollout):
            save(args, r, knobs)
        if args.eval_interval and periodic(r, args.eval_interval, args.num_rollout_per_epoch):
            log_eval(args, r)
    if pg is not None:
        import ray
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
