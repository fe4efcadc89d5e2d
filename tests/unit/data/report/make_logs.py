#!/usr/bin/env python
"""Writes the two attempt logs of tests/unit/data/report/ (run it from anywhere; the files
are committed, this is how they were made). They imitate what `ray job logs <id>` prints
for a slime GRPO run of the guide (slime.md §4.1, real-programs.md "Logs"): Ray's actor
prefix `(MegatronTrainRayActor pid=…)`, slime's logger prefix `[YYYY-MM-DD HH:MM:SS]
file.py:NNN - `, the metric lines `perf/rollout/passrate/step/perf/eval N: {dict repr}`
with bare `nan`/`inf`, Megatron's checkpoint lines, SGLang and Ray noise, an ANSI-coloured
prefix, Ray's `[repeated 1x across cluster]` suffix, and attempt 1's crash traceback.

Attempt 1 loads the converted checkpoint (iteration 0), logs rollouts 1-23, saves every
5 rollouts (iterations 4, 9, 14, 19) and crashes in rollout 23. Attempt 2 loads iteration
19 and logs rollouts 20-45, so rollouts 20-23 of attempt 1 were done again. Two eval sets
(aime24, aime25) every 5 rollouts. Gaps: rollout/raw_reward is nan at rollout 12,
perf/tokens_per_gpu_per_sec is inf at rollout 17, train/ppo_kl is nan at rollout 1.
"""
from __future__ import annotations

import datetime
import math
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
EXPERIMENT = "qwen3-8B"
TRAIN = "(MegatronTrainRayActor pid=3001) "
ROLLOUT = "(RolloutManager pid=2801) "
SAVE = "/data/checkpoints/Qwen3-8B_slime"


def reward(r, rng):
    return 0.12 + 0.55 * (1 - math.exp(-r / 18.0)) + rng.uniform(-0.04, 0.04)


def pass_at(p, k):
    return 1 - (1 - p) ** k


def fmt(d):
    return repr(d)


def header(out, sid, loaded_from, iteration):
    out.append("2026-09-20 12:00:01,123\tINFO job_manager.py:581 -- Runtime env is setting up.")
    out.append("Running entrypoint for job %s: python3 train.py --actor-num-nodes 1 --actor-num-gpus-per-node 4 "
               "--rollout-num-gpus 4 --load %s --save %s --save-interval 5 --eval-interval 5 --log-passrate"
               % (sid, loaded_from, SAVE))
    out.append("2026-09-20 12:00:05,460\tINFO worker.py:1858 -- Connecting to existing Ray cluster at address: "
               "10.121.38.2:64379...")
    out.append("[2026-09-20 12:00:06] placement_group.py:101 - Creating placement group with 8 GPUs...")
    out.append(TRAIN + " loading distributed checkpoint from %s at iteration %d" % (loaded_from, iteration))
    out.append(TRAIN + "  successfully loaded checkpoint from %s [ t 1/4, p 1/1 ] at iteration %d"
               % (loaded_from, iteration))
    out.append("(SGLangEngine pid=4001) [2026-09-20 12:01:16 TP0] Capture cuda graph begin. This can take up to "
               "several minutes. avail mem=11.02 GB")
    out.append("(SGLangEngine pid=4002) [2026-09-20 12:01:23 TP0] Capture cuda graph end. Time elapsed: 6.51 s. "
               "[repeated 1x across cluster]")


