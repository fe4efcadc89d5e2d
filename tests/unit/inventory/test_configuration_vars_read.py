"""No knob without effect: every variable that docs/configuration.md documents is read by a role (its tasks,
templates, vars or another default's value), a play, site.yml or the collection's Python code (a filter, an action,
a module, the configuration check whose own knobs they are), or by the value of a default inventory variable that
is itself read. Mentions do not count: comments, the key that defines a variable, messages and documentation."""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import yaml

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory import defaults

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "configuration.md"
# the schema declares every variable; that is not a read
DECLARATION = REPO / "plugins" / "plugin_utils" / "inventory" / "variables.py"
SETTINGS = REPO / "roles" / "settings" / "defaults"
DOC_NAMES = {"DOCUMENTATION", "EXAMPLES", "RETURN"}
KEY = re.compile(r"^\s*(?:-\s+)?[A-Za-z_][A-Za-z0-9_]*:(?:\s|$)")
COMMENT = re.compile(r"(?:^|\s)#(?!\}).*$")


def documented():
    """The variables of the doc's tables, from '## Paths' up to '## Rules between values'."""
    text = DOC.read_text(encoding="utf-8")
    tables = text[text.index("\n## Paths"):text.index("\n## Rules between values")]
    return re.findall(r"^\| `([A-Za-z_][A-Za-z0-9_]*)` \|", tables, re.M)


def reading_text(path):
    """A YAML or Jinja file's text without comments and without the keys its lines define."""
    lines = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if path.suffix != ".j2":
            line = KEY.sub(" ", COMMENT.sub("", line), count=1)
        lines.append(line)
    return "\n".join(lines)


def python_names(path):
    """Every string constant of a Python file that is exactly a variable-like name (a lookup such as
    node.get("slime_node_ip")), apart from docstrings and a module's DOCUMENTATION/EXAMPLES/RETURN."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.add(id(first.value))
        if isinstance(node, ast.Assign) and {getattr(t, "id", None) for t in node.targets} & DOC_NAMES:
            skip.add(id(node.value))
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and id(node) not in skip
            and isinstance(node.value, str) and re.fullmatch(r"[a-z_][a-z0-9_]*", node.value)}


WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@functools.cache
def readers():
    """(the words of every reading file and the names its Python code looks up, {inventory variable: the words of
    its value})."""
    # the collection's defaults (roles/settings/defaults/) are the values below, not readers
    files = [p for p in (REPO / "roles").rglob("*") if p.is_file() and "meta" not in p.parts
             and p.suffix in (".yml", ".yaml", ".j2") and SETTINGS not in p.parents]
    files += [p for p in (REPO / "playbooks").rglob("*") if p.is_file() and p.suffix in (".yml", ".yaml", ".j2")]
    files.append(REPO / "site.yml")
    words = set()
    for path in files:
        words.update(WORD.findall(reading_text(path)))
    for path in (REPO / "plugins").rglob("*.py"):
        if path != DECLARATION:
            words |= python_names(path)
    values = {}
    for name, value in defaults.load().items():
        values[name] = set(WORD.findall(yaml.safe_dump(value)))
    return words, values


def effective(variables):
    words, values = readers()
    found = {name for name in set(variables) | set(values) if name in words}
    while True:  # a variable named in the value of a read inventory variable is read too
        more = {name for name in set(variables) - found if any(name in values[other] for other in found & set(values))}
        if not more:
            return found
        found |= more


def test_every_documented_variable_is_read_somewhere():
    variables = documented()
    assert len(variables) > 100 and "slime_dir" in variables and "ray_dashboard_port" in variables
    unread = sorted(set(variables) - effective(variables))
    assert unread == [], (
        "documented in docs/configuration.md but read by no role, play, template, plugin or read inventory value "
        "(a knob without effect): %s; use it or remove it from plugins/plugin_utils/inventory/variables.py, the "
        "defaults and the argument specs" % ", ".join(unread)
    )


def test_a_variable_nobody_reads_is_found():
    """The search itself: a documented name that only the schema, a comment and a message mention is unread."""
    assert "slime_no_such_knob" not in effective(["slime_no_such_knob", "slime_dir"])
    assert "slime_dir" in effective(["slime_dir"])
    # slime_max_response_len is read only through slime_train_args, a default inventory value that train_job reads
    assert "slime_max_response_len" in effective(["slime_max_response_len"])
