# Stand-in for tools/convert_hf_to_torch_dist.py of the Moore Threads fork of slime (/home/slime/tools/ in the
# MT image), the form the guide's §3.2 diff patches: `import json` beside gc/os/shutil, and
# device_id=None on MUSA. Upstream THUDM/slime differs (tests/standins/convert_forms/README.md). Same CLI,
# launch env, config validation, log lines and torch_dist write order as the real converter; no weights are
# converted. Knobs: MTSLIME_STANDIN_CONVERT_SECONDS, MTSLIME_STANDIN_CONVERT_DIE_AT,
# MTSLIME_STANDIN_CONVERT_IMPORT_ERROR.
import gc
import json
import os
import shutil

import torch
import torch.distributed as dist

from slime.utils import accelerator

import argparse
import math
import sys
import time

DIE_POINTS = ("before_save", "mid_shards", "before_rename", "after_tracker")
METADATA_JSON = {"sharded_backend": "torch_dist", "sharded_backend_version": 1,
                 "common_backend": "torch", "common_backend_version": 1}
METADATA_JSON_RECENT = {"sharded_backend": "torch_dist", "sharded_backend_version": 1}


def add_model_args(parser):
    """Megatron flags of slime's scripts/models/qwen3-8B.sh plus common parallel/precision flags."""
    g = parser.add_argument_group("model")
    for flag in ("--swiglu", "--group-query-attention", "--use-rotary-position-embeddings", "--disable-bias-linear",
                 "--qk-layernorm", "--untie-embeddings-and-output-weights", "--use-cpu-initialization",
                 "--sequence-parallel", "--bf16", "--fp16", "--allgather-cp", "--no-rope-fusion",
                 "--use-distributed-optimizer", "--add-qkv-bias", "--apply-layernorm-1p"):
        g.add_argument(flag, action="store_true")
    for flag in ("--num-layers", "--hidden-size", "--ffn-hidden-size", "--num-attention-heads", "--num-query-groups",
                 "--vocab-size", "--kv-channels", "--rotary-base", "--padded-vocab-size", "--seq-length",
                 "--max-position-embeddings", "--make-vocab-size-divisible-by", "--decoder-last-pipeline-num-layers",
                 "--decoder-first-pipeline-num-layers"):
        g.add_argument(flag, type=int, default=None)
    for flag in ("--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--context-parallel-size",
                 "--expert-model-parallel-size", "--expert-tensor-parallel-size"):
        g.add_argument(flag, type=int, default=1)
    g.add_argument("--norm-epsilon", type=float, default=1e-5)
    g.add_argument("--rotary-percent", type=float, default=1.0)
    g.add_argument("--normalization", default="LayerNorm", choices=["LayerNorm", "RMSNorm"])
    g.add_argument(
        "--position-embedding-type", default="learned_absolute", choices=["learned_absolute", "rope", "none"]
    )
    g.add_argument("--attention-backend", default="auto")
    g.add_argument("--distributed-backend", default="nccl")
    g.add_argument("--save", default=None)
    g.add_argument("--load", default=None)
    g.add_argument("--tokenizer-type", default=None)
    g.add_argument("--tokenizer-model", default=None)
    return parser


def add_convertion_args(parser):
    parser.add_argument("--hf-checkpoint", type=str, required=True)
    parser.add_argument("--custom-model-provider-path", type=str, default=None)
    return parser


def get_args():
    parser = argparse.ArgumentParser(description="Megatron-LM Arguments", allow_abbrev=False)
    args = add_convertion_args(add_model_args(parser)).parse_args()
    args.save_interval = 1
    args.micro_batch_size = 1
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    args.global_batch_size = world_size
    if args.num_layers is None:
        parser.error("the following arguments are required: --num-layers")
    assert world_size <= args.num_layers, (
        f"World size {world_size} must be less than or equal to number of layers {args.num_layers}. "
        "You are using too much GPUs for this conversion."
    )
    if args.pipeline_model_parallel_size == 1 and world_size > 1:
        pp_size = world_size
        while pp_size > 1:
            per_stage = math.ceil(args.num_layers / pp_size)
            last = args.num_layers - per_stage * (pp_size - 1)
            if last >= 1:
                args.decoder_last_pipeline_num_layers = last
                break
            pp_size //= 2
        args.pipeline_model_parallel_size = pp_size
    if dist.get_rank() == 0:
        print(f"Using pipeline model parallel size: {args.pipeline_model_parallel_size}", flush=True)
    return args


