# Controller-side: the configuration check of the whole inventory, before anything touches a node
# (documentation in plugins/modules/validate_config.py; the rules in plugins/plugin_utils/).
from __future__ import annotations

import re

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory import check as inventory_check
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory import defaults
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory import inputs as stage_inputs
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.fleet import topology
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.variables import VARS
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.problems import numbered
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.var_origin import Origins

# What the cluster layout is made of (templated first: the other values may use slime_cluster_info).
LAYOUT = ("slime_cluster", "slime_storage", "slime_node_ip", "ansible_host", "ansible_default_ipv4",
          "slime_gpus_per_node")
FACT = re.compile(r"'(ansible_[A-Za-z0-9_]+)' is undefined")


def plain(value):
    """A plain copy of a templated value (no lazy containers, no tags)."""
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value


class HostValues:
    """Each host's variables, templated on the controller as its plays would see them: its inventory values over
    the collection's defaults (role defaults, which `hostvars` does not hold)."""

    def __init__(self, templar, hostvars, hosts, groups, default_values=None):
        self.templar, self.hostvars, self.hosts, self.groups = templar, hostvars, hosts, groups
        self.raw = {host: dict(default_values or {}, **self.hostvars.raw_get(host)) for host in hosts}
        self.values = {host: {} for host in hosts}
        self.errors = {host: {} for host in hosts}

    def _template(self, host, names, extra):
        variables = dict(self.raw[host], hostvars=self.hostvars, **extra)
        templar = self.templar.copy_with_new_env(available_variables=variables)
        for name in names:
            if name not in self.raw[host] or name in self.values[host]:
                continue
            try:
                self.values[host][name] = plain(templar.template(self.raw[host][name]))
            except AnsibleError as error:
                text = str(getattr(error, "message", "") or error).splitlines()[0]
                if FACT.search(text) and FACT.search(text).group(1) not in self.raw[host]:
                    continue  # needs the node's facts: checked when they are there
                self.errors[host][name] = text

    def read(self):
        for host in self.hosts:
            self._template(host, LAYOUT, {})
        layout = {h: {k: self.values[h].get(k) for k in LAYOUT} for h in self.hosts}
        for host in self.hosts:
            gpus = layout[host].get("slime_gpus_per_node")
            layout[host]["slime_gpus_per_node"] = gpus if isinstance(gpus, int) and not isinstance(gpus, bool) else 0
        clusters = topology.clusters(layout, self.hosts, self.groups)
        storages = topology.storages(layout, self.hosts)
        for host in self.hosts:
            cluster = clusters[topology.cluster_of(host, layout[host])]
            storage = storages[topology.storage_of(host, layout[host])]
            extra = {"slime_cluster_info": cluster, "slime_storage_info": storage, "slime_topology": clusters,
                     "slime_storage_layout": storages}
            self._template(host, [var.name for var in VARS] + ["ansible_host"], extra)
        return self.values, self.errors


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("hosts",))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        hosts = list(self._task.args.get("hosts") or task_vars.get("ansible_play_hosts_all") or [])
        groups = {name: list(members) for name, members in (task_vars.get("groups") or {}).items()}
        hostvars = task_vars["hostvars"]
        default_values = defaults.load(self._loader)
        values, errors = HostValues(self._templar, hostvars, hosts, groups, default_values).read()
        check = inventory_check.InventoryCheck(hosts, values, errors, groups, Origins(hostvars, default_values))
        problems = check.run()
        clusters = {}
        for cluster in check.clusters.values():
            own = [p.text() for p in problems if cluster["name"] in p.clusters]
            clusters[cluster["name"]] = {
                "head": cluster["head"], "nodes": cluster["nodes"], "problems": own,
                "msg": "%d problem(s) in the configuration of cluster %s (nothing was changed):\n%s" % (
                    len(own), cluster["name"], numbered(own)) if own else "",
            }
        failed = sorted(name for name, item in clusters.items() if item["problems"])
        collection = stage_inputs.collection_digest()
        node_of = check.cluster_of
        inputs = {host: stage_inputs.node_inputs(values, clusters.get(node_of.get(host), {}).get("nodes") or [host],
                                                 collection) for host in hosts}
        result.update(
            changed=False,
            problems=[p.text() for p in problems],
            clusters=clusters,
            failed_clusters=failed,
            hosts={host: check.cluster_of.get(host, host) for host in hosts},
            inputs=inputs,
            msg=("%d problem(s) in %d cluster(s): %s" % (len(problems), len(failed), ", ".join(failed)) if problems
                 else "the configuration of %d cluster(s) is valid" % len(clusters)),
        )
        return result
