# What `ray start` has to do on one node, decided from what the node shows (the probe of
# node_probe.py) and what the inventory wants: start a head, join a worker to its
# head, leave Ray alone, restart it, or refuse (with why and the fix). Pure: no I/O, so
# every branch and message is unit-tested (tests/unit/ray/test_start_rules.py).
#
# The one hard rule: `ray stop` (with or without --force) never runs while a job runs on
# the cluster (job_rules.is_active), unless restart == "force" (the guide's own way).
from __future__ import annotations

START, JOIN, KEEP, RESTART, REFUSE = "start", "join", "keep", "restart", "refuse"
POLICIES = ("when_idle", "never", "force")


def start_argv(want):
    """The guide's `ray start` (§5.1) for this node, as a list."""
    common = [
        "--num-cpus", str(want["num_cpus"]),
        "--num-gpus", str(want["num_gpus"]),
        "--node-ip-address", want["node_ip"],
        "--disable-usage-stats",
    ]
    if want["role"] == "head":
        argv = ["ray", "start", "--head", "--port", str(want["gcs_port"]),
                "--dashboard-port", str(want["dashboard_port"]), "--dashboard-host", want["dashboard_host"]]
    else:
        argv = ["ray", "start", "--address", want["gcs_address"]]
    return argv + common + list(want.get("extra_args") or [])


def stop_argv(force):
    return ["ray", "stop"] + (["--force"] if force else [])


def _decision(action, reason, commands=(), fix=None):
    return {"action": action, "reason": reason, "fix": fix, "commands": [list(c) for c in commands]}


def _jobs_text(jobs):
    return ", ".join(jobs)


def _differences(node, want):
    """What differs between the head node Ray registered and the configuration, as text."""
    found = []
    resources = node.get("resources") or {}
    if node.get("ip") != want["node_ip"]:
        found.append("address %s (configured %s)" % (node.get("ip") or "unknown", want["node_ip"]))
    if int(resources.get("GPU") or 0) != int(want["num_gpus"]):
        found.append("%g GPUs (configured %d)" % (float(resources.get("GPU") or 0), int(want["num_gpus"])))
    if int(resources.get("CPU") or 0) != int(want["num_cpus"]):
        found.append("%g CPUs (configured ray_num_cpus %d)" % (float(resources.get("CPU") or 0), int(want["num_cpus"])))
    return found


def _port_taken(probe, want):
    """The configured ports that something listens on although no Ray runs here."""
    taken = []
    for port, var in ((want["gcs_port"], "ray_gcs_port"), (want.get("dashboard_port"), "ray_dashboard_port")):
        if port and port in (probe.get("listening") or []):
            taken.append("%d (%s)" % (port, var))
    return taken


