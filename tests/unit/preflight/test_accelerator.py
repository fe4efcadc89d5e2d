"""Parsers and probe of module_utils/preflight/accelerator.py on recorded mthreads-gmi / nvidia-smi output
(tests/unit/data/accelerator/, provenance in PROVENANCE-parsers.md)."""

from __future__ import annotations

import json
import os
import stat

import pytest
from ansible_collections.mtslime.posttrain.plugins.module_utils.preflight import accelerator as acc
from ansible_collections.mtslime.posttrain.plugins.module_utils.preflight import gpu_formats as fmt
from gpu_tools import no_tools

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "accelerator")


def sample(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as handle:
        return handle.read()


# `mthreads-gmi -q` text: no recording of a real card was found, so this is reconstructed from the key
# tree of `-q --json` and from the lines MT's own tools grep out of `-q` (see PROVENANCE-parsers.md).
Q_TEXT_S4000 = (
    "\n".join(
        [
            "==============MTGMI LOG==============",
            "",
            "Timestamp                               : Tue Nov 12 20:55:00 2024",
            "Driver Version                          : 1.2.0",
            "Attached GPUs                           : 8",
        ]
        + sum(
            [
                [
                    "GPU 00000000:%02x:00.0" % (8 + i),
                    "    Index                               : %d" % i,
                    "    Product Name                        : MTT S4000",
                    "    Product Brand                       : MTT",
                    "    GPU UUID                            : 5e1f0a00-0000-4000-8000-0000000040%02d" % i,
                    "    MTBios Version                      : 3.4.3",
                    "    PCI",
                    "        Bus ID                          : 00000000:%02x:00.0" % (8 + i),
                    "    FB Memory Usage",
                    "        Total                           : 49152MiB",
                    "        Used                            : 0MiB",
                    "        Free                            : 49152MiB",
                    "    Utilization",
                    "        Gpu                             : 0%",
                ]
                for i in range(8)
            ],
            [],
        )
    )
    + "\n"
)

# The same facts in the compact `Key: value` spelling and without `GPU <bus id>` headers, as MT's
# musa_deploy checker quotes them, one card after the other.
Q_TEXT_FLAT = """Driver Version: 1.0.0
Product Name: MTT S4000
MTBios Version: 3.4.3
FB Memory Usage
    Total: 49152MiB
    Used: 0MiB
Product Name: MTT S4000
MTBios Version: 3.4.3
FB Memory Usage
    Total: 32768MiB
    Used: 0MiB
"""

# nvidia-smi -q (recorded layout, trimmed): the FB total must win over the BAR1 total.
NVIDIA_Q_TEXT = """==============NVSMI LOG==============

Timestamp                                 : Fri Nov 15 10:23:11 2024
Driver Version                            : 545.23.08
CUDA Version                              : 12.3

Attached GPUs                             : 2
GPU 00000000:18:00.0
    Product Name                          : NVIDIA GeForce RTX 2080 Ti
    GPU UUID                              : GPU-0a1b2c3d-0000-4000-8000-000000002080
    BAR1 Memory Usage
        Total                             : 256 MiB
        Used                              : 5 MiB
    FB Memory Usage
        Total                             : 11264 MiB
        Reserved                          : 252 MiB
        Used                              : 1 MiB
GPU 00000000:3B:00.0
    Product Name                          : NVIDIA GeForce RTX 2080 Ti
    GPU UUID                              : GPU-0a1b2c3d-0000-4000-8000-000000002081
    FB Memory Usage
        Total                             : 11264 MiB
    BAR1 Memory Usage
        Total                             : 256 MiB
"""

GARBAGE = [
    "",
    "\n\n   \n",
    "Segmentation fault (core dumped)\n",
    "mthreads-gmi: error while loading shared libraries: libmtml.so: cannot open shared object file\n",
    "\x00\x01\x02 binary \xff",
    "{not json",
    "[1, 2, 3]",
    "GPU:\nGPU x: foo\nGPU 00000000:18:00.0\n",
]


# ---------------------------------------------------------------- -L


@pytest.mark.parametrize("name", ["mthreads-gmi_L_colon.txt", "mthreads-gmi_L_spaced_colon.txt"])
def test_gmi_list_both_colon_spacings(name):
    devices = fmt.parse_list(sample(name))
    assert [d["index"] for d in devices] == list(range(8))
    assert {d["name"] for d in devices} == {"MTT S4000"}
    assert devices[3]["uuid"] == "5e1f0a00-0000-4000-8000-000000004003"
    assert all(d["memory_total_mib"] is None for d in devices)


def test_list_without_uuid_and_odd_spacing():
    text = "GPU 0 :  MTT S5000\nGPU 1:MTT S5000\nGPU 12  :  MTT S5000  (UUID :abc)\r\n"
    devices = fmt.parse_list(text)
    # `GPU 1:MTT` has no space after the colon and is not a -L line
    assert [(d["index"], d["name"], d["uuid"]) for d in devices] == [(0, "MTT S5000", None), (12, "MTT S5000", "abc")]


def test_nvidia_list_h100():
    devices = fmt.parse_list(sample("nvidia-smi_L_h100_8x.txt"))
    assert len(devices) == 8
    assert devices[7] == {
        "index": 7,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-0a1b2c3d-0000-4000-8000-000000000007",
        "memory_total_mib": None,
    }


def test_list_ignores_mig_lines_and_query_headers():
    text = (
        "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-aaaa)\n"
        "  MIG 1g.5gb      Device  0: (UUID: MIG-bbbb)\n"
        "GPU 00000000:18:00.0\n"
        " GPU 1: indented is not a device line\n"
    )
    assert [d["index"] for d in fmt.parse_list(text)] == [0]


# ---------------------------------------------------------------- -q --json


def test_gmi_json_s5000():
    driver, devices = fmt.parse_gmi_json(sample("mthreads-gmi_q_json_s5000.json"))
    assert driver == "3.3.5-server"
    assert devices == [
        {"index": 0, "name": "MTT S5000", "uuid": "5e1f0a00-0000-4000-8000-00000000a000", "memory_total_mib": 81920},
        {"index": 1, "name": "MTT S5000", "uuid": "5e1f0a00-0000-4000-8000-00000000a001", "memory_total_mib": 81920},
    ]


def test_gmi_json_slime_reference_shape_without_total():
    # shared/reference/slime.md section 7: {"GPU":[{"Index","GPU UUID","FB Memory Usage":{"Used"},"Utilization"}]}
    text = json.dumps(
        {
            "GPU": [
                {
                    "Index": str(i),
                    "GPU UUID": "u%d" % i,
                    "FB Memory Usage": {"Used": "12 MiB"},
                    "Utilization": {"Gpu": "3%"},
                }
                for i in range(8)
            ]
        }
    )
    driver, devices = fmt.parse_gmi_json(text)
    assert driver is None
    assert [d["index"] for d in devices] == list(range(8))
    assert devices[5]["uuid"] == "u5"
    assert all(d["memory_total_mib"] is None for d in devices)


@pytest.mark.parametrize(
    "doc",
    [
        {
            "driver_version": "2.7.0",
            "gpus": [{"index": 0, "product_name": "MTT S4000", "uuid": "x", "fb_memory_usage": {"total": "49152 MiB"}}],
        },
        {
            "Driver Version": "2.7.0",
            "GPU": {"Index": "0", "Product Name": "MTT S4000", "GPU UUID": "x", "FB Memory Usage": {"Total": "48GiB"}},
        },
        {
            "DRIVER-VERSION": "2.7.0",
            "GPU": {"0": {"Product Name": "MTT S4000", "GPU UUID": "x", "Memory Total": 49152}},
        },
        {
            "Driver Version ": "2.7.0",
            "GPU 0": {"Product Name": "MTT S4000", "uuid": "x", "fb memory usage": {"TOTAL": "49152MiB"}},
        },
        [{"Index": 0, "Name": "MTT S4000", "UUID": "x", "Driver Version": "2.7.0", "Memory": {"Total": "49152MiB"}}],
    ],
)
def test_gmi_json_is_lenient_about_key_spellings(doc):
    driver, devices = fmt.parse_gmi_json(json.dumps(doc))
    assert driver == "2.7.0"
    assert devices == [{"index": 0, "name": "MTT S4000", "uuid": "x", "memory_total_mib": 49152}]


def test_gmi_json_after_a_banner_line():
    text = "WARNING: mtml version mismatch\n" + sample("mthreads-gmi_q_json_s5000.json")
    assert len(fmt.parse_gmi_json(text)[1]) == 2


@pytest.mark.parametrize("text", GARBAGE)
def test_gmi_json_garbage(text):
    assert fmt.parse_gmi_json(text)[1] == []


# ---------------------------------------------------------------- -q text


def test_gmi_query_text():
    driver, devices = fmt.parse_gmi_query(Q_TEXT_S4000)
    assert driver == "1.2.0"
    assert len(devices) == 8
    assert devices[2] == {
        "index": 2,
        "name": "MTT S4000",
        "uuid": "5e1f0a00-0000-4000-8000-000000004002",
        "memory_total_mib": 49152,
    }


def test_gmi_query_text_compact_colons_without_headers():
    driver, devices = fmt.parse_gmi_query(Q_TEXT_FLAT)
    assert driver == "1.0.0"
    assert [(d["index"], d["name"], d["memory_total_mib"]) for d in devices] == [
        (0, "MTT S4000", 49152),
        (1, "MTT S4000", 32768),
    ]


def test_gmi_query_text_with_gpu_n_headers_and_tabs():
    text = (
        "Driver Version : 3.0.0\nGPU 0\n\tProduct Name : MTT S4000\n\tFB Memory Usage\n\t\tTotal : 49152 MiB\n"
        "GPU 1\n\tProduct Name : MTT S4000\n"
    )
    driver, devices = fmt.parse_gmi_query(text)
    assert driver == "3.0.0"
    assert [(d["index"], d["memory_total_mib"]) for d in devices] == [(0, 49152), (1, None)]


def test_query_parser_reads_fb_not_bar1_total():
    driver, devices = fmt.parse_gmi_query(NVIDIA_Q_TEXT)
    assert driver == "545.23.08"
    assert [d["memory_total_mib"] for d in devices] == [11264, 11264]
    assert devices[1]["uuid"] == "GPU-0a1b2c3d-0000-4000-8000-000000002081"


@pytest.mark.parametrize("text", GARBAGE + [sample("mthreads-gmi_L_colon.txt"), sample("mthreads-gmi_table_s4000.txt")])
def test_gmi_query_garbage_and_other_formats(text):
    assert fmt.parse_gmi_query(text)[1] == []


# ---------------------------------------------------------------- plain table


def test_gmi_table_s4000():
    driver, devices = fmt.parse_gmi_table(sample("mthreads-gmi_table_s4000.txt"))
    assert driver == "3.0.0"
    assert devices == [
        {"index": 0, "name": "MTT S4000", "uuid": None, "memory_total_mib": 49152},
        {"index": 1, "name": "MTT S4000", "uuid": None, "memory_total_mib": 49152},
    ]


def test_gmi_table_iommu_off_shows_32768():
    driver, devices = fmt.parse_gmi_table(sample("mthreads-gmi_table_s4000_iommu_off.txt"))
    assert driver == "1.2.0"
    assert devices == [{"index": 0, "name": "MTT S4000", "uuid": None, "memory_total_mib": 32768}]


def test_gmi_table_s5000_with_perf_column():
    driver, devices = fmt.parse_gmi_table(sample("mthreads-gmi_table_s5000.txt"))
    assert driver == "3.3.5-server"
    assert [d["memory_total_mib"] for d in devices] == [81920, 81920]


@pytest.mark.parametrize("text", GARBAGE + [sample("nvidia-smi_L_h100_8x.txt")])
def test_gmi_table_garbage(text):
    assert fmt.parse_gmi_table(text)[1] == []


# ---------------------------------------------------------------- nvidia-smi CSV


def test_smi_csv_noheader_nounits():
    driver, devices = fmt.parse_smi_csv(sample("nvidia-smi_query_noheader_nounits_h100_8x.csv"))
    assert driver == "550.54.15"
    assert len(devices) == 8
    assert devices[4] == {
        "index": 4,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-0a1b2c3d-0000-4000-8000-000000000004",
        "memory_total_mib": 81559,
    }


def test_smi_csv_with_header_and_mib_units():
    driver, devices = fmt.parse_smi_csv(sample("nvidia-smi_query_header_units.csv"))
    assert driver == "610.57.04"
    assert [(d["name"], d["memory_total_mib"]) for d in devices] == [
        ("NVIDIA RTX A5000", 24564),
        ("NVIDIA RTX 4500 Ada Generation", 24570),
    ]


def test_smi_csv_header_decides_the_column_order():
    driver, devices = fmt.parse_smi_csv(sample("nvidia-smi_query_reordered_tesla_m40.csv"))
    assert driver == "384.81"
    assert devices[1] == {
        "index": 1,
        "name": "Tesla M40",
        "uuid": "GPU-0a1b2c3d-0000-4000-8000-0000000m4001",
        "memory_total_mib": 11443,
    }


def test_smi_csv_skips_warning_lines_and_na():
    text = (
        "WARNING: infoROM is corrupted at gpu 0000:01:00.0\n"
        "0, NVIDIA A10, GPU-1, [N/A], 535.104.05\n"
        "1, NVIDIA A10, GPU-2, 23028, 535.104.05\n"
    )
    driver, devices = fmt.parse_smi_csv(text)
    assert [(d["index"], d["memory_total_mib"]) for d in devices] == [(0, None), (1, 23028)]
    assert driver == "535.104.05"


@pytest.mark.parametrize(
    "text",
    GARBAGE
    + [
        sample("nvidia-smi_no_driver.txt"),
        sample("nvidia-smi_nvml_unknown_error.txt"),
        sample("nvidia-smi_L_h100_8x.txt"),
    ],
)
def test_smi_csv_errors_and_garbage(text):
    assert fmt.parse_smi_csv(text)[1] == []


# ---------------------------------------------------------------- empty output in a container


@pytest.mark.parametrize(
    "parser",
    [
        fmt.parse_list,
        lambda t: fmt.parse_gmi_json(t)[1],
        lambda t: fmt.parse_gmi_query(t)[1],
        lambda t: fmt.parse_gmi_table(t)[1],
        lambda t: fmt.parse_smi_csv(t)[1],
    ],
)
@pytest.mark.parametrize("name", ["mthreads-gmi_container_empty.txt", "mthreads-gmi_no_device.txt"])
def test_every_parser_reads_nothing_from_an_empty_container_or_no_device(parser, name):
    assert parser(sample(name)) == []


# ---------------------------------------------------------------- helpers


@pytest.mark.parametrize(
    "value,mib",
    [
        ("49152MiB", 49152),
        ("49152 MiB", 49152),
        ("49152", 49152),
        (49152, 49152),
        ("48 GiB", 49152),
        ("48GB", 49152),
        ("51539607552 B", 49152),
        ("N/A", None),
        ("[N/A]", None),
        ("", None),
        (None, None),
        ("lots", None),
        (True, None),
    ],
)
def test_parse_mib(value, mib):
    assert fmt.parse_mib(value) == mib


def test_musa_memory_hint_for_iommu_off():
    devices = [{"index": i, "name": "MTT S4000", "memory_total_mib": 32768} for i in range(8)]
    hint = acc.musa_memory_hint(devices, 49152)
    assert hint.startswith("GPU 0, 1, 2, 3, 4, 5, 6, 7 (MTT S4000) report 32768 MiB instead of 49152 MiB: IOMMU is off")
    for needle in ("0 devices", "801", "IOMMU on", "ACS redirect off", "mt-container-toolkit bound to Docker"):
        assert needle in hint


def test_musa_memory_hint_none_when_healthy_or_not_expected():
    healthy = [{"index": 0, "name": "MTT S4000", "memory_total_mib": 49152}]
    assert acc.musa_memory_hint(healthy, 49152) is None
    assert acc.musa_memory_hint([{"index": 0, "memory_total_mib": 32768}], None) is None
    assert acc.musa_memory_hint([{"index": 0, "memory_total_mib": 32768}], 32768) is None
    assert acc.musa_memory_hint([], 49152) is None


# ---------------------------------------------------------------- probe


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    """No real tool can be found: empty PATH, no vendor install directories."""
    no_tools(monkeypatch, tmp_path / "empty-path")
    return tmp_path


def fake_tools(directory, *names):
    directory.mkdir(exist_ok=True)
    for name in names:
        path = directory / name
        path.write_text("#!/bin/sh\nexit 99\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(directory)


class Runner:
    """An injectable `run`: maps the arguments after the program name to (rc, stdout, stderr)."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, argv):
        key = (os.path.basename(argv[0]),) + tuple(argv[1:])
        self.calls.append(key)
        return self.answers.get(key, (2, "", "unknown option"))


def test_probe_musa_reads_the_table_first_and_uuids_from_json(isolated):
    tools = fake_tools(isolated / "tools", "mthreads-gmi")
    two = sample("mthreads-gmi_table_s5000.txt")
    run = Runner(
        {
            ("mthreads-gmi",): (0, two, ""),
            ("mthreads-gmi", "-q", "--json"): (0, sample("mthreads-gmi_q_json_s5000.json"), ""),
        }
    )
    result = acc.probe("musa", tools, run)
    assert result["vendor"] == "musa" and result["tool"] == "mthreads-gmi"
    assert result["tool_path"] == os.path.join(tools, "mthreads-gmi")
    assert (result["count"], result["source_format"], result["verified"]) == (2, "table", True)
    assert result["driver_version"] == "3.3.5-server" and result["command"] == "mthreads-gmi"
    assert [d["memory_total_mib"] for d in result["devices"]] == [81920, 81920]
    assert result["devices"][1]["uuid"] == "5e1f0a00-0000-4000-8000-00000000a001"
    assert run.calls == [("mthreads-gmi",), ("mthreads-gmi", "-q", "--json")]
    assert result["warnings"] == []


def test_probe_musa_warns_when_table_and_json_disagree(isolated):
    tools = fake_tools(isolated / "tools", "mthreads-gmi")
    run = Runner(
        {
            ("mthreads-gmi",): (0, sample("mthreads-gmi_table_s4000_iommu_off.txt"), ""),
            ("mthreads-gmi", "-q", "--json"): (0, sample("mthreads-gmi_q_json_s5000.json"), ""),
        }
    )
    result = acc.probe("musa", tools, run)
    assert result["count"] == 1 and result["devices"][0]["uuid"] is None
    assert result["warnings"] == [
        "mthreads-gmi lists 1 devices in its table but 2 in `mthreads-gmi -q --json`; the table's count is used"
    ]


def test_probe_musa_no_device_with_rc_0_stops_at_zero(isolated):
    tools = fake_tools(isolated / "tools", "mthreads-gmi")
    run = Runner({("mthreads-gmi",): (0, sample("mthreads-gmi_no_device.txt"), "")})
    result = acc.probe("musa", tools, run)
    assert (result["count"], result["no_device"], result["verified"]) == (0, "Error: No MT GPU device found.", None)
    assert run.calls == [("mthreads-gmi",)]  # the other formats would only say it again
    (problem,) = acc.problems_for(result, "musa", tools, expected_count=8)
    assert problem.startswith(
        "no MUSA devices: mthreads-gmi (%s) says 'Error: No MT GPU device found.' (exit 0): the MT driver sees no GPU"
        % os.path.join(tools, "mthreads-gmi")
    )
    assert "IOMMU" in problem and "mt-container-toolkit" in problem


def test_probe_musa_falls_back_to_json_when_the_table_is_unreadable(isolated):
    tools = fake_tools(isolated / "tools", "mthreads-gmi")
    run = Runner(
        {
            ("mthreads-gmi",): (0, "a table layout this parser does not know\n", ""),
            ("mthreads-gmi", "-q", "--json"): (0, sample("mthreads-gmi_q_json_s5000.json"), ""),
        }
    )
    result = acc.probe("musa", tools, run)
    assert (result["count"], result["source_format"], result["verified"]) == (2, "json", True)
    assert result["command"] == "mthreads-gmi -q --json" and result["warnings"] == []


def test_probe_musa_falls_back_to_query_text_and_says_it_is_unverified(isolated):
    tools = fake_tools(isolated / "tools", "mthreads-gmi")
    run = Runner(
        {
            ("mthreads-gmi",): (3, "", "mtml: unknown error"),
            ("mthreads-gmi", "-q", "--json"): (2, "", "Invalid option --json"),
            ("mthreads-gmi", "-q"): (0, Q_TEXT_S4000, ""),
        }
    )
    result = acc.probe("musa", tools, run)
    assert (result["count"], result["source_format"], result["driver_version"]) == (8, "query", "1.2.0")
    assert result["verified"] is False
    assert [a["format"] for a in result["attempts"]] == ["table", "json", "query"]
    (warning,) = result["warnings"]
    assert warning.startswith("the device list comes from `mthreads-gmi -q`, a format reconstructed without a public")
    assert warning.endswith("listed no device (rc 3: mtml: unknown error)")


@pytest.mark.parametrize(
    "name", ["mthreads-gmi_L_spaced_colon.txt", "mthreads-gmi_-L.txt", "mthreads-gmi_-L_colon.txt"]
)
def test_probe_musa_list_is_the_last_resort(isolated, name):
    tools = fake_tools(isolated / "tools", "mthreads-gmi")
    run = Runner(
        {
            ("mthreads-gmi",): (0, "", ""),
            ("mthreads-gmi", "-q", "--json"): (0, "", ""),
            ("mthreads-gmi", "-q"): (0, "", ""),
            ("mthreads-gmi", "-L"): (0, sample(name), ""),
        }
    )
    result = acc.probe("musa", tools, run)
    assert (result["count"], result["source_format"], result["verified"]) == (8, "list", False)
    assert all(d["memory_total_mib"] is None for d in result["devices"])
    uuid = result["devices"][0]["uuid"]
    assert uuid and not uuid.startswith("GPU-")  # MT UUIDs carry no GPU- prefix
    assert "`mthreads-gmi -L`" in result["warnings"][0]


def test_probe_musa_table_only(isolated):
    """An old mthreads-gmi (1.12) that knows none of the other flags."""
    tools = fake_tools(isolated / "tools", "mthreads-gmi")
    run = Runner({("mthreads-gmi",): (0, sample("mthreads-gmi_table_s4000_iommu_off.txt"), "")})
    result = acc.probe("musa", tools, run)
    assert (result["count"], result["source_format"], result["verified"]) == (1, "table", True)
    assert result["devices"][0]["memory_total_mib"] == 32768 and result["warnings"] == []


def test_probe_musa_in_a_container_prints_nothing(isolated):
    tools = fake_tools(isolated / "tools", "mthreads-gmi")
    empty = sample("mthreads-gmi_container_empty.txt")
    run = Runner(
        {
            k: (0, empty, "")
            for k in [
                ("mthreads-gmi", "-q", "--json"),
                ("mthreads-gmi", "-q"),
                ("mthreads-gmi", "-L"),
                ("mthreads-gmi",),
            ]
        }
    )
    result = acc.probe("musa", tools, run)
    assert result["tool_path"] and result["count"] == 0 and result["devices"] == []
    assert result["source_format"] is None and result["tool_output"] == ""
    assert len(result["attempts"]) == 4


def test_probe_auto_tries_musa_then_cuda(isolated):
    tools = fake_tools(isolated / "tools", "nvidia-smi")
    run = Runner(
        {
            ("nvidia-smi", acc.query_gpu(), "--format=csv,noheader,nounits"): (
                0,
                sample("nvidia-smi_query_noheader_nounits_h100_8x.csv"),
                "",
            )
        }
    )
    result = acc.probe("auto", tools, run)
    assert (result["vendor"], result["count"], result["source_format"]) == ("cuda", 8, "csv")
    assert result["searched"] == ["musa", "cuda"]


def test_probe_auto_keeps_the_vendor_that_lists_devices(isolated):
    tools = fake_tools(isolated / "tools", "mthreads-gmi", "nvidia-smi")
    run = Runner(
        {
            ("mthreads-gmi",): (0, sample("mthreads-gmi_no_device.txt"), ""),
            ("nvidia-smi", "-L"): (0, sample("nvidia-smi_L_h100_8x.txt"), ""),
        }
    )
    result = acc.probe("auto", tools, run)
    assert (result["vendor"], result["count"], result["source_format"]) == ("cuda", 8, "list")


def test_probe_auto_reports_a_found_tool_without_devices(isolated):
    tools = fake_tools(isolated / "tools", "mthreads-gmi")
    run = Runner({("mthreads-gmi",): (0, sample("mthreads-gmi_no_device.txt"), "")})
    result = acc.probe("auto", tools, run)
    assert (result["vendor"], result["count"]) == ("musa", 0)
    assert result["tool_output"] == result["no_device"] == "Error: No MT GPU device found."


def test_probe_cuda_nvml_error_then_list(isolated):
    tools = fake_tools(isolated / "tools", "nvidia-smi")
    run = Runner(
        {
            ("nvidia-smi", acc.query_gpu(), "--format=csv,noheader,nounits"): (
                255,
                sample("nvidia-smi_nvml_unknown_error.txt"),
                "",
            ),
            ("nvidia-smi", "-L"): (255, sample("nvidia-smi_nvml_unknown_error.txt"), ""),
        }
    )
    result = acc.probe("cuda", tools, run)
    assert result["count"] == 0 and result["tool_output"] == "Failed to initialize NVML: Unknown Error"
    assert [a["rc"] for a in result["attempts"]] == [255, 255]


def test_probe_nothing_found(isolated):
    result = acc.probe("auto", str(isolated / "nowhere"), Runner({}))
    assert result["vendor"] is None and result["tool_path"] is None and result["count"] == 0
    assert acc.probe("musa", None, Runner({}))["vendor"] == "musa"


def test_probe_tool_dir_is_searched_before_path(isolated, monkeypatch):
    on_path = fake_tools(isolated / "on-path", "mthreads-gmi")
    first = fake_tools(isolated / "first", "mthreads-gmi")
    monkeypatch.setenv("PATH", on_path)
    run = Runner({("mthreads-gmi", "-L"): (0, sample("mthreads-gmi_L_colon.txt"), "")})
    assert acc.probe("musa", first, run)["tool_path"] == os.path.join(first, "mthreads-gmi")
    assert acc.probe("musa", None, run)["tool_path"] == os.path.join(on_path, "mthreads-gmi")


def test_probe_rejects_unknown_vendor(isolated):
    with pytest.raises(ValueError):
        acc.probe("rocm", None, Runner({}))


def test_default_run_reports_missing_programs_as_rc():
    rc, out, err = acc.default_run(["/nonexistent/mthreads-gmi", "-L"])
    assert rc == 127 and out == "" and err


# ---------------------------------------------------------------- problems and messages


def result_with(devices, vendor="musa"):
    return {
        "vendor": vendor,
        "tool": acc.TOOLS[vendor],
        "tool_path": "/usr/bin/" + acc.TOOLS[vendor],
        "devices": devices,
        "count": len(devices),
        "tool_output": "",
    }


def test_problem_tool_missing_names_the_variables():
    empty = dict(result_with([]), tool_path=None)
    (musa,) = acc.problems_for(empty, "musa", "/opt/mt/bin")
    assert musa.startswith(
        "no MUSA accelerator: mthreads-gmi not found on PATH or in slime_accelerator_tool_dir (/opt/mt/bin)"
    )
    assert "slime_accelerator: cuda" in musa
    (cuda,) = acc.problems_for(empty, "cuda")
    assert "nvidia-smi not found" in cuda and "slime_accelerator: musa" in cuda
    (auto,) = acc.problems_for(empty, "auto")
    assert "neither mthreads-gmi nor nvidia-smi" in auto and "slime_accelerator_tool_dir" in auto


def test_problem_no_devices_mentions_the_container_case():
    (text,) = acc.problems_for(result_with([]), "musa")
    assert "listed no GPU (it printed nothing)" in text
    assert "inside a container mthreads-gmi may print nothing" in text
    assert "torch.musa.device_count()" in text


def test_problem_count_names_slime_gpus_per_node():
    devices = [{"index": i, "name": "MTT S4000", "memory_total_mib": 49152} for i in range(4)]
    (text,) = acc.problems_for(result_with(devices), "musa", expected_count=8, expected_memory_mib=49152)
    assert text.startswith("found 4 MUSA devices (MTT S4000) with mthreads-gmi but slime_gpus_per_node is 8")
    assert "set slime_gpus_per_node: 4" in text


def test_problem_memory_gets_the_iommu_hint_on_musa_and_a_plain_one_on_cuda():
    small = [{"index": i, "name": "MTT S4000", "memory_total_mib": 32768} for i in range(8)]
    (musa,) = acc.problems_for(result_with(small), "musa", expected_count=8, expected_memory_mib=49152)
    assert "IOMMU is off" in musa
    cuda = [{"index": 0, "name": "NVIDIA A10", "memory_total_mib": 23028}]
    (text,) = acc.problems_for(result_with(cuda, "cuda"), "cuda", expected_memory_mib=81559)
    assert text.startswith("1 CUDA device report less memory than the expected 81559 MiB (GPU 0 23028 MiB)")


def test_failure_message_numbers_every_problem():
    assert acc.failure_message("x failed", ["a", "b"]) == "x failed on 2 problems: (1) a; (2) b"
    assert acc.failure_message("y failed", ["a"], noun="check") == "y failed on 1 check: (1) a"


# ---------------------------------------------------------------- the project's stand-ins (tests/standins)

STANDINS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "standins", "rootfs", "usr",
                        "local", "bin")
needs_standins = pytest.mark.skipif(
    not all(os.path.exists(os.path.join(STANDINS, t)) for t in ("mthreads-gmi", "nvidia-smi")),
    reason="tests/standins accelerator tools not present",
)


def standin_run(disabled=()):
    """Run a stand-in with this Python (PATH is empty in these tests); `disabled` argument tuples
    answer like an old tool version that does not know the flag."""
    import sys

    def run(argv):
        if tuple(argv[1:]) in disabled:
            return 2, "", "unknown option"
        return acc.default_run([sys.executable] + list(argv))

    return run


@needs_standins
@pytest.mark.parametrize(
    "disabled,source,memory",
    [
        ((), "table", 49152),
        (((),), "json", 49152),
        (((), ("-q", "--json")), "query", 49152),
        (((), ("-q", "--json"), ("-q",)), "list", None),
    ],
)
@pytest.mark.parametrize("style", ["spaced", "colon"])
def test_standin_mthreads_gmi_in_every_format(isolated, monkeypatch, disabled, source, memory, style):
    monkeypatch.setenv("MTSLIME_STANDIN_GMI_STYLE", style)
    result = acc.probe("musa", STANDINS, standin_run(disabled))
    assert (result["vendor"], result["count"], result["source_format"]) == ("musa", 8, source)
    assert result["verified"] is (source in ("table", "json"))
    assert {d["name"] for d in result["devices"]} == {"MTT S4000"}
    assert all(d["memory_total_mib"] == memory for d in result["devices"])
    assert all(d["uuid"] and not d["uuid"].startswith("GPU-") for d in result["devices"])
    assert result["driver_version"] or source == "list"


@needs_standins
def test_standin_mthreads_gmi_without_devices(isolated, monkeypatch):
    monkeypatch.setenv("MTSLIME_STANDIN_GPUS", "0")
    result = acc.probe("musa", STANDINS, standin_run())
    assert (result["count"], result["no_device"]) == (0, "Error: No MT GPU device found.")
    assert [a["rc"] for a in result["attempts"]] == [0]


@needs_standins
def test_standin_iommu_off_and_fewer_cards(isolated, monkeypatch):
    monkeypatch.setenv("MTSLIME_STANDIN_GPUS", "4")
    monkeypatch.setenv("MTSLIME_STANDIN_GPU_MEMORY_MIB", "32768")
    result = acc.probe("musa", STANDINS, standin_run())
    problems = acc.problems_for(result, "musa", STANDINS, expected_count=8, expected_memory_mib=49152)
    assert problems[0].startswith("found 4 MUSA devices (MTT S4000) with mthreads-gmi but slime_gpus_per_node is 8")
    assert "IOMMU is off" in problems[1]


@needs_standins
@pytest.mark.parametrize(
    "disabled,source", [((), "csv"), (((acc.query_gpu(), "--format=csv,noheader,nounits"),), "list")]
)
def test_standin_nvidia_smi(isolated, monkeypatch, disabled, source):
    monkeypatch.setenv("MTSLIME_STANDIN_VENDOR", "nvidia")  # mthreads-gmi fails like a host without the MT driver
    result = acc.probe("auto", STANDINS, standin_run(disabled))
    assert (result["vendor"], result["count"], result["source_format"]) == ("cuda", 8, source)
    assert result["devices"][0]["name"] == "NVIDIA A100-SXM4-80GB"
    assert result["nvlink"] is False  # topo -m, ANSI header and all, shows no NV# link
    if source == "csv":
        assert result["devices"][0]["memory_total_mib"] == 81920 and result["driver_version"]
    monkeypatch.setenv("MTSLIME_STANDIN_NVLINK", "1")
    assert acc.probe("cuda", STANDINS, standin_run(disabled))["nvlink"] is True


def test_probe_cuda_asks_again_without_a_field_the_driver_rejects(isolated):
    tools = fake_tools(isolated / "tools", "nvidia-smi")
    short = ("index", "name", "uuid", "memory.total")
    run = Runner(
        {
            ("nvidia-smi", acc.query_gpu(), "--format=csv,noheader,nounits"): (
                2,
                "",
                'Field "driver_version" is not a valid field to query.\n',
            ),
            ("nvidia-smi", "--query-gpu=%s" % ",".join(short), "--format=csv,noheader,nounits"): (
                0,
                "0, NVIDIA H200, GPU-0a1b2c3d-0000-4000-8000-000000000000, 143771\n",
                "",
            ),
        }
    )
    result = acc.probe("cuda", tools, run)
    assert (result["count"], result["source_format"], result["driver_version"]) == (1, "csv", None)
    assert result["devices"][0] == {
        "index": 0,
        "name": "NVIDIA H200",
        "uuid": "GPU-0a1b2c3d-0000-4000-8000-000000000000",
        "memory_total_mib": 143771,
    }
    assert result["warnings"] == [
        "nvidia-smi does not know the query field 'driver_version' (rc 2); asked again without it"
    ]
    assert result["nvlink"] is None  # one device: topo -m is not asked


def test_probe_cuda_unknown_index_field_is_not_retried(isolated):
    tools = fake_tools(isolated / "tools", "nvidia-smi")
    run = Runner(
        {
            ("nvidia-smi", acc.query_gpu(), "--format=csv,noheader,nounits"): (
                2,
                'Field "index" is not a valid field to query.\n',
                "",
            ),
            ("nvidia-smi", "-L"): (0, sample("nvidia-smi_L_h100_8x.txt"), ""),
            ("nvidia-smi", "topo", "-m"): (0, sample("nvidia-smi_topo_-m_nvlink.txt"), ""),
        }
    )
    result = acc.probe("cuda", tools, run)
    assert (result["count"], result["source_format"], result["verified"], result["nvlink"]) == (8, "list", True, True)


def test_the_real_nvidia_smi_query_line():
    """real-programs.md: `nvidia-smi` as the collection queries it prints this line."""
    line = "0, NVIDIA H200, GPU-0a1b2c3d-0000-4000-8000-000000000000, 143771, 580.159.04\n"
    _driver, (dev,) = fmt.parse_smi_csv(line)
    assert (dev["name"], dev["memory_total_mib"]) == ("NVIDIA H200", 143771)


@pytest.mark.parametrize(
    "name, gpus, pairs", [("nvidia-smi_topo_-m.txt", 8, 0), ("nvidia-smi_topo_-m_nvlink.txt", 8, 28)]
)
def test_topo_matrix_with_the_ansi_underlined_header(name, gpus, pairs):
    text = sample(name)
    assert "\x1b[4m" in text  # as the real tool prints its header
    assert fmt.parse_topo_matrix(text) == {"gpus": gpus, "nvlink_pairs": pairs}


def test_topo_matrix_garbage():
    assert fmt.parse_topo_matrix("") is None
    assert fmt.parse_topo_matrix("NVIDIA-SMI has failed because it couldn't communicate with the driver.") is None


@pytest.mark.parametrize(
    "name, parser, count",
    [
        ("mthreads-gmi.txt", lambda t: fmt.parse_gmi_table(t)[1], 8),
        ("mthreads-gmi_-L.txt", fmt.parse_list, 8),
        ("mthreads-gmi_-L_colon.txt", fmt.parse_list, 8),
        ("mthreads-gmi_-q.txt", lambda t: fmt.parse_gmi_query(t)[1], 8),
        ("mthreads-gmi_-q_json.json", lambda t: fmt.parse_gmi_json(t)[1], 8),
        ("mthreads-gmi_standin_no_device.txt", lambda t: fmt.parse_gmi_table(t)[1], 0),
        ("nvidia-smi_-L.txt", fmt.parse_list, 8),
        ("nvidia-smi_query_csv.txt", lambda t: fmt.parse_smi_csv(t)[1], 8),
        ("nvidia-smi_query_csv_header.txt", lambda t: fmt.parse_smi_csv(t)[1], 8),
    ],
)
def test_the_standins_samples_read_like_the_real_formats(name, parser, count):
    """The samples the stand-ins print (tests/unit/data/accelerator/README.md) parse as the real tools' output."""
    assert len(parser(sample(name))) == count


def test_s4000_at_32768_gets_the_hint_even_without_an_expected_memory():
    small = [{"index": i, "name": "MTT S4000", "memory_total_mib": 32768} for i in range(8)]
    (text,) = acc.problems_for(result_with(small), "musa", expected_count=8)
    assert "report 32768 MiB instead of 49152 MiB: IOMMU is off" in text
    s5000 = [{"index": 0, "name": "MTT S5000", "memory_total_mib": 81920}]
    assert acc.problems_for(result_with(s5000), "musa", expected_count=1) == []
