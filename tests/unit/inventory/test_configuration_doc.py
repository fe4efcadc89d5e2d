"""docs/configuration.md is what tools/configuration_doc.py makes of the schema today, and names every variable."""
from __future__ import annotations

import os
import subprocess
import sys

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.variables import VARS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_the_committed_file_is_current():
    proc = subprocess.run([sys.executable, os.path.join(REPO, "tools", "configuration_doc.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr + proc.stdout


def test_every_variable_has_a_row():
    with open(os.path.join(REPO, "docs", "configuration.md")) as handle:
        text = handle.read()
    missing = [var.name for var in VARS if "| `%s` |" % var.name not in text]
    assert missing == []
