"""No import cycle under plugins/: every module's imports of the collection (read from its syntax tree, inside
functions too, by plugin_utils/imports.py) form a graph without a cycle; a cycle is named module by module."""
from __future__ import annotations

import os

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.imports import PLUGINS, collection_imports, module_name


def import_graph(plugins):
    """{module: [collection modules it imports]} for every .py file under `plugins`."""
    graph = {}
    for directory, _dirs, files in os.walk(plugins):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                graph[module_name(path, plugins)] = collection_imports(path, plugins)
    return graph


def cycles(graph):
    """One cycle per group of modules that import each other (Tarjan's strongly connected components), each as
    the list of its modules with the first repeated at the end."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for child in graph.get(node, ()):
            if child not in index:
                visit(child)
                low[node] = min(low[node], low[child])
            elif child in on_stack:
                low[node] = min(low[node], index[child])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(_cycle_in(graph, set(component), node))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _cycle_in(graph, component, start):
    """A path start -> ... -> start inside the component (breadth first, so the shortest)."""
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for child in graph.get(node, ()):
            if child == start:
                return paths[node] + [start]
            if child in component and child not in paths:
                paths[child] = paths[node] + [child]
                queue.append(child)
    raise AssertionError("no cycle through %s" % start)


def test_no_module_under_plugins_is_part_of_an_import_cycle():
    graph = import_graph(PLUGINS)
    # the walk sees the collection's imports, function-level ones included
    assert "plugins.module_utils.checkpoint.resume" in graph["plugins.module_utils.job.plan"]
    assert "plugins.module_utils.checkpoint.layout" in graph["plugins.module_utils.checkpoint.mcore"]
    assert "plugins.plugin_utils.report.status_doc" in graph["plugins.action.train_report"]
    found = cycles(graph)
    assert found == [], "import cycles under plugins/: " + "; ".join(" -> ".join(cycle) for cycle in found)


def test_a_cycle_through_a_function_level_import_is_found_and_named(tmp_path):
    plugins = tmp_path / "plugins"
    (plugins / "module_utils" / "checkpoint").mkdir(parents=True)
    prefix = "ansible_collections.mtslime.posttrain.plugins.module_utils"
    (plugins / "module_utils" / "checkpoint" / "__init__.py").write_text("")
    (plugins / "module_utils" / "checkpoint" / "mcore.py").write_text(
        "def resume_plan(save_dir):\n    from %s.checkpoint import resume\n    return resume.resume_plan(save_dir)\n"
        % prefix)
    (plugins / "module_utils" / "checkpoint" / "resume.py").write_text(
        "try:\n    from %s.checkpoint import mcore\nexcept ImportError:\n    import mcore\n" % prefix)
    (plugins / "module_utils" / "common.py").write_text("from %s.checkpoint.mcore import resume_plan\n" % prefix)
    found = cycles(import_graph(str(plugins)))
    assert found == [["plugins.module_utils.checkpoint.mcore", "plugins.module_utils.checkpoint.resume",
                      "plugins.module_utils.checkpoint.mcore"]]