def rollout_lines(out, r, when, rng, evals=True):
    ts = when.strftime("[%Y-%m-%d %H:%M:%S]")
    raw = reward(r, rng)
    length = 300 + 4 * r + rng.uniform(-10, 10)
    tokens = 1150 + 6 * r + rng.uniform(-30, 30)
    out.append(ROLLOUT + "%s rollout_metrics.py:268 - perf %d: %s" % (ts, r, fmt({
        "rollout/response_len/mean": round(length, 2), "rollout/response_len/median": round(length - 9, 1),
        "rollout/response_len/max": 512, "rollout/response_len/min": 37, "rollout/zero_std/count_0.0": 3,
        "rollout/repetition_frac": 0.0078125, "rollout/truncated_ratio": round(0.1 + 0.001 * r, 4),
        "perf/rollout_time": 61.5, "perf/tokens_per_gpu_per_sec": float("inf") if r == 17 else round(tokens, 1)})))
    out.append(TRAIN + "%s train_metric_utils.py:135 - rollout %d: %s" % (ts, r, fmt({
        "rollout/raw_reward": float("nan") if r == 12 else round(raw, 6), "rollout/rewards": 0.0,
        "rollout/response_lengths": round(length, 2), "rollout/total_lengths": round(length + 180, 2),
        "rollout/truncated": 0.1171875, "rollout/log_probs": -0.31, "rollout/advantages": 0.0,
        "rollout/returns": 0.0, "rollout/rollout_log_probs": -0.31})))
    out.append(TRAIN + "%s train_metric_utils.py:150 - passrate %d: %s" % (ts, r, fmt(
        {"passrate/pass@%d" % k: round(pass_at(max(raw, 0.0), k), 4) for k in (1, 2, 4, 8)})))
    out.append(TRAIN + "%s model.py:918 - step %d: %s" % (ts, r, fmt({
        "train/loss": round(0.02 - 0.0003 * r, 5), "train/pg_loss": round(0.02 - 0.0003 * r, 5),
        "train/entropy_loss": 0.51, "train/pg_clipfrac": 0.0, "train/ppo_kl": float("nan") if r == 1 else 0.0,
        "train/ois": 1.0, "train/tis": 1.0, "train/tis_clipfrac": 0.0, "train/tis_abs": 0.0,
        "train/grad_norm": round(0.4 + rng.uniform(0, 0.2), 4), "train/lr-pg_0": 1e-06,
        "train/global_batch_size": 128, "train/step": r})))
    out.append(TRAIN + "%s train_metric_utils.py:401 - perf %d: %s" % (ts, r, fmt({
        "perf/update_weights_time": 4.4, "perf/log_probs_time": 8.1, "perf/actor_train_time": 31.2,
        "perf/actor_train_tflops": 121.7, "perf/actor_train_tok_per_s": round(2400 + 10 * r + rng.uniform(-50, 50), 1),
        "perf/step_time": round(64 + rng.uniform(-3, 3), 2), "perf/wait_time_ratio": 0.41})))
    if (r + 1) % 5 == 0:
        out.append(TRAIN + " saving checkpoint at iteration {:7d} to {} in torch_dist format".format(r, SAVE))
        out.append(TRAIN + "  successfully saved checkpoint from iteration {:7d} to {} [ t 1/4, p 1/1 ]"
                   .format(r, SAVE))
        if evals:
            metrics = {}
            for name, base in (("aime24", 0.2), ("aime25", 0.12)):
                acc = base + 0.3 * (1 - math.exp(-r / 20.0)) + rng.uniform(-0.02, 0.02)
                metrics["eval/%s" % name] = round(acc, 4)
                metrics["eval/%s/response_len/mean" % name] = 455.0
                metrics["eval/%s-truncated_ratio" % name] = 0.3
                metrics["eval/%s-pass@8" % name] = round(pass_at(acc, 8) * 0.8, 4)
            # the rollout manager's line arrives with Ray's ANSI-coloured prefix
            out.append("\x1b[36m(RolloutManager pid=2801)\x1b[0m %s rollout_metrics.py:247 - eval %d: %s"
                       % (ts, r, fmt(metrics)))


def attempt(sid, loaded_from, iteration, first, last, start, seed, crash=False):
    rng = random.Random(seed)
    out = []
    header(out, sid, loaded_from, iteration)
    when = start
    for r in range(first, last + 1):
        rollout_lines(out, r, when, rng)
        when += datetime.timedelta(seconds=65)
    if crash:
        out.append(TRAIN + "Traceback (most recent call last):")
        out.append(TRAIN + '  File "/home/slime/slime/backends/megatron_utils/actor.py", line 301, in train')
        out.append(TRAIN + "    loss.backward()")
        out.append(TRAIN + "RuntimeError: MUSA error: an illegal memory access was encountered")
        out.append("---------------------------------------")
        out.append("Job '%s' failed" % sid)
    path = os.path.join(HERE, "%s.%s.log.txt" % (EXPERIMENT, sid))
    with open(path, "w") as handle:
        handle.write("\n".join(out) + "\n")
    return path


def main():
    start = datetime.datetime(2026, 9, 20, 12, 2, 0)
    attempt("%s-attempt-1" % EXPERIMENT, "/data/LLMs/MCORE/Qwen3-8B_slime", 0, 1, 23, start, seed=1, crash=True)
    attempt("%s-attempt-2" % EXPERIMENT, SAVE, 19, 20, 45, start + datetime.timedelta(minutes=40), seed=2)


if __name__ == "__main__":
    main()
