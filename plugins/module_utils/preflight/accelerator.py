# Accelerator discovery for mtslime.posttrain modules: probe() runs Moore Threads' mthreads-gmi or
# NVIDIA's nvidia-smi (verified formats first, see gpu_formats.py for the parsers) and returns one
# dict describing the node's devices; problems_for() says what differs from what is expected.
# Standard library only, Python 3.8+.
from __future__ import annotations

import os
import re
import subprocess

from ansible_collections.mtslime.posttrain.plugins.module_utils.preflight.gpu_formats import (
    NVIDIA_QUERY_FIELDS,
    parse_gmi_json,
    parse_gmi_query,
    parse_gmi_table,
    parse_list,
    parse_smi_csv,
    parse_topo_matrix,
)

VENDORS = ("musa", "cuda")
TOOLS = {"musa": "mthreads-gmi", "cuda": "nvidia-smi"}
LABELS = {"musa": "MUSA", "cuda": "CUDA"}

# Searched after tool_dir and PATH: modules run with Ansible's PATH, which may
# lack the vendors' install directories. Tests set this to () for isolation.
EXTRA_TOOL_DIRS = {
    "mthreads-gmi": ("/usr/local/musa/bin", "/usr/bin", "/usr/local/bin", "/usr/sbin"),
    "nvidia-smi": ("/usr/bin", "/usr/local/bin", "/usr/local/nvidia/bin", "/usr/lib/wsl/lib"),
}

TOOL_TIMEOUT = 60

# Healthy MTT S4000 frame buffer, and what it shows when IOMMU is off.
S4000_MIB = 49152
IOMMU_OFF_MIB = 32768



def query_gpu(fields=NVIDIA_QUERY_FIELDS):
    """nvidia-smi's `--query-gpu=<fields>` argument."""
    return "--query-gpu=%s" % ",".join(fields)


# ---------------------------------------------------------------- hints


def musa_memory_hint(devices, expected_mib=S4000_MIB):
    """The IOMMU hint when MUSA cards report 32768 MiB where 49152 MiB (a healthy MTT S4000) is
    expected, else None."""
    if not expected_mib or expected_mib <= IOMMU_OFF_MIB:
        return None
    short = [d for d in devices or [] if d.get("memory_total_mib") == IOMMU_OFF_MIB]
    if not short:
        return None
    which = ", ".join(str(d.get("index")) for d in short)
    name = short[0].get("name") or "MUSA card"
    return (
        "GPU %s (%s) report %d MiB instead of %d MiB: IOMMU is off on this host (a healthy MTT S4000 shows "
        "49152 MiB). With IOMMU off, containers may see 0 devices (torch_musa: 'Error 801: operation not "
        "supported', device count 0). Fix the host as Moore Threads' FAQ prescribes: IOMMU on "
        "(intel_iommu=on, or amd_iommu=on on AMD/Hygon CPUs, plus iommu.passthrough=0 in GRUB_CMDLINE_LINUX_DEFAULT, "
        "then update-grub and reboot), PCIe ACS redirect off for multi-GPU (pci=disable_acs_redir=...), and "
        "mt-container-toolkit bound to Docker" % (which, name, IOMMU_OFF_MIB, expected_mib)
    )


# ---------------------------------------------------------------- probe


def default_run(argv):
    """Run argv and return (rc, stdout, stderr); a missing or hung program is an rc, not an exception."""
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TOOL_TIMEOUT, check=False)
    except OSError as exc:
        return 127, "", str(exc)
    except subprocess.TimeoutExpired:
        return 124, "", "%s did not answer within %d s" % (argv[0], TOOL_TIMEOUT)
    return (
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )


def find_tool(name, tool_dir=None, path=None):
    """Absolute path of `name`: in `tool_dir` first, then on PATH, then in the vendor's usual
    install directories; None when nowhere."""
    candidates = []
    if tool_dir:
        candidates.append(os.path.expanduser(tool_dir))
    search = os.environ.get("PATH", "") if path is None else path
    candidates.extend(p for p in search.split(os.pathsep) if p)
    candidates.extend(EXTRA_TOOL_DIRS.get(name, ()))
    seen = set()
    for directory in candidates:
        if directory in seen:
            continue
        seen.add(directory)
        full = os.path.join(directory, name)
        if os.path.isfile(full) and os.access(full, os.X_OK):
            return full
    return None


def _first_line(*texts):
    for text in texts:
        for line in (text or "").splitlines():
            if line.strip():
                return line.strip()[:200]
    return ""


