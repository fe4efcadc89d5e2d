"""The keeper's round (module_utils/supervise/keeper.py) against a recorded engine: the training container
started when it stopped, one check run inside it with the library and directory, nothing done while supervision
is off or the container is gone, an engine error said and the loop kept."""
from __future__ import annotations

import io
import json

from ansible_collections.mtslime.posttrain.plugins.module_utils.supervise import docker_api, files, keeper


class Engine:
    def __init__(self, state=None, exec_result=(0, "kept: e-attempt-1 RUNNING\n", ""), error=None):
        self.state, self.exec_result, self.error = state, exec_result, error
        self.calls = []

    def inspect(self, name):
        self.calls.append(("inspect", name))
        if self.error:
            raise docker_api.DockerError(self.error)
        return None if self.state is None else {"State": self.state}

    def start(self, name):
        self.calls.append(("start", name))
        return True

    def exec_run(self, name, argv, timeout, env=None, user=None):
        self.calls.append(("exec", name, argv))
        return self.exec_result


def keep(tmp_path, engine, **config):
    if config:
        (tmp_path / files.CONFIG).write_text(json.dumps(dict({"enabled": True, "interval": 20,
                                                              "container": "slime_rl", "python": "python3.10"},
                                                             **config)))
    out = io.StringIO()
    wait = keeper.Keeper(str(tmp_path), engine, clock=lambda: 0, out=out).once()
    log = tmp_path / files.LOG
    return wait, [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else [], out.getvalue()


def test_a_stopped_training_container_is_started_then_checked(tmp_path):
    engine = Engine({"Running": False, "Status": "exited", "FinishedAt": "2026-12-03T01:02:03Z", "ExitCode": 137})
    wait, logged, dummy = keep(tmp_path, engine, enabled=True)
    library = str(tmp_path / files.LIBRARY)
    assert engine.calls == [("inspect", "slime_rl"), ("start", "slime_rl"),
                            ("exec", "slime_rl", ["python3.10", library, "tick", str(tmp_path)])]
    assert wait == 20
    assert [e["action"] for e in logged] == ["container_started"] and "exit code 137" in logged[0]["message"]


def test_a_running_container_is_only_checked_and_a_good_check_is_not_logged_twice(tmp_path):
    engine = Engine({"Running": True})
    dummy, logged, out = keep(tmp_path, engine, enabled=True)
    assert [c[0] for c in engine.calls] == ["inspect", "exec"] and logged == []
    assert "check: rc 0: kept: e-attempt-1 RUNNING" in out


def test_a_check_that_ends_badly_is_logged(tmp_path):
    engine = Engine({"Running": True}, exec_result=(1, "", "Traceback\nKeyError: 'ray_job'\n"))
    dummy, logged, dummy = keep(tmp_path, engine, enabled=True)
    assert logged[-1]["action"] == "check" and logged[-1]["message"] == "rc 1: KeyError: 'ray_job'"


def test_nothing_is_started_while_supervision_is_off_or_the_container_is_gone(tmp_path):
    engine = Engine({"Running": False, "Status": "exited"})
    dummy, logged, dummy2 = keep(tmp_path, engine, enabled=False)
    assert engine.calls == [("inspect", "slime_rl")] and logged[-1]["action"] == "disabled"
    assert "left exited" in logged[-1]["message"]
    engine = Engine(None)
    dummy, logged, dummy2 = keep(tmp_path, engine, enabled=True)
    assert engine.calls == [("inspect", "slime_rl")] and logged[-1]["action"] == "container_absent"


def test_off_with_the_container_running_the_check_still_runs_to_record_it(tmp_path):
    engine = Engine({"Running": True}, exec_result=(0, "disabled: supervision is disabled\n", ""))
    keep(tmp_path, engine, enabled=False)
    assert [c[0] for c in engine.calls] == ["inspect", "exec"]


def test_an_engine_error_is_said_and_the_loop_goes_on(tmp_path):
    engine = Engine(error="cannot reach the Docker engine at /var/run/docker.sock")
    wait, logged, dummy = keep(tmp_path, engine, enabled=True)
    assert wait == 20 and logged[-1] == {"time": files.now_iso(0), "role": "keeper", "action": "engine_error",
                                         "message": "cannot reach the Docker engine at /var/run/docker.sock"}


def test_without_configuration_the_keeper_waits_a_little(tmp_path):
    engine = Engine({"Running": True})
    wait, logged, out = keep(tmp_path, engine)
    assert wait == keeper.IDLE_SECONDS and engine.calls == [] and "waiting for config.json" in out


def test_a_new_library_is_noticed(tmp_path):
    (tmp_path / files.LIBRARY).write_bytes(b"old")
    found = keeper.Keeper(str(tmp_path), Engine(), out=io.StringIO())
    assert not found.upgraded()
    (tmp_path / files.LIBRARY).write_bytes(b"new")
    assert found.upgraded()
