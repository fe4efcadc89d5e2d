"""module_utils run on the nodes' Python 3.8+ (inside each module's payload and the run directory's .mtslime/
copies), while mypy and the controller run 3.11: every file parses as Python 3.8, and its type annotations use
typing's List/Dict/Optional/Union, never list[...] or X | None, which Python 3.8 cannot evaluate (a TypedDict
or typing.get_type_hints evaluates them)."""
from __future__ import annotations

import ast
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULE_UTILS = os.path.join(REPO, "plugins", "module_utils")
BUILTIN_GENERICS = {"list", "dict", "tuple", "set", "frozenset", "type"}


def node_files():
    for root, _dirs, files in os.walk(MODULE_UTILS):
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.relpath(os.path.join(root, name), REPO)


def annotations(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            for arg in arguments.posonlyargs + arguments.args + arguments.kwonlyargs + [arguments.vararg,
                                                                                        arguments.kwarg]:
                if arg is not None and arg.annotation is not None:
                    yield arg.annotation
            if node.returns is not None:
                yield node.returns
        elif isinstance(node, ast.AnnAssign):
            yield node.annotation


def newer_than_38(annotation):
    """The parts of one annotation Python 3.8 cannot evaluate."""
    found = []
    for node in ast.walk(annotation):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in BUILTIN_GENERICS:
            found.append("%s[...]" % node.value.id)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            found.append("X | Y")
    return found


@pytest.mark.parametrize("path", list(node_files()))
def test_module_utils_are_python_38(path):
    with open(os.path.join(REPO, path)) as handle:
        source = handle.read()
    tree = ast.parse(source, path, feature_version=(3, 8))
    problems = ["line %d: %s" % (annotation.lineno, ", ".join(newer_than_38(annotation)))
                for annotation in annotations(tree) if newer_than_38(annotation)]
    assert not problems, "%s: annotations Python 3.8 cannot evaluate (use typing's List, Dict, Optional, Union): %s" % (
        path, "; ".join(problems))


def test_the_check_finds_what_python_38_cannot_evaluate():
    tree = ast.parse("def f(a: list[int], b: 'int') -> dict[str, int] | None:\n    c: Optional[int] = None\n")
    assert [newer_than_38(a) for a in annotations(tree)] == [["list[...]"], [], ["X | Y", "dict[...]"], []]
