#!/usr/bin/env python
"""Write docs/configuration.md from the inventory schema (plugins/plugin_utils/inventory/variables.py): every variable,
its type and range, its default (inventory/group_vars/all/*.yml, roles/*/defaults/main.yml), who reads it (the
roles and playbooks that name it), and the rules between variables. `--check` compares instead of writing.

    tools/configuration_doc.py [--check]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "collections"))

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.training import known_flags  # noqa: E402
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.check import CLASS_NAMES  # noqa: E402
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.variables import TOPICS  # noqa: E402
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.schema import NAME_PATTERN, PATH_RULE  # noqa: E402

OUTPUT = os.path.join(REPO, "docs", "configuration.md")
TEMPLATE = os.path.join(REPO, "tools", "configuration_doc.md.in")
SCOPES = {"node": "node", "cluster": "cluster", "fleet": "run (-e)"}
OVERLAP = {
    "data": "hf, converted, save, work, log",
    "hf": "data, converted, save, work, log",
    "converted": "data, hf, save, work, log",
    "save": "data, hf, converted, work, log; another cluster's save dir or run dir on the same storage",
    "work": "data, hf, converted, save (the log dir may lie inside it)",
    "log": "data, hf, converted, save; the work dir may not lie inside it",
}


def defaults():
    """{variable: (value, file)} from the default inventory and the roles' defaults."""
    found = {}
    files = sorted(glob.glob(os.path.join(REPO, "inventory", "group_vars", "all", "*.yml"))) + sorted(
        glob.glob(os.path.join(REPO, "roles", "*", "defaults", "main.yml")))
    for path in files:
        with open(path) as handle:
            for name, value in (yaml.safe_load(handle) or {}).items():
                found.setdefault(name, (value, os.path.relpath(path, REPO)))
    return found


def readers():
    """{variable: [role or playbook]}: where a name appears, outside the inventory and the schema."""
    texts = {}
    for role in sorted(glob.glob(os.path.join(REPO, "roles", "*"))):
        parts = []
        for path in sorted(glob.glob(os.path.join(role, "**", "*"), recursive=True)):
            if os.path.isfile(path) and "/defaults/" not in path and "/meta/" not in path:
                with open(path, errors="replace") as handle:
                    parts.append(handle.read())
        texts["role " + os.path.basename(role)] = "\n".join(parts)
    for path in sorted(glob.glob(os.path.join(REPO, "playbooks", "**", "*"), recursive=True)):
        if os.path.isfile(path):
            with open(path, errors="replace") as handle:
                texts[os.path.relpath(path, REPO)] = handle.read()
    for path in sorted(glob.glob(os.path.join(REPO, "inventory", "group_vars", "all", "*.yml"))):
        with open(path) as handle:
            texts["inventory " + os.path.basename(path)] = "\n".join(
                line for line in handle if not re.match(r"^[a-z_]+:", line))
    return texts


def shown(value):
    text = json.dumps(value, default=str) if not isinstance(value, str) else (
        '"%s"' % value if value == "" or value.strip() != value else value)
    text = " ".join(text.split())
    return "`%s`" % (text if len(text) <= 60 else text[:57] + "...").replace("|", "\\|")


def table(vars_, found, texts):
    lines = ["| Variable | Type | Default | Scope | Read by | Notes |", "|---|---|---|---|---|---|"]
    for var in vars_:
        if var.name in found:
            source = found[var.name][1]
            default = shown(found[var.name][0]) + " (%s)" % source.split("/")[-1 if "group_vars" in source else 1]
        elif var.has_default:
            default = shown(var.default) + " (role, pending)"
        else:
            default = "not set"
        pattern = re.compile(r"(?<![A-Za-z0-9_])%s(?![A-Za-z0-9_])" % re.escape(var.name))
        read = [who for who, text in texts.items() if pattern.search(text)] or ["the configuration check"]
        notes = [var.doc]
        if var.required:
            notes.append("Required.")
        if var.secret:
            notes.append("Secret: never shown.")
        if getattr(var.type, "mount", False):
            notes.append("Inside the container: under one of its mounts.")
        if var.overlap:
            notes.append("Not equal to or nested with: %s." % OVERLAP[var.overlap])
        lines.append("| `%s` | %s | %s | %s | %s | %s |" % (
            var.name, var.type.doc.replace("|", "\\|"), default, SCOPES[var.scope], ", ".join(read),
            " ".join(notes).replace("|", "\\|")))
    return lines


def render():
    found, texts = defaults(), readers()
    sources = known_flags.DATA["sources"]
    variables = []
    for title, vars_ in TOPICS:
        variables += ["## %s" % title, ""] + table(vars_, found, texts) + [""]
    classes = ", ".join("%s (`%s`)" % (CLASS_NAMES[k], v) for k, v in (
        ("data", "slime_data_dir"), ("hf", "slime_hf_model_dir`, `--hf-checkpoint"),
        ("converted", "slime_mcore_dir`, `--ref-load"), ("save", "slime_save_dir`, `--save"),
        ("work", "slime_work_dir"), ("log", "slime_log_dir")))
    with open(TEMPLATE) as handle:
        text = handle.read()
    for key, value in (("@@VARIABLES@@", "\n".join(variables)), ("@@NAME_PATTERN@@", NAME_PATTERN),
                       ("@@PATH_RULE@@", (PATH_RULE[0].upper() + PATH_RULE[1:]).replace("`", "backquotes")),
                       ("@@CLASSES@@", classes),
                       ("@@FLAG_COUNT@@", str(len(known_flags.FLAGS))),
                       ("@@SGLANG_VERSIONS@@", ", ".join("%s: %d flags" % (v, len(known_flags.sglang_flags(v)))
                                                         for v in known_flags.SGLANG_VERSIONS)),
                       ("@@SLIME_REVISIONS@@", " and ".join(sources["slime"]["revisions"])),
                       ("@@MEGATRON_COMMIT@@", sources["megatron"]["commit"][:12])):
        text = text.replace(key, value)
    return text


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        with open(OUTPUT) as handle:
            if handle.read() != text:
                print("docs/configuration.md is out of date: run tools/configuration_doc.py", file=sys.stderr)
                return 1
        return 0
    with open(OUTPUT, "w") as handle:
        handle.write(text)
    print("wrote %s" % OUTPUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
