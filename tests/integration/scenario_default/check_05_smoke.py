"""playbooks/smoke.yml on the converged node (molecule/default/converge.yml ran it after site.yml, reading the
downloaded model's config.json; the idempotence step ran it again with changed=0): a converter that dies with a
traceback is reported with its exception line and the scratch moved aside; the next run passes."""
from __future__ import annotations

from default_bed import INVENTORY, control, in_container
from runner import run_playbook
from smoke_checks import assert_failure_reported, assert_passed


def smoke():
    return run_playbook("playbooks/smoke.yml", INVENTORY, "--tags", "smoke")


def test_a_dying_converter_is_reported_and_its_scratch_kept_then_the_smoke_passes():
    control(convert_import_error="pydantic")
    try:
        failed = smoke()
    finally:
        control()
    moved = assert_failure_reported(failed, in_container, "ModuleNotFoundError: No module named 'pydantic'")
    run = smoke()
    assert_passed(run, in_container, config_from="/data/models/Qwen3-8B/config.json")
    assert run.changed_hosts() == {}, run.changed_tasks()
    assert in_container("test -d %s" % moved).returncode == 0