def _empty_result(vendor, tool):
    return {
        "vendor": vendor,
        "tool": tool,
        "tool_path": None,
        "count": 0,
        "devices": [],
        "driver_version": None,
        "source_format": None,
        "command": None,
        "tool_output": "",
        "attempts": [],
        "verified": None,
        "no_device": None,
        "nvlink": None,
        "warnings": [],
    }


def _attempt(result, run, argv, parser, fmt):
    rc, out, err = run(argv)
    driver, devices = (None, [])
    if rc == 0:
        driver, devices = parser(out)
    result["attempts"].append(
        {
            "command": " ".join([os.path.basename(argv[0])] + list(argv[1:])),
            "rc": rc,
            "format": fmt,
            "devices": len(devices),
            "output": _first_line(out, err),
        }
    )
    return driver, devices


def _use(result, tool, argv, fmt, driver, devices):
    result.update(
        devices=devices,
        driver_version=driver,
        source_format=fmt,
        command=" ".join([tool] + list(argv[1:])),
        verified=fmt in VERIFIED_FORMATS,
    )


# mthreads-gmi's formats, most trusted first (shared/reference/real-programs.md, "GPU tools"): the plain table is
# the one format seen in public captures of many versions (gmi 1.14 to 2.4, S80/S3000/S4000/S5000); `-q --json`
# was seen once; no capture of `-q` text or of `-L` exists, their parsers follow secondary evidence
# (tests/unit/data/accelerator/PROVENANCE-parsers.md) and what they find is reported as unverified.
VERIFIED_FORMATS = ("table", "json", "csv")
MUSA_FALLBACKS = (
    (("-q", "--json"), parse_gmi_json, "json"),
    (("-q",), parse_gmi_query, "query"),
    (("-L",), lambda text: (None, parse_list(text)), "list"),
)
# What mthreads-gmi prints, with rc 0, when the driver sees no GPU (MooreThreads' musa_deploy checker tests).
GMI_NO_DEVICE = re.compile(r"^Error: No MT GPU device found\.?\s*$", re.MULTILINE)


def _probe_musa(tool_path, run):
    result = _empty_result("musa", "mthreads-gmi")
    result["tool_path"] = tool_path
    rc, out, err = run([tool_path])
    driver, table = parse_gmi_table(out) if rc == 0 else (None, [])
    result["attempts"].append(
        {"command": "mthreads-gmi", "rc": rc, "format": "table", "devices": len(table), "output": _first_line(out, err)}
    )
    if table:
        _use(result, "mthreads-gmi", [tool_path], "table", driver, table)
        _compare_json(result, tool_path, run, table)
        return result
    said = GMI_NO_DEVICE.search(out + "\n" + err)
    if rc == 0 and said:
        # the tool answered: the driver sees no GPU. Other formats would only say it again.
        result["no_device"] = said.group(0).strip()
        return result
    for args, parser, fmt in MUSA_FALLBACKS:
        argv = [tool_path] + list(args)
        driver, devices = _attempt(result, run, argv, parser, fmt)
        if devices:
            _use(result, "mthreads-gmi", argv, fmt, driver, devices)
            if fmt not in VERIFIED_FORMATS:
                result["warnings"].append(
                    "the device list comes from `%s`, a format reconstructed without a public capture (its parser "
                    "follows secondary evidence); the plain `mthreads-gmi` table, the verified format, listed no "
                    "device (rc %d: %s)" % (result["command"], rc, _first_line(out, err) or "no output")
                )
            break
    return result


def _compare_json(result, tool_path, run, table):
    """UUIDs from `-q --json` when it lists the same devices as the table; a warning when the counts differ."""
    argv = [tool_path, "-q", "--json"]
    _driver, listed = _attempt(result, run, argv, parse_gmi_json, "json")
    if not listed:
        return
    if len(listed) != len(table):
        result["warnings"].append(
            "mthreads-gmi lists %d devices in its table but %d in `mthreads-gmi -q --json`; the table's count is used"
            % (len(table), len(listed))
        )
        return
    by_index = {d["index"]: d for d in listed}
    for dev in table:
        other = by_index.get(dev["index"])
        if other and not dev["uuid"]:
            dev["uuid"] = other["uuid"]