def load_hf_config(path):
    if not os.path.isdir(path):
        raise OSError(f"Incorrect path_or_model_id: '{path}'. Please provide either the path to a local folder "
                      "or the repo_id of a model on the Hub.")
    config_path = os.path.join(path, "config.json")
    if not os.path.isfile(config_path):
        raise OSError(f"{path} does not appear to have a file named config.json. "
                      f"Checkout 'https://huggingface.co/{path}/tree/None' for available files.")
    with open(config_path) as f:
        return json.load(f)


def hf_validate_args(args, hf_config):
    errors = []
    for hf_name, megatron_name, compare in [
        ("hidden_size", "hidden_size", lambda x, y: x == y),
        ("num_attention_heads", "num_attention_heads", lambda x, y: x == y),
        ("num_hidden_layers", "num_layers", lambda x, y: x == y),
        ("intermediate_size", "ffn_hidden_size", lambda x, y: x == y),
        ("tie_word_embeddings", "untie_embeddings_and_output_weights", lambda x, y: not x == y),
        ("rms_norm_eps", "norm_epsilon", lambda x, y: x == y),
        ("rope_theta", "rotary_base", lambda x, y: x == y),
    ]:
        if hf_name in hf_config and not compare(hf_config[hf_name], getattr(args, megatron_name)):
            errors.append(f"{hf_name} in hf config {hf_config[hf_name]} is not equal to "
                          f"{megatron_name} {getattr(args, megatron_name)}, please check the config.")
    if errors:
        raise AssertionError("hf_validate_args failed: " + "; ".join(errors))


def control(key, env_name, default):
    """Test knob: env var first, then the stand-in control file (JSON)."""
    if os.environ.get(env_name):
        return os.environ[env_name]
    path = os.environ.get("MTSLIME_STANDIN_CONTROL", "/etc/mtslime-standin.json")
    try:
        with open(path) as f:
            value = json.load(f).get(key)
    except (OSError, ValueError):
        value = None
    return default if value is None else value


def maybe_die(point, rank):
    die_at = control("convert_die_at", "MTSLIME_STANDIN_CONVERT_DIE_AT", "")
    if die_at and die_at not in DIE_POINTS:
        raise ValueError(f"MTSLIME_STANDIN_CONVERT_DIE_AT={die_at!r}: expected one of {', '.join(DIE_POINTS)}")
    if die_at == point and rank == int(os.environ.get("MTSLIME_STANDIN_CONVERT_DIE_RANK", "0")):
        raise RuntimeError(f"stand-in conversion killed at {point} (MTSLIME_STANDIN_CONVERT_DIE_AT)")


def maybe_import_error():
    """An import that the image lacks, as slime's imports meet it on every rank before anything else (measured on
    an H200 image: `ModuleNotFoundError: No module named 'pydantic'`)."""
    name = control("convert_import_error", "MTSLIME_STANDIN_CONVERT_IMPORT_ERROR", "")
    if name:
        raise ModuleNotFoundError("No module named %r" % str(name), name=str(name))