def decide_head(probe, want):
    policy = want["restart"]
    jobs = list(probe.get("active_jobs") or [])
    start = start_argv(want)
    if probe.get("up"):
        head = probe.get("head_node") or {}
        differs = _differences(head, want)
        if not differs:
            return _decision(KEEP, "the Ray head on %s is up with the configured address, GPUs and CPUs"
                             % want["gcs_address"])
        what = "the Ray head on %s is up but differs from the configuration: %s" % (
            want["gcs_address"], "; ".join(differs))
        if policy == "never":
            return _decision(REFUSE, what, fix="ray_head_restart is never; set it to when_idle to restart the head")
        if jobs and policy != "force":
            return _decision(
                REFUSE, what + "; job(s) %s run on it and would die" % _jobs_text(jobs),
                fix="wait for them or stop them (playbooks/stop.yml), or set ray_head_restart: force",
            )
        return _decision(RESTART, what, [stop_argv(policy == "force"), start])
    if probe.get("processes"):
        recorded = probe.get("recorded_address") or ""
        if probe.get("recorded_answers") and recorded and recorded != want["gcs_address"]:
            what = ("Ray is running on this node (%d processes, cluster %s), but not on the configured ports "
                    "(ray_gcs_port %d, ray_dashboard_port %d)" % (
                        probe["processes"], recorded, want["gcs_port"], want["dashboard_port"]))
            if policy != "force":
                return _decision(
                    REFUSE, what + "; it may run someone's job, so it is left alone",
                    fix="point ray_gcs_port / ray_dashboard_port at it, stop it yourself, "
                        "or set ray_head_restart: force to stop it",
                )
            return _decision(RESTART, what + "; ray_head_restart is force", [stop_argv(True), start])
        if probe.get("recorded_answers") and policy != "force":
            # The GCS lives, the dashboard (the Jobs API) does not answer: no way to see the jobs.
            return _decision(
                REFUSE,
                "the Ray GCS on %s answers but its dashboard (ray_dashboard_port %d) does not, so the running jobs "
                "cannot be listed" % (want["gcs_address"], want["dashboard_port"]),
                fix="it may still be starting: rerun in a minute; look at `ray status --address %s`; "
                    "or set ray_head_restart: force to restart it" % want["gcs_address"],
            )
        if jobs and policy != "force":
            return _decision(
                REFUSE,
                "the Ray head on %s does not answer on both ports, but job(s) %s are listed as running"
                % (want["gcs_address"], _jobs_text(jobs)),
                fix="wait for them or stop them (playbooks/stop.yml), or set ray_head_restart: force",
            )
        return _decision(
            RESTART,
            "the remains of a dead Ray head are running (%d processes, its GCS %s does not answer, so no job can run)"
            % (probe["processes"], recorded or want["gcs_address"]),
            [stop_argv(True), start],
        )
    taken = _port_taken(probe, want)
    if taken:
        return _decision(
            REFUSE,
            "port %s is already listening on this node, but no Ray runs here: another program holds it"
            % " and ".join(taken),
            fix="run the preflight (it is part of the ray_head tag; `--tags preflight` alone names the process and "
                "its pid), then stop that program or change the port variable",
        )
    return _decision(START, "no Ray runs on this node", [start])


def decide_worker(probe, want):
    policy = want["restart"]
    jobs = list(probe.get("active_jobs") or [])
    join = start_argv(want)
    registered = probe.get("registered")
    if registered and registered.get("alive") and int((registered.get("resources") or {}).get("GPU") or 0) == int(
        want["num_gpus"]
    ):
        return _decision(KEEP, "the head %s lists this worker (%s) alive with its %d GPUs"
                         % (want["gcs_address"], want["node_ip"], int(want["num_gpus"])))
    what = "worker %s is not registered with its head %s%s" % (
        want["node_ip"], want["gcs_address"],
        " with its %d GPUs" % int(want["num_gpus"]) if registered and registered.get("alive") else "")
    if jobs and policy != "force":
        return _decision(
            REFUSE, what + ", but job(s) %s run on the cluster; rejoining now would disturb them" % _jobs_text(jobs),
            fix="wait for them to end or stop them (playbooks/stop.yml), then rerun",
        )
    if not probe.get("processes"):
        return _decision(JOIN, what, [join])
    recorded = probe.get("recorded_address") or ""
    if probe.get("recorded_answers"):
        if recorded != want["gcs_address"] and policy == "never":
            return _decision(
                REFUSE, what + "; its Ray is attached to another live cluster %s" % (recorded or "(unknown)"),
                fix="ray_head_restart is never; stop that Ray yourself or set ray_head_restart: when_idle",
            )
        return _decision(RESTART, what + "; its Ray (cluster %s) is stopped and joined again" % (recorded or "?"),
                         [stop_argv(policy == "force"), join])
    return _decision(RESTART, what + "; the remains of its Ray (cluster %s, not answering) are cleared"
                     % (recorded or "?"), [stop_argv(True), join])


def decide(probe, want):
    """{action, reason, fix, commands} for this node. `want`: role (head/worker), gcs_address,
    gcs_port, dashboard_port, dashboard_host, node_ip, num_gpus, num_cpus, extra_args, restart.
    `probe`: processes, recorded_address, recorded_answers, listening (ports), active_jobs,
    and for a head up / head_node, for a worker registered (its entry in the head's node list)."""
    if want["restart"] not in POLICIES:
        return _decision(
            REFUSE, "ray_head_restart is %r" % want["restart"], fix="set it to one of %s" % ", ".join(POLICIES)
        )
    return decide_head(probe, want) if want["role"] == "head" else decide_worker(probe, want)


def message(decision):
    """The one line for people: the reason, and for a refusal the fix."""
    text = decision["reason"]
    if decision.get("fix"):
        text += ". Fix: " + decision["fix"]
    return text
