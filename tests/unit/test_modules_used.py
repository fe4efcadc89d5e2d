"""Every module of plugins/modules is run by a role, a play or an action plugin, or documented for users to run
(README.md, docs/): no module that only its tests call."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MODULES = sorted(p.stem for p in (REPO / "plugins" / "modules").glob("*.py") if p.stem != "__init__")


def texts(*patterns):
    found = []
    for pattern in patterns:
        found.extend(path.read_text(encoding="utf-8") for path in sorted(REPO.glob(pattern)) if path.is_file())
    return "\n".join(found)


RUN_BY = texts("roles/**/*.yml", "playbooks/**/*.yml", "site.yml", "plugins/action/*.py")
USER_DOCS = texts("README.md", "docs/*.md")


@pytest.mark.parametrize("name", MODULES)
def test_the_module_is_run_or_documented_for_users(name):
    fqcn = "mtslime.posttrain." + name
    assert fqcn in RUN_BY or fqcn in USER_DOCS, (
        "%s: no role, play or action plugin runs it and README.md / docs/ do not offer it to users; "
        "call it where it helps or remove it with its tests" % fqcn
    )


def test_the_modules_are_found():
    assert "ray_job" in MODULES and "node_preflight" in MODULES and len(MODULES) >= 20
