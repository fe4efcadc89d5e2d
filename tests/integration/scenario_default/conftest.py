"""Checks of the molecule `default` scenario, run by its verify step against the live,
converged test bed (molecule/default/verify.yml). Not collected by a plain
`pytest tests/integration`: the files are named check_*.py, and verify.yml passes
`-o python_files=check_*.py`. Each check leaves the node converged with a job running."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from default_bed import control  # noqa: E402  (needs the path above)


HERE = os.path.dirname(os.path.abspath(__file__))


def pytest_collection_modifyitems(items):
    # (this hook sees the whole session's items: mark only the checks of this directory)
    for item in items:
        if str(item.fspath).startswith(HERE + os.sep):
            item.add_marker(pytest.mark.docker)


@pytest.fixture(autouse=True)
def no_knobs():
    control()
    yield
    control()
