"""Word of a job's events (module_utils/job/notify.py, the job_notify module): the events read from ray_job's
results, the message, the sent-once record, and delivery to a real local HTTP server and a real command."""
from __future__ import annotations

import json
import os
import stat


from ansible_collections.mtslime.posttrain.plugins.module_utils.job import notify
from ansible_collections.mtslime.posttrain.plugins.modules import job_notify

from job.test_ray_job import warned  # noqa: F401 (fixture)  pylint: disable=unused-import

EXP = "qwen3-8B"


def rec(n, status, step, exception=None):
    return {"submission_id": "%s-attempt-%d" % (EXP, n), "attempt": n, "status": status, "step": step,
            "exception": exception}


FAILED_TWICE = {
    "msg": "ray_job: experiment qwen3-8B: 2 attempts in a row failed ...", "failed": True,
    "attempts_history": [rec(1, "FAILED", 7, "RuntimeError: boom"), rec(2, "FAILED", 7, "RuntimeError: boom")],
    "crash_loop": {"count": 2, "step": 7, "attempts": ["qwen3-8B-attempt-1", "qwen3-8B-attempt-2"], "limit": 2,
                   "retry": False, "blocked": True},
}
RESUBMITTED = {
    "submission_id": "qwen3-8B-attempt-2", "attempt": 2, "status": "PENDING", "argv": ["--load", "/save"],
    "resumed_from_iteration": 5, "previous_attempt": rec(1, "FAILED", 7, "RuntimeError: boom"),
    "attempts_history": [rec(1, "FAILED", 7, "RuntimeError: boom")],
    "crash_loop": {"count": 1, "step": 7, "attempts": ["qwen3-8B-attempt-1"], "limit": 2, "blocked": False},
}


# -- the events ----------------------------------------------------------------------------------------
def test_a_resubmission_after_a_failure_is_two_events():
    events = notify.job_events(RESUBMITTED)
    assert [(e["event"], e["key"]) for e in events] == [
        ("attempt_failed", "attempt_failed:qwen3-8B-attempt-1"), ("resubmitted", "resubmitted:qwen3-8B-attempt-2")]
    assert events[0]["step"] == 7 and events[0]["exception"] == "RuntimeError: boom"
    assert events[1]["detail"] == "after qwen3-8B-attempt-1 FAILED, resuming from iteration 5"


def test_a_refused_submission_is_a_crash_loop_event_keyed_by_the_last_failure():
    events = notify.job_events(FAILED_TWICE)
    assert [e["event"] for e in events] == ["attempt_failed", "attempt_failed", "crash_loop_stopped"]
    assert events[-1]["key"] == "crash_loop_stopped:qwen3-8B-attempt-2"
    assert "2 attempts in a row failed without passing step 7 (limit 2)" in events[-1]["detail"]


def test_a_first_submission_and_a_running_job_are_no_event():
    first = {"submission_id": "qwen3-8B-attempt-1", "attempt": 1, "status": "PENDING", "argv": [],
             "attempts_history": [], "previous_attempt": None}
    assert notify.job_events(first) == []
    assert notify.job_events({"submission_id": "qwen3-8B-attempt-1", "status": "RUNNING"}) == []


def test_status_results_give_failed_attempts_and_the_finish():
    status = {"submission_id": "qwen3-8B-attempt-2", "attempt": 2, "status": "SUCCEEDED",
              "end_time": "2026-12-03T10:00:00.000Z",
              "attempts": [{"submission_id": "qwen3-8B-attempt-1", "attempt": 1, "status": "FAILED", "last_step": 3,
                            "exception": "OSError: disk"},
                           {"submission_id": "qwen3-8B-attempt-2", "attempt": 2, "status": "SUCCEEDED",
                            "last_step": 99, "exception": None}]}
    events = notify.job_events(status)
    assert [(e["event"], e["step"]) for e in events] == [("attempt_failed", 3), ("finished", 99)]
    assert events[1]["detail"] == "qwen3-8B-attempt-2 SUCCEEDED at 2026-12-03T10:00:00.000Z"


def test_preflight_projection_that_does_not_fit_is_an_event_per_node_and_path():
    results = {"n2": {"checks": {"disk": {"items": [{"path": "/data/save", "projection": {
        "ok": False, "warning": "the run's 10 checkpoints need 1.2 TiB, 300 GiB free"}}]}}},
        "n1": {"checks": {"disk": {"items": [{"path": "/data/save", "projection": {"ok": True}}]}}}}
    events = notify.preflight_events(results)
    assert [(e["key"], e["node"]) for e in events] == [("disk_projection_exceeded:n2:/data/save", "n2")]


# -- the message ----------------------------------------------------------------------------------------
def test_payload_text_reads_as_a_chat_message_and_carries_the_fields():
    event = notify.job_events(RESUBMITTED)[0]
    doc = notify.payload(event, EXP, "c1", "n1", now="2026-12-03T10:00:00Z")
    assert doc["text"] == ("*[qwen3-8B] attempt 1 failed* (cluster c1, head n1)\n"
                           "qwen3-8B-attempt-1 FAILED after step 7: RuntimeError: boom")
    assert {k: doc[k] for k in ("event", "cluster", "host", "job_id", "attempt", "step", "exception", "time")} == {
        "event": "attempt_failed", "cluster": "c1", "host": "n1", "job_id": "qwen3-8B-attempt-1", "attempt": 1,
        "step": 7, "exception": "RuntimeError: boom", "time": "2026-12-03T10:00:00Z"}