def stage_state(args, rank, world_size, shard_bytes):
    """This rank's pipeline stage of the model as Megatron shards it: each layer's weights are a chunk (along
    the layer dim) of a tensor of all layers; the last stage also holds the output layer, the first the
    embedding. Zeros of about shard_bytes."""
    import io

    import torch.distributed.checkpoint as dcp

    layers = args.num_layers
    per_stage = math.ceil(layers / world_size)
    first = rank * per_stage
    mine = list(range(first, min(layers, first + per_stage)))
    cols = max(1, shard_bytes // (2 * 2 * max(1, len(mine)) * 16))  # bf16, two tensors per layer, 16 rows
    state = {}
    for name in ("self_attention.linear_qkv.weight", "mlp.linear_fc1.weight"):
        for layer in mine:
            state["decoder.layers.%d.%s" % (layer, name)] = dcp.Shard(
                torch.empty(1, 16, cols, dtype=torch.bfloat16), (layers, 16, cols), (layer, 0, 0))
    if rank == 0:
        state["embedding.word_embeddings.weight"] = torch.empty(16, cols, dtype=torch.bfloat16)
    state["rng_state/shard_%d_%d" % (rank, world_size)] = io.BytesIO(b"rng of rank %d" % rank)
    return state


def stamp():
    import datetime

    return datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")


def common_pt_wanted():
    return str(control("common_pt", "MTSLIME_STANDIN_COMMON_PT", True)).lower() not in ("0", "false", "no")


def save_checkpoint(iteration, args, rank, world_size, pause):
    """Megatron's save_checkpoint at slime's pinned commit (checkpointing.py L471-798, dist_checkpointing
    serialization.py save): the dir, common.pt (legacy layout; knob common_pt), the shards two per rank and
    `.metadata` (temp + rename) through torch.distributed.checkpoint, metadata.json (plain write), a barrier,
    the tracker (plain write)."""
    import torch.distributed.checkpoint as dcp

    save = args.save
    iter_dir = os.path.join(save, "iter_{:07d}".format(iteration))
    dist.barrier()  # the sharded-state-dict exchange at the start of a save is collective
    if rank == 0:
        print(f"[{stamp()}] saving checkpoint at iteration {iteration:7d} to {save} in torch_dist format", flush=True)
        os.makedirs(iter_dir, exist_ok=True)
    dist.barrier()
    legacy = common_pt_wanted()
    if rank == 0 and legacy:
        common = {"args": vars(args), "checkpoint_version": 3.0, "iteration": iteration}
        torch.save(common, os.path.join(iter_dir, "common.pt"))
    shard_bytes = int(os.environ.get("MTSLIME_STANDIN_SHARD_BYTES", "65536"))
    state = stage_state(args, rank, world_size, shard_bytes)
    if rank == 0 and not legacy:
        import io

        state["common_state/shard_0_1"] = io.BytesIO(json.dumps({"iteration": iteration}).encode())

    def hook(point, hook_rank):
        if point == "after_write":
            maybe_die("mid_shards", hook_rank)
            time.sleep(pause)

    dcp.save(state, storage_writer=dcp.FileSystemWriter(iter_dir, thread_count=2), standin_hook=hook)
    if rank == 0:
        with open(os.path.join(iter_dir, "metadata.json"), "w") as f:
            json.dump(METADATA_JSON if legacy else METADATA_JSON_RECENT, f)
    dist.barrier()
    if rank == 0:
        with open(os.path.join(save, "latest_checkpointed_iteration.txt"), "w") as f:
            f.write(str(iteration))
        print(f"  [{stamp()}] successfully saved checkpoint from iteration {iteration:7d} to {save} "
              f"[ t 1/{args.tensor_model_parallel_size}, p 1/{args.pipeline_model_parallel_size} ]", flush=True)
    dist.barrier()


def main():
    maybe_import_error()
    world_size = int(os.environ.get("WORLD_SIZE", os.environ.get("SLURM_NTASKS", "1")))
    local_rank = int(os.environ.get("LOCAL_RANK", os.environ.get("SLURM_LOCALID", "0")))
    global_rank = int(os.environ.get("RANK", os.environ.get("SLURM_PROCID", "0")))
    accelerator.set_device(local_rank)

    os.environ.setdefault("MASTER_ADDR", "localhost")
    os.environ.setdefault("MASTER_PORT", "12355")
    dist.init_process_group(
        backend=accelerator.process_group_backend(),
        world_size=world_size,
        rank=global_rank,
        device_id=None if accelerator.is_musa_available() else torch.device(accelerator.device_name(local_rank)),
    )
    args = get_args()
    if accelerator.is_musa_available():
        assert args.use_cpu_initialization, "--use-cpu-initialization is required for conversion on MUSA"
    if args.save is None:
        raise ValueError("--save is required: the directory to write the torch_dist checkpoint to")
    hf_validate_args(args, load_hf_config(args.hf_checkpoint))

    total = float(control("convert_seconds", "MTSLIME_STANDIN_CONVERT_SECONDS", 3))
    time.sleep(total / 3)  # build model + load_hf_weights
    accelerator.synchronize()
    gc.collect()
    accelerator.empty_cache()
    maybe_die("before_save", global_rank)
    save_checkpoint(1, args, global_rank, world_size, total / 3)
    maybe_die("before_rename", global_rank)
    if dist.get_rank() == 0:
        time.sleep(total / 3)
        with open(os.path.join(args.save, "latest_checkpointed_iteration.txt"), "w") as f:
            f.write("release")
        maybe_die("after_tracker", global_rank)
        source_dir = os.path.join(args.save, "iter_0000001")
        target_dir = os.path.join(args.save, "release")
        shutil.move(source_dir, target_dir)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
