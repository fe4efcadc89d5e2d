# The configuration check of a whole inventory, on the controller, before anything touches a node: every
# variable against its type (variables.py), then the rules between variables, nodes, clusters and
# storages, then each cluster's training configuration (training/config.py). Every problem at once.
from __future__ import annotations

import posixpath

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.fleet import topology
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.training import config as training_config
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory import defaults
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.variables import BY_NAME, VARS
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.fleet.paths import host_path, mount_of, norm, relation
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.problems import Problem, merged
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.schema import NAME_RE, NAME_RULE, Path, as_int
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.training.args import apply_overrides, effective_args
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.var_origin import short

PORTS = ("ray_gcs_port", "ray_dashboard_port", "convert_master_port")
# Path classes of the no-overlap rule. Artifacts are prepared once per storage and may be shared by
# clusters (equal, never nested); a cluster's own dirs belong to it alone.
ARTIFACTS = ("data", "hf", "converted")
OWNED = ("save",)
FLAG_CLASSES = {"hf-checkpoint": "hf", "ref-load": "converted", "save": "save"}
CLASS_NAMES = {"data": "data dir", "hf": "Hugging Face model dir", "converted": "converted checkpoint dir",
               "save": "save dir", "work": "work dir", "log": "log dir", "run": "run dir (logs, manifests, "
               "TensorBoard) of the container"}


class NoOrigins:
    def describe(self, host, name):
        return None

    def groups_setting(self, host, name):
        return []


