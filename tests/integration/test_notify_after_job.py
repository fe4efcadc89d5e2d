"""The train_job role's step after the job task (tasks/notify_job.yml), on the local machine: a crash-loop
refusal of ray_job is sent to a real local webhook first, then the play fails with ray_job's own message; a
webhook that keeps failing is a warning and the play goes on."""
from __future__ import annotations

import json
import os
import subprocess
import sys


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


REFUSED = {
    "failed": True, "changed": False,
    "msg": "ray_job: experiment qwen3-8B: 2 attempts in a row failed without passing step 7 (max_failures_at_step "
           "is 2), so attempt 3 is not submitted:",
    "attempts_history": [
        {"submission_id": "qwen3-8B-attempt-%d" % n, "attempt": n, "status": "FAILED", "step": 7,
         "exception": "RuntimeError: boom"} for n in (1, 2)],
    "crash_loop": {"count": 2, "step": 7, "limit": 2, "retry": False, "blocked": True,
                   "attempts": ["qwen3-8B-attempt-1", "qwen3-8B-attempt-2"]},
}


def play(tmp_path, url, result):
    extra = {"job_result": result, "slime_experiment": "qwen3-8B", "slime_work_dir": str(tmp_path / "work"),
             "train_job_notify": {"webhooks": [url]}, "ansible_python_interpreter": sys.executable}
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "collections"))
    return subprocess.run(["ansible-playbook", "-i", "localhost,", "-c", "local",
                           "tests/integration/playbooks/notify_after_job.yml", "-e", json.dumps(extra)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_a_refusal_is_sent_then_fails_the_play_and_is_not_sent_again(hook, tmp_path):
    server = hook()
    proc = play(tmp_path, server.url, REFUSED)
    assert proc.returncode != 0 and "so attempt 3 is not submitted" in proc.stdout
    assert [b["event"] for b in server.bodies] == ["attempt_failed", "attempt_failed", "crash_loop_stopped"]
    assert "SECRET-TOKEN" not in proc.stdout + proc.stderr
    again = play(tmp_path, server.url, REFUSED)
    assert again.returncode != 0 and len(server.bodies) == 3


def test_a_failing_webhook_is_a_warning(hook, tmp_path):
    server = hook([500] * 20)
    running = {"changed": False, "submission_id": "qwen3-8B-attempt-2", "attempt": 2, "status": "SUCCEEDED"}
    proc = play(tmp_path, server.url, running)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "cannot send finished" in proc.stdout + proc.stderr and len(server.bodies) == 4
    assert "SECRET-TOKEN" not in proc.stdout + proc.stderr
