"""site.yml under --check --diff on a bare node, without Docker: the default inventory's single node (this machine)
with container_enabled false, every path it would write under a temporary directory and free Ray ports. Nothing has
run there (no data, no model, no checkpoint, no Ray): every stage says what a real run would do, the checks of what
only a real run writes are skipped with a message, nothing fails and nothing is written. The node preflight is
skipped (this machine has no accelerator). Ray's processes are read from the machine's /proc: where another Ray runs
here (a container of another test), the Ray and job stages would judge that one, and only the earlier stages run."""
from __future__ import annotations

import socket

from ansible_collections.mtslime.posttrain.plugins.module_utils.ray.processes import ray_processes
from runner import run_playbook


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def messages(run, task):
    return [(e["event_data"].get("res") or {}).get("msg", "") for e in run.events
            if e.get("event") == "runner_on_ok" and task in (e["event_data"].get("task") or "")]


def test_site_check_diff_on_a_bare_node_says_what_it_would_do_and_fails_nowhere(tmp_path):
    root = tmp_path / "node"
    values = {
        "container_enabled": False, "slime_work_dir": str(root / "work"), "slime_log_dir": str(root / "logs"),
        "slime_data_dir": str(root / "data"), "data_archive_dest": str(root / "AIME_data.tgz"),
        "slime_hf_model_dir": str(root / "models" / "Qwen3-8B"),
        "slime_mcore_dir": str(root / "models" / "Qwen3-8B_torch_dist"), "slime_save_dir": str(root / "ckpt"),
        "ray_dashboard_port": free_port(), "ray_gcs_port": free_port()}
    ray_here = bool(ray_processes("/proc"))
    skip = "preflight" + (",ray_head,train_job" if ray_here else "")

    run = run_playbook("site.yml", "inventory/", "--check", "--diff", "--skip-tags", skip, extravars=values,
                       timeout=900)
    assert run.rc == 0 and run.failed_hosts() == {}, run.stdout[-4000:]
    assert not root.exists(), "check mode wrote nothing on the node"

    waiting = messages(run, "Say which data checks wait for a real run")
    assert len(waiting) == 1 and str(root / "data" / "aime_2025.parquet") in waiting[0], waiting
    assert "Would download" in messages(run, "Say why the data is prepared again")[0]
    assert "Would fetch Qwen/Qwen3-8B" in messages(run, "Say why the model is fetched")[0]
    assert "is absent" in messages(run, "Say what will be done")[0]
    if not ray_here:
        assert messages(run, "Say how to reach the dashboard")[0].startswith("check mode: Ray head not started")
        job = messages(run, "Say why the job is not looked at")
        assert len(job) == 1 and "A real run would write the run files into %s" % (root / "work") in job[0], job
