# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""What a training cluster's stages are made from, as one digest per node: the templated value of every variable of
the collection (variables.VARS, as the configuration check reads them) on every node of the node's cluster, and the
collection's own files (roles, playbooks, plugins). The fast path (module converged) asks a node again only when
this digest is the one its last full run recorded; any other value, or another version of the collection, runs
every stage."""
from __future__ import annotations

import hashlib
import json
import os

COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
COLLECTION_PARTS = ("playbooks", "plugins", "roles")
# Facts read by the layout when the fact cache has them: the cache's age must not make a node look changed.
NOT_INPUTS = frozenset(("ansible_default_ipv4",))
_collection: dict = {}


def collection_digest(root=COLLECTION_ROOT, parts=COLLECTION_PARTS):
    """sha256 over the path and bytes of every file of the collection's parts (compiled files left out); once per
    process."""
    key = (root, parts)
    if key not in _collection:
        digest = hashlib.sha256()
        for part in parts:
            for folder, dirs, names in sorted(os.walk(os.path.join(root, part))):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                for name in sorted(names):
                    if name.endswith((".pyc", ".pyo")):
                        continue
                    full = os.path.join(folder, name)
                    digest.update(os.path.relpath(full, root).encode("utf-8") + b"\0")
                    with open(full, "rb") as handle:
                        digest.update(handle.read())
                    digest.update(b"\0")
        _collection[key] = digest.hexdigest()
    return _collection[key]


def node_inputs(values, cluster_nodes, collection):
    """The digest of one node's inputs: its cluster's nodes' values ({host: {name: value}}) and the collection."""
    document = {"collection": collection,
                "nodes": {host: {name: value for name, value in values.get(host, {}).items() if name not in NOT_INPUTS}
                          for host in sorted(cluster_nodes)}}
    return hashlib.sha256(json.dumps(document, sort_keys=True, default=repr).encode("utf-8")).hexdigest()
