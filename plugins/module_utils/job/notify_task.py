# Copyright: mtslime.posttrain contributors
# Apache License 2.0
"""The job_notify module's work (plugins/modules/job_notify.py holds its documentation): main(module) runs it
for an AnsibleModule made with module_kwargs(). The supervisor runs the same function with the arguments the
role gave the module (module_utils/supervise)."""
from __future__ import annotations

from ansible_collections.mtslime.posttrain.plugins.module_utils.job import notify
from ansible_collections.mtslime.posttrain.plugins.module_utils.job.manifest import manifest_dir


def module_kwargs():
    return dict(
        argument_spec=dict(
            experiment=dict(type="str", required=True),
            cluster=dict(type="str", default=""),
            host=dict(type="str", required=True),
            manifest_dir=dict(type="path", required=True),
            job=dict(type="dict"),
            preflight=dict(type="dict"),
            lost_workers=dict(type="list", elements="dict", default=[]),
            webhooks=dict(type="list", elements="str", default=[], no_log=True),
            command=dict(type="str"),
            retries=dict(type="int", default=3),
            timeout=dict(type="int", default=10),
        ),
        supports_check_mode=True,
    )


def main(module):
    params = module.params
    if params["retries"] < 0 or params["timeout"] < 1:
        module.fail_json(msg="job_notify: retries must be >= 0 and timeout >= 1 (seconds)")
    targets = [(notify.target_id("webhook", url), url) for url in params["webhooks"] if url]
    if params["command"]:
        targets.append((notify.target_id("command", params["command"]), params["command"]))
    path = notify.state_file(manifest_dir(params["manifest_dir"], None), params["experiment"])
    events = (notify.job_events(params["job"]) + notify.preflight_events(params["preflight"])
              + notify.worker_events(params["lost_workers"]))
    sent = notify.read_state(path)

    def send(tid, value, document):
        if tid.startswith("command:"):
            return notify.run_command(value, document, timeout=params["timeout"])
        return notify.post(value, document, retries=params["retries"], timeout=params["timeout"])

    context = {"experiment": params["experiment"], "cluster": params["cluster"], "host": params["host"]}
    reports = notify.deliver(events, targets, sent, send, context, check=module.check_mode)
    actions = []
    for report in reports:
        for tid in report["would_send"]:
            actions.append("would send %s (%s) to %s" % (report["event"], report["key"], tid))
        for tid in report["delivered"]:
            actions.append("sent %s (%s) to %s" % (report["event"], report["key"], tid))
        for failure in report["failed"]:
            module.warn("job_notify: cannot send %s (%s) to %s: %s; it is tried again at the next run" % (
                report["event"], report["key"], failure["target"], failure["error"]))
    delivered = any(report["delivered"] for report in reports)
    if delivered:
        try:
            notify.write_state(path, sent)
        except OSError as exc:
            module.warn("job_notify: cannot record what was sent in %s: %s; a rerun sends it again"
                        % (path, exc.strerror or exc))
    module.exit_json(changed=delivered or any(r["would_send"] for r in reports), events=reports, state_file=path,
                     actions=actions)
