"""The collection's default values for a set of hosts, templated the way Ansible would (native types), without
Ansible: roles/settings/defaults/main/*.yml (plugin_utils/inventory/defaults.py) rendered with Jinja's
NativeEnvironment and the collection's own filters, so that the configuration check's unit tests start from the
real defaults."""
from __future__ import annotations

import copy
import os
import shlex

from jinja2.nativetypes import NativeEnvironment

from ansible_collections.mtslime.posttrain.plugins.filter.slime import slime_job_files
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.fleet import paths, topology
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory import defaults as collection_defaults

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def defaults():
    return copy.deepcopy(collection_defaults.load())


def _environment():
    env = NativeEnvironment()
    env.filters["mtslime.posttrain.slime_host_path"] = paths.host_path
    env.filters["mtslime.posttrain.slime_job_files"] = slime_job_files
    env.filters["quote"] = lambda value: shlex.quote(str(value))
    env.filters["int"] = int
    return env


def _render(env, value, context):
    if isinstance(value, str) and "{{" in value:
        result = env.from_string(value).render(**context)
        return result.strip() if isinstance(result, str) else result
    if isinstance(value, dict):
        return {k: _render(env, v, context) for k, v in value.items()}
    if isinstance(value, list):
        return [_render(env, v, context) for v in value]
    return value


def host_values(hosts, per_host=None, groups=None):
    """{host: {variable: value}}: the defaults, each host's own values on top (per_host[host]), templated with
    the host's slime_cluster_info like the configuration check does."""
    per_host = per_host or {}
    env = _environment()
    raw = {}
    for host in hosts:
        raw[host] = dict(defaults(), inventory_hostname=host, inventory_dir=os.path.join(REPO,
                                                                                         "inventory"))
        raw[host].update(copy.deepcopy(per_host.get(host, {})))
    layout = {h: {k: raw[h].get(k) for k in ("slime_cluster", "slime_storage", "slime_node_ip", "ansible_host",
                                             "slime_gpus_per_node")} for h in hosts}
    clusters = topology.clusters(layout, hosts, groups or {})
    result = {}
    for host in hosts:
        context = dict(raw[host], slime_cluster_info=clusters[topology.cluster_of(host, layout[host])])
        values = raw[host]
        for dummy in range(6):  # templates that use templated values
            rendered = {k: _render(env, v, dict(context, **values)) for k, v in values.items()}
            if rendered == values:
                break
            values = rendered
        for name in ("inventory_hostname", "inventory_dir"):
            values.pop(name)
        result[host] = values
    return result