class InventoryCheck:
    """values: {host: {variable: templated value}} (only the variables the host has);
    errors: {host: {variable: why it could not be templated}}; groups: the inventory's groups."""

    def __init__(self, hosts, values, errors=None, groups=None, origins=None):
        self.hosts = list(hosts)
        self.values = values
        self.errors = errors or {}
        self.groups = groups or {}
        self.origins = origins or NoOrigins()
        self.problems = []
        self.bad = {host: set() for host in self.hosts}  # variables that failed their type check

    # -- helpers ------------------------------------------------------------------------------------
    def value(self, host, name, default=None):
        return self.values.get(host, {}).get(name, default)

    def good(self, host, name, default=None):
        """The value when it passed its type check, else `default`."""
        if name in self.bad.get(host, ()):
            return default
        return self.value(host, name, default)

    def where(self, host, name):
        return {host: self.origins.describe(host, name)}

    def add(self, variable, rule, fix, hosts, value=None, clusters=None, show_value=True, origin_of=None, where=None):
        secret = BY_NAME.get(variable)
        show = show_value and not (secret is not None and secret.secret)
        wheres = {}
        for host in hosts:
            wheres.update({host: where} if where else self.where(host, origin_of or variable))
        self.problems.append(Problem(variable, rule, fix, hosts=hosts, value=value, show_value=show, where=wheres,
                                     clusters=clusters if clusters is not None else
                                     {self.cluster_of.get(h, h) for h in hosts}))

    # -- the check ----------------------------------------------------------------------------------
    def run(self):
        self.check_host_names()
        for host in self.hosts:
            self.check_types(host)
        self.layout()
        for host in self.hosts:
            self.check_host_rules(host)
        for cluster in self.clusters.values():
            self.check_cluster(cluster)
        self.check_membership()
        self.check_storages()
        for cluster in self.clusters.values():
            self.check_training(cluster)
        self.problems = merged(self.problems)
        return self.problems

    def check_host_names(self):
        self.cluster_of = {}
        for host in self.hosts:
            if not NAME_RE.fullmatch(host):
                self.add("inventory_hostname", "the host name %s; it becomes a directory of the review render "
                         "(render_dir/<host>) and names the node's cluster and storage" % NAME_RULE,
                         "rename the host in the inventory (keep its address in ansible_host)", [host], host,
                         where="its name in the inventory")

    def check_types(self, host):
        present = self.values.get(host, {})
        for name, why in self.errors.get(host, {}).items():
            self.bad[host].add(name)
            self.add(name, "could not be evaluated: %s" % why, "correct the template or the variables it uses",
                     [host], show_value=False)
        for var in VARS:
            if var.name in self.errors.get(host, {}):
                continue
            if var.name not in present:
                if var.required and var.scope != "fleet":
                    self.bad[host].add(var.name)
                    self.add(var.name, "is not set, and the collection has no default for it (%s)" % defaults.LABEL,
                             "set %s in the inventory" % var.name, [host], show_value=False)
                continue
            rule = var.check(present[var.name])
            if rule:
                self.bad[host].add(var.name)
                self.add(var.name, rule, var.type.fix(var.name), [host], present[var.name])

    def layout(self):
        """Clusters and storages from the values that passed their checks."""
        nodes = {h: {k: self.good(h, k) for k in ("slime_cluster", "slime_storage", "slime_node_ip",
                                                  "ansible_host", "ansible_default_ipv4", "slime_gpus_per_node")}
                 for h in self.hosts}
        self.clusters = topology.clusters(nodes, self.hosts, self.groups)
        self.storages = topology.storages(nodes, self.hosts)
        self.cluster_of = {h: c["name"] for c in self.clusters.values() for h in c["nodes"]}
        for problem in self.problems:
            problem.clusters = {self.cluster_of.get(h, h) for h in problem.hosts}

    def check_host_rules(self, host):
        profiles = self.good(host, "slime_accelerator_profiles")
        accelerator = self.good(host, "slime_accelerator")
        if isinstance(profiles, dict) and accelerator is not None and accelerator not in profiles:
            self.add("slime_accelerator", "is not a vendor of slime_accelerator_profiles (%s)" % ", ".join(profiles),
                     "set slime_accelerator to one of %s, or add a profile for it" % ", ".join(profiles), [host],
                     accelerator)
        ports = {}
        for name in PORTS:
            port = as_int(self.good(host, name))
            if port is not None:
                ports.setdefault(port, []).append(name)
        for port, names in ports.items():
            if len(names) > 1:
                self.add(names[1], "is the same port as %s (%d); each needs its own port on a node" % (
                    " and ".join(names[:1] + names[2:]), port), "change one of them", [host], port)
        if self.good(host, "container_enabled", True) is True:
            self.check_mounts(host)

    def check_mounts(self, host):
        names = ("container_volumes", "container_extra_volumes", "container_run_volumes")
        if self.bad[host] & set(names):
            return  # the mounts themselves are reported
        volumes = []
        for name in names:
            volumes += list(self.good(host, name) or [])
        inside = sorted({str(v).split(":")[1] for v in volumes if ":" in str(v)})
        for var in VARS:
            if not getattr(var.type, "mount", False):
                continue
            path = self.good(host, var.name)
            if isinstance(path, str) and path and mount_of(path, volumes) is None:
                self.add(var.name, "is not under any of the container's mounts (%s): what is written there is lost "
                         "when the container is recreated, and the node cannot check it" % ", ".join(inside),
                         "put it under a mount, or add a mount for it to container_extra_volumes", [host], path)

    def check_cluster(self, cluster):
        """Values every node of a cluster must share: the head's value is the one the job uses."""
        head = cluster["head"]
        if len(cluster["nodes"]) < 2:
            return
        for var in VARS:
            if var.scope != "cluster":
                continue
            values = {n: self.value(n, var.name) for n in cluster["nodes"]}
            differ = [n for n in cluster["nodes"][1:] if _plain(values[n]) != _plain(values[head])]
            if not differ:
                continue
            shown = "; ".join("%s%s %s" % (n, " (head)" if n == head else "", "<hidden>" if var.secret else
                                           short(values[n], 60)) for n in [head] + differ)
            if var.name in ("slime_accelerator", "slime_gpus_per_node"):
                rule = ("a training cluster must be homogeneous: one Ray cluster and one slime job need the same "
                        "accelerator vendor and GPU count on every node (%s)" % shown)
                fix = "put nodes of another vendor or size in a cluster of their own (slime_cluster)"
            else:
                rule = ("differs between the nodes of cluster %s (%s); the job and Ray use the head's value, so a "
                        "worker's own value would be ignored without a word" % (cluster["name"], shown))
                fix = "set it once for the cluster (group_vars/<cluster group>.yml), not per node"
            self.add(var.name, rule, fix, differ, values[differ[0]], clusters={cluster["name"]},
                     show_value=not var.secret)

    def check_membership(self):
        """A node belongs to exactly one cluster: no two groups of a node naming different clusters, and no node
        in the group named like a cluster it is not in."""
        for host in self.hosts:
            settings = list(self.origins.groups_setting(host, "slime_cluster"))
            names = {str(v) for _g, v in settings}
            if len(names) > 1:
                self.add("slime_cluster", "the node is in groups that name different clusters (%s); Ansible would "
                         "silently keep one" % ", ".join("%s: %s" % (g, v) for g, v in settings),
                         "put the node in one cluster's group only", [host], self.value(host, "slime_cluster"),
                         clusters={self.cluster_of.get(host, host)} | (names & set(self.clusters)))
            cluster = self.cluster_of.get(host)
            for name, members in self.groups.items():
                if name in self.clusters and name != cluster and host in members:
                    self.add("slime_cluster", "the node is listed in group %s, which names cluster %s, but its own "
                             "cluster is %s: it would be moved out of %s without a word" % (name, name, cluster, name),
                             "remove the node from group %s, or set its slime_cluster to %s" % (name, name), [host],
                             self.value(host, "slime_cluster"), clusters={cluster, name})

    # -- paths --------------------------------------------------------------------------------------
    def cluster_paths(self, cluster):
        """[(class, label, container path)] of a cluster, from its head's values after the overrides."""
        head = cluster["head"]
        result = []
        for var in VARS:
            if var.overlap and isinstance(self.good(head, var.name), str) and self.good(head, var.name):
                result.append((var.overlap, var.name, self.good(head, var.name)))
        args = self.effective_args(head)
        for flag, kind in FLAG_CLASSES.items():
            value = args.get(flag)
            if isinstance(value, str) and value and not Path().check(value):
                result.append((kind, self.flag_label(head, flag), value))
        return result

    def effective_args(self, host):
        groups = self.good(host, "slime_train_args") or {}
        overrides = self.good(host, "slime_train_args_overrides") or {}
        merged_groups, _located = apply_overrides(groups, overrides)
        return effective_args(merged_groups)

    def flag_label(self, host, flag):
        overrides = self.good(host, "slime_train_args_overrides") or {}
        if flag in {str(k).lstrip("-") for k in overrides}:
            return "slime_train_args_overrides['%s']" % flag
        _merged, located = apply_overrides(self.good(host, "slime_train_args") or {}, {})
        return "slime_train_args.%s['%s']" % (located.get(flag, "MISC_ARGS"), flag)

    def check_overlaps(self, cluster):
        head = cluster["head"]
        groups = {}  # (class, path) -> labels: a variable and the flag that repeats it are one directory
        given = {}
        for kind, label, path in self.cluster_paths(cluster):
            groups.setdefault((kind, norm(path)), []).append(label)
            given.setdefault((kind, norm(path)), path)
        order = ("save", "log", "work", "converted", "hf", "data")
        items = sorted(groups.items(), key=lambda item: order.index(item[0][0]))
        for i, ((kind_a, path_a), labels_a) in enumerate(items):
            for (kind_b, path_b), labels_b in items[i + 1:]:
                found = relation(path_a, path_b)
                if kind_a == kind_b or found is None or _log_in_work(kind_a, kind_b, found):
                    continue
                self.add(labels_a[0], "the %s %s the %s %s (%s)%s" % (
                    CLASS_NAMES[kind_a], RELATIONS[found], CLASS_NAMES[kind_b], path_b, ", ".join(labels_b),
                    _overlap_why(kind_a, kind_b)), "give each its own directory, side by side (for example "
                    "/data/models/..., /data/LLMs/..., /data/checkpoints/<experiment>)%s" % (
                        "; %s repeat%s it" % (", ".join(labels_a[1:]), "s" if len(labels_a) == 2 else "")
                        if len(labels_a) > 1 else ""), [head], given[(kind_a, path_a)], clusters={cluster["name"]},
                    origin_of=_base(labels_a[0]))

    def check_storages(self):
        for cluster in self.clusters.values():
            self.check_overlaps(cluster)
        for storage in self.storages.values():
            on_storage = [c for c in self.clusters.values() if self.storage_of(c["head"]) == storage["name"]]
            entries = []
            for cluster in on_storage:
                head = cluster["head"]
                volumes = self._volumes(head)
                for kind, label, path in self.cluster_paths(cluster):
                    if kind in ARTIFACTS + OWNED:
                        entries.append((cluster["name"], head, kind, label, path, host_path(path, volumes)))
                if self.good(head, "container_enabled", True) is True:
                    for volume in self.good(head, "container_run_volumes") or []:
                        side = str(volume).split(":", 1)[0]
                        entries.append((cluster["name"], head, "run", "container_run_volumes", volume, side))
            self.compare_on_storage(storage["name"], entries)

    def storage_of(self, host):
        return str(self.good(host, "slime_storage") or host)

    def _volumes(self, host):
        if self.good(host, "container_enabled", True) is not True:
            return []
        return list(self.good(host, "container_volumes") or []) + list(self.good(host, "container_extra_volumes") or [])

    def compare_on_storage(self, storage, entries):
        """entries: (cluster, head, class, label, container path, node path). One message per directory that
        several clusters use (shared artifacts of one class excepted), and per pair of nested ones."""
        by_path = {}
        for entry in entries:
            by_path.setdefault(norm(entry[5]), []).append(entry)
        for path, group in by_path.items():
            clusters = sorted({e[0] for e in group})
            kinds = {e[2] for e in group}
            if len(clusters) < 2 or len(kinds) == 1 and kinds <= set(ARTIFACTS):
                continue
            first = min(group, key=lambda e: (e[2] in ARTIFACTS, e[0]))
            if len(kinds) == 1:
                uses = "clusters %s all use it as their %s (%s)" % (", ".join(clusters), CLASS_NAMES[first[2]],
                                                                    ", ".join(sorted({e[3] for e in group})))
            else:
                uses = "it is " + ", ".join(sorted({"cluster %s's %s (%s)" % (e[0], CLASS_NAMES[e[2]], e[3])
                                                    for e in group}))
            self.add(first[3], "on storage %s, the node directory %s is shared: %s%s" % (
                storage, path, uses, _storage_why(*sorted(kinds)[:2] if len(kinds) > 1 else [first[2]] * 2)),
                _storage_fix(*(sorted(kinds) * 2)[:2]), sorted({e[1] for e in group}), first[4],
                clusters=set(clusters), origin_of=_base(first[3]))
        nested = {}  # (class a, node path a, class b, node path b) -> [(cluster a, head a, label a, cluster b, head b)]
        own = {}  # cluster -> its node paths (a nesting inside one cluster is reported by check_overlaps)
        for entry in entries:
            own.setdefault(entry[0], set()).add(norm(entry[5]))
        for path, inner in by_path.items():
            for ancestor in _ancestors(path):
                for outer in by_path.get(ancestor, ()):
                    for entry in inner:
                        if entry[0] == outer[0] or ancestor in own[entry[0]]:
                            continue
                        nested.setdefault((entry[2], path, outer[2], ancestor), []).append(
                            (entry[0], entry[1], entry[3], outer[0], outer[1]))
        for (kind_a, node_a, kind_b, node_b), pairs in nested.items():
            inner = sorted({p[0] for p in pairs})
            outer = sorted({p[3] for p in pairs})
            self.add(pairs[0][2], "on storage %s, the %s %s of cluster %s lies inside the %s %s of cluster %s%s" % (
                storage, CLASS_NAMES[kind_a], node_a, ", ".join(inner), CLASS_NAMES[kind_b], node_b, ", ".join(outer),
                _storage_why(kind_a, kind_b)), _storage_fix(kind_a, kind_b),
                sorted({p[1] for p in pairs} | {p[4] for p in pairs}), node_a, clusters=set(inner) | set(outer),
                origin_of=_base(pairs[0][2]))

    # -- training -----------------------------------------------------------------------------------
    def check_training(self, cluster):
        head = cluster["head"]
        needed = ("slime_train_args", "slime_model_args", "slime_actor_gpus_per_node", "slime_actor_num_nodes",
                  "slime_rollout_num_gpus")
        if any(self.good(head, name) is None for name in needed):
            return  # their own problems are reported
        gpus = {n: as_int(self.good(n, "slime_gpus_per_node")) for n in cluster["nodes"]}  # None: reported
        config = {
            "cluster": cluster["name"], "head": head, "nodes": gpus,
            "actor_num_nodes": self.good(head, "slime_actor_num_nodes"),
            "actor_gpus_per_node": self.good(head, "slime_actor_gpus_per_node"),
            "rollout_num_gpus": self.good(head, "slime_rollout_num_gpus"),
            "train_args": self.good(head, "slime_train_args"),
            "overrides": self.good(head, "slime_train_args_overrides") or {},
            "model_args": self.good(head, "slime_model_args"),
            "known_flags_extra": self.good(head, "slime_train_known_flags_extra") or [],
            "sglang_version": self.good(head, "slime_sglang_version"),
            "tp_above_query_groups": self.good(head, "slime_megatron_tp_above_query_groups", False),
        }
        for problem in training_config.check(config):
            name = problem.variable.split("[")[0].split(".")[0]
            problem.where = self.where(head, name)
            self.problems.append(problem)


