"""The Ray stage run alone by its tags (`--tags ray_head,train_job`): a dashboard port that another
program holds is refused at once, naming the program and the port, before Ray is touched (the
preflight's port check runs under the ray_head tag); the rerun after the port is freed converges;
a rerun under a running job leaves Ray alone (mtslime.posttrain.ray_start keeps it)."""
from __future__ import annotations

import subprocess
import time
import urllib.request

from default_bed import CONTAINER, active, in_container, ours, site, wait

TAGS = "--tags ray_head,train_job"
PORT = 8772
PIDFILE = "/tmp/mtslime-check35-holder.pid"


def serves_a_directory():
    with urllib.request.urlopen("http://127.0.0.1:%d/" % PORT, timeout=3) as answer:
        return b"Directory listing" in answer.read()


def ray_running():
    # Live processes only: the container's init does not reap, and pgrep matches a zombie by its name.
    # (The brackets keep grep from matching the shell that runs it.)
    return in_container("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -qE '[g]cs_server|[r]aylet'"
                        ).returncode == 0


def listening():
    return in_container("grep -qi ':%04X 00000000:0000 0A' /proc/net/tcp" % PORT).returncode == 0


def test_taken_dashboard_port_is_refused_at_once_then_the_rerun_converges():
    assert in_container("ray stop --force").returncode == 0
    # A program that is not Ray on the dashboard port, in the training container's network (--net host).
    # Detached; the shell writes its pid, then becomes the program (exec), so that pid is the program's.
    subprocess.run(["docker", "exec", "-d", "-w", "/tmp", CONTAINER, "bash", "-c",
                    "echo $$ > %s; exec python3 -m http.server %d --bind 127.0.0.1" % (PIDFILE, PORT)], check=True)

    def pid_text():
        return in_container("cat %s" % PIDFILE).stdout.strip()

    pid = wait(pid_text, timeout=30, what="the program's pid")
    try:
        wait(serves_a_directory, timeout=30, what="the program on the dashboard port")
        begin = time.time()
        refused = site(TAGS)
        took = time.time() - begin
        print("refused in %.0f s" % took)
        assert refused.rc != 0, refused.stdout[-3000:]
        text = refused.stdout
        assert "port %d (Ray dashboard and Jobs API (ray_dashboard_port)) is held by pid" % PORT in text, text[-3000:]
        assert "http.server %d" % PORT in text, text[-3000:]
        assert refused.changed_hosts() == {}, refused.changed_tasks()
        assert not refused.results("(ray_start)"), "the Ray stage did not run"
        assert not ray_running(), "Ray was not started beside the program"
        assert serves_a_directory(), "the program that holds the port was left alone"
    finally:
        in_container("kill %s; rm -f %s" % (pid, PIDFILE))
    wait(lambda: not listening(), timeout=30, what="the program to end")

    begin = time.time()
    converged = site(TAGS)
    print("converged in %.0f s" % (time.time() - begin))
    assert converged.rc == 0, converged.stdout[-3000:]
    assert any("Start the Ray head" in t for t in converged.changed_tasks()), converged.changed_tasks()
    [start] = converged.results("Start the Ray head")
    assert start["action"] == "start" and start["cmd"][:3] == ["ray", "start", "--head"], start
    assert start["rc"] == 0 and "stdout" in start and "stderr" in start
    wait(active, what="the resumed job")


def test_a_rerun_under_a_running_job_leaves_ray_alone():
    job = wait(active, what="an active job")[-1]["submission_id"]
    again = site(TAGS)
    assert again.rc == 0, again.stdout[-3000:]
    assert again.changed_hosts() == {}, again.changed_tasks()
    [kept] = again.results("Start the Ray head")
    assert kept["action"] == "keep" and kept["cmd"] == [] and not kept["changed"], kept
    assert job in kept["active_jobs"]
    assert [j["submission_id"] for j in ours() if j["status"] in ("PENDING", "RUNNING")] == [job]
