"""The container under a running job: changed flags never recreate it."""
from __future__ import annotations

from default_bed import active, container_id, site, wait


def test_changed_container_flags_never_kill_a_running_job():
    job = wait(active, what="an active job")[-1]["submission_id"]
    before = container_id()
    run = site("-e", "container_shm_size=64g")
    assert run.rc != 0
    text = " ".join(run.stdout.split())
    assert "differs from the configuration" in text and job in text and "container_recreate: force" in text
    assert container_id() == before
    assert [j["submission_id"] for j in active()] == [job]
