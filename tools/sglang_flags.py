#!/usr/bin/env python
"""Regenerate plugins/plugin_utils/training/sglang_flags.json: the `--sglang-*` and `--router-*` flags that slime's
train.py accepts with a given SGLang, read off the sources (no import of SGLang).

    tools/sglang_flags.py --slime-git DIR --sglang-wheel FILE --router-wheel FILE [--check]

DIR is a git directory of THUDM/slime; FILE are the wheels of the SGLang that slime's docker/Dockerfile builds on
(SGLANG_IMAGE_TAG) and of sglang-router (`pip download --no-deps sglang==X sglang-router==Y`). What is read:
- sglang/srt/server_args.py, patched with slime's docker/patch/latest/sglang*.patch at each revision in
  known_flags.json (as the Dockerfile does): the ServerArgs fields annotated `A[type, "help"]` or
  `A[type, Arg(...)]` (not `no_cli`), whose flag is `cli_name` or the field name with '-' for '_', plus `aliases`;
  and every `add_argument` in ServerArgs.add_cli_args;
- slime/backends/sglang_utils/arguments.py at each revision: `skipped_args`, the fields slime sets itself and does
  not re-register (by dest, else by the first long flag); every other flag gets the prefix --sglang-;
- sglang_router/router_args.py: every `add_argument` of RouterArgs.add_cli_args as slime calls it
  (use_router_prefix=True, so `--{prefix}x` is --router-x; exclude_host_port=True, so no --host/--port).

The wheels' version is added to the file (or replaces its entry); --check compares instead of writing (exit 1
when it differs).
"""
from __future__ import annotations

import argparse
import ast
import email.parser
import json
import os
import subprocess
import sys
import tempfile
import zipfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.join(REPO, "plugins", "plugin_utils", "training", "sglang_flags.json")
KNOWN = os.path.join(REPO, "plugins", "plugin_utils", "training", "known_flags.json")
SERVER_ARGS = "python/sglang/srt/server_args.py"
ROUTER_ARGS = "sglang_router/router_args.py"
SLIME_SGLANG = "slime/backends/sglang_utils/arguments.py"


def git(git_dir, *args):
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True,
                          text=True).stdout


def wheel(path):
    """(name, version, {member: text}) of a wheel's .py files and its METADATA."""
    with zipfile.ZipFile(path) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        headers = email.parser.Parser().parsestr(archive.read(meta).decode())
        files = {n: archive.read(n).decode() for n in archive.namelist() if n.endswith(".py")}
    return headers["Name"], headers["Version"], files


def names_of(call, prefix=""):
    """The option strings of an add_argument call; f"--{prefix}x" with `prefix` put in."""
    names = []
    for node in call.args:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.append(node.value)
        elif isinstance(node, ast.JoinedStr):
            names.append("".join(part.value if isinstance(part, ast.Constant) else prefix for part in node.values))
    return [name for name in names if name.startswith("-")]


def add_argument_calls(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            yield node


def method(tree, class_name, name):
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    return cls, next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name)


def server_flags(source):
    """[(dest, option strings)] that ServerArgs.add_cli_args registers."""
    tree = ast.parse(source)
    cls, add_cli_args = method(tree, "ServerArgs", "add_cli_args")
    found = []
    for node in cls.body:
        annotation = getattr(node, "annotation", None)
        if not (isinstance(node, ast.AnnAssign) and isinstance(annotation, ast.Subscript)
                and getattr(annotation.value, "id", None) in ("A", "Annotated")
                and isinstance(annotation.slice, ast.Tuple)):
            continue  # a field without CLI metadata has no flag
        meta = annotation.slice.elts[-1]
        options = {}
        if isinstance(meta, ast.Call) and getattr(meta.func, "id", None) == "Arg":
            options = {k.arg: ast.literal_eval(k.value) for k in meta.keywords
                       if k.arg in ("cli_name", "aliases", "no_cli")}
        elif not (isinstance(meta, ast.Constant) and isinstance(meta.value, str)):
            continue
        if options.get("no_cli"):
            continue
        field = node.target.id
        found.append((field, [options.get("cli_name") or "--" + field.replace("_", "-")] + (options.get("aliases")
                                                                                            or [])))
    for call in add_argument_calls(add_cli_args):
        names = names_of(call)
        dest = next((ast.literal_eval(k.value) for k in call.keywords if k.arg == "dest"), None)
        long = next((n for n in names if n.startswith("--")), None)
        found.append((dest or (long[2:].replace("-", "_") if long else None), names))
    return found


