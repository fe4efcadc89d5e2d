"""module_utils/artifacts/aside.py: the one move-aside naming (used here by the checkpoint judge and the resume
rule)."""
from __future__ import annotations

import calendar
import os

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.artifacts import aside

NOW = calendar.timegm((2026, 8, 21, 13, 4, 5, 0, 0, 0))


def test_move_aside_names_the_reason_and_the_utc_time(tmp_path):
    save = tmp_path / "Qwen3-8B_slime"
    (save / "release").mkdir(parents=True)
    target = aside.move_aside(str(save), "interrupted", now=NOW)
    assert target == str(save) + ".interrupted-20260821T130405Z"
    assert not save.exists() and os.path.isdir(os.path.join(target, "release"))
    assert aside.is_aside(os.path.basename(target))


def test_a_taken_name_gets_a_number_and_an_empty_dir_is_not_replaced(tmp_path):
    save = tmp_path / "run"
    taken = str(save) + ".incomplete-20260821T130405Z"
    os.makedirs(taken)
    save.mkdir()
    assert aside.aside_name(str(save), "incomplete", now=NOW) == taken + ".1"
    assert aside.move_aside(str(save) + "/", "incomplete", now=NOW) == taken + ".1"
    save.mkdir()
    assert aside.move_aside(str(save), "incomplete", now=NOW) == taken + ".2"
    assert os.listdir(taken) == []


def test_reason_is_cleaned_and_a_missing_path_refused(tmp_path):
    path = tmp_path / "f"
    path.write_text("x")
    assert os.path.basename(aside.move_aside(str(path), "bad reason/x")).startswith("f.bad-reason-x-")
    with pytest.raises(FileNotFoundError):
        aside.move_aside(str(path), "again")
