# Filters for the run script's arguments, the fleet's cluster layout and the files rendered from them.
# Values are validated by the configuration check first; these filters refuse what would be pasted
# unsafely anyway (an array name that is not a bash name, a switch given a string, a hostfile address
# that is not an IP).
from __future__ import annotations
# pylint: disable=bad-string-format-type  # pylint infers None where each %d follows a test that it is a number

import os
import re
import shlex

from ansible.errors import AnsibleFilterError
from ansible_collections.mtslime.posttrain.plugins.module_utils.job import names as run_names
from ansible_collections.mtslime.posttrain.plugins.module_utils.logs import ansi
from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import size
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.fleet import paths, topology
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory import defaults
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.imports import module_utils_closure
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.training import args as ta
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.schema import CONTROL_RE, as_int

BASH_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _tokens(flags):
    try:
        return ta.group_tokens(flags)
    except ValueError as error:
        raise AnsibleFilterError(str(error)) from error


def slime_arg_arrays(groups, overrides=None, model_args=None):
    """[{name, tokens}] for each array of the run script, MODEL_ARGS first when given."""
    merged, _located = ta.apply_overrides(groups, overrides)
    if model_args is not None:
        merged = dict(merged, MODEL_ARGS=dict(model_args))
    for name in merged:
        if not BASH_NAME.fullmatch(str(name)):
            raise AnsibleFilterError("slime_train_args: %r is not a bash array name ([A-Za-z_][A-Za-z0-9_]*)" % name)
    return [{"name": name, "tokens": _tokens(merged[name])} for name in ta.ordered_groups(merged)]


def slime_argv(groups, cluster_args, model_args, overrides=None):
    """train.py's argv, in the guide's order (cluster args, MODEL_ARGS, then the arrays)."""
    try:
        return ta.argv(cluster_args, model_args, groups, overrides)
    except ValueError as error:
        raise AnsibleFilterError(str(error)) from error


def slime_effective_args(groups, overrides=None):
    """{flag: value} that train.py receives from the arrays (MODEL_ARGS aside)."""
    merged, _located = ta.apply_overrides(groups, overrides)
    return ta.effective_args(merged)


def slime_job_files(work_dir, log_dir, model_name):
    """The run's file names (module_utils/job/names.py) and the log's ANSI filter, for the plays and templates."""
    for name, value in (("work_dir", work_dir), ("log_dir", log_dir), ("model_name", model_name)):
        if not isinstance(value, str) or not value:
            raise AnsibleFilterError("slime_job_files: %s must be a non-empty string, not %r" % (name, value))
    return {
        "log_file": run_names.guide_log(log_dir, model_name),
        "log_stem": model_name,
        "attempt_log_prefix": run_names.attempt_log_prefix(log_dir, model_name),
        "attempt_log_suffix": run_names.LOG_SUFFIX,
        "manifest_dir": run_names.manifest_dir(work_dir),
        "converged_record": run_names.converged_record(work_dir),
        "ansi_sed": ansi.SED_EXPRESSION,
    }


def slime_flag_tokens(flags):
    """argv tokens of a {flag: value} mapping."""
    return _tokens(flags)


def slime_shell_lines(tokens):
    """Group argv tokens into shell-quoted lines: each flag with its values."""
    lines = []
    for token in tokens:
        quoted = shlex.quote(str(token))
        if str(token).startswith("--") or not lines:
            lines.append(quoted)
        else:
            lines[-1] += " " + quoted
    return lines


def slime_shell_comment(value):
    """A value for a shell comment line: quoted, and with control characters shown as escapes, so that
    a newline can never end the comment and start a command."""
    text = shlex.quote(str(value))
    return CONTROL_RE.sub(lambda m: "\\x%02x" % ord(m.group(0)), text)


def slime_host_path(path, volumes):
    """The node's path behind a container path, through bind mounts `host:container[:mode]`.
    The longest matching mount wins; a path outside every mount is returned unchanged."""
    return paths.host_path(path, volumes)


def _node_value(hostvars, node, name):
    try:
        return defaults.node_value(hostvars, node, name)
    except ValueError as error:
        raise AnsibleFilterError(str(error)) from error


def slime_topology(hostvars, nodes, groups=None):
    """{cluster name: {name, head, workers, nodes, size, gpus, addresses}} for the given nodes.

    A node's cluster is its `slime_cluster` variable (set per host, or per group in the
    group's vars); a node without one is a single-node cluster named after itself. The
    head is the first node, in the order of the group named like the cluster when there
    is one, else in inventory order."""
    gpus = {}
    for name in nodes:
        count = _node_value(hostvars, name, "slime_gpus_per_node")
        if as_int(count) is None:
            raise AnsibleFilterError("slime_gpus_per_node of %s is %r; set it to the node's GPU count" % (name, count))
        gpus[name] = int(count)
    return topology.clusters(hostvars, nodes, groups, gpus)


