# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""A sharded Hugging Face model's index (model.safetensors.index.json): its name and what makes it usable, for the
download (hf_download) and the check (hf_model_check).
Standard library only; Python 3.8+."""
from __future__ import annotations

import json

INDEX = "model.safetensors.index.json"


def weight_map(index_path):
    """The index's {tensor: shard file}; raises ValueError naming the cause (unreadable, not JSON, no or an empty
    weight_map)."""
    try:
        with open(index_path, encoding="utf-8") as handle:
            found = json.load(handle)["weight_map"]
        if not isinstance(found, dict) or not found:
            raise ValueError("weight_map is empty or not an object")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError("%s: %s" % (type(exc).__name__, exc)) from exc
    return found
