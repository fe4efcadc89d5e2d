"""What a run of playbooks/smoke.yml must report, for the docker test (test_smoke_play.py) and the default
scenario's check (scenario_default/check_05_smoke.py). `in_container(script)` runs a shell script in the node's
training container and returns the CompletedProcess."""
from __future__ import annotations

import json

SCRATCH = "/tmp/mtslime-smoke"


def message(run, task):
    results = run.results(task)
    assert results, "no result of %r in:\n%s" % (task, run.stdout[-3000:])
    return " ".join(json.dumps(results[-1].get("msg")).split())


def assert_passed(run, in_container, config_from="model_args", scratch=SCRATCH):
    """A passing smoke run: the 2-layer model converted by the run's command line with two processes, the
    checkpoint complete and kept in the scratch directory. Returns the report."""
    assert run.rc == 0, run.stdout[-4000:]
    report = message(run, "Report the smoke run")
    assert "smoke run passed: a 2-layer qwen3 model (config from %s)" % config_from in report, report
    assert "--nproc-per-node 2" in report and "--num-layers 2" in report and "--hidden-size 256" in report, report
    assert "checkpoint complete" in report, report
    listing = in_container("ls %s %s/mcore %s/hf && cat %s/mcore/latest_checkpointed_iteration.txt"
                           % (scratch, scratch, scratch, scratch)).stdout.split()
    assert {"release", "model.safetensors", "tokenizer.json", "convert.log"} <= set(listing), listing
    assert listing[-1] == "release", listing
    return report


def assert_failure_reported(run, in_container, exception, scratch=SCRATCH):
    """A failed smoke run: the exception line named, the scratch moved aside with the conversion log in it, the
    stack's gaps with their workaround. Returns where the scratch went."""
    assert run.rc != 0
    text = message(run, "Report the failed smoke run")
    assert exception in text and "Fail when the converter failed" in text, text
    moved = text.split("The scratch was moved to ")[1].split(" ")[0]
    assert moved.startswith(scratch + ".failed-"), text
    assert "Lacks: transformer_engine" in text and "--transformer-impl" in text, text
    kept = in_container("ls %s && cat %s/convert.log" % (moved, moved)).stdout
    assert "hf" in kept and exception in kept, kept
    assert in_container("test -e %s" % scratch).returncode != 0
    return moved
