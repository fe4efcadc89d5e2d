"""The accelerator probe of node_preflight (checks: [accelerator], the node's accelerator report), run in-process
against stand-in mthreads-gmi / nvidia-smi scripts that print recorded outputs (tests/unit/data/accelerator/)."""

from __future__ import annotations

import json
import os

import pytest
from ansible_collections.mtslime.posttrain.plugins.module_utils.preflight import accelerator as acc
from ansible_collections.mtslime.posttrain.plugins.modules import node_preflight
from gpu_tools import no_tools, write_tool

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "accelerator")


def sample(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as handle:
        return handle.read()


def eight_s5000_json():
    """The recorded 2-card S5000 document, grown to the 8 cards the recorded node had."""
    doc = json.loads(sample("mthreads-gmi_q_json_s5000.json"))
    first = doc["GPU"][0]
    doc["GPU"] = [
        dict(first, Index=str(i), **{"GPU UUID": "5e1f0a00-0000-4000-8000-00000000a00%d" % i}) for i in range(8)
    ]
    return json.dumps(doc, indent=4)


def probe(run_module, args, check_mode=False):
    """node_preflight with only its accelerator check; `fail_on_mismatch` is its accelerator.required."""
    accelerator = {k: v for k, v in args.items() if k != "fail_on_mismatch"}
    accelerator["required"] = bool(args.get("fail_on_mismatch"))
    result, failed = run_module(
        node_preflight, {"checks": ["accelerator"], "accelerator": accelerator}, check_mode=check_mode
    )
    result["problems"] = result["checks"]["accelerator"]["problems"]
    return result, failed


@pytest.fixture
def node(monkeypatch, tmp_path):
    """A node whose PATH holds no accelerator tool; stand-ins go into node/'tools'."""
    no_tools(monkeypatch, tmp_path / "empty-path")
    return tmp_path


def test_musa_node_with_eight_healthy_cards(run_module, node):
    tools = write_tool(node / "tools", "mthreads-gmi", {"-q --json": (0, eight_s5000_json())})
    result, failed = probe(
        run_module,
        {
            "vendor": "musa",
            "tool_dir": tools,
            "expected_count": 8,
            "expected_memory_mib": 81920,
            "fail_on_mismatch": True,
        },
    )
    assert not failed and result["changed"] is False
    accel = result["accelerator"]
    assert (accel["vendor"], accel["count"], accel["source_format"], accel["driver_version"]) == (
        "musa",
        8,
        "json",
        "3.3.5-server",
    )
    assert accel["tool_path"] == os.path.join(tools, "mthreads-gmi")
    assert result["problems"] == []


def test_auto_finds_the_spaced_colon_list(run_module, node):
    tools = write_tool(node / "tools", "mthreads-gmi", {"-L": (0, sample("mthreads-gmi_L_spaced_colon.txt"))})
    result, failed = probe(run_module, {"tool_dir": tools, "expected_count": 8})
    assert not failed
    assert (result["accelerator"]["vendor"], result["accelerator"]["count"]) == ("musa", 8)
    assert result["accelerator"]["source_format"] == "list"
    assert result["problems"] == []


def test_count_mismatch_is_reported_and_fails_when_asked(run_module, node):
    tools = write_tool(node / "tools", "mthreads-gmi", {"-q --json": (0, sample("mthreads-gmi_q_json_s5000.json"))})
    args = {"vendor": "musa", "tool_dir": tools, "expected_count": 8, "expected_memory_mib": 81920}
    result, failed = probe(run_module, args)
    assert not failed
    (problem,) = result["problems"]
    assert "found 2 MUSA devices (MTT S5000)" in problem and "slime_gpus_per_node is 8" in problem

    result, failed = probe(run_module, dict(args, fail_on_mismatch=True))
    assert failed
    assert result["msg"].startswith("node preflight failed on 1 check: (1) found 2 MUSA devices")
    assert "set slime_gpus_per_node: 2" in result["msg"]
    assert result["accelerator"]["count"] == 2


def test_iommu_off_card_gets_the_hint(run_module, node):
    # an old mthreads-gmi: no --json, no -q, no -L; its plain table shows 32768MiB
    tools = write_tool(node / "tools", "mthreads-gmi", {"": (0, sample("mthreads-gmi_table_s4000_iommu_off.txt"))})
    result, failed = probe(
        run_module,
        {
            "vendor": "musa",
            "tool_dir": tools,
            "expected_count": 1,
            "expected_memory_mib": 49152,
            "fail_on_mismatch": True,
        },
    )
    assert failed
    assert result["accelerator"]["source_format"] == "table"
    assert "report 32768 MiB instead of 49152 MiB: IOMMU is off" in result["msg"]
    assert "mt-container-toolkit bound to Docker" in result["msg"]
    assert "ACS redirect off" in result["msg"]


def test_missing_tool_names_the_variables_and_the_fix(run_module, node):
    result, failed = probe(
        run_module,
        {"vendor": "musa", "tool_dir": str(node / "no-tools"), "expected_count": 8, "fail_on_mismatch": True},
    )
    assert failed
    assert result["msg"] == (
        "node preflight failed on 1 check: (1) no MUSA accelerator: mthreads-gmi not found on PATH or in "
        "slime_accelerator_tool_dir (%s); install the MT driver/tools (mthreads-gmi), set slime_accelerator_tool_dir "
        "to its directory, or set slime_accelerator: cuda for NVIDIA nodes" % (node / "no-tools")
    )
    assert result["accelerator"]["tool_path"] is None


def test_empty_output_in_a_container(run_module, node):
    empty = sample("mthreads-gmi_container_empty.txt")
    tools = write_tool(node / "tools", "mthreads-gmi", {a: (0, empty) for a in ("-q --json", "-q", "-L", "")})
    result, failed = probe(run_module, {"vendor": "musa", "tool_dir": tools, "expected_count": 8})
    assert not failed
    (problem,) = result["problems"]
    assert problem.startswith(
        "no MUSA devices: mthreads-gmi (%s) listed no GPU (it printed nothing)" % os.path.join(tools, "mthreads-gmi")
    )
    assert "inside a container mthreads-gmi may print nothing" in problem


def test_no_device_message_is_quoted(run_module, node):
    """`Error: No MT GPU device found.` comes with exit code 0: zero devices, said as the tool says it."""
    said = sample("mthreads-gmi_no_device.txt")
    tools = write_tool(node / "tools", "mthreads-gmi", {a: (0, said) for a in ("-q --json", "-q", "-L", "")})
    result, failed = probe(run_module, {"vendor": "musa", "tool_dir": tools, "fail_on_mismatch": True})
    assert failed and result["accelerator"]["no_device"] == "Error: No MT GPU device found."
    assert "says 'Error: No MT GPU device found.' (exit 0): the MT driver sees no GPU" in result["msg"]
    assert [a["command"] for a in result["accelerator"]["attempts"]] == ["mthreads-gmi"]


def test_an_unverified_format_is_a_warning(run_module, node):
    tools = write_tool(node / "tools", "mthreads-gmi", {"-L": (0, sample("mthreads-gmi_L_spaced_colon.txt"))})
    result, failed = probe(run_module, {"vendor": "musa", "tool_dir": tools, "expected_count": 8})
    assert not failed and result["problems"] == [] and result["accelerator"]["verified"] is False
    assert any("a format reconstructed without a public capture" in w for w in result["accelerator"]["warnings"])


def test_cuda_node_from_the_csv_query(run_module, node):
    tools = write_tool(
        node / "tools",
        "nvidia-smi",
        {
            "%s --format=csv,noheader,nounits"
            % acc.query_gpu(): (0, sample("nvidia-smi_query_noheader_nounits_h100_8x.csv"))
        },
    )
    result, failed = probe(
        run_module,
        {
            "vendor": "cuda",
            "tool_dir": tools,
            "expected_count": 8,
            "expected_memory_mib": 80000,
            "fail_on_mismatch": True,
        },
    )
    assert not failed
    accel = result["accelerator"]
    assert (accel["vendor"], accel["count"], accel["driver_version"]) == ("cuda", 8, "550.54.15")
    assert accel["devices"][0]["memory_total_mib"] == 81559


def test_cuda_driver_not_loaded(run_module, node):
    tools = write_tool(
        node / "tools",
        "nvidia-smi",
        {
            "%s --format=csv,noheader,nounits" % acc.query_gpu(): (9, sample("nvidia-smi_no_driver.txt")),
            "-L": (9, sample("nvidia-smi_no_driver.txt")),
        },
    )
    result, failed = probe(run_module, {"vendor": "cuda", "tool_dir": tools, "fail_on_mismatch": True})
    assert failed
    assert "no CUDA devices: nvidia-smi" in result["msg"]
    assert "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver" in result["msg"]


def test_check_mode_gives_the_same_answer(run_module, node):
    tools = write_tool(node / "tools", "mthreads-gmi", {"-q --json": (0, eight_s5000_json())})
    args = {"vendor": "musa", "tool_dir": tools, "expected_count": 8}
    normal, _ = probe(run_module, args)
    checked, failed = probe(run_module, args, check_mode=True)
    assert not failed and checked["changed"] is False
    assert checked["accelerator"] == normal["accelerator"]
