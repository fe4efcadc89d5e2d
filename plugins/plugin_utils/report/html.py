# Controller side: one self-contained HTML page per training cluster: the picture of the
# run (the PNG embedded as base64), the attempts, the last values, the checkpoints,
# the manifest and how to open TensorBoard. Every value is escaped; nothing is fetched.
from __future__ import annotations

import base64
import html
import json

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em;color:#222;max-width:1400px}
h1{font-size:1.4em;margin-bottom:.2em} h2{font-size:1.1em;margin-top:1.6em;border-bottom:1px solid #ddd}
.line{font-family:monospace;background:#f5f5f5;padding:.5em;border-radius:4px;white-space:pre-wrap}
table{border-collapse:collapse;font-size:.9em} td,th{border:1px solid #ddd;padding:.3em .6em;text-align:left;
vertical-align:top} th{background:#f0f0f0} code{font-size:.9em} img{max-width:100%;border:1px solid #eee}
.bad{color:#b00020;font-weight:600} .ok{color:#1b5e20;font-weight:600} .muted{color:#777}
"""
GOOD = ("RUNNING", "SUCCEEDED", "PENDING")


def _e(value):
    if value is None or value == "":
        return '<span class="muted">-</span>'
    if isinstance(value, float):
        return html.escape("%.4g" % value)
    if isinstance(value, (dict, list)):
        return "<code>%s</code>" % html.escape(json.dumps(value, sort_keys=True))
    return html.escape(str(value))


def _status(value):
    if not value:
        return _e(value)
    css = "ok" if value in GOOD else "bad" if value in ("FAILED", "STOPPED", "UNKNOWN") else "muted"
    return '<span class="%s">%s</span>' % (css, html.escape(value))


def _table(headers, rows):
    head = "".join("<th>%s</th>" % html.escape(h) for h in headers)
    body = "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % cell for cell in row) for row in rows)
    return "<table><tr>%s</tr>%s</table>" % (head, body)


def _span(first, last):
    if first is None:
        return _e(None)
    return _e(first if first == last else "%s-%s" % (first, last))


def merge_attempts(recorded, logged):
    """The attempts of the status (ray_job) and of the logs (train_metrics), one row per
    submission id, in the logs' order, then the ones without a log."""
    by_id = {a.get("submission_id"): dict(a) for a in recorded or []}
    rows = []
    for item in logged or []:
        row = dict(by_id.pop(item.get("submission_id"), {}))
        row.update({"submission_id": item.get("submission_id"), "log": item.get("log") or row.get("log"),
                    "first_rollout": item.get("first_rollout"), "last_rollout": item.get("last_rollout"),
                    "loaded_iteration": item.get("loaded_iteration"), "index": item.get("index")})
        row.setdefault("attempt", item.get("attempt"))
        row.setdefault("first_step", item.get("first_step"))
        row.setdefault("last_step", item.get("last_step"))
        if row.get("first_step") is None:
            row["first_step"] = item.get("first_step")
        if row.get("last_step") is None:
            row["last_step"] = item.get("last_step")
        rows.append(row)
    rows.extend(by_id.values())
    return rows


def _iterations(values):
    values = list(values or [])
    if len(values) <= 8:
        return ", ".join(str(v) for v in values) or "none"
    return "%d iterations: %s ... %s" % (len(values), ", ".join(str(v) for v in values[:3]),
                                         ", ".join(str(v) for v in values[-3:]))


def page(status, png, metrics, plot_info, title):
    """The HTML text. status: the cluster's status (status_doc.cluster_status), png: bytes,
    metrics: the train_metrics result, plot_info: report_plot.render_png's info."""
    job, last, checkpoint = status["job"], status["last"], status["checkpoint"]
    parts = ["<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title><style>%s</style>"
             "</head><body>" % (html.escape(title), STYLE)]
    parts.append("<h1>%s</h1>" % html.escape(title))
    parts.append('<div class="line">%s</div>' % html.escape(status["line"]))
    parts.append('<p>Job %s: %s%s</p>' % (_e(job["submission_id"]), _status(job["status"]),
                                          (" - " + _e(job["error"])) if job.get("error") else ""))
    loop = status.get("crash_loop")
    if loop and loop.get("count"):
        parts.append('<p class="bad">Crash loop: %s failures at step %s (limit %s)</p>'
                     % (_e(loop["count"]), _e(loop.get("step")), _e(loop.get("limit"))))
    parts.append('<img alt="curves of %s" src="data:image/png;base64,%s">'
                 % (html.escape(status["cluster"]), base64.b64encode(png).decode("ascii")))
    notes = []
    for panel in plot_info.get("panels", []):
        for curve in panel["curves"]:
            if curve["non_finite"]:
                notes.append("%s: %d value(s) were nan/inf, shown as gaps (x at the bottom)."
                             % (curve["key"], curve["non_finite"]))
            if curve["downsampled"]:
                notes.append("%s: %d points, every %s. shown (plus gaps and attempt ends)."
                             % (curve["key"], curve["downsampled"]["from"], curve["downsampled"]["every"]))
    for sid in metrics.get("missing_logs") or []:
        notes.append("attempt %s has no log in %s." % (sid, metrics.get("log_dir")))
    if notes:
        parts.append("<ul>%s</ul>" % "".join("<li>%s</li>" % html.escape(n) for n in notes))

    parts.append("<h2>Attempts</h2>")
    rows = []
    for row in merge_attempts(status.get("attempts"), metrics.get("attempts")):
        resumed = row.get("resumed_from_iteration")
        if resumed is None:
            resumed = row.get("loaded_iteration")
        rows.append([_e(row.get("attempt")), _e(row.get("submission_id")), _status(row.get("status")),
                     _e(row.get("submitted_at")), _e(row.get("ended_at")),
                     _span(row.get("first_step"), row.get("last_step")),
                     _span(row.get("first_rollout"), row.get("last_rollout")), _e(resumed),
                     _e(row.get("exception")), _e(row.get("hint")), _e(row.get("log"))])
    parts.append(_table(["#", "submission id", "status", "submitted", "ended", "steps", "rollouts logged",
                         "resumed from iteration", "exception", "hint", "log"], rows) if rows
                 else "<p class=\"muted\">no attempt found</p>")

    parts.append("<h2>Last values</h2>")
    values = [["step", _e(last["step"])], ["rollout", _e(last["rollout"])], ["reward (rollout/raw_reward)",
                                                                              _e(last["reward"])]]
    for key, value in sorted(last["pass_at_k"].items(), key=lambda kv: int(kv[0].split("@")[1])):
        values.append([key, _e(value)])
    for name, entry in sorted(last["eval"].items()):
        values.append(["eval %s (rollout %s)" % (name, last.get("eval_rollout")), _e(entry["score"])])
        for key, value in sorted(entry["pass_at_k"].items()):
            values.append(["eval %s %s" % (name, key), _e(value)])
    for key, value in sorted(last["throughput"].items()):
        values.append([key, _e(value)])
    error = last.get("first_error")
    if error:
        # a traceback's exception line (however long the traceback), not its header
        rank = " [rank %s]" % error["rank"] if error.get("rank") is not None else ""
        values.append(["first error (line %s)" % (error.get("exception_lineno") or error.get("lineno")),
                       '<span class="bad">%s</span>' % _e((error.get("exception") or error.get("line")) + rank)])
    if last.get("hint"):
        values.append(["hint", _e(last["hint"])])
    values.append(["log", _e(last.get("log_file"))])
    if last.get("error"):
        values.append(["not read", _e(last["error"])])
    parts.append(_table(["value", "last"], values))

    parts.append("<h2>Checkpoints</h2>")
    parts.append(_table(["", ""], [
        ["save dir", _e(checkpoint.get("save_dir"))], ["state", _e(checkpoint.get("state"))],
        ["tracker", _e(checkpoint.get("tracker"))],
        ["latest complete iteration", _e(checkpoint.get("latest_complete_iteration"))],
        ["complete iterations", _e(_iterations(checkpoint.get("complete_iterations")))],
        ["incomplete iterations", _e(_iterations(checkpoint.get("incomplete_iterations")))],
        ["data state", _e(checkpoint.get("dataset_state"))], ["message", _e(checkpoint.get("message") or
                                                                                checkpoint.get("error"))],
    ]))

    manifest = status.get("manifest") or {}
    parts.append("<h2>Manifest</h2>")
    data = manifest.get("data") or {}
    rows = [["file", _e(manifest.get("path"))]]
    for key in sorted(data):
        if key in ("train_argv", "runtime_env"):
            continue
        rows.append([_e(key), _e(data[key])])
    if manifest.get("error"):
        rows.append(["not read", _e(manifest["error"])])
    parts.append(_table(["", ""], rows))

    board = status.get("tensorboard")
    if board:
        parts.append("<h2>TensorBoard</h2>")
        parts.append("<p>On the head: <code>%s</code><br>From your computer: <code>%s</code>, then open %s</p>"
                     % (html.escape(board["command"]), html.escape(board["tunnel"]), html.escape(board["url"])))
    parts.append('<p class="muted">generated by mtslime.posttrain (playbooks/status.yml)</p></body></html>')
    return "\n".join(parts)
