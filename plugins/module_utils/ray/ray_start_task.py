# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""The ray_start module's work (plugins/modules/ray_start.py holds its documentation): main(module) runs it
for an AnsibleModule made with module_kwargs(). The supervisor runs the same function with the arguments the
role gave the module (module_utils/supervise)."""
from __future__ import annotations

import datetime
import time

from ansible_collections.mtslime.posttrain.plugins.module_utils.job.rules import is_active
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.api import (
    RayApiError,
    RayClient,
    normalize_url,
    parse_hostport,
    probe_port,
    url_port,
)
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.common import ray_argument_spec
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.node_probe import probe_node
from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.start_rules import (
    KEEP,
    REFUSE,
    decide,
    message,
)

# How long a head whose GCS answers is given for its dashboard to answer too (under the 30 s progress rule).
DASHBOARD_GRACE_SECONDS = 25


def probe_head(client, gcs_host, gcs_port, request_timeout):
    """The head as its own node sees it: up on both ports, its head node, the nodes and the active jobs."""
    found = {"up": False, "head_node": None, "nodes": [], "active_jobs": [], "ray_version": None}
    gcs = probe_port(gcs_host, gcs_port, timeout=request_timeout)
    if not gcs["open"] or gcs["protocol"] == "http":
        return found
    try:
        found["ray_version"] = client.version().get("ray_version")
        if not client.gcs_healthz():
            return found
        found["nodes"] = client.nodes()
        found["active_jobs"] = [
            job.get("submission_id") or job.get("job_id") for job in client.list_jobs() if is_active(job)
        ]
    except RayApiError:
        return found
    found["up"] = True
    found["head_node"] = next((n for n in found["nodes"] if n.get("is_head") and n.get("alive")), None) or {}
    return found


def is_ready(nodes, expected_nodes, expected_gpus):
    alive = [n for n in nodes if n.get("alive")]
    ips = set(n.get("ip") for n in alive)
    gpus = sum(float((n.get("resources") or {}).get("GPU") or 0) for n in alive)
    return all(ip in ips for ip in expected_nodes) and (expected_gpus is None or gpus >= expected_gpus)


def run_commands(module, commands):
    runs = []
    for cmd in commands:
        rc, out, err = module.run_command(cmd)
        runs.append({"cmd": cmd, "rc": rc, "stdout": out, "stderr": err})
        if rc != 0:
            break
    return runs


def module_kwargs():
    spec = dict(
        role=dict(type="str", choices=["head", "worker"], required=True),
        gcs_address=dict(type="str", required=True),
        node_ip=dict(type="str", required=True),
        num_gpus=dict(type="int", required=True),
        num_cpus=dict(type="int", required=True),
        dashboard_host=dict(type="str", default="127.0.0.1"),
        extra_args=dict(type="list", elements="str", default=[]),
        restart=dict(type="str", choices=["when_idle", "never", "force"], default="when_idle"),
        expected_nodes=dict(type="list", elements="str", default=[]),
        expected_gpus=dict(type="int"),
        cluster_nodes=dict(type="list", elements="dict", default=[]),
        cluster_active_jobs=dict(type="list", elements="str", default=[]),
    )
    spec.update(ray_argument_spec(request_timeout=5))
    return dict(argument_spec=spec, supports_check_mode=True)


def main(module):
    params = module.params
    problems = []
    try:
        gcs_host, gcs_port = parse_hostport(params["gcs_address"])
    except ValueError as exc:
        problems.append("gcs_address: %s" % exc)
    try:
        dashboard_url = normalize_url(params["dashboard_url"])
    except ValueError as exc:
        problems.append("dashboard_url: %s" % exc)
    if params["num_gpus"] < 0 or params["num_cpus"] < 1:
        problems.append(
            "num_gpus must be >= 0 and num_cpus >= 1 (got %d and %d)" % (params["num_gpus"], params["num_cpus"])
        )
    if problems:
        module.fail_json(msg="ray_start: " + "; ".join(problems))
    dashboard_port = url_port(dashboard_url)
    want = dict(
        role=params["role"], gcs_address=params["gcs_address"], gcs_port=gcs_port, dashboard_port=dashboard_port,
        dashboard_host=params["dashboard_host"], node_ip=params["node_ip"], num_gpus=params["num_gpus"],
        num_cpus=params["num_cpus"], extra_args=params["extra_args"], restart=params["restart"],
    )

    probe = probe_node([gcs_port, dashboard_port] if params["role"] == "head" else [])
    head = {"up": False, "head_node": None, "nodes": [], "active_jobs": [], "ray_version": None}
    if params["role"] == "head":
        client = RayClient(dashboard_url, timeout=params["request_timeout"], use_proxy=params["use_proxy"])
        head = probe_head(client, gcs_host, gcs_port, params["request_timeout"])
        # A live GCS whose dashboard is slow to answer (starting, or a loaded node): ask again for a while
        # before the rules call it a head that cannot list its jobs.
        deadline = time.monotonic() + DASHBOARD_GRACE_SECONDS
        while (not head["up"] and probe.get("recorded_answers") and probe.get("recorded_address") == want["gcs_address"]
               and time.monotonic() < deadline):
            time.sleep(3)
            head = probe_head(client, gcs_host, gcs_port, params["request_timeout"])
        probe.update(up=head["up"], head_node=head["head_node"], active_jobs=head["active_jobs"])
    else:
        probe["active_jobs"] = list(params["cluster_active_jobs"])
        probe["registered"] = next((n for n in params["cluster_nodes"] if n.get("ip") == params["node_ip"]
                                    and n.get("alive")), None) or next(
            (n for n in params["cluster_nodes"] if n.get("ip") == params["node_ip"]), None)

    decision = decide(probe, want)
    action = decision["action"]
    fresh = action not in (KEEP, REFUSE)
    result = dict(
        changed=fresh,
        action=action,
        reason=decision["reason"],
        fix=decision["fix"],
        cmd=decision["commands"][-1] if decision["commands"] else [],
        rc=0,
        stdout="",
        stderr="",
        commands=[{"cmd": c} for c in decision["commands"]],
        probe=probe,
        up=head["up"],
        ready=(action == KEEP and params["role"] == "head"
               and is_ready(head["nodes"], params["expected_nodes"], params["expected_gpus"])),
        nodes=[] if fresh else head["nodes"],
        active_jobs=[] if fresh else head["active_jobs"],
        ray_version=head["ray_version"] or "",
        actions=[],
    )
    if action == REFUSE:
        module.fail_json(msg="ray_start: " + message(decision), **result)
    if not fresh:
        result["actions"] = ["left Ray alone: %s" % decision["reason"]]
        module.exit_json(**result)

    before = "Ray: %s" % ("%d processes, cluster %s" % (probe["processes"], probe["recorded_address"] or "?")
                          if probe["processes"] else "not running")
    verb = {"start": "start the head", "join": "join %s" % params["gcs_address"]}.get(action, "restart Ray")
    result["diff"] = {"before": before + "\n", "after": "Ray: %s (%s)\n" % (params["role"], " ".join(result["cmd"]))}
    if module.check_mode:
        result["actions"] = ["would %s: %s" % (verb, decision["reason"])] + [
            "would run: %s" % " ".join(c) for c in decision["commands"]]
        module.exit_json(**result)

    started = datetime.datetime.now()
    runs = run_commands(module, decision["commands"])
    ended = datetime.datetime.now()
    last = runs[-1]
    result.update(cmd=last["cmd"], rc=last["rc"], stdout=last["stdout"], stderr=last["stderr"], commands=runs,
                  start=str(started), end=str(ended), delta=str(ended - started))
    result["actions"] = ["%s: %s" % (verb, decision["reason"])] + ["ran: %s (rc %d)" % (" ".join(r["cmd"]), r["rc"])
                                                                   for r in runs]
    if last["rc"] != 0:
        tail = (last["stderr"] or last["stdout"] or "").strip().splitlines()[-5:]
        module.fail_json(msg="ray_start: `%s` failed with rc %d%s: %s" % (
            " ".join(last["cmd"]), last["rc"], " (after `ray stop`)" if len(runs) > 1 else "",
            " / ".join(tail) or "no output"), **result)
    module.exit_json(**result)
