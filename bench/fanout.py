#!/usr/bin/env python3
"""Fan-out benchmark (a script, not a test): one artifact from a seed node to N node containers.

Every node's outgoing link is shaped with tc (tbf, --rate, default 20mbit), the seed's too. For each N it
measures, in one run:
  - one copy: seed -> one node;
  - fan-out: the plan of module_utils/fanout_plan.py (one pipelined chain: each node pulls piece by piece from
    the previous one while that one still receives);
  - naive: every node pulls from the seed (the origin) at once, as N nodes downloading from one hub or mirror.
and prints the times and the ratios to one copy. Needs Docker and the node-base test image (tests/images/build).
Run it under the Docker lock:
  flock /tmp/mtslime-docker.lock bench/fanout.py --nodes 1,2,4 --megabytes 48 --rate 20mbit
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
sys.path.insert(0, os.path.join(REPO, "collections"))

from ansible_collections.mtslime.posttrain.plugins.module_utils import fanout_agent as fa  # noqa: E402
from ansible_collections.mtslime.posttrain.plugins.module_utils import fanout_plan as fp  # noqa: E402
from fanout_bed import Bed, make_artifact  # noqa: E402

PATH = "/data/models/artifact"


def spread(bed, seed, nodes, manifest, naive):
    storages = [{"name": n, "node": n, "address": bed.ip(n)} for n in [seed] + nodes]
    plan = fp.plan(storages, holders=[seed])
    configs = bed.configs(plan, manifest, PATH, sources={seed: "/data/source"}, idle_timeout=20,
                          stall_timeout=60)
    if naive:
        for name in nodes:
            configs[name]["upstreams"] = [{"name": seed, "url": "http://%s:8765" % bed.ip(seed)}]
            configs[name]["children"] = []
        configs[seed]["children"] = list(nodes)
    for name in nodes:
        bed.clear(name, PATH)
    start = time.time()
    results = bed.finish(bed.start(configs), timeout=3600)
    # the time until the last node holds a verified copy (servers may idle a little longer)
    elapsed = max(results[n][1]["elapsed"] for n in nodes if results[n][1]) if all(
        results[n][0] == 0 for n in nodes) else None
    wall = time.time() - start
    failed = {n: r for n, r in results.items() if r[0] != 0}
    if failed:
        raise SystemExit("bench: agents failed: %s" % json.dumps({n: (r[1], r[2][-500:]) for n, r in failed.items()}))
    return elapsed, wall


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="1,2,4", help="comma-separated N values (default 1,2,4)")
    parser.add_argument("--megabytes", type=int, default=48, help="artifact size (default 48)")
    parser.add_argument("--rate", default="20mbit", help="tc rate of every node's link (default 20mbit)")
    parser.add_argument("--piece-mib", type=int, default=4, help="piece size in MiB (default 4)")
    parser.add_argument("--no-naive", action="store_true", help="skip the every-node-from-the-origin runs")
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    counts = sorted({int(n) for n in args.nodes.split(",")})
    with tempfile.TemporaryDirectory(prefix="mtslime-fanout-bench-") as root:
        bed = Bed("mtslime-fanout-bench", "172.31.246", root, 1 + max(counts)).up()
        try:
            seed, pool = bed.names[0], bed.names[1:]
            src = make_artifact(os.path.join(bed.data(seed), "source"), args.megabytes)
            manifest = fa.build_manifest(src, args.piece_mib << 20)
            for name in bed.names:
                bed.limit(name, args.rate)
            print("artifact %.1f MB in %d pieces; every link %s; 2-core machine" % (
                manifest["total"] / 1e6, len(manifest["pieces"]), args.rate), flush=True)
            one, one_wall = spread(bed, seed, pool[:1], manifest, naive=False)
            print("one copy seed -> 1 node: %.1f s (%.1f MB/s; wall %.1f s with docker exec)" % (
                one, manifest["total"] / 1e6 / one, one_wall), flush=True)
            rows = []
            for count in counts:
                fan, fan_wall = spread(bed, seed, pool[:count], manifest, naive=False)
                naive, naive_wall = spread(bed, seed, pool[:count], manifest, naive=True) if (
                    count > 1 and not args.no_naive) else (one if count == 1 else float("nan"), one_wall)
                rows.append({"n": count, "fanout_s": round(fan, 1), "fanout_ratio": round(fan / one, 2),
                             "fanout_wall_s": round(fan_wall, 1), "naive_s": round(naive, 1),
                             "naive_ratio": round(naive / one, 2), "naive_wall_s": round(naive_wall, 1)})
                print("N=%d  fan-out %.1f s (%.2f x one copy; wall %.1f s)   every node from the origin %.1f s "
                      "(%.2f x; wall %.1f s)" % (count, fan, fan / one, fan_wall, naive, naive / one, naive_wall),
                      flush=True)
            if args.json:
                with open(args.json, "w", encoding="utf-8") as handle:
                    json.dump({"megabytes": args.megabytes, "rate": args.rate, "one_copy_s": round(one, 1),
                               "rows": rows}, handle, indent=1)
        finally:
            bed.down()


if __name__ == "__main__":
    main()