def _smi_query(tool_path, run, result, fields):
    """The CSV query; an old driver that does not know a field answers rc 2 `Field "x" is not a valid field to
    query.`: ask again without it (index and name are always needed)."""
    while True:
        argv = [tool_path, query_gpu(fields), "--format=csv,noheader,nounits"]
        driver, devices = _attempt(result, run, argv, lambda text, asked=fields: parse_smi_csv(text, asked), "csv")
        if devices:
            return argv, driver, devices
        unknown = SMI_UNKNOWN_FIELD.search(result["attempts"][-1]["output"])
        if result["attempts"][-1]["rc"] != 2 or not unknown or unknown.group(1) not in fields[2:]:
            return argv, None, []
        result["warnings"].append(
            "nvidia-smi does not know the query field %r (rc 2); asked again without it" % unknown.group(1)
        )
        fields = tuple(f for f in fields if f != unknown.group(1))


SMI_UNKNOWN_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')


def _probe_cuda(tool_path, run):
    result = _empty_result("cuda", "nvidia-smi")
    result["tool_path"] = tool_path
    argv, driver, devices = _smi_query(tool_path, run, result, NVIDIA_QUERY_FIELDS)
    if devices:
        _use(result, "nvidia-smi", argv, "csv", driver, devices)
    else:
        argv = [tool_path, "-L"]
        driver, devices = _attempt(result, run, argv, lambda text: (None, parse_list(text)), "list")
        if devices:
            _use(result, "nvidia-smi", argv, "list", driver, devices)
            result["verified"] = True
    if len(devices) > 1:
        rc, out, _err = run([tool_path, "topo", "-m"])
        topo = parse_topo_matrix(out) if rc == 0 else None
        if topo:
            result["nvlink"] = topo["nvlink_pairs"] > 0
    return result


def _finish(result):
    result["devices"] = sorted(result["devices"], key=lambda d: d["index"])
    result["count"] = len(result["devices"])
    # what the tool said: a successful run's words (`Error: No MT GPU device found.` comes with rc 0)
    # tell more than an old version rejecting a flag
    said = [a["output"] for a in result["attempts"] if a["rc"] == 0 and a["output"]]
    said = said or [a["output"] for a in result["attempts"] if a["output"]]
    result["tool_output"] = said[0] if said else ""
    return result


def probe(vendor="auto", tool_dir=None, run=None, path=None):
    """Find and query the node's accelerators.

    vendor: "musa" runs mthreads-gmi: its plain table first (the verified format; UUIDs from
    `-q --json` when it lists as many devices), then `-q --json`, `-q` and `-L` only when the table
    lists none (`Error: No MT GPU device found.` with rc 0 stops there: zero devices). "cuda" runs
    nvidia-smi (the CSV query, asked again without a field an old driver rejects with rc 2, then
    -L; `topo -m` for NVLink). "auto" tries MUSA, then CUDA, and keeps the first that lists devices
    (or, when none does, the first whose tool exists).
    tool_dir: a directory searched before PATH. run: callable(argv) -> (rc, stdout, stderr).

    Returns {vendor, tool, tool_path, count, devices: [{index, name, uuid, memory_total_mib}],
    driver_version, source_format, command, verified, no_device, nvlink, warnings, tool_output,
    attempts, searched}."""
    run = run or default_run
    vendors = VENDORS if vendor in (None, "", "auto") else (vendor,)
    found = []
    for name in vendors:
        if name not in TOOLS:
            raise ValueError("unknown accelerator vendor %r (expected auto, musa or cuda)" % (name,))
        tool_path = find_tool(TOOLS[name], tool_dir, path)
        if tool_path is None:
            continue
        result = _finish((_probe_musa if name == "musa" else _probe_cuda)(tool_path, run))
        if result["count"]:
            result["searched"] = list(vendors)
            return result
        found.append(result)
    if found:
        result = found[0]
    else:
        result = _empty_result(
            vendors[0] if len(vendors) == 1 else None, TOOLS[vendors[0]] if len(vendors) == 1 else None
        )
    result["searched"] = list(vendors)
    return result


def tools_for(vendor):
    vendors = VENDORS if vendor in (None, "", "auto") else (vendor,)
    return [TOOLS[v] for v in vendors if v in TOOLS]


# ---------------------------------------------------------------- problems


def _names(devices):
    names = sorted({d.get("name") for d in devices if d.get("name")})
    return ", ".join(names) if names else "unnamed"


