"""Checkpoint layouts for the unit tests, rebuilt from REAL torch_dist saves (tests/unit/data/dcp/, see its
PROVENANCE.md): each checkpoint dir gets the `.metadata` and `metadata.json` the real save wrote and its other
files (the shards, `common.pt`) at their real sizes, zero-filled: the judge reads sizes, never weights."""
from __future__ import annotations

import json
import os
import shutil

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "dcp")
# Megatron at slime's pinned commit (legacy layout: common.pt), Megatron at a recent HEAD (no common.pt),
# plain torch DCP with two processes, plain torch DCP in one process with two writer threads; torch 2.15
# and (suffix _torch2.5) torch 2.5.
PINNED = "megatron_1dcf0dafa884"
RECENT = "megatron_d98e8a64ddf3"
LAYOUTS = tuple(sorted(name for name in os.listdir(DATA) if os.path.isfile(os.path.join(DATA, name, "files.json"))))


def layout_files(layout=PINNED):
    """{name: size} of the files the real save wrote besides .metadata and metadata.json."""
    with open(os.path.join(DATA, layout, "files.json")) as handle:
        return json.load(handle)["files"]


def ckpt_dir(path, layout=PINNED, metadata_json=True, dcp_metadata=True, shards=True, common=True):
    """A complete checkpoint dir (iter_XXXXXXX/ or release/) as the real save left it; the flags leave parts out."""
    path = str(path)
    os.makedirs(path, exist_ok=True)
    if dcp_metadata:
        shutil.copyfile(os.path.join(DATA, layout, ".metadata"), os.path.join(path, ".metadata"))
    if metadata_json:
        shutil.copyfile(os.path.join(DATA, layout, "metadata.json"), os.path.join(path, "metadata.json"))
    for name, size in layout_files(layout).items():
        if name.endswith(".distcp") and not shards or name == "common.pt" and not common:
            continue
        with open(os.path.join(path, name), "wb") as handle:
            handle.truncate(size)
    return path


def shard_names(layout=PINNED):
    return sorted(name for name in layout_files(layout) if name.endswith(".distcp"))


def cut(path, size):
    """Truncate a file to `size` bytes (a torn write, a full disk)."""
    with open(str(path), "r+b") as handle:
        handle.truncate(size)


def tracker(save, text):
    with open(os.path.join(str(save), "latest_checkpointed_iteration.txt"), "w") as handle:
        handle.write(text)


def data_state(save, iteration, payload=b"\x80\x04state"):
    os.makedirs(os.path.join(str(save), "rollout"), exist_ok=True)
    path = os.path.join(str(save), "rollout", "global_dataset_state_dict_%d.pt" % iteration)
    with open(path, "wb") as handle:
        handle.write(payload)
    return path


def conversion(root, name="Qwen3-8B_slime", layout=PINNED):
    """A finished conversion: tracker 'release' (no newline) and a complete release/."""
    save = os.path.join(str(root), name)
    ckpt_dir(os.path.join(save, "release"), layout=layout)
    tracker(save, "release")
    return save


def training(root, iters=(19, 39), latest=39, dataset_state=True, name="run", layout=PINNED):
    """A training --save dir: iter dirs, slime's data cursors (written after the tracker) and the tracker."""
    save = os.path.join(str(root), name)
    os.makedirs(save, exist_ok=True)
    for it in iters:
        ckpt_dir(os.path.join(save, "iter_%07d" % it), layout=layout)
        if dataset_state:
            data_state(save, it)
    if latest is not None:
        tracker(save, str(latest))
    return save


def listing(root):
    """Every file under root, relative, sorted (to compare before and after a resume)."""
    found = []
    for base, _dirs, files in os.walk(str(root)):
        for name in files:
            found.append(os.path.relpath(os.path.join(base, name), str(root)))
    return sorted(found)


def save_dir(root, complete=(2, 5), tracker="5", partial=()):
    """A training --save dir at `root`: complete iterations with their data state, partial ones (no
    metadata), and the tracker (None: none)."""
    root.mkdir(exist_ok=True)
    for it in complete:
        ckpt_dir(root / ("iter_%07d" % it))
        data_state(root, it)
    for it in partial:
        ckpt_dir(root / ("iter_%07d" % it), dcp_metadata=False, metadata_json=False)
    if tracker is not None:
        (root / "latest_checkpointed_iteration.txt").write_text(tracker)
    return root
