#!/usr/bin/env python
"""Fan-out benchmark (a script, not a test): one artifact from a seed node to N node containers.

Every node's outgoing link is shaped with tc tbf (--rate, default 200mbit; the seed's too; --burst defaults to
10 ms of the rate, the minimum tc-tbf(8) asks for, and --latency to a 50 ms queue). For each N it measures, in
one run:
  - one copy: seed -> one node;
  - fan-out: the plan of module_utils/fanout/plan.py (one pipelined chain: each node pulls piece by piece from
    the previous one while that one still receives);
  - origin: every node pulls from the seed (the origin) at once, as N nodes downloading from one hub or mirror;
  - with --alternatives, rsync (bench/fanout_rsync.py: daemons on the same nodes and links) in a chain, a binary
    tree and a doubling schedule, and rsync's own one copy;
and prints the times, the ratios to one copy and what each phase cost in CPU. Needs Docker and the node-base test
image (tests/images/build); --alternatives also the host's apt (it layers Debian's rsync on node-base once).
Run it under the Docker lock:
  flock /tmp/mtslime-docker.lock bench/fanout.py --nodes 1,2,4,8 --megabytes 256 --rate 200mbit --alternatives
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
sys.path.insert(0, os.path.join(REPO, "collections"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ansible_collections.mtslime.posttrain.plugins.module_utils.fanout import agent as fa  # noqa: E402
from ansible_collections.mtslime.posttrain.plugins.module_utils.fanout import plan as fp  # noqa: E402
from fanout_bed import IMAGE, Bed, make_artifact  # noqa: E402
from fanout_cpu import Meter  # noqa: E402

PATH = "/data/models/artifact"
SOURCE = "/data/source"
SHAPES = ("chain", "tree", "doubling")


def spread(bed, seed, nodes, manifest, naive, streams):
    storages = [{"name": n, "node": n, "address": bed.ip(n)} for n in [seed] + nodes]
    plan = fp.plan(storages, holders=[seed])
    configs = bed.configs(plan, manifest, PATH, sources={seed: SOURCE}, idle_timeout=20, stall_timeout=60,
                          streams=streams)
    if naive:
        for name in nodes:
            configs[name]["upstreams"] = [{"name": seed, "url": "http://%s:8765" % bed.ip(seed)}]
            configs[name]["children"] = []
        configs[seed]["children"] = list(nodes)
    for name in nodes:
        bed.clear(name, PATH)
    meter = Meter(bed.names)
    start = time.time()
    results = bed.finish(bed.start(configs), timeout=3600)
    wall = time.time() - start
    cpu = meter.read()
    failed = {n: r for n, r in results.items() if r[0] != 0}
    if failed:
        raise SystemExit("bench: agents failed: %s" % json.dumps({n: (r[1], r[2][-500:]) for n, r in failed.items()}))
    # the time until the last node holds a verified copy, from its agent's start (servers may idle a little longer)
    return {"s": max(results[n][1]["elapsed"] for n in nodes), "wall_s": round(wall, 1), **cpu}


def rsync_spread(bed, seed, nodes, shape):
    import fanout_rsync

    meter = Meter(bed.names)
    try:
        last, each = fanout_rsync.spread(bed, seed, nodes, SOURCE, PATH, shape)
    except SystemExit as exc:  # keep the figures of the other phases
        print(exc, flush=True)
        return {"s": float("nan"), "error": str(exc)}
    return {"s": round(last, 2), "each_s": {n: round(t, 1) for n, t in each.items()}, **meter.read()}


def bits(rate):
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(k|m|g)?bit", rate.lower())
    if not match:
        raise SystemExit("bench: --rate %r: give it as tc does, e.g. 200mbit" % rate)
    return float(match.group(1)) * {None: 1, "k": 1e3, "m": 1e6, "g": 1e9}[match.group(2)]


def line(label, phase, one):
    cpu = ("; CPU: host %d%% busy, nodes %s s" % (phase["host_busy_pct"], phase["containers_cpu_s"])
           if "host_busy_pct" in phase else "")
    return "  %-24s %6.1f s  %5.2f x%s" % (label, phase["s"], phase["s"] / one, cpu)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="1,2,4,8", help="comma-separated N values (default 1,2,4,8)")
    parser.add_argument("--megabytes", type=int, default=256, help="artifact size in MiB (default 256)")
    parser.add_argument("--rate", default="200mbit", help="tc rate of every node's link (default 200mbit)")
    parser.add_argument("--burst", help="tbf burst (default: 10 ms of the rate, at least 32kbit)")
    parser.add_argument("--latency", default="50ms", help="tbf queue length in time (default 50ms)")
    parser.add_argument("--piece-mib", type=int, default=fa.PIECE_SIZE >> 20,
                        help="piece size in MiB (default %d, the agent's)" % (fa.PIECE_SIZE >> 20))
    parser.add_argument("--streams", type=int, default=2, help="requests in flight per puller (default 2, the "
                        "agent's)")
    parser.add_argument("--no-naive", action="store_true", help="skip the every-node-from-the-origin runs")
    parser.add_argument("--alternatives", action="store_true", help="also rsync: one copy, and N nodes in a chain, "
                        "a binary tree and a doubling schedule")
    parser.add_argument("--alternatives-at", help="the N values for the rsync runs (default: the largest N)")
    parser.add_argument("--json", help="also write the figures to this file (after every N)")
    args = parser.parse_args()
    counts = sorted({int(n) for n in args.nodes.split(",")})
    alt_counts = {int(n) for n in args.alternatives_at.split(",")} if args.alternatives_at else {counts[-1]}
    burst = args.burst or "%dkbit" % max(32, bits(args.rate) / 100 / 1e3)
    image = IMAGE
    if args.alternatives:
        import fanout_rsync

        image = fanout_rsync.image()
    with tempfile.TemporaryDirectory(prefix="mtslime-fanout-bench-") as root:
        bed = Bed("mtslime-fanout-bench", "172.31.246", root, 1 + max(counts), image=image).up()
        try:
            seed, pool = bed.names[0], bed.names[1:]
            src = make_artifact(os.path.join(bed.data(seed), SOURCE[len("/data/"):]), args.megabytes)
            manifest = fa.build_manifest(src, args.piece_mib << 20)
            for name in bed.names:
                bed.limit(name, args.rate, burst, args.latency)
            if args.alternatives:
                import fanout_rsync

                fanout_rsync.start_daemons(bed)
            info = {"date": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()), "machine": "%s, %d cores, %s" % (
                platform.machine(), os.cpu_count(), platform.release()), "megabytes": args.megabytes,
                "bytes": manifest["total"], "pieces": len(manifest["pieces"]), "piece_mib": args.piece_mib,
                "streams": args.streams, "rate": args.rate, "tbf": "burst %s latency %s" % (burst, args.latency)}
            print("artifact %.1f MB in %d pieces of %d MiB; every link tbf rate %s burst %s latency %s; %s" % (
                manifest["total"] / 1e6, len(manifest["pieces"]), args.piece_mib, args.rate, burst, args.latency,
                info["machine"]), flush=True)
            one = spread(bed, seed, pool[:1], manifest, False, args.streams)
            print("one copy seed -> 1 node: %.1f s (%.1f MB/s; wall %.1f s with docker exec); CPU: host %d%% busy, "
                  "nodes %s s" % (one["s"], manifest["total"] / 1e6 / one["s"], one["wall_s"], one["host_busy_pct"],
                                  one["containers_cpu_s"]), flush=True)
            info["one_copy"] = one
            if args.alternatives:
                info["rsync_one_copy"] = rsync_spread(bed, seed, pool[:1], "chain")
                print("rsync one copy: %.1f s" % info["rsync_one_copy"]["s"], flush=True)
            rows = []
            for count in counts:
                row = {"n": count}
                print("N=%d" % count, flush=True)
                row["fanout"] = spread(bed, seed, pool[:count], manifest, False, args.streams)
                print(line("fan-out", row["fanout"], one["s"]), flush=True)
                if count > 1 and not args.no_naive:
                    row["origin"] = spread(bed, seed, pool[:count], manifest, True, args.streams)
                    print(line("every node from origin", row["origin"], one["s"]), flush=True)
                if args.alternatives:
                    rone = info["rsync_one_copy"]["s"]
                    for shape in SHAPES if count > 1 and count in alt_counts else ():
                        row["rsync_" + shape] = rsync_spread(bed, seed, pool[:count], shape)
                        print(line("rsync %s" % shape, row["rsync_" + shape], one["s"]) + " (%.2f x rsync's one "
                              "copy)" % (row["rsync_" + shape]["s"] / rone), flush=True)
                for phase in row.values():
                    if isinstance(phase, dict):
                        phase["ratio"] = round(phase["s"] / one["s"], 2)
                rows.append(row)
                info["rows"] = rows
                if args.json:
                    with open(args.json, "w", encoding="utf-8") as handle:
                        json.dump(info, handle, indent=1)
        finally:
            bed.down()


if __name__ == "__main__":
    main()
