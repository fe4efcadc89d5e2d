"""docs/architecture.md's tables follow the tree: every file of plugins/module_utils/ and plugins/plugin_utils/ is
named there (`module_utils/<area>/<name>.py`), and every such path it names exists."""
from __future__ import annotations

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
NAMED = re.compile(r"`(?:plugins/)?((?:module_utils|plugin_utils)/[a-z0-9_/]+\.(?:py|json))`")


def tree_files():
    found = set()
    for top in ("module_utils", "plugin_utils"):
        for directory, _dirs, files in os.walk(REPO / "plugins" / top):
            for name in files:
                if name.endswith((".py", ".json")) and name != "__init__.py":
                    found.add(os.path.relpath(os.path.join(directory, name), REPO / "plugins").replace(os.sep, "/"))
    return found


def test_the_doc_names_every_file_of_module_utils_and_plugin_utils_and_only_files_that_exist():
    named = set(NAMED.findall(DOC.read_text(encoding="utf-8")))
    files = tree_files()
    assert "module_utils/job/plan.py" in files and "plugin_utils/training/known_flags.json" in files
    assert sorted(files - named) == [], "files that docs/architecture.md does not name"
    assert sorted(named - files) == [], "paths docs/architecture.md names that do not exist"
