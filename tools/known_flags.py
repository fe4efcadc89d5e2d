#!/usr/bin/env python
"""Regenerate plugins/plugin_utils/training/known_flags.json: every flag slime's train.py accepts, with the type
its parser gives it, read off the parsers' source (no torch, no import of slime or Megatron).

    tools/known_flags.py --slime-git DIR --megatron-git DIR [--check]

DIR are git directories (clones or mirrors) of THUDM/slime and NVIDIA/Megatron-LM. What is read:
- slime at each revision in SLIME_REVISIONS: slime/utils/arguments.py (train.py's own flags, the
  `reset_arg` calls that only change a Megatron default, and the pre-parse flags),
  slime/backends/sglang_utils/arguments.py (its explicit `--sglang-*` flags; the rest of `--sglang-*`
  and `--router-*` wrap the image's SGLang and stay a passthrough);
- Megatron-LM at the commit slime's docker/Dockerfile pins (MEGATRON_COMMIT), patched with slime's
  docker/patch/latest/megatron.patch as the Dockerfile does: megatron/training/arguments.py, the
  functions add_megatron_arguments calls: each `add_argument`, and each ArgumentGroupFactory, whose
  flags come from a dataclass's fields by the rules of megatron/training/argument_utils.py (emulated
  in `factory_flags` below, line for line).
The teacher server's flags (slime/backends/megatron_utils/server/arguments.py) belong to
megatron_server.py, not train.py, and are left out.

--check compares with the committed file instead of writing it (exit 1 when it differs).
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUTPUT = os.path.join(REPO, "plugins", "plugin_utils", "training", "known_flags.json")
SLIME_REVISIONS = ("v0.3.1", "624b824a8")
MEGATRON_FILES = "megatron"

# Type functions the parsers use, by name: what a value must be.
TYPE_FUNCTIONS = {
    "int": {"type": "int"},
    "float": {"type": "float"},
    "str": {"type": "str"},
    "_positive_int": {"type": "int", "min": 1},
    "_non_negative_int": {"type": "int", "min": 0},
    "_positive_float": {"type": "float", "min_exclusive": 0},
    # argparse's bool("False") is True: any non-empty value switches it on.
    "bool": {"type": "str", "note": "type=bool: any non-empty value is true"},
}


def git(git_dir, *args):
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True,
                          text=True).stdout


def literal(node):
    """The value of a literal node, or None when it is not one."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def name_of(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return "%s.%s" % (name_of(node.value), node.attr)
    return None


def spec_from_kwargs(kwargs, names):
    """One flag's record from add_argument's keyword nodes."""
    record = {}
    action = kwargs.get("action")
    action_name = literal(action) if isinstance(action, ast.Constant) else name_of(action) if action else None
    if action_name in ("store_true", "store_false"):
        record["type"] = "bool"
        record["action"] = action_name
    elif action_name and action_name.endswith("BooleanOptionalAction"):
        record["type"] = "bool"
        record["action"] = "boolean_optional"
    elif action_name in ("store_const", "count", "append_const"):
        record["type"] = "bool"
        record["action"] = action_name
    else:
        type_node = kwargs.get("type")
        type_name = name_of(type_node) if type_node is not None else "str"
        record.update(TYPE_FUNCTIONS.get(type_name, {"type": "str", "note": "parsed by %s" % type_name}))
        if action_name == "append":
            record["action"] = "append"
    nargs = literal(kwargs["nargs"]) if "nargs" in kwargs else None
    if nargs is not None:
        record["nargs"] = nargs
    choices = literal(kwargs["choices"]) if "choices" in kwargs else None
    if isinstance(choices, (list, tuple)):
        record["choices"] = [str(c) for c in choices]
    flags = {name[2:]: dict(record) for name in names if name.startswith("--")}
    if record.get("action") == "boolean_optional":
        # argparse.BooleanOptionalAction also registers --no-<name>.
        flags.update({"no-" + name[2:]: dict(record) for name in names if name.startswith("--")})
    return flags, record