def test_disk_event_text_names_the_node():
    event = notify.preflight_events({"n2": {"checks": {"disk": {"items": [
        {"path": "/data/save", "projection": {"ok": False, "warning": "does not fit"}}]}}}})[0]
    assert notify.text_of(event, EXP, "c1", "n1") == (
        "*[qwen3-8B] checkpoints will not fit on disk* (cluster c1, head n1, node n2)\ndoes not fit")


# -- delivery --------------------------------------------------------------------------------------------
def test_post_retries_a_500_then_succeeds(hook):
    server = hook([500, 503])
    waits = []
    ok, why = notify.post(server.url, {"text": "hi"}, retries=3, backoff=0.5, sleep=waits.append)
    assert (ok, why) == (True, None)
    assert len(server.bodies) == 3 and waits == [0.5, 1.0]


def test_post_gives_up_without_raising_and_without_the_url(hook):
    server = hook([500] * 10)
    ok, why = notify.post(server.url, {"text": "hi"}, retries=2, sleep=lambda s: None)
    assert not ok and why == "HTTP 500 Internal Server Error (after 3 tries)"
    assert len(server.bodies) == 3


def test_post_does_not_retry_a_client_error(hook):
    server = hook([404])
    ok, why = notify.post(server.url, {"text": "hi"}, retries=3, sleep=lambda s: None)
    assert not ok and why.startswith("HTTP 404") and len(server.bodies) == 1


def test_post_to_a_closed_port_fails_without_raising(hook):
    server = hook()
    url = server.url
    server.close()
    ok, why = notify.post(url, {"text": "hi"}, retries=1, timeout=2, sleep=lambda s: None)
    assert not ok and "SECRET-TOKEN" not in why and "(after 2 tries)" in why


def test_command_gets_the_event_json_on_stdin(tmp_path):
    out = tmp_path / "got.json"
    ok, why = notify.run_command("cat > %s" % out, {"event": "finished"})
    assert (ok, why) == (True, None) and json.loads(out.read_text()) == {"event": "finished"}
    ok, why = notify.run_command("echo nope >&2; exit 3", {})
    assert (ok, why) == (False, "exit 3: nope")


# -- the module -------------------------------------------------------------------------------------------
def args(tmp_path, url, job=None, **extra):
    found = {"experiment": EXP, "cluster": "c1", "host": "n1", "manifest_dir": str(tmp_path / "manifests"),
             "job": RESUBMITTED if job is None else job, "webhooks": [url], "retries": 1}
    found.update(extra)
    return found


def test_module_sends_each_event_once(run_module, hook, tmp_path):
    server = hook()
    result, failed = run_module(job_notify, args(tmp_path, server.url))
    assert not failed and result["changed"]
    assert [b["event"] for b in server.bodies] == ["attempt_failed", "resubmitted"]
    state = tmp_path / "manifests" / "qwen3-8B.notified.json"
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o600
    assert "SECRET-TOKEN" not in state.read_text()
    again, failed = run_module(job_notify, args(tmp_path, server.url))
    assert not failed and not again["changed"] and len(server.bodies) == 2
    assert [len(e["already"]) for e in again["events"]] == [1, 1]


def test_module_check_mode_says_what_it_would_send_and_sends_nothing(run_module, hook, tmp_path):
    server = hook()
    result, failed = run_module(job_notify, args(tmp_path, server.url), check_mode=True)
    assert not failed and result["changed"] and server.bodies == []
    assert [e["event"] for e in result["events"] if e["would_send"]] == ["attempt_failed", "resubmitted"]
    assert not (tmp_path / "manifests").exists()


def test_a_failing_webhook_warns_is_retried_next_run_and_never_shows_its_url(run_module, hook, tmp_path, capsys,
                                                                             warned):  # noqa: F811
    server = hook([500] * 4)
    result, failed = run_module(job_notify, args(tmp_path, server.url, retries=1))
    assert not failed and not result["changed"]
    assert result["events"][0]["failed"][0]["error"] == "HTTP 500 Internal Server Error (after 2 tries)"
    assert len(warned) == 2 and all("tried again at the next run" in w for w in warned)
    assert "SECRET-TOKEN" not in json.dumps(result) + "".join(warned) + "".join(capsys.readouterr())
    again, _failed = run_module(job_notify, args(tmp_path, server.url))
    assert again["changed"] and [len(e["delivered"]) for e in again["events"]] == [1, 1]


def test_a_command_and_a_webhook_each_get_the_event(run_module, hook, tmp_path):
    server = hook()
    log = tmp_path / "events.jsonl"
    result, failed = run_module(job_notify, args(tmp_path, server.url, job=FAILED_TWICE,
                                                 command="cat >> %s; echo >> %s" % (log, log)))
    assert not failed
    sent = [json.loads(line) for line in log.read_text().splitlines() if line]
    assert [d["event"] for d in sent] == [b["event"] for b in server.bodies] == [
        "attempt_failed", "attempt_failed", "crash_loop_stopped"]
    assert all(len(e["delivered"]) == 2 for e in result["events"])


def test_nothing_configured_sends_nothing(run_module, tmp_path):
    result, failed = run_module(job_notify, {"experiment": EXP, "host": "n1", "job": RESUBMITTED,
                                             "manifest_dir": str(tmp_path / "m")})
    assert not failed and not result["changed"] and not (tmp_path / "m").exists()