def slime_storages(hostvars, nodes):
    """{storage name: {name, leader, nodes}}: nodes that share /data name the same
    `slime_storage`; a node without one has storage of its own. The leader (first
    node) downloads, extracts, preprocesses and converts; the others only check."""
    return topology.storages(hostvars, nodes)


def slime_hostfile_lines(cluster):
    """The hostfile's lines (guide §4.1): `<ip> slots=<gpus>` for each node, head first."""
    lines = []
    for node in cluster["nodes"]:
        address = cluster["addresses"].get(node)
        if not address or not topology.is_ip(address):
            raise AnsibleFilterError(
                "cluster %s: node %s has no usable IP address (%r) for the hostfile; set slime_node_ip in its "
                "host_vars (or ansible_host to an IP), or include it in the run so its facts are gathered"
                % (cluster["name"], node, address))
        slots = as_int(cluster["gpus"].get(node))
        if slots is None or slots < 1:
            raise AnsibleFilterError("cluster %s: node %s has slime_gpus_per_node %r" % (
                cluster["name"], node, cluster["gpus"].get(node)))
        lines.append("%s slots=%d" % (address, slots))
    return lines


def slime_writer(hostvars, storage, name, value):
    """The node that writes `value` (a path held in variable `name`) on a storage: the
    first of the storage's nodes whose `name` is `value`. The others only check it."""
    for node in storage["nodes"]:
        if _node_value(hostvars, node, name) == value:
            return node
    return storage["leader"]


def slime_collect(hostvars, nodes, name, default=None):
    """{node: that node's variable `name`} (default when it has none)."""
    return {node: hostvars[node].get(name, default) for node in nodes}


MODULE_UTILS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils")
MODULE_UTILS_FILE = re.compile(r"(?:[a-z_][a-z0-9_]*/)*[a-z_][a-z0-9_]*\.py")


def slime_module_utils_copies(names, directory, mode="0640"):
    """[{path, content, mode}]: copies of the collection's module_utils files `names` (paths under module_utils/,
    such as job/plan.py) and of every module_utils file they import (imports.module_utils_closure), under
    `directory` in the same layout, for the run directory's .mtslime/ (the run script runs the job plan from
    there). The files of `names` come first, in order."""
    names = [str(name) for name in names or []]
    for name in names:
        if not MODULE_UTILS_FILE.fullmatch(name):
            raise AnsibleFilterError("slime_module_utils_copies: %r is not a module_utils file name" % (name,))
    try:
        closure = module_utils_closure(names)
    except (OSError, SyntaxError, ValueError) as exc:
        raise AnsibleFilterError("slime_module_utils_copies: %s" % exc) from exc
    copies = []
    for name in closure:
        try:
            with open(os.path.join(MODULE_UTILS, name), encoding="utf-8") as handle:
                content = handle.read()
        except OSError as exc:
            raise AnsibleFilterError("slime_module_utils_copies: %s: %s" % (name, exc.strerror or exc)) from exc
        copies.append({"path": "%s/%s" % (str(directory).rstrip("/"), name), "content": content, "mode": mode})
    return copies


def slime_checkpoint_size(model_args, train_args=None, override_gib=None, kind="training"):
    """{bytes, gib, size, parameters, bytes_per_parameter, basis} of one checkpoint: `override_gib` when set
    (preflight_checkpoint_gib), else estimated from MODEL_ARGS and the run's flags (module_utils/checkpoint/size.py)."""
    if override_gib is not None and override_gib != "":
        gib = as_int(override_gib)
        if gib is None or gib < 0:
            raise AnsibleFilterError("preflight_checkpoint_gib is %r: set it to a whole number of GiB, or to null to "
                                     "estimate the size from slime_model_args" % (override_gib,))
        return {"bytes": gib * size.GIB, "gib": gib, "size": "%d GiB" % gib, "parameters": None,
                "bytes_per_parameter": None, "basis": "preflight_checkpoint_gib"}
    try:
        return size.estimate(model_args, train_args=train_args, kind=kind)
    except ValueError as error:
        raise AnsibleFilterError("slime_checkpoint_size: %s" % error) from error


class FilterModule:
    def filters(self):
        return {
            "slime_arg_arrays": slime_arg_arrays,
            "slime_argv": slime_argv,
            "slime_effective_args": slime_effective_args,
            "slime_job_files": slime_job_files,
            "slime_flag_tokens": slime_flag_tokens,
            "slime_shell_lines": slime_shell_lines,
            "slime_shell_comment": slime_shell_comment,
            "slime_host_path": slime_host_path,
            "slime_checkpoint_size": slime_checkpoint_size,
            "slime_topology": slime_topology,
            "slime_storages": slime_storages,
            "slime_hostfile_lines": slime_hostfile_lines,
            "slime_collect": slime_collect,
            "slime_writer": slime_writer,
            "slime_module_utils_copies": slime_module_utils_copies,
        }