def problems_for(result, vendor, tool_dir=None, expected_count=None, expected_memory_mib=None):
    """Sentences for everything about `result` (a probe() dict) that is not as expected."""
    problems = []
    where = "on PATH or in slime_accelerator_tool_dir%s" % (" (%s)" % tool_dir if tool_dir else "")
    if not result.get("tool_path"):
        if vendor == "musa":
            problems.append(
                "no MUSA accelerator: mthreads-gmi not found %s; install the MT driver/tools (mthreads-gmi), "
                "set slime_accelerator_tool_dir to its directory, or set slime_accelerator: cuda for NVIDIA nodes"
                % where
            )
        elif vendor == "cuda":
            problems.append(
                "no CUDA accelerator: nvidia-smi not found %s; install the NVIDIA driver (it ships nvidia-smi), "
                "set slime_accelerator_tool_dir to its directory, or set slime_accelerator: musa for Moore Threads "
                "nodes"
                % where
            )
        else:
            problems.append(
                "no accelerator: neither %s found %s; install the Moore Threads driver/tools or the NVIDIA driver, "
                "or set slime_accelerator_tool_dir to the directory that holds the tool"
                % (" nor ".join(tools_for(vendor)), where)
            )
        return problems
    vendor_found = result.get("vendor")
    label = LABELS.get(vendor_found, "accelerator")
    tool = result.get("tool") or TOOLS.get(vendor_found, "the tool")
    devices = result.get("devices") or []
    if not devices:
        if result.get("no_device"):
            problems.append(
                "no MUSA devices: %s (%s) says %r (exit 0): the MT driver sees no GPU. On the host check that the "
                "mtgpu driver is loaded (lsmod | grep mtgpu, dmesg) and that IOMMU is on (Moore Threads FAQ: IOMMU "
                "on, PCIe ACS redirect off); in a container the devices are not passed in (mt-container-toolkit bound "
                "to Docker, --runtime mthreads, or --privileged)" % (tool, result.get("tool_path"), result["no_device"])
            )
            return problems
        said = result.get("tool_output")
        said = "it printed %r" % said if said else "it printed nothing"
        if vendor_found == "musa":
            problems.append(
                "no MUSA devices: %s (%s) listed no GPU (%s); on the host this means the mtgpu driver is not loaded "
                "or IOMMU is off (Moore Threads FAQ: IOMMU on, PCIe ACS redirect off, mt-container-toolkit bound to "
                "Docker); "
                "inside a container mthreads-gmi may print nothing, so run the check on the host, or count with "
                "python -c 'import torch, torch_musa; print(torch.musa.device_count())' in the container"
                % (tool, result.get("tool_path"), said)
            )
        else:
            problems.append(
                "no %s devices: %s (%s) listed no GPU (%s); load the driver (a kernel update may need the module "
                "rebuilt) and check that the node's GPUs are visible (lspci), or set slime_accelerator to the node's "
                "vendor"
                % (label, tool, result.get("tool_path"), said)
            )
        return problems
    count = len(devices)
    if expected_count is not None and count != expected_count:
        problems.append(
            "found %d %s device%s (%s) with %s but slime_gpus_per_node is %d; set slime_gpus_per_node: %d for this "
            "host (host_vars), or bring the missing devices back (check %s on the host, dmesg for the driver)"
            % (count, label, "" if count == 1 else "s", _names(devices), tool, expected_count, count, tool)
        )
    if not expected_memory_mib and vendor_found == "musa":
        # an MTT S4000 has 49152 MiB whatever was asked: 32768 is the IOMMU-off symptom
        hint = musa_memory_hint([d for d in devices if (d.get("name") or "").upper().endswith("S4000")], S4000_MIB)
        if hint:
            problems.append(hint)
    if expected_memory_mib:
        small = [
            d for d in devices if d.get("memory_total_mib") is not None and d["memory_total_mib"] < expected_memory_mib
        ]
        if small:
            hint = musa_memory_hint(small, expected_memory_mib) if vendor_found == "musa" else None
            if hint:
                problems.append(hint)
            else:
                listed = ", ".join("GPU %s %d MiB" % (d["index"], d["memory_total_mib"]) for d in small)
                problems.append(
                    "%d %s device%s report less memory than the expected %d MiB (%s); check the card model and driver, "
                    "or set the expected memory (expected_memory_mib) to what this model has"
                    % (len(small), label, "" if len(small) == 1 else "s", expected_memory_mib, listed)
                )
    return problems


def failure_message(prefix, problems, noun="problem"):
    """One readable message for several problems: `<prefix> on 2 problems: (1) ...; (2) ...`."""
    return "%s on %d %s%s: %s" % (
        prefix,
        len(problems),
        noun,
        "" if len(problems) == 1 else "s",
        "; ".join("(%d) %s" % (i + 1, p) for i, p in enumerate(problems)),
    )
