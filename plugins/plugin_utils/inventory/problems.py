# One problem of the inventory: the variable, the hosts (and where their value comes from), the value,
# the rule it breaks and the fix; identical problems of many hosts become one message.
from __future__ import annotations

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.var_origin import short


class Problem:
    def __init__(self, variable, rule, fix, hosts=(), value=None, clusters=(), where=None, show_value=True):
        self.variable = variable
        self.rule = rule
        self.fix = fix
        self.hosts = list(hosts)
        self.value = value
        self.clusters = set(clusters)
        self.where = where  # host -> "from group_vars/all (inventory/group_vars/all/train.yml:9)"
        self.show_value = show_value

    def key(self):
        return (self.variable, short(self.value, 400) if self.show_value else None, self.rule, self.fix)

    def merge(self, other):
        for host in other.hosts:
            if host not in self.hosts:
                self.hosts.append(host)
        self.clusters |= other.clusters
        if other.where:
            self.where = dict(self.where or {}, **other.where)

    def text(self):
        parts = [self.variable]
        if self.show_value:
            parts.append(" = %s" % short(self.value, 160))
        located = self._located()
        if located:
            parts.append(" (%s)" % located)
        parts.append(": %s." % self.rule.rstrip("."))
        if self.fix:
            parts.append(" Fix: %s" % self.fix.rstrip(".") + ".")
        return "".join(parts)

    def _located(self):
        if not self.hosts:
            return ""
        wheres = {self.where.get(h) for h in self.hosts} if self.where else {None}
        hosts = hosts_text(self.hosts)
        if len(wheres) == 1:
            where = wheres.pop()
            return "%s%s" % (hosts, ", " + where if where else "")
        return "; ".join("%s, %s" % (h, self.where.get(h)) for h in self.hosts[:6]) + (
            "; ..." if len(self.hosts) > 6 else "")


def hosts_text(hosts):
    if len(hosts) == 1:
        return "host %s" % hosts[0]
    if len(hosts) <= 6:
        return "hosts %s" % ", ".join(hosts)
    return "hosts %s, ... (%d in all)" % (", ".join(hosts[:5]), len(hosts))


def merged(problems):
    """The problems with identical ones (same variable, value, rule and fix) of several hosts joined."""
    result = []
    index = {}
    for problem in problems:
        key = problem.key()
        if key in index:
            index[key].merge(problem)
        else:
            index[key] = problem
            result.append(problem)
    return result


def numbered(texts):
    return "\n".join("(%d) %s" % (i, text) for i, text in enumerate(texts, 1))
