"""What a phase of bench/fanout.py costs in CPU: the host's busy share (all of the machine, other work included) and
the CPU seconds charged to the node containers (their processes, and the kernel's network work done on their
behalf: tc, the bridge, TCP), from the containers' cgroups (v1 cpuacct or v2 cpu.stat)."""
from __future__ import annotations

import os
import subprocess


def _host():
    with open("/proc/stat", encoding="ascii") as handle:
        values = [int(v) for v in handle.readline().split()[1:]]
    return sum(values), values[3] + values[4]  # total, idle + iowait


def _cgroup_seconds(cid):
    for path, scale in (("/sys/fs/cgroup/cpuacct/docker/%s/cpuacct.usage" % cid, 1e9),
                        ("/sys/fs/cgroup/cpu,cpuacct/docker/%s/cpuacct.usage" % cid, 1e9),
                        ("/sys/fs/cgroup/system.slice/docker-%s.scope/cpu.stat" % cid, 1e6),
                        ("/sys/fs/cgroup/docker/%s/cpu.stat" % cid, 1e6)):
        if os.path.exists(path):
            with open(path, encoding="ascii") as handle:
                text = handle.read()
            if path.endswith("cpu.stat"):
                text = dict(line.split() for line in text.splitlines())["usage_usec"]
            return int(text) / scale
    return None


class Meter:
    """Usage: meter = Meter(names); ...phase...; meter.read() -> {host_busy_pct, containers_cpu_s}."""

    def __init__(self, names):
        self.ids = [subprocess.run(["docker", "inspect", "-f", "{{.Id}}", n], check=True, text=True,
                                   capture_output=True).stdout.strip() for n in names]
        self.start()

    def _containers(self):
        values = [_cgroup_seconds(cid) for cid in self.ids]
        return None if None in values else sum(values)

    def start(self):
        self.host0, self.cont0 = _host(), self._containers()

    def read(self):
        (total, idle), cont = _host(), self._containers()
        busy = (total - self.host0[0]) - (idle - self.host0[1])
        return {"host_busy_pct": round(100.0 * busy / max(1, total - self.host0[0])),
                "containers_cpu_s": None if cont is None or self.cont0 is None else round(cont - self.cont0, 1)}
