"""Ray's job statuses and "active" are spelled once, in module_utils/job/rules.py: no other Python file under
plugins/ holds one of them as a string of its own (read from the syntax trees), except the log follower, a
standalone program that imports nothing from the collection, whose copy must equal the rule's."""
from __future__ import annotations

import ast
import os

from ansible_collections.mtslime.posttrain.plugins.module_utils.job import log_follower, rules
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.imports import PLUGINS

STANDALONE = {os.path.join("module_utils", "job", "log_follower.py")}
HOME = os.path.join("module_utils", "job", "rules.py")


def spelled(path):
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    return sorted({node.value for node in ast.walk(tree)
                   if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in rules.STATUSES})


def test_rules_defines_every_status_and_active():
    assert rules.ACTIVE == ("PENDING", "RUNNING") and set(rules.TERMINAL) == {"SUCCEEDED", "FAILED", "STOPPED"}
    assert set(rules.ENDED_BADLY) < set(rules.TERMINAL) and rules.STATUSES == rules.ACTIVE + rules.TERMINAL
    assert rules.is_active({"status": "PENDING"}) and not rules.is_active({"status": "STOPPED"})
    assert rules.is_ended("FAILED") and rules.is_ended({"status": "SUCCEEDED"}) and not rules.is_ended("RUNNING")
    assert not rules.is_ended({"status": None})


def test_no_other_file_spells_a_status():
    found = {}
    for directory, _dirs, files in os.walk(PLUGINS):
        for name in files:
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, PLUGINS)
            if name.endswith(".py") and relative != HOME and relative not in STANDALONE:
                names = spelled(path)
                if names:
                    found[relative] = names
    assert not found, "import them from module_utils/job/rules.py instead: %s" % found


def test_the_standalone_followers_copy_equals_the_rule():
    assert log_follower.TERMINAL == rules.TERMINAL


def test_the_standalone_followers_ansi_expression_is_the_one_rule():
    from ansible_collections.mtslime.posttrain.plugins.module_utils.logs import ansi

    assert log_follower.ANSI.pattern == ansi.PATTERN
    assert log_follower.strip_ansi("\x1b[32mstep 1:\x1b[0m ok") == ansi.strip_ansi("\x1b[32mstep 1:\x1b[0m ok")
