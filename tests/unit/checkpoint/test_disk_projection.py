"""Preflight's projection of a run's checkpoints against the free space
(module_utils/checkpoint/disk_projection.py and node_preflight's disk entry)."""
from __future__ import annotations

import os

import ckpt_layouts
import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import disk_projection as dp
from ansible_collections.mtslime.posttrain.plugins.modules import node_preflight as npf

GIB = 1024 ** 3


@pytest.mark.parametrize(
    "num_rollout, interval, start, count",
    [
        (3000, 200, 0, 15),  # the guide: iterations 199, 399, ..., 2999
        (10, 3, 0, 4),  # 2, 5, 8 and the last rollout 9
        (9, 3, 0, 3),  # 2, 5, 8 (the last is one of them)
        (10, 3, 6, 2),  # resumed after iteration 5: 8 and 9
        (10, 3, 10, 0),
        (3000, 0, 0, 0),
    ],
)
def test_saves_follow_slimes_cadence(num_rollout, interval, start, count):
    assert dp.saves(num_rollout, interval, start) == count
    expected = sum(1 for r in range(start, num_rollout)
                   if interval and ((r + 1) % interval == 0 or r == num_rollout - 1))
    assert count == expected


def test_the_guides_run_does_not_fit_and_the_warning_gives_the_figures(tmp_path):
    result = dp.project(str(tmp_path / "save"), 900 * GIB, 107 * GIB, 3000, 200, size_from="preflight_checkpoint_gib")
    assert not result["ok"] and result["saves_total"] == 15 and result["need_bytes"] == 15 * 107 * GIB
    assert result["fits_keep"] == 6, "(6 + 2) x 107 GiB = 856 GiB fits in 900 GiB"
    warning = result["warning"]
    for words in ("saves 15 checkpoints", "num-rollout 3000 / save-interval 200", "~107.0 GiB each",
                  "preflight_checkpoint_gib", "train_job_keep_checkpoints 0", "needs 1.6 TiB more",
                  "900.0 GiB is free",
                  "train_job_keep_checkpoints: 6 with train_job_prune: delete (at most 856.0 GiB)"):
        assert words in warning, (words, warning)


def test_retention_with_delete_fits_and_trash_does_not(tmp_path):
    fits = dp.project(str(tmp_path / "save"), 900 * GIB, 107 * GIB, 3000, 200, keep=5, prune="delete")
    assert fits["ok"] and fits["at_end"] == 7 and fits["warning"] is None
    trash = dp.project(str(tmp_path / "save"), 900 * GIB, 107 * GIB, 3000, 200, keep=5, prune="trash")
    assert not trash["ok"] and "moves the older ones to" in trash["warning"] and ".trash on the same disk" in \
        trash["warning"]


def test_a_resumed_run_counts_what_is_left_with_the_measured_size(tmp_path):
    save = tmp_path / "save"
    for number in (199, 399):
        path = save / ("iter_%07d" % number)
        ckpt_layouts.ckpt_dir(path)  # real torch_dist metadata, shards of the real sizes
    size = sum(os.path.getsize(os.path.join(path, name)) for name in os.listdir(path))
    (save / "latest_checkpointed_iteration.txt").write_text("399")
    result = dp.project(str(save), 13 * size - 1, 107 * GIB, 3000, 200)
    assert result["start_rollout"] == 400 and result["saves_remaining"] == 13 and result["existing"] == 2
    assert result["checkpoint_bytes"] == size and result["measured_from"].endswith("iter_0000399")
    assert not result["ok"] and "13 still to come after iteration 399" in result["warning"]
    assert "size of iter_0000399" in result["warning"]


def test_node_preflight_warns_and_does_not_fail(run_module, tmp_path):
    args = {
        "accelerator": {"vendor": "musa", "tool_dir": str(tmp_path / "no-tools"), "required": False},
        "docker": {"required": False, "socket": "unix://%s" % (tmp_path / "no.sock")},
        "disk": [{"path": str(tmp_path / "save"), "need_bytes": 1024, "what": "one checkpoint",
                  "projection": {"num_rollout": 3000, "save_interval": 1}}],
    }
    result, failed = run_module(npf, args)
    assert not failed and result["ready"]
    projection = result["checks"]["disk"]["items"][0]["projection"]
    assert projection["saves_total"] == 3000 and projection["need_bytes"] == 3000 * 1024 and projection["ok"]
    assert not [w for w in result["preflight_warnings"] if w.startswith("disk: the run saves")]
    tiny = dict(args, disk=[dict(args["disk"][0], need_bytes=projection["free_bytes"] // 100)])
    result, failed = run_module(npf, tiny)
    assert not failed, "the projection warns, it does not fail"
    assert any(w.startswith("disk: the run saves 3000 checkpoints") for w in result["preflight_warnings"])
