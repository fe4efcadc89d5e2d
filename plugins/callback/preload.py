# Copyright: mtslime.posttrain contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
---
name: preload
type: aggregate
short_description: Load the collection's controller-side plugins once, before the task workers start
version_added: "0.1.0"
description:
  - ansible-playbook runs every task of every host in a worker process forked from its main process. A worker that
    templates one of the collection's filters, runs one of its action plugins or opens its connection plugin imports
    that plugin's file, which ansible-core's collection loader compiles from source each time. With one worker per
    host and task, a rerun of C(site.yml) spends much of its controller CPU on those imports (docs/performance.md).
  - At the start of the playbook this callback imports, in the main process, every filter, test, lookup, action and
    connection plugin file of the collection, so that each worker inherits them already loaded. It changes no
    output and no result; a file that fails to import is left to the worker that needs it, which reports the error
    where it happens, and is named here at C(-vvv).
requirements:
  - enabled in ansible.cfg (C(callbacks_enabled = mtslime.posttrain.cluster_recap, mtslime.posttrain.preload)),
    as the repository's ansible.cfg does
"""

import importlib
import os

from ansible.plugins.callback import CallbackBase

PLUGIN_KINDS = ("filter", "test", "lookup", "action", "connection")


def plugin_files(plugins_dir, kinds=PLUGIN_KINDS):
    """[(kind, stem)] of the Python plugin files under `plugins_dir`, in a stable order."""
    found = []
    for kind in kinds:
        directory = os.path.join(plugins_dir, kind)
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            if name.endswith(".py") and name != "__init__.py":
                found.append((kind, name[:-len(".py")]))
    return found


def preload(plugins_dir, package):
    """Import each plugin file of `plugins_dir` as `package`.<kind>.<stem>. Returns (loaded, failed): the module
    names imported (or already imported), and {module name: error} of those that raised."""
    loaded, failed = [], {}
    for kind, stem in plugin_files(plugins_dir):
        name = "%s.%s.%s" % (package, kind, stem)
        try:
            importlib.import_module(name)
        except Exception as exc:  # pylint: disable=broad-except  # the worker that needs it reports it in context
            failed[name] = "%s: %s" % (type(exc).__name__, exc)
        else:
            loaded.append(name)
    return loaded, failed


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "mtslime.posttrain.preload"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        package = __name__.rsplit(".", 2)[0]  # ansible_collections.<namespace>.<name>.plugins
        plugins_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        loaded, failed = preload(plugins_dir, package)
        self._display.vvv("preload: %d plugin files of %s loaded" % (len(loaded), package))
        for name, error in failed.items():
            self._display.vvv("preload: %s not loaded (%s); the task that uses it imports it itself" % (name, error))
