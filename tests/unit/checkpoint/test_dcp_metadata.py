"""module_utils/checkpoint/dcp_metadata.py: torch DCP `.metadata` read without torch, on REAL files
(tests/unit/data/dcp/), and nothing a pickle names is ever imported or run."""
from __future__ import annotations

import os
import pickle

import pytest
from ckpt_layouts import DATA, LAYOUTS, layout_files

from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import dcp_metadata


@pytest.mark.parametrize("layout", LAYOUTS)
def test_real_metadata_records_each_shard_up_to_its_real_size(layout):
    found = dcp_metadata.read_extents(os.path.join(DATA, layout, ".metadata"))
    shards = {name: size for name, size in layout_files(layout).items() if name.endswith(".distcp")}
    assert found["extents"] == shards
    assert found["items"] >= len(shards)


def test_the_real_pickle_names_torch_classes_that_become_inert():
    root = dcp_metadata.load(os.path.join(DATA, "megatron_d98e8a64ddf3", ".metadata"))
    assert root.names() == ("torch.distributed.checkpoint.metadata", "Metadata")
    infos = list(root.fields()["storage_data"].values())
    assert {info.names() for info in infos} == {("torch.distributed.checkpoint.filesystem", "_StorageInfo")}
    keys = list(root.fields()["storage_data"])
    assert all(key.names() == ("torch.distributed.checkpoint.metadata", "MetadataIndex") for key in keys)
    assert any(key.fields()["fqn"] == "common_state/shard_0_1" for key in keys)  # recent Megatron: no common.pt


class Boom:
    """Pickles as a call of os.system: what a malicious .metadata would hold."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, ("touch %s" % self.marker,))


def test_nothing_the_file_names_runs(tmp_path):
    marker = tmp_path / "ran"
    path = tmp_path / ".metadata"
    path.write_bytes(pickle.dumps({"storage_data": Boom(str(marker))}))
    with pytest.raises(dcp_metadata.MetadataError, match="not torch.distributed.checkpoint.metadata.Metadata"):
        dcp_metadata.read_extents(str(path))
    assert not marker.exists()
    loaded = dcp_metadata.load(str(path))
    assert loaded["storage_data"].names() in (("posix", "system"), ("nt", "system"))
    assert loaded["storage_data"].args == ("touch %s" % marker,)
    with pytest.raises(TypeError):
        pickle.dumps(loaded["storage_data"])


def test_persistent_ids_are_refused(tmp_path):
    path = tmp_path / ".metadata"
    path.write_bytes(b"\x80\x04\x95\x06\x00\x00\x00\x00\x00\x00\x00\x8c\x01x\x94Q.")
    with pytest.raises(dcp_metadata.MetadataError, match="not a readable pickle"):
        dcp_metadata.load(str(path))


@pytest.mark.parametrize("content,phrase", [
    (b"", r"is empty \(0 bytes\)"),
    (b"\x80\x04", "is not a readable pickle"),
    (pickle.dumps([1, 2]), "holds list"),
])
def test_bad_files(tmp_path, content, phrase):
    path = tmp_path / ".metadata"
    path.write_bytes(content)
    with pytest.raises(dcp_metadata.MetadataError, match=phrase):
        dcp_metadata.read_extents(str(path))


def test_missing_file(tmp_path):
    with pytest.raises(dcp_metadata.MetadataError, match="cannot be read"):
        dcp_metadata.load(str(tmp_path / ".metadata"))


def test_shard_paths_outside_the_checkpoint_are_refused(tmp_path):
    raw = open(os.path.join(DATA, "torch_one_process_two_threads", ".metadata"), "rb").read()
    evil = raw.replace(b"__0_0.distcp", b"../../passwd")  # same length: the pickle stays valid
    assert len(evil) == len(raw)
    path = tmp_path / ".metadata"
    path.write_bytes(evil)
    with pytest.raises(dcp_metadata.MetadataError, match="not a file inside the checkpoint"):
        dcp_metadata.read_extents(str(path))
