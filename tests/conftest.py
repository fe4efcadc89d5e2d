"""Shared pytest set-up: the collection is importable as
ansible_collections.mtslime.posttrain through the repo's collections/ link."""
from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(REPO, "collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
