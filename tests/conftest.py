"""Shared pytest set-up: the collection is importable as
ansible_collections.mtslime.posttrain through the repo's collections/ link."""
from __future__ import annotations

import os
import sys

import pytest
from local_webhook import Hook

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(REPO, "collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)


@pytest.fixture
def hook():
    """hook(statuses=()) -> a started Hook; every one is closed after the test."""
    made = []

    def make(statuses=()):
        made.append(Hook(statuses))
        return made[-1]

    yield make
    for one in made:
        one.close()
