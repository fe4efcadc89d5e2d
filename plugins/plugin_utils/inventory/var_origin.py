# Where a host's variable comes from: extra vars, the host (inventory entry or host_vars), a group
# (inline in the inventory or group_vars/), or the collection's defaults (role defaults, the lowest), following
# Ansible's precedence (VARIABLE_PRECEDENCE), and the file and line Ansible's data tags recorded. Used only to
# word messages; never changes a value.
from __future__ import annotations

import os

from ansible import constants as C
from ansible.inventory.helpers import sort_groups
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory import defaults

try:
    from ansible.vars.plugins import get_vars_from_inventory_sources
except ImportError:  # pragma: no cover - older ansible-core
    get_vars_from_inventory_sources = None

try:
    from ansible._internal._datatag._tags import Origin
except ImportError:  # pragma: no cover - ansible-core < 2.19
    Origin = None

MAGIC = frozenset(("inventory_file", "inventory_dir", "inventory_hostname", "inventory_hostname_short",
                   "group_names"))


def _tag(value):
    """Ansible's Origin tag of a value loaded from a file, or None (booleans and None carry no tag)."""
    if Origin is None:
        return None
    try:
        tag = Origin.get_tag(value)
    except Exception:  # noqa: BLE001 - a tag lookup must never break a message
        return None
    return tag if tag is not None and tag.path else None


def file_and_line(value):
    """'path:line' of a value loaded from a file, or None."""
    tag = _tag(value)
    if tag is None:
        return None
    path = tag.path
    try:
        relative = os.path.relpath(path)
        path = relative if not relative.startswith("..") else path
    except ValueError:
        pass
    return "%s:%s" % (path, tag.line_num) if tag.line_num else path


class Origins:
    """Precedence layers of each host's variables, from the inventory behind `hostvars`."""

    def __init__(self, hostvars, default_values=None):
        self._defaults = dict(default_values or {})
        self._inventory = getattr(hostvars, "_inventory", None)
        self._loader = getattr(hostvars, "_loader", None)
        manager = getattr(hostvars, "_variable_manager", None)
        self._extra = dict(getattr(manager, "extra_vars", {}) or {})
        self._layers = {}

    def _plugins(self, entity):
        if get_vars_from_inventory_sources is None or self._inventory is None:
            return {}
        try:
            return get_vars_from_inventory_sources(self._loader, self._inventory._sources, [entity], "task")
        except Exception:  # noqa: BLE001 - degrade to fewer layers
            return {}

    def layers(self, host_name):
        """[(label, kind, vars)] lowest precedence first; kind is default, group, host or extra."""
        if host_name in self._layers:
            return self._layers[host_name]
        layers = [("the collection's default", "default", self._defaults)]
        host = self._inventory.get_host(host_name) if self._inventory is not None else None
        if host is not None:
            all_group = self._inventory.groups.get("all")
            groups = sort_groups([g for g in host.get_groups() if g.name != "all"])
            steps = {
                "all_inventory": [("group all (inventory)", all_group.get_vars())],
                "groups_inventory": [("group %s (inventory)" % g.name, g.get_vars()) for g in groups],
                "all_plugins_inventory": [("group_vars/all", self._plugins(all_group))],
                "groups_plugins_inventory": [("group_vars/%s" % g.name, self._plugins(g)) for g in groups],
            }
            for entry in C.VARIABLE_PRECEDENCE:
                for label, data in steps.get(entry, []):
                    layers.append((label, "group", data))
            host_vars = {k: v for k, v in host.get_vars().items() if k not in MAGIC}
            layers.append(("host %s (inventory)" % host_name, "host", host_vars))
            layers.append(("host_vars/%s" % host_name, "host", self._plugins(host)))
        layers.append(("extra vars (-e)", "extra", self._extra))
        self._layers[host_name] = layers
        return layers

    def winner(self, host_name, name):
        """(label, kind, raw value) of the layer that sets `name` for the host, or None (set nowhere)."""
        found = None
        for label, kind, data in self.layers(host_name):
            if name in data:
                found = (label, kind, data[name])
        return found

    def group_value(self, host_name, name):
        """(label, raw value) the host's groups give `name`, ignoring host-level and extra vars."""
        found = None
        for label, kind, data in self.layers(host_name):
            if kind == "group" and name in data:
                found = (label, data[name])
        return found

    def groups_setting(self, host_name, name):
        """[(group name, raw value)] of every group of the host that sets `name` itself."""
        result = []
        for label, kind, data in self.layers(host_name):
            if kind == "group" and name in data and not label.startswith(("group all ", "group_vars/all")):
                group = label.split(" ", 1)[1].split(" ")[0] if label.startswith("group ") else label.split("/", 1)[1]
                result.append((group, data[name]))
        return result

    def describe(self, host_name, name):
        """'set for host n03 in hosts.yml:17; its groups give ...' for a message."""
        won = self.winner(host_name, name)
        if won is None:
            return "not set in the inventory, and the collection has no default for it"
        label, kind, raw = won
        where = file_and_line(raw)
        if kind == "default":  # named from the collection's root, wherever it is installed
            tag = _tag(raw)
            line = ":%d" % tag.line_num if tag and tag.line_num else ""
            where = defaults.sources().get(name, defaults.LABEL) + line
        text = "from %s%s" % (label, " (%s)" % where if where else "")
        if kind in ("host", "extra"):
            group = self.group_value(host_name, name)
            if group is not None and group[1] != raw:
                group_where = file_and_line(group[1])
                text += "; the group value (%s%s) is %s" % (group[0], ", %s" % group_where if group_where else "",
                                                            short(group[1]))
        return text


def short(value, limit=80):
    """repr of a value for a message, cut at `limit` characters (newlines stay visible as \\n)."""
    text = repr(value)
    if text.startswith(("_Ansible", "<")):
        text = repr(str(value))
    return text if len(text) <= limit else text[:limit - 3] + "..."