RELATIONS = {"equal": "is the same directory as", "inside": "lies inside", "contains": "contains"}


def _ancestors(path):
    """The directories above a normalised path, nearest first: /a/b/c -> /a/b, /a, /."""
    result = []
    while path not in ("/", ""):
        path = posixpath.dirname(path)
        result.append(path)
    return result


def _base(label):
    """The variable of a label: slime_train_args.CKPT_ARGS['save'] -> slime_train_args."""
    return label.split("[")[0].split(".")[0]


def _log_in_work(kind_a, kind_b, found):
    """The guide keeps its logs inside the work dir (§4.1): allowed, the other way round is not."""
    return (kind_a, kind_b, found) in (("log", "work", "inside"), ("work", "log", "contains"))


def _plain(value):
    """A comparable copy of a value (tagged Ansible types become plain ones)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value) if isinstance(value, float) else int(value)
    return str(value)


def _overlap_why(a, b):
    kinds = {a, b}
    if "save" in kinds and "converted" in kinds:
        return ": training would write into the converted weights, and a resume could move them aside"
    if "save" in kinds:
        return ": training would write its checkpoints among the files there"
    if "hf" in kinds and "data" in kinds:
        return ": the data and the model would be prepared into one directory"
    return ": what one stage prepares or moves aside would hit the other's files"


def _storage_why(a, b):
    if a == b == "save":
        return ": the trainings would overwrite each other's checkpoints"
    if a == b == "run":
        return ": the clusters' containers would write their logs, manifests and TensorBoard files into each other's"
    return ": one cluster would write into what the other prepares or reads"


def _storage_fix(a, b):
    if "run" in (a, b):
        return ("give the clusters distinct container_name values (the run dir is /data/mtslime/runs/<container_name>) "
                "or distinct container_run_volumes")
    if "save" in (a, b):
        return ("give each cluster its own slime_save_dir, for example /data/checkpoints/{{ slime_experiment }} with a "
                "slime_experiment per cluster")
    return "keep each cluster's directories apart from the others' on the shared storage"


def check(hosts, values, errors=None, groups=None, origins=None):
    """[Problem] of the inventory (see InventoryCheck)."""
    return InventoryCheck(hosts, values, errors, groups, origins).run()