def add_argument_calls(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
            names = [literal(a) for a in node.args if isinstance(a, ast.Constant)]
            yield [n for n in names if isinstance(n, str)], {k.arg: k.value for k in node.keywords if k.arg}


class Sources:
    """Python files of one source tree, and the classes they define."""

    def __init__(self, root):
        self.root = root
        self._trees = {}

    def tree(self, module):
        if module not in self._trees:
            base = os.path.join(self.root, *module.split("."))
            for path in (base + ".py", os.path.join(base, "__init__.py")):
                if os.path.exists(path):
                    with open(path) as handle:
                        self._trees[module] = (ast.parse(handle.read()), path.endswith("__init__.py"))
                    break
            else:
                raise KeyError("module %s not found under %s" % (module, self.root))
        return self._trees[module]

    def find_class(self, module, name, seen=None):
        """(module, ClassDef) of `name` as seen from `module`, following imports."""
        seen = seen or set()
        if (module, name) in seen:
            raise KeyError(name)
        seen.add((module, name))
        tree, is_package = self.tree(module)
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                return module, node
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and any((a.asname or a.name) == name for a in node.names):
                original = next(a.name for a in node.names if (a.asname or a.name) == name)
                return self.find_class(self.resolve(module, node, is_package), original, seen)
        raise KeyError("class %s not found from %s" % (name, module))

    @staticmethod
    def resolve(module, node, is_package):
        if not node.level:
            return node.module
        parts = module.split(".")
        keep = len(parts) - node.level + (1 if is_package else 0)
        base = parts[:keep]
        return ".".join(base + ([node.module] if node.module else []))


def is_enum(sources, module, node):
    for base in node.bases:
        base_name = name_of(base) or ""
        if base_name.split(".")[-1] in ("Enum", "IntEnum", "StrEnum", "Flag"):
            return True
        try:
            owner, parent = sources.find_class(module, base_name.split(".")[-1])
        except KeyError:
            continue
        if is_enum(sources, owner, parent):
            return True
    return False


class TypeInferenceError(Exception):
    """ArgumentGroupFactory's own: a field type argparse cannot take."""


def extract_type(sources, module, annotation):
    """ArgumentGroupFactory._extract_type on an annotation's AST."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        left, right = annotation.left, annotation.right
        if isinstance(right, ast.Constant) and right.value is None:
            return extract_type(sources, module, left)
        raise TypeInferenceError("union")
    if isinstance(annotation, ast.Subscript):
        origin = (name_of(annotation.value) or "").split(".")[-1]
        items = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        if origin == "Optional":
            return extract_type(sources, module, items[0])
        if origin == "Union":
            if len(items) == 2 and isinstance(items[1], ast.Constant) and items[1].value is None:
                return extract_type(sources, module, items[0])
            raise TypeInferenceError("union")
        if origin in ("list", "List"):
            if len(items) != 1:
                raise TypeInferenceError("multi-type list")
            kwargs = extract_type(sources, module, items[0])
            kwargs["nargs"] = "+"
            return kwargs
        if origin == "Literal":
            values = [literal(item) for item in items]
            kinds = {type(v).__name__ for v in values}
            if len(kinds) != 1:
                raise TypeInferenceError("mixed literal")
            return {"type": kinds.pop(), "choices": values}
        raise TypeInferenceError("unsupported %s" % origin)
    type_name = name_of(annotation) or ""
    if type_name in ("int", "float", "str", "bool"):
        return {"type": type_name}
    try:
        owner, node = sources.find_class(module, type_name.split(".")[-1])
    except KeyError:
        return {"type": "other:%s" % type_name}
    if is_enum(sources, owner, node):
        members = [t.id for stmt in node.body if isinstance(stmt, ast.Assign) for t in stmt.targets
                   if isinstance(t, ast.Name) and not t.id.startswith("_")]
        return {"type": "enum", "choices": members}
    return {"type": "other:%s" % type_name}


def dataclass_fields(sources, module, node):
    """[(name, annotation, default, has_default, metadata, init)] in dataclass order (bases first)."""
    fields = {}
    for base in node.bases:
        base_name = (name_of(base) or "").split(".")[-1]
        if base_name in ("object", "Generic") or not base_name:
            continue
        owner, parent = sources.find_class(module, base_name)
        for item in dataclass_fields(sources, owner, parent):
            fields[item[0]] = item
    for stmt in node.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        if "ClassVar" in ast.dump(stmt.annotation):
            continue
        default, has_default, metadata, init = None, stmt.value is not None, None, True
        value = stmt.value
        if isinstance(value, ast.Call) and name_of(value.func) in ("field", "dataclasses.field"):
            keywords = {k.arg: k.value for k in value.keywords}
            has_default = "default" in keywords
            default = literal(keywords["default"]) if has_default else None
            if "metadata" in keywords:
                meta = metadata_literal(keywords["metadata"])
                metadata = meta.get("argparse_meta") if isinstance(meta, dict) else None
            if "init" in keywords:
                init = literal(keywords["init"]) is not False
        elif value is not None:
            default = literal(value)
        previous = fields.get(stmt.target.id)
        fields[stmt.target.id] = (stmt.target.id, stmt.annotation, default, has_default, metadata, init) \
            if previous is None or stmt.value is not None else previous
    return list(fields.values())


def metadata_literal(node):
    """A metadata dict whose values may name types (int, float, str): kept as their names."""
    if isinstance(node, ast.Dict):
        return {literal(k): metadata_literal(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, (ast.List, ast.Tuple)):
        return [metadata_literal(v) for v in node.elts]
    if isinstance(node, (ast.Name, ast.Attribute)):
        return {"__name__": name_of(node)}
    return literal(node)


def factory_flags(sources, module, class_name, exclude):
    """The flags ArgumentGroupFactory(class, exclude).build_group adds (argument_utils.py)."""
    owner, node = sources.find_class(module, class_name)
    flags = {}
    for name, annotation, default, has_default, meta, init in dataclass_fields(sources, owner, node):
        if name in exclude or not init:
            continue
        names = ["--" + name.replace("_", "-")]
        try:
            kwargs = extract_type(sources, owner, annotation)
            if kwargs["type"] == "bool":
                # `attribute.default == False`: a default_factory or a None default gives store_false.
                store_true = has_default and default is False
                kwargs["action"] = "store_true" if store_true else "store_false"
                if not store_true:
                    names = ["--no-" + name.replace("_", "-"), "--disable-" + name.replace("_", "-")]
        except TypeInferenceError:
            if meta is None:
                raise
            kwargs = {"type": "str"}
        if meta:
            names = meta.get("arg_names", names)
            if isinstance(meta.get("type"), dict):
                kwargs.update(TYPE_FUNCTIONS.get(meta["type"]["__name__"], {"type": "str"}))
                kwargs.pop("action", None)
            if isinstance(meta.get("action"), str):
                kwargs["action"] = meta["action"]
                kwargs["type"] = "bool" if meta["action"] in ("store_true", "store_false") else kwargs["type"]
            for key in ("nargs", "choices"):
                if key in meta:
                    kwargs[key] = meta[key]
        if kwargs["type"] == "enum":
            kwargs["type"] = "str"
        if "choices" in kwargs:
            kwargs["choices"] = [str(c) for c in kwargs["choices"]]
        for flag in names:
            flags[flag[2:]] = dict(kwargs)
    return flags


def megatron_flags(root):
    sources = Sources(root)
    tree, _package = sources.tree("megatron.training.arguments")
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    called = [name_of(c.value.func) for c in functions["add_megatron_arguments"].body
              if isinstance(c, ast.Assign) and isinstance(c.value, ast.Call)]
    flags = {}
    for function in called:
        body = functions[function]
        for names, kwargs in add_argument_calls(body):
            found, _record = spec_from_kwargs(kwargs, names)
            flags.update(found)
        for node in ast.walk(body):
            if isinstance(node, ast.Call) and name_of(node.func) == "ArgumentGroupFactory":
                keywords = {k.arg: k.value for k in node.keywords}
                exclude = literal(keywords["exclude"]) if "exclude" in keywords else []
                if exclude is None:
                    exclude = literal(local_value(body, keywords["exclude"])) or []
                flags.update(factory_flags(sources, "megatron.training.arguments", node.args[0].id, exclude))
    return flags


def local_value(function, name_node):
    """The literal assigned to a local name in `function` (the factory's `exclude` list)."""
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name_node.id for t in node.targets):
            return node.value
    return name_node


def slime_flags(read):
    """train.py's own flags at one slime revision; `read(path)` returns a file's text."""
    flags = {}
    tree = ast.parse(read("slime/utils/arguments.py"))
    for names, kwargs in add_argument_calls(tree):
        if names:
            flags.update(spec_from_kwargs(kwargs, names)[0])
    resets = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and name_of(node.func) == "reset_arg" and len(node.args) >= 2:
            flag = literal(node.args[1])
            kwargs = {k.arg: k.value for k in node.keywords if k.arg}
            resets[flag[2:]] = spec_from_kwargs(kwargs, [flag])[0][flag[2:]]
    sglang = ast.parse(read("slime/backends/sglang_utils/arguments.py"))
    for function in (n for n in sglang.body if isinstance(n, ast.FunctionDef)):
        if function.name in ("add_sglang_router_arguments", "add_sglang_arguments", "sglang_parse_args"):
            for names, kwargs in add_argument_calls(function):
                if names and names[0].startswith("--"):
                    flags.update(spec_from_kwargs(kwargs, names)[0])
    return flags, resets


def patched_megatron(megatron_git, commit, patch_text, workdir):
    archive = subprocess.run(["git", "--git-dir", megatron_git, "archive", commit, MEGATRON_FILES],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", workdir], input=archive, check=True)
    patch = os.path.join(workdir, "megatron.patch")
    with open(patch, "w") as handle:
        handle.write(patch_text)
    subprocess.run(["git", "apply", "--include=megatron/*", patch], cwd=workdir, check=True)
    return workdir


def dockerfile_megatron_commit(text):
    for line in text.splitlines():
        if line.startswith("ARG MEGATRON_COMMIT="):
            return line.split("=", 1)[1].strip()
    raise SystemExit("no MEGATRON_COMMIT in slime's docker/Dockerfile")


def generate(slime_git, megatron_git):
    revisions = {}
    merged = {}
    resets = {}
    for revision in SLIME_REVISIONS:
        commit = git(slime_git, "rev-parse", revision + "^{commit}").strip()
        revisions[revision] = commit
        found, reset = slime_flags(lambda path, c=commit: git(slime_git, "show", "%s:%s" % (c, path)))
        for flag, record in found.items():
            merged.setdefault(flag, dict(record, source=[]))["source"].append("slime " + revision)
        resets.update(reset)
    head = revisions[SLIME_REVISIONS[-1]]
    megatron_commit = dockerfile_megatron_commit(git(slime_git, "show", head + ":docker/Dockerfile"))
    patch = git(slime_git, "show", head + ":docker/patch/latest/megatron.patch")
    with tempfile.TemporaryDirectory() as workdir:
        megatron = megatron_flags(patched_megatron(megatron_git, megatron_commit, patch, workdir))
    for flag, record in megatron.items():
        if flag in merged:
            merged[flag]["source"].append("megatron")
        else:
            merged[flag] = dict(record, source=["megatron"])
    for flag, record in resets.items():
        # reset_arg adds the flag only when Megatron lacks it; otherwise Megatron's type stays.
        if flag not in merged:
            merged[flag] = dict(record, source=["slime reset_arg"])
    return {
        "about": "Flags slime's train.py accepts, with the types its parsers give them. Generated by "
                 "tools/known_flags.py; do not edit by hand.",
        "sources": {
            "slime": {"repository": "THUDM/slime", "revisions": revisions,
                      "files": ["slime/utils/arguments.py", "slime/backends/sglang_utils/arguments.py",
                                "docker/Dockerfile", "docker/patch/latest/megatron.patch"]},
            "megatron": {"repository": "NVIDIA/Megatron-LM", "commit": megatron_commit,
                         "patched_with": "slime %s docker/patch/latest/megatron.patch" % SLIME_REVISIONS[-1],
                         "files": ["megatron/training/arguments.py", "megatron/training/argument_utils.py",
                                   "dataclasses named by its ArgumentGroupFactory calls"]},
        },
        "passthrough": ["sglang-", "router-"],
        "flags": {flag: merged[flag] for flag in sorted(merged)},
    }


def dump(data):
    """JSON with one flag per line, so a regeneration diffs by flag."""
    lines = ["{"]
    for key in ("about", "sources", "passthrough"):
        lines.append("  %s: %s," % (json.dumps(key), json.dumps(data[key], sort_keys=True)))
    lines.append('  "flags": {')
    items = list(data["flags"].items())
    for index, (flag, record) in enumerate(items):
        comma = "," if index < len(items) - 1 else ""
        lines.append("    %s: %s%s" % (json.dumps(flag), json.dumps(record, sort_keys=True), comma))
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--slime-git", required=True, help="git directory of THUDM/slime")
    parser.add_argument("--megatron-git", required=True, help="git directory of NVIDIA/Megatron-LM")
    parser.add_argument("--output", default=OUTPUT)
    parser.add_argument("--check", action="store_true", help="compare with the committed file")
    args = parser.parse_args(argv)
    text = dump(generate(args.slime_git, args.megatron_git))
    if args.check:
        with open(args.output) as handle:
            if handle.read() != text:
                print("%s is out of date: run tools/known_flags.py" % args.output, file=sys.stderr)
                return 1
        return 0
    with open(args.output, "w") as handle:
        handle.write(text)
    print("wrote %s (%d flags)" % (args.output, len(json.loads(text)["flags"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
