#!/usr/bin/env python
"""Write the options of each role's meta/argument_specs.yml from the inventory schema
(plugins/plugin_utils/inventory/variables.py): type, elements, choices, description, no_log, and the default from
the collection's defaults (roles/settings/defaults/main/). Which role reads which variables is ROLE_OPTIONS below;
each entry point's short_description and description stay as written in the file. `--check` compares instead.

    tools/argument_specs.py [--check]
"""
from __future__ import annotations

import argparse
import os
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "collections"))

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory import defaults  # noqa: E402
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.schema import Choice, List  # noqa: E402
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.variables import (  # noqa: E402
    BY_NAME,
    COMPUTED_VARS,
    VARS,
)

COMMAND = "tools/argument_specs.py"
# {role: {entry point: [variable]}}: what each role reads. The settings role documents every default (its entry
# point is not `main`, so loading it runs no argument validation). roles/prepare's options are the calling roles'
# parameters, not inventory variables: written by hand, as are an entry point's options whose names start with `_`.
ROLE_OPTIONS = {
    "container": {"main": [
        "container_enabled", "container_name", "container_image", "container_volumes", "container_run_volumes",
        "container_network_mode", "container_privileged", "container_shm_size", "container_command",
        "container_python_interpreter", "container_recreate", "container_pull", "container_image_archive",
        "container_image_archive_location", "container_image_archive_ids", "container_image_digest",
        "container_registry", "container_extra_volumes", "container_extra_env", "container_devices",
        "container_device_requests_extra", "container_runtime", "container_verify_paths", "container_archive_dir",
        "slime_accelerator_profile", "slime_gpus_per_node", "ray_dashboard_port", "slime_work_dir",
        "train_job_supervise", "train_job_supervise_dir", "train_job_supervise_docker_socket",
        "train_job_supervise_keeper"]},
    "convert": {"main": [
        "slime_dir", "slime_megatron_dir", "slime_musa_patch_dir", "slime_hf_model_dir", "slime_mcore_dir",
        "slime_model_args", "slime_accelerator_profile", "convert_script", "convert_nproc_per_node",
        "convert_extra_args", "convert_log_file", "convert_master_port", "convert_timeout", "convert_poll_interval",
        "convert_temp_suffix", "convert_lock_timeout"],
        "smoke": [
            "slime_dir", "slime_megatron_dir", "slime_musa_patch_dir", "slime_accelerator_profile", "convert_script",
            "convert_extra_args"]},
    "data": {"main": [
        "data_method", "data_archive_url", "data_archive_dest", "data_archive_files", "data_archive_sha256",
        "data_download_retries", "data_download_timeout", "data_min_rows", "data_split_input", "data_split_source",
        "data_split_test_size", "data_split_seed", "data_split_train_output", "data_split_test_output",
        "slime_data_dir", "slime_train_file", "slime_eval_file", "slime_train_args", "slime_train_args_overrides",
        "data_lock_timeout"]},
    "model": {"main": [
        "model_source", "model_id", "model_revision", "model_hf_endpoint", "model_hf_token", "model_http_url",
        "model_source_dir", "model_expected_bytes", "model_download_timeout", "model_poll_interval",
        "model_temp_suffix", "model_sha256_manifest", "slime_hf_model_dir", "slime_model_args", "model_lock_timeout"]},
    "ray_head": {"main": [
        "ray_gcs_port", "ray_dashboard_port", "ray_dashboard_host", "ray_num_cpus", "ray_head_restart",
        "ray_head_wait_timeout", "ray_head_wait_interval", "ray_head_start_extra_args", "slime_cluster_info",
        "slime_gpus_per_node", "slime_node_ifname", "slime_node_env"]},
    "train_job": {
        "main": [
            "train_job_state", "train_job_runtime_env_excludes", "train_job_wait_first_step",
            "train_job_first_step_timeout", "train_job_max_failures_at_step", "train_job_retry",
            "train_job_follow_logs", "train_job_render_dir", "slime_experiment", "slime_model_name",
            "slime_train_args", "slime_train_args_overrides", "slime_model_args", "slime_work_dir", "slime_log_dir",
            "slime_runtime_env_vars", "slime_runtime_env_vars_extra", "ray_dashboard_port", "ray_dashboard_host",
            "train_job_notify", "train_job_keep_checkpoints", "train_job_prune", "train_job_trash_dir",
            "train_job_supervise", "train_job_supervise_interval", "train_job_supervise_dir", "container_name",
            "container_python_interpreter", "container_enabled"],
        "render": ["train_job_render_dir"],
    },
    "smoke": {"main": [
        "smoke_dir", "smoke_num_layers", "smoke_timeout", "smoke_poll_interval", "smoke_master_port",
        "slime_model_args", "slime_hf_model_dir", "slime_dir", "slime_megatron_dir", "slime_musa_patch_dir",
        "slime_accelerator", "slime_accelerator_profile", "slime_gpus_per_node"]},
    "settings": {"defaults": [var.name for var in VARS if var.name in defaults.load()]},
}
COMPUTED = {var.name: var for var in COMPUTED_VARS}


def option(name):
    """The argument spec of one variable, from its schema entry and its default."""
    var = BY_NAME.get(name) or COMPUTED[name]
    spec = {"description": var.doc, "type": var.type.spec_type}
    elements = var.type.elements if isinstance(var.type, List) else None
    if elements is not None:
        spec["elements"] = elements.spec_type
    for type_ in (var.type, elements):
        if isinstance(type_, Choice):
            spec["choices"] = list(type_.choices)
    found = defaults.load()
    if name in found:
        spec["default"] = found[name]
    elif var.required or name in COMPUTED:
        spec["required"] = True
    if var.secret:
        spec["no_log"] = True
    return spec


class Dumper(yaml.SafeDumper):
    """Block sequences indented under their key, as yamllint asks."""

    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


def path_of(role):
    return os.path.join(REPO, "roles", role, "meta", "argument_specs.yml")


def render(role):
    """The file's text: its entry points' own descriptions, the options generated."""
    with open(path_of(role), encoding="utf-8") as handle:
        specs = (yaml.safe_load(handle) or {}).get("argument_specs") or {}
    result = {}
    for entry, names in ROLE_OPTIONS[role].items():
        spec = {key: value for key, value in (specs.get(entry) or {}).items() if key != "options"}
        spec["options"] = {name: option(name) for name in names}
        # an entry point's own parameters (a leading _, set by its caller, not the inventory) stay as written
        spec["options"].update({name: value for name, value in ((specs.get(entry) or {}).get("options") or {}).items()
                                if name.startswith("_")})
        result[entry] = spec
    header = ("---\n# Options generated from plugins/plugin_utils/inventory/variables.py by %s; edit the schema\n"
              "# or the defaults (roles/settings/defaults/main/), then run it; the entry points' descriptions stay.\n"
              % COMMAND)
    return header + yaml.dump({"argument_specs": result}, Dumper=Dumper, sort_keys=False, width=115,
                              allow_unicode=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    stale = []
    for role in ROLE_OPTIONS:
        text = render(role)
        with open(path_of(role), encoding="utf-8") as handle:
            current = handle.read()
        if text == current:
            continue
        if args.check:
            stale.append(os.path.relpath(path_of(role), REPO))
            continue
        with open(path_of(role), "w", encoding="utf-8") as handle:
            handle.write(text)
        print("wrote %s" % os.path.relpath(path_of(role), REPO))
    if stale:
        print("%s differ from the schema: run %s" % (", ".join(stale), COMMAND), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
