# The words of mtslime.posttrain.ray_cluster, shared by the module (one probe, or its own
# wait) and its action plugin (the wait that prints progress at least every 30 s): the
# progress line and the message when the wait runs out, naming what is missing.
from __future__ import annotations


def _count(value):
    return "%d" % value if float(value).is_integer() else "%g" % value


def progress_line(result, expected_nodes, expected_gpus):
    if not result["up"]:
        parts = []
        if not result["gcs_ok"]:
            parts.append("GCS: %s" % result["errors"].get("gcs", "not answering"))
        if not result["dashboard_ok"]:
            parts.append("dashboard: %s" % result["errors"].get("dashboard", "not answering"))
        return "Ray is not up (%s)" % "; ".join(parts)
    alive = [node for node in result["nodes"] if node["alive"]]
    if expected_nodes:
        nodes = "%d/%d nodes" % (len(expected_nodes) - len(result["missing_nodes"]), len(expected_nodes))
    else:
        nodes = "%d node%s" % (len(alive), "" if len(alive) == 1 else "s")
    if expected_gpus is not None:
        gpus = "%s/%d GPUs" % (_count(result["gpus"]), expected_gpus)
    else:
        gpus = "%s GPUs" % _count(result["gpus"])
    text = "%s, %s registered" % (nodes, gpus)
    if result["ready"]:
        return text + " (Ray %s)" % result["ray_version"]
    waits = []
    if result["missing_nodes"]:
        waits.append("waiting for %s" % ", ".join(result["missing_nodes"]))
    if result["missing_gpus"]:
        waits.append("%d GPU%s missing" % (result["missing_gpus"], "" if result["missing_gpus"] == 1 else "s"))
    return text + "; " + "; ".join(waits)


def failure_message(result, params, dashboard_url, gcs_port):
    """Why the wait for a complete cluster ran out: Ray not up, or which nodes / how many GPUs are missing."""
    if not result["up"]:
        msg = "ray_cluster: Ray did not answer within %ds at gcs_address %s and dashboard_url %s: %s." % (
            params["timeout"],
            params["gcs_address"],
            dashboard_url,
            result["progress"],
        )
    else:
        missing = []
        if result["missing_nodes"]:
            missing.append("nodes not registered: %s" % ", ".join(result["missing_nodes"]))
        if result["missing_gpus"]:
            missing.append(
                "%d of expected_gpus %d GPUs missing (%s registered)"
                % (result["missing_gpus"], params["expected_gpus"], _count(result["gpus"]))
            )
        head = result["head"]["ip"]
        msg = (
            "ray_cluster: after %ds the cluster at %s is incomplete: %s. Start Ray on the missing nodes with "
            "`ray start --address=%s:%d` and check that Ray sees their GPUs (`ray status --address=%s:%d`)."
            % (params["timeout"], dashboard_url, "; ".join(missing), head, gcs_port, head, gcs_port)
        )
    if result["hints"]:
        msg += " Hint: " + " ".join(result["hints"])
    return msg
