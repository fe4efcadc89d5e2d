"""What the fast path compares (plugin_utils/inventory/inputs.py): a node's digest moves with any value of its
cluster and with the collection's files, and not with another cluster's values or the fact cache's age."""
from __future__ import annotations

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory import inputs

VALUES = {"a": {"slime_gpus_per_node": 8, "container_image": "img:1"},
          "b": {"slime_gpus_per_node": 8, "container_image": "img:1"},
          "c": {"slime_gpus_per_node": 8, "container_image": "img:1"}}


def _with(host, name, value):
    changed = {h: dict(v) for h, v in VALUES.items()}
    changed[host][name] = value
    return changed


def test_a_node_s_digest_follows_its_cluster_s_values_only():
    base = inputs.node_inputs(VALUES, ["a", "b"], "coll")
    assert inputs.node_inputs(VALUES, ["b", "a"], "coll") == base
    assert inputs.node_inputs(_with("b", "container_image", "img:2"), ["a", "b"], "coll") != base
    assert inputs.node_inputs(_with("c", "container_image", "img:2"), ["a", "b"], "coll") == base
    assert inputs.node_inputs(VALUES, ["a", "b"], "coll-2") != base
    assert inputs.node_inputs(_with("a", "ansible_default_ipv4", {"address": "10.0.0.1"}), ["a", "b"], "coll") == base


def test_the_collection_digest_covers_its_files_and_not_compiled_ones(tmp_path):
    (tmp_path / "roles" / "r" / "__pycache__").mkdir(parents=True)
    (tmp_path / "roles" / "r" / "main.yml").write_text("a: 1\n")
    base = inputs.collection_digest(str(tmp_path), ("roles",))
    assert inputs.collection_digest(str(tmp_path), ("roles",)) == base
    (tmp_path / "roles" / "r" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    inputs._collection.clear()
    assert inputs.collection_digest(str(tmp_path), ("roles",)) == base
    (tmp_path / "roles" / "r" / "main.yml").write_text("a: 2\n")
    inputs._collection.clear()
    assert inputs.collection_digest(str(tmp_path), ("roles",)) != base


def test_the_installed_collection_is_found_from_the_plugin():
    import os
    assert os.path.isdir(os.path.join(inputs.COLLECTION_ROOT, "roles", "train_job"))
    assert len(inputs.collection_digest()) == 64
