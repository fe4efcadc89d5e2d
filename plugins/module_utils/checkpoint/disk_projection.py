# How much disk a training run's checkpoints will take, for node_preflight's disk check:
# the saves slime makes (num-rollout / save-interval, plus the last rollout, slime.md §4.1
# cadence), times the size of one checkpoint (measured from the newest complete iteration
# of the save dir when there is one, else the estimate: module_utils/checkpoint/size.py or
# preflight_checkpoint_gib), minus what retention (train_job_keep_checkpoints with
# train_job_prune: delete) removes, against the free space.
#
# Standard library only; Python 3.8+.
from __future__ import annotations

import os

from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import layout, mcore
from ansible_collections.mtslime.posttrain.plugins.module_utils.common import human_bytes
from ansible_collections.mtslime.posttrain.plugins.module_utils.common import tree_bytes

# Besides the newest N: the save being written and an older iteration the running job loaded from.
RETENTION_MARGIN = 2


def saves(num_rollout, save_interval, start=0):
    """How many checkpoints slime writes for rollouts start .. num_rollout-1: after rollout r when
    (r + 1) % save_interval == 0, and after the last rollout."""
    if not num_rollout or not save_interval or num_rollout <= start:
        return 0
    due = (num_rollout // save_interval) - (start // save_interval)
    if num_rollout % save_interval:
        due += 1
    return max(0, due)


def on_disk_at_end(existing, remaining, keep, prune):
    """Checkpoints the save dir (and a trash on the same disk) holds when the run ends."""
    total = existing + remaining
    if keep and keep > 0 and prune == "delete":
        return min(total, keep + RETENTION_MARGIN)
    return total


def project(save_dir, free_bytes, estimate_bytes, num_rollout, save_interval, keep=0, prune="trash",
            size_from="need_bytes"):
    """`size_from` says where `estimate_bytes` comes from, for the warning.
    {saves_total, saves_remaining, start_rollout, existing, checkpoint_bytes, measured_from, at_end,
    need_bytes, free_bytes, ok, fits_keep, warning}; `warning` is the message when it does not fit."""
    info = mcore.inspect_checkpoint(save_dir, expect="training") if os.path.isdir(save_dir) else None
    complete = (info or {}).get("complete_iterations") or []
    tracker = (info or {}).get("latest_iteration") if (info or {}).get("tracker") not in (None, "release") else None
    start = tracker + 1 if isinstance(tracker, int) else 0
    size, measured = estimate_bytes, None
    if complete:
        measured = os.path.join(save_dir, layout.iter_dirname(complete[-1]))
        size = tree_bytes(measured) or estimate_bytes
    total = saves(num_rollout, save_interval)
    remaining = saves(num_rollout, save_interval, start)
    existing = len(complete)
    at_end = on_disk_at_end(existing, remaining, keep, prune)
    need = max(0, at_end - existing) * size
    result = {
        "saves_total": total, "saves_remaining": remaining, "start_rollout": start, "existing": existing,
        "checkpoint_bytes": size, "measured_from": measured, "at_end": at_end, "need_bytes": need,
        "free_bytes": free_bytes, "ok": need <= free_bytes, "fits_keep": None, "warning": None,
    }
    if result["ok"] or not total:
        return result
    fits = None
    for candidate in range(1, remaining + existing + 1):
        if max(0, on_disk_at_end(existing, remaining, candidate, "delete") - existing) * size <= free_bytes:
            fits = candidate
        else:
            break
    result["fits_keep"] = fits
    where = "size of %s" % os.path.basename(measured) if measured else size_from
    after = " (%d still to come after iteration %d)" % (remaining, tracker) if isinstance(tracker, int) else ""
    if keep and keep > 0 and prune == "delete":
        kept = "keeping the newest %d (train_job_keep_checkpoints %d, train_job_prune: delete) holds up to %d" % (
            keep, keep, at_end)
    elif keep and keep > 0:
        kept = ("train_job_keep_checkpoints %d with train_job_prune: trash moves the older ones to %s.trash on the "
                "same disk, so all %d stay" % (keep, save_dir.rstrip("/"), at_end))
    else:
        kept = "keeping every one (train_job_keep_checkpoints 0) holds %d" % at_end
    advice = ("set train_job_keep_checkpoints: %d with train_job_prune: delete (at most %s)"
              % (fits, human_bytes(max(0, on_disk_at_end(existing, remaining, fits, "delete") - existing) * size))
              if fits else "even one kept checkpoint does not fit")
    result["warning"] = (
        "disk: the run saves %d checkpoints into %s (num-rollout %d / save-interval %d)%s of ~%s each (%s); %s, "
        "which needs %s more, but %s is free there. %s, raise save-interval, or free space"
        % (total, save_dir, num_rollout, save_interval, after, human_bytes(size), where, kept, human_bytes(need),
           human_bytes(free_bytes), advice[0].upper() + advice[1:])
    )
    return result
