"""The job plan (job/plan.py decide, resume) and the resume plan (checkpoint/resume.py resume_plan) are typed
(TypedDict from typing, which the nodes' Python 3.8 has): what they return has exactly the keys their types declare,
and the types import from typing only."""
from __future__ import annotations

import ast

import ckpt_layouts

from ansible_collections.mtslime.posttrain.plugins.module_utils.checkpoint import resume as resume_rule
from ansible_collections.mtslime.posttrain.plugins.module_utils.job import plan as job_plan


def keys(typed):
    return set(typed.__annotations__)


def test_decide_returns_a_decision():
    decision = job_plan.decide([{"submission_id": "exp-attempt-1", "status": "FAILED"}], "exp")
    assert set(decision) == keys(job_plan.Decision) and decision["submission_id"] == "exp-attempt-2"


def test_the_resume_plan_and_its_parts_have_their_declared_keys(tmp_path):
    save = ckpt_layouts.training(tmp_path, iters=(19, 39), latest=39)
    ckpt_layouts.ckpt_dir(tmp_path / "run" / "iter_0000059", metadata_json=False)
    plan = resume_rule.resume_plan(save)
    assert set(plan) == keys(resume_rule.ResumePlan)
    assert plan["moves"] and all(set(move) == keys(resume_rule.Move) for move in plan["moves"])
    assert all(set(report) == keys(resume_rule.IterationReport) for report in plan["iterations"])
    resumed = job_plan.resume(save, "--load", ["--save", save], check_mode=True)
    assert set(resumed) == keys(job_plan.Resumed) and set(resumed["info"]) == keys(job_plan.ResumeInfo)
    assert resumed["info"]["resumed_from_iteration"] == 39


def test_the_types_come_from_typing_not_typing_extensions():
    for module in (resume_rule, job_plan):
        with open(module.__file__) as handle:
            tree = ast.parse(handle.read())
        modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert "typing" in modules and "typing_extensions" not in modules, module.__name__
