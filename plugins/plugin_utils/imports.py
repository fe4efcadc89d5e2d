# Which of the collection's own Python modules a file imports, read from its syntax tree (nothing is run), and
# from that the module_utils files a program needs beside it to run on its own: the run directory's .mtslime/
# copies are that closure of module_utils/job/plan.py, so the list cannot fall behind the imports.
from __future__ import annotations

import ast
import functools
import os

PREFIX = "ansible_collections.mtslime.posttrain."
PLUGINS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULE_UTILS = "plugins.module_utils"


def module_file(name, plugins=PLUGINS):
    """The file of the collection module `name` ("plugins.module_utils.job.plan"): the .py, or the package's
    __init__.py; None when there is neither."""
    parts = name.split(".")
    if parts[0] != "plugins":
        return None
    base = os.path.join(os.path.dirname(plugins), *parts)
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return path
    return None


def module_name(path, plugins=PLUGINS):
    """The dotted name ("plugins.module_utils.job.plan") of the file `path` under `plugins`."""
    relative = os.path.relpath(os.path.abspath(path), os.path.dirname(plugins))
    parts = relative[:-len(".py")].split(os.sep)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(node, name, is_package):
    """The module an ImportFrom names, made absolute (relative imports resolved against `name`)."""
    if not node.level:
        return node.module or ""
    base = name.split(".")
    base = base[:len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def _statements(nodes):
    """Every statement of `nodes`, nested ones (in functions, classes, try, if, with, loops, match) included; an
    import is a statement, so expressions are not visited."""
    for node in nodes:
        if isinstance(node, ast.stmt):
            yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(node, field, None)
            if isinstance(inner, list):
                yield from _statements(inner)


def collection_imports(path, plugins=PLUGINS):
    """The collection modules, as dotted names from "plugins.", that the file `path` imports anywhere in it
    (inside functions and try blocks too), each once, in order of appearance. `from P import x` names P.x when
    x is a module of its own, else P; imports from outside the collection are left out."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), filename=path)
    name = module_name(path, plugins)
    is_package = os.path.basename(path) == "__init__.py"
    found = []

    def add(dotted):
        if dotted.startswith(PREFIX):
            dotted = dotted[len(PREFIX):]
        elif not dotted.startswith("plugins."):
            return
        if dotted not in found:
            found.append(dotted)

    for node in _statements(tree.body):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PREFIX):
                    add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, name, is_package)
            if not (module.startswith(PREFIX) or (node.level and module.startswith("plugins."))):
                continue
            for alias in node.names:
                child = "%s.%s" % (module, alias.name)
                short = child[len(PREFIX):] if child.startswith(PREFIX) else child
                add(child if module_file(short, plugins) else module)
    return found


def _packages(name, plugins):
    """The dotted names of the packages below module_utils that hold `name` and have an __init__.py."""
    parts = name.split(".")
    found = []
    for end in range(len(MODULE_UTILS.split(".")) + 1, len(parts)):
        package = ".".join(parts[:end])
        path = module_file(package, plugins)
        if path and os.path.basename(path) == "__init__.py":
            found.append(package)
    return found


def module_utils_closure(entries, plugins=PLUGINS):
    """The files, as paths relative to module_utils/ ("job/plan.py"), that the module_utils files `entries`
    (relative paths too) need to run: the entries, every module_utils file they import directly or not, and the
    __init__.py of each package an imported module is in. Entries first, in order, then the rest sorted.
    Raises ValueError naming an entry that is not a module_utils file. Computed once per process (the roles
    template it for every node)."""
    return list(_closure(tuple(entries), plugins))


@functools.lru_cache(maxsize=32)
def _closure(entries, plugins):
    root = os.path.join(plugins, "module_utils")
    todo, seen = [], set()
    for entry in entries:
        path = os.path.join(root, entry)
        if not os.path.isfile(path):
            raise ValueError("%s is not a file under %s" % (entry, root))
        todo.append(module_name(path, plugins))
    names = list(todo)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for imported in collection_imports(module_file(name, plugins), plugins):
            if not imported.startswith(MODULE_UTILS + ".") or not module_file(imported, plugins):
                continue
            for dependency in _packages(imported, plugins) + [imported]:
                if dependency not in names:
                    names.append(dependency)
                    todo.append(dependency)
    paths = [os.path.relpath(module_file(name, plugins), root).replace(os.sep, "/") for name in names]
    first = paths[:len(entries)]
    return tuple(first + sorted(set(paths[len(entries):]) - set(first)))
