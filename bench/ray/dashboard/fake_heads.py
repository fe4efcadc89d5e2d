"""Stand-in for N Ray heads, for the rerun benchmark only: one process serving, per
simulated node, a dashboard/Jobs API (tests/unit/fake_ray.py FakeRay, shaped from
recorded Ray 2.60 responses) and a GCS port (FakeGcs). A real Ray head costs ~650 MiB;
64 of them do not fit on a benchmark machine, and the benchmark measures Ansible.

It lives under bench/ray/dashboard/ so that its command line looks like Ray's dashboard
and the node preflight accepts the ports as held by Ray. Writes
{"nodes": [{"dashboard_port", "gcs_port"}]} to the file given."""
from __future__ import annotations

import json
import os
import signal
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "unit"))
sys.path.insert(0, os.path.join(REPO, "collections"))

from fake_ray import FakeGcs, FakeRay, node  # noqa: E402


def main():
    count, out = int(sys.argv[1]), sys.argv[2]
    servers = []
    for dummy in range(count):
        servers.append((FakeRay(nodes=[node("127.0.0.1", head=True)], start_after=0), FakeGcs()))
    with open(out + ".tmp", "w") as handle:
        json.dump({"nodes": [{"dashboard_port": int(ray.url.rsplit(":", 1)[1]), "gcs_port": gcs.port}
                             for ray, gcs in servers]}, handle)
    os.replace(out + ".tmp", out)
    signal.signal(signal.SIGTERM, lambda *dummy: sys.exit(0))
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
