"""The preload callback: every controller-side plugin file of the collection imported once in the main process, a
file that fails to import left to the task that needs it (named at -vvv, never fatal)."""
from __future__ import annotations

import glob
import os
import sys

import pytest

from ansible_collections.mtslime.posttrain.plugins.callback import preload

PLUGINS = os.path.dirname(os.path.dirname(os.path.abspath(preload.__file__)))
PACKAGE = "ansible_collections.mtslime.posttrain.plugins"


def test_every_filter_action_and_connection_file_of_the_collection_is_loaded():
    loaded, failed = preload.preload(PLUGINS, PACKAGE)
    assert failed == {}
    expected = sorted("%s.%s.%s" % (PACKAGE, kind, os.path.basename(path)[:-3])
                      for kind in ("filter", "action", "connection")
                      for path in glob.glob(os.path.join(PLUGINS, kind, "*.py")) if not path.endswith("__init__.py"))
    assert expected and sorted(loaded) == expected
    assert all(name in sys.modules for name in loaded)
    # modules, module_utils and callbacks run elsewhere or are loaded by ansible-core itself
    assert not any(".modules." in name or ".module_utils." in name or ".callback." in name for name in loaded)


@pytest.fixture
def fake_collection(tmp_path, monkeypatch):
    plugins = tmp_path / "fakecoll" / "plugins"
    (plugins / "filter").mkdir(parents=True)
    (plugins / "action").mkdir()
    (plugins / "filter" / "good.py").write_text("VALUE = 1\n")
    (plugins / "filter" / "notes.txt").write_text("not a plugin\n")
    (plugins / "filter" / "__init__.py").write_text("")
    (plugins / "action" / "broken.py").write_text("raise RuntimeError('needs a library this controller lacks')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield plugins
    for name in [n for n in sys.modules if n.startswith("fakecoll")]:
        del sys.modules[name]


def test_a_file_that_fails_to_import_is_named_and_the_others_load(fake_collection):
    assert preload.plugin_files(str(fake_collection)) == [("filter", "good"), ("action", "broken")]
    loaded, failed = preload.preload(str(fake_collection), "fakecoll.plugins")
    assert loaded == ["fakecoll.plugins.filter.good"]
    assert failed == {"fakecoll.plugins.action.broken": "RuntimeError: needs a library this controller lacks"}
    assert "fakecoll.plugins.action.broken" not in sys.modules


def test_the_callback_loads_at_playbook_start_and_reports_at_vvv(monkeypatch):
    seen = []
    callback = preload.CallbackModule()
    monkeypatch.setattr(callback._display, "vvv", seen.append)
    callback.v2_playbook_on_start(None)
    assert len(seen) == 1 and seen[0].startswith("preload: "), seen
    assert seen[0].endswith(" plugin files of %s loaded" % PACKAGE), seen
    assert int(seen[0].split()[1]) == len(preload.plugin_files(PLUGINS))