def router_flags(source):
    _cls, add_cli_args = method(ast.parse(source), "RouterArgs", "add_cli_args")
    flags = set()
    for call in add_argument_calls(add_cli_args):
        flags.update(name.lstrip("-") for name in names_of(call, prefix="router-"))
    return flags - {"host", "port"}  # exclude_host_port=True


def skipped_args(source):
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "skipped_args" for t in node.targets):
            return set(ast.literal_eval(node.value))
    raise SystemExit("no skipped_args in slime's %s" % SLIME_SGLANG)


def patched_server_args(files, slime_git, commit):
    with tempfile.TemporaryDirectory() as workdir:
        path = os.path.join(workdir, SERVER_ARGS)
        os.makedirs(os.path.dirname(path))
        with open(path, "w") as handle:
            handle.write(files["sglang/srt/server_args.py"])
        listing = git(slime_git, "ls-tree", "--name-only", commit, "docker/patch/latest/").split()
        for patch in sorted(p for p in listing if os.path.basename(p).startswith("sglang")):
            text = git(slime_git, "show", "%s:%s" % (commit, patch))
            if SERVER_ARGS in text:
                subprocess.run(["git", "apply", "--include=" + SERVER_ARGS, "-"], input=text, text=True,
                               cwd=workdir, check=True)
        with open(path) as handle:
            return handle.read()


def generate(slime_git, sglang_wheel, router_wheel):
    with open(KNOWN) as handle:
        revisions = json.load(handle)["sources"]["slime"]["revisions"]
    _name, version, files = wheel(sglang_wheel)
    router_name, router_version, router_files = wheel(router_wheel)
    router = router_flags(router_files[ROUTER_ARGS])
    flags = set(router)
    for commit in revisions.values():
        skipped = skipped_args(git(slime_git, "show", "%s:%s" % (commit, SLIME_SGLANG)))
        for dest, names in server_flags(patched_server_args(files, slime_git, commit)):
            if dest not in skipped:
                flags.update("sglang-" + name.lstrip("-") for name in names)
    return version, {
        "sources": {"sglang": "sglang %s (%s, patched with slime's docker/patch/latest/sglang*.patch at %s)" % (
            version, SERVER_ARGS, ", ".join(sorted(revisions))),
            "router": "%s %s (%s)" % (router_name, router_version, ROUTER_ARGS),
            "slime": "%s at %s" % (SLIME_SGLANG, ", ".join(sorted(revisions)))},
        "flags": sorted(flags),
    }


def committed():
    if not os.path.exists(OUTPUT):
        return {"about": "The --sglang-* and --router-* flags slime's train.py accepts, by SGLang version (the "
                         "inventory's slime_sglang_version). Generated by tools/sglang_flags.py, one version a run; "
                         "do not edit by hand.", "versions": {}}
    with open(OUTPUT) as handle:
        return json.load(handle)


def dump(data):
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slime-git", required=True)
    parser.add_argument("--sglang-wheel", required=True)
    parser.add_argument("--router-wheel", required=True)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    version, entry = generate(args.slime_git, args.sglang_wheel, args.router_wheel)
    data = committed()
    data["versions"][version] = entry
    text = dump(data)
    if args.check:
        with open(OUTPUT) as handle:
            if handle.read() != text:
                print("%s differs from what the sources give; run tools/sglang_flags.py" % OUTPUT, file=sys.stderr)
                return 1
        return 0
    with open(OUTPUT, "w") as handle:
        handle.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
