# Every inventory variable the collection reads, with its type (schema.py): the one source of the types, read by
# the configuration check, docs/configuration.md and the roles' meta/argument_specs.yml (both generated). Defaults
# live in roles/settings/defaults/main/<topic>.yml (defaults.py). To add a variable: add a Var to the topic's list
# below (and to ROLE_OPTIONS for the roles that read it), its default to the topic file, then run
# tools/configuration_doc.py and tools/argument_specs.py.
from __future__ import annotations

import re

from ansible_collections.mtslime.posttrain.plugins.plugin_utils.training import known_flags
from ansible_collections.mtslime.posttrain.plugins.plugin_utils.inventory.schema import (
    ENV_NAME_RE,
    Bool,
    FlagBool,
    Choice,
    ControllerPath,
    Dict,
    Int,
    Ip,
    List,
    Name,
    Path,
    Port,
    Scalar,
    Str,
    Type,
    Url,
    Var,
    Volume,
    env_dict,
    kind_of,
)

FLAG_KEY_RE = re.compile(r"^(--)?[a-z0-9][a-z0-9_-]*$")
ARRAY_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _flag_value_problem(value):
    if value is None or isinstance(value, (bool, int, float)):
        return None
    if isinstance(value, str):
        return Scalar().check(value)
    if isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, (dict, list, tuple)) or item is None:
                return "must be a value or a list of values, not a list holding %s" % kind_of(item)
            problem = Scalar().check(item)
            if problem:
                return problem
        return None
    return "must be a value, a list of values, true/false or null, not %s" % kind_of(value)


class Flags(Type):
    """{flag: value}: a flag name (train.py's, without or with the leading --) and its value. The
    values' types come from the parsers (known_flags.json) and are checked by training/config.py."""
    spec_type = "dict"
    doc = "dict `{flag: value}` (true = bare flag, false/null = left out, a list = several values)"

    def check(self, value):
        if not isinstance(value, dict):
            return "must be a dict {flag: value}, not %s" % kind_of(value)
        for flag, item in value.items():
            if not (isinstance(flag, str) and FLAG_KEY_RE.fullmatch(flag)):
                return "has the key %r, which is not a flag name (lower-case letters, digits and '-')" % (flag,)
            problem = _flag_value_problem(item)
            if problem:
                return "['%s'] %s" % (flag, problem)
        return None


class ArgArrays(Type):
    """{array name: {flag: value}}: the run script's bash arrays."""
    spec_type = "dict"
    doc = "dict `{ARRAY_NAME: {flag: value}}` (the run script's bash arrays)"

    def check(self, value):
        if not isinstance(value, dict):
            return "must be a dict {ARRAY_NAME: {flag: value}}, not %s" % kind_of(value)
        for name, flags in value.items():
            if not (isinstance(name, str) and ARRAY_NAME_RE.fullmatch(name)):
                return ("has the array name %r, which is not a bash variable name ([A-Za-z_][A-Za-z0-9_]*)"
                        % (name,))
            if flags is None:
                continue
            problem = Flags().check(flags)
            if problem:
                return ".%s %s" % (name, problem)
        return None


class AcceleratorProfiles(Type):
    spec_type = "dict"
    doc = "dict `{vendor: profile}`; a profile has smi, container_env, container_device_requests, " \
          "runtime_env_vars, process_group_backend, patch_converter"
    KEYS = {"smi": Name(), "container_env": env_dict(), "container_device_requests": List(Dict()),
            "runtime_env_vars": env_dict(), "process_group_backend": Str(r"^[a-z:,]+$"),
            "patch_converter": Bool()}

    def check(self, value):
        problem = Dict(r"^[a-z][a-z0-9_]*$", Dict()).check(value)
        if problem:
            return problem
        for vendor, profile in value.items():
            for key, type_ in self.KEYS.items():
                if key not in profile:
                    return "[%r] lacks %s" % (vendor, key)
                problem = type_.check(profile[key])
                if problem:
                    return "[%r].%s %s" % (vendor, key, problem)
        return None


class Notify(Type):
    """{webhooks: [URL], command: "..."}: where word of the job's events goes (job_notify). The URLs go to
    urllib only, never to a shell, so a query string's '&' is allowed. Problems never quote a URL (a secret)."""
    spec_type = "dict"
    doc = "dict `{webhooks: [http(s) URL], command: shell command}` (either or both; `{}` = nothing sent)"
    URL_RE = re.compile(r"^https?://\S+$")

    def check(self, value):
        if not isinstance(value, dict):
            return "must be a dict {webhooks: [URL], command: ...}, not %s" % kind_of(value)
        for key in value:
            if key not in ("webhooks", "command"):
                return "has the key %r; the keys are webhooks and command" % (key,)
        hooks = value.get("webhooks", [])
        if not isinstance(hooks, list):
            return ".webhooks must be a list of URLs, not %s" % kind_of(hooks)
        for index, url in enumerate(hooks):
            if not (isinstance(url, str) and self.URL_RE.fullmatch(url)):
                return ".webhooks item %d must be an http(s) URL without spaces" % index
        problem = Str(empty_ok=True).check(value.get("command", ""))
        return ".command %s" % problem if problem else None


IMAGE = Str(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$", "must be an image reference (registry/name:tag or @sha256:...)")
SUFFIX = Str(r"^\.[A-Za-z0-9._-]+$", "must be a suffix like .partial (a dot, then letters, digits, . _ -)")
COMMAND_WORD = Str(r"^[A-Za-z0-9_./+-]+$", "must be a command or path without spaces or shell characters")
ARG = Str(doc="argument (one line)")
MOUNTED = Path(mount=True)

PATHS = [
    Var("slime_dir", Path(), "The slime checkout inside the container (guide /home/slime).", scope="cluster",
        required=True),
    Var("slime_megatron_dir", Path(), "Megatron-LM inside the container.", scope="cluster", required=True),
    Var("slime_musa_patch_dir", Path(), "megatron-lm-musa-patch inside the container (MUSA_PATCH_PATH).",
        scope="cluster", required=True),
    Var("slime_data_dir", MOUNTED, "Training and eval data.", scope="cluster", required=True, overlap="data"),
    Var("slime_hf_model_dir", MOUNTED, "The Hugging Face model (--hf-checkpoint).", scope="cluster",
        required=True, overlap="hf"),
    Var("slime_mcore_dir", MOUNTED, "The converted torch_dist checkpoint (--ref-load, the first --load).",
        scope="cluster", required=True, overlap="converted"),
    Var("slime_save_dir", MOUNTED, "Where training saves its checkpoints (--save); per cluster.",
        scope="cluster", required=True, overlap="save"),
    Var("slime_work_dir", Path(), "The run directory: hostfile, run script, runtime_env.yaml.", scope="cluster",
        required=True, overlap="work"),
    Var("slime_log_dir", MOUNTED, "The job's logs (may lie inside the work dir, as in the guide).",
        scope="cluster", required=True, overlap="log"),
    Var("slime_tensorboard_dir", MOUNTED, "TensorBoard files of the job.", scope="cluster", required=True),
]

ACCELERATOR = [
    Var("slime_accelerator", Name(), "Accelerator vendor of the node: a key of slime_accelerator_profiles "
        "(musa, cuda).", scope="cluster", required=True),
    Var("slime_gpus_per_node", Int(1, 1024), "GPUs of the node; every node of a cluster has the same count.",
        scope="cluster", required=True),
    Var("slime_gpu_memory_mib", Int(0), "Per-device memory the preflight expects (MiB); 0 = do not check."),
    Var("slime_accelerator_profiles", AcceleratorProfiles(), "What differs between the vendors.",
        scope="cluster", required=True),
    Var("slime_accelerator_tool_dir", Path(empty_ok=True), "Directory searched first for mthreads-gmi / "
        "nvidia-smi on the node."),
]

CONTAINER = [
    Var("container_enabled", Bool(), "Run the stages in the training container (false: slime on the node).",
        required=True),
    Var("container_name", Name(), "Container name; a shell word and the docker connection's target.",
        required=True),
    Var("container_image", IMAGE, "Training image.", scope="cluster", required=True),
    Var("container_volumes", List(Volume()), "Bind mounts host:container[:mode] (guide -v /data:/data).",
        required=True),
    Var("container_run_volumes", List(Volume()), "Mounts that keep logs, manifests and TensorBoard files on "
        "the node; their host sides belong to one cluster."),
    Var("container_network_mode", Str(r"^[a-z][a-z0-9_:.-]*$"), "Docker network mode (guide host).",
        required=True),
    Var("container_privileged", Bool(), "Privileged container (guide --privileged).", required=True),
    Var("container_shm_size", Str(r"^[0-9]+[bkmgBKMG]?$", "must be a size like 500g"), "Size of /dev/shm.",
        required=True),
    Var("container_command", List(ARG, 1), "Command that keeps the container alive (guide sleep inf).",
        required=True),
    Var("container_python_interpreter", COMMAND_WORD, "Python inside the container.", required=True),
    Var("container_docker_sudo", Bool(), "Run the node's Docker CLI through sudo -n (unset: ansible_become)."),
    Var("container_archive_dir", Path(), "Node path where a container's run directory is saved before it is "
        "recreated.", required=True),
    Var("container_recreate", Choice("auto", "force", "never"), "What to do when the container differs."),
    Var("container_pull", Choice("missing", "always", "never"), "Image pull policy."),
    Var("container_image_archive", ControllerPath(empty_ok=True), "docker save archive to load the image from."),
    Var("container_image_archive_location", Choice("controller", "node"), "Where that archive is."),
    Var("container_image_archive_ids", List(Str(r"^sha256:[0-9a-f]{64}$", "must be sha256:<64 hex digits>")),
        "Image IDs the image must have when container_image_archive is set (the image fan-out sets them)."),
    Var("container_image_digest", Str(r"^(sha256:[0-9a-f]{64})?$", "must be sha256:<64 hex digits> or empty",
                                      empty_ok=True), "Expected repo digest of the image."),
    Var("container_registry", Dict(r"^(url|username|password)$", Scalar(), "must be url, username or password"),
        "Registry login {url, username, password}.", secret=True),
    Var("container_extra_volumes", List(Volume()), "More bind mounts."),
    Var("container_extra_env", env_dict(), "More container environment."),
    Var("container_devices", List(Str(r"^/dev/[A-Za-z0-9_./-]+(:/dev/[A-Za-z0-9_./-]+)?(:[rwm]+)?$",
                                      "must be host[:container[:perms]] device paths")), "Devices to pass through."),
    Var("container_device_requests_extra", List(Dict()), "More device requests."),
    Var("container_runtime", Name(empty_ok=True), "Container runtime (mthreads, nvidia) or empty."),
    Var("container_verify_paths", List(Path()), "Directories that must exist inside the container."),
]

DATA = [
    Var("data_method", Choice("archive", "preprocess"), "archive (guide §2.3) or preprocess (guide §2.2).",
        required=True),
    Var("data_archive_url", Url(), "URL of the prepared archive.", required=True),
    Var("data_archive_dest", MOUNTED, "Where the archive is downloaded.", required=True),
    Var("data_archive_files", List(Name(), 1), "Files the archive must contain.", required=True),
    Var("data_split_input", Path(empty_ok=True), "Source Parquet file for preprocess."),
    Var("data_split_source", Str(), "data_source value the split keeps.", required=True),
    Var("data_split_test_size", Int(1), "Rows in the test file.", required=True),
    Var("data_split_seed", Int(0), "Shuffle seed of the split.", required=True),
    Var("data_split_train_output", MOUNTED, "Train file written by the split.", required=True),
    Var("data_split_test_output", MOUNTED, "Test file written by the split.", required=True),
    Var("slime_train_file", MOUNTED, "The training file (--prompt-data).", scope="cluster", required=True),
    Var("slime_eval_file", MOUNTED, "The eval file (--eval-prompt-data).", scope="cluster", required=True),
    Var("data_archive_sha256", Str(r"^([0-9a-f]{64})?$", "must be 64 hex digits or empty", empty_ok=True),
        "sha256 of the archive."),
    Var("data_download_retries", Int(0), "Download retries."),
    Var("data_download_timeout", Int(1), "Per-request download timeout (s)."),
    Var("data_min_rows", Int(0), "Fewest rows each data file must have."),
    Var("data_lock_timeout", Int(1), "Longest wait (s) for the storage lock of the data held by a live run "
        "(a dead run's is taken over)."),
]

MODEL = [
    Var("model_source", Choice("modelscope", "huggingface", "http", "controller_dir", "node_dir"),
        "Where the model comes from.", required=True),
    Var("model_id", Str(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$", "must be owner/name"),
        "Model id on ModelScope or Hugging Face.", required=True),
    Var("slime_model_name", Name(), "Names the run script (run-<name>.sh) and the log files.", scope="cluster",
        required=True),
    Var("slime_model_args", Flags(), "MODEL_ARGS as {flag: value}.", scope="cluster", required=True),
    Var("model_revision", Str(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$", "must be a branch, tag or commit"), "Revision."),
    Var("model_hf_endpoint", Url(("http", "https")), "Hugging Face endpoint or mirror."),
    Var("model_hf_token", Str(empty_ok=True), "Access token for gated repositories.", secret=True),
    Var("model_http_url", Url(("http", "https", "file"), empty_ok=True), "Base URL of an HTTP mirror."),
    Var("model_source_dir", Path(empty_ok=True), "An existing copy of the model."),
    Var("model_expected_bytes", Int(0), "Size of the download, for a percentage."),
    Var("model_download_timeout", Int(1), "Longest a download may take (s)."),
    Var("model_poll_interval", Int(1), "Seconds between progress lines."),
    Var("model_temp_suffix", SUFFIX, "Suffix of the temporary download directory."),
    Var("model_sha256_manifest", Type(), "sha256 manifest: a file on the node or {file: sha256}."),
    Var("model_lock_timeout", Int(1), "Longest wait (s) for the storage lock of the model held by a live run "
        "(a dead run's is taken over)."),
]

CONVERT = [
    Var("convert_script", Path(), "tools/convert_hf_to_torch_dist.py.", required=True),
    Var("convert_nproc_per_node", Int(1, 1024), "torchrun --nproc-per-node.", required=True),
    Var("convert_extra_args", List(ARG), "Arguments after --save (guide --use-cpu-initialization)."),
    Var("convert_log_file", Path(), "The conversion log.", required=True),
    Var("convert_master_port", Port(), "torchrun's rendezvous port.", required=True),
    Var("convert_timeout", Int(1), "Longest a conversion may run (s)."),
    Var("convert_poll_interval", Int(1), "Seconds between progress lines."),
    Var("convert_temp_suffix", SUFFIX, "Suffix of the directory the conversion writes into."),
    Var("convert_lock_timeout", Int(1), "Longest wait (s) for the storage lock of the conversion held by a live run "
        "(a dead run's is taken over)."),
]

RAY = [
    Var("ray_gcs_port", Port(), "GCS port (ray start --port); workers join it.", scope="cluster", required=True),
    Var("ray_dashboard_port", Port(), "Dashboard and Jobs API port.", scope="cluster", required=True),
    Var("ray_num_cpus", Int(1), "ray start --num-cpus.", required=True),
    Var("ray_dashboard_host", Ip(allow_localhost=True), "Address the dashboard binds.", scope="cluster",
        required=True),
    Var("ray_head_restart", Choice("when_idle", "never", "force"), "What to do with a Ray that differs."),
    Var("ray_head_wait_timeout", Int(1), "Seconds to wait for every node and GPU."),
    Var("ray_head_wait_interval", Int(1), "Seconds between two looks."),
    Var("ray_head_start_extra_args", List(ARG), "More ray start arguments."),
]

TRAIN = [
    Var("slime_experiment", Name(), "Names the job ids, manifests and Ray job metadata.", scope="cluster",
        required=True),
    Var("slime_actor_gpus_per_node", Int(0, 1024), "GPUs per node for the Megatron actor.", scope="cluster",
        required=True),
    Var("slime_rollout_gpus_per_node", Int(0, 1024), "GPUs per node for SGLang rollout.", scope="cluster",
        required=True),
    Var("slime_max_response_len", Int(1), "MAX_RESPONSE_LEN of the guide.", scope="cluster"),
    Var("slime_train_args", ArgArrays(), "The run script's arrays {ARRAY: {flag: value}}.", scope="cluster",
        required=True),
    Var("slime_train_args_overrides", Flags(), "Single-flag overrides {flag: value}; null removes a flag.",
        scope="cluster"),
    Var("slime_runtime_env_vars", env_dict(), "The job's environment (runtime_env.yaml).", scope="cluster"),
    Var("slime_runtime_env_vars_extra", env_dict(), "More job environment.", scope="cluster"),
    Var("slime_actor_num_nodes", Int(1, 4096), "--actor-num-nodes (default: the cluster's size).",
        scope="cluster", required=True),
    Var("slime_rollout_num_gpus", Int(0), "--rollout-num-gpus (default: per node x nodes).", scope="cluster",
        required=True),
    Var("slime_train_known_flags_extra", List(Str(FLAG_KEY_RE.pattern, "must be a flag name")),
        "Flags of your slime fork that the known-flag list lacks.", scope="cluster"),
    Var("slime_sglang_version", Choice(*known_flags.SGLANG_VERSIONS + (known_flags.UNCHECKED,)), "The image's "
        "SGLang: its server's and router's flags are the --sglang-*/--router-* flags the configuration check "
        "accepts (sglang_flags.json; slime's own image has 0.5.15.post1); unchecked lets any pass.",
        scope="cluster"),
    Var("slime_megatron_tp_above_query_groups", Bool(), "The image's Megatron-LM accepts a tensor parallel size "
        "that is a multiple of the query groups (megatron-core >= 0.16, commit f7dfb99795; slime's own image, "
        "Megatron 1dcf0dafa884, does); false keeps the older rule (TP divides the query groups).",
        scope="cluster"),
    Var("train_job_state", Choice("running", "stopped"), "Keep the job running, or stop it.", scope="cluster"),
    Var("train_job_runtime_env_excludes", List(ARG), "Paths Ray leaves out of the working_dir package.",
        scope="cluster"),
    Var("train_job_wait_first_step", Bool(), "Wait for the first step after submitting.", scope="cluster"),
    Var("train_job_first_step_timeout", Int(1), "Seconds to wait for that first step.", scope="cluster"),
    Var("train_job_follow_logs", Bool(), "Follow the job's log into the guide's log file.", scope="cluster"),
    Var("train_job_render_dir", ControllerPath(), "Where the run files are rendered on the controller."),
    Var("train_job_max_failures_at_step", Int(1), "Attempts in a row that failed without passing the same step "
        "before a rerun refuses to submit again (the crash-loop rule).", scope="cluster"),
    Var("train_job_retry", FlagBool(), "Submit one more attempt although the crash-loop rule refuses "
        "(-e train_job_retry=true).", scope="cluster"),
    Var("train_job_keep_checkpoints", Int(0), "Checkpoints to keep in the save dir; 0 = keep all.",
        scope="cluster"),
    Var("train_job_prune", Choice("trash", "delete"), "What happens to pruned checkpoints.", scope="cluster"),
    Var("train_job_notify", Notify(), "Where word of the job's events goes (docs/status.md, \"Word of the job's "
        "events\"): webhook URLs (JSON POST, `text` for Slack, Mattermost, Teams) and/or a command run on the head "
        "with the event JSON on stdin.", scope="cluster", secret=True),
    Var("train_job_trash_dir", Path(empty_ok=True), "Where pruned checkpoints go with train_job_prune: trash, on the "
        "save dir's filesystem and outside it (\"\": <save dir>.trash).", scope="cluster"),
    Var("train_job_supervise", FlagBool(), "Unattended recovery (docs/recovery.md): a keeper container per node "
        "runs the job's own rules every train_job_supervise_interval seconds (resubmits a FAILED or lost job, brings "
        "back the training container and Ray after a restart); false: only site.yml acts.", scope="cluster"),
    Var("train_job_supervise_interval", Int(5), "Seconds between two checks of the supervisor.", scope="cluster"),
    Var("train_job_supervise_dir", MOUNTED, "The supervisor's directory (code, configuration, state, decisions "
        "log, the job's lease), under a container mount so it outlives the container.", scope="cluster"),
    Var("train_job_supervise_docker_socket", Path(), "The node's Docker engine socket, mounted into the keeper "
        "container."),
    Var("train_job_supervise_keeper", Name(), "Name of the keeper container on each node."),
]

NODE = [
    Var("slime_cluster", Name(), "The node's training cluster (default: the node alone)."),
    Var("slime_storage", Name(), "Name of the file system the node mounts as /data (default: its own)."),
    Var("slime_node_ip", Ip(), "The node's address on the training network (hostfile, Ray, slime)."),
    Var("slime_node_ifname", Str(r"^[A-Za-z0-9_.:-]{1,15}$", "must be a network interface name", empty_ok=True),
        "Interface for the collective libraries on multi-NIC nodes."),
    Var("slime_node_env", env_dict(), "More environment for ray start on this node."),
    Var("preflight_checkpoint_gib", Int(0, empty_ok=True), "Free space the save dir needs at least (GiB): one "
        "training checkpoint; null estimates it from slime_model_args and the optimizer and precision flags."),
    Var("slime_render_dir", ControllerPath(), "Where site.yml renders the run files on the controller."),
    Var("render_dir", ControllerPath(), "Where playbooks/render.yml renders them (-e render_dir=DIR)."),
    Var("slime_fast_path", FlagBool(), "A run of every stage first asks each node, in one call, whether anything "
        "differs from its last full run, and ends there for a cluster whose nodes all answer no (docs/architecture.md, "
        "\"The fast path\"); false: every stage runs on every node.", scope="fleet"),
    Var("slime_max_fail_percentage", Int(0, 100), "Stop a stage for the whole run above this share of failed "
        "nodes (an extra var).", scope="fleet"),
]

FANOUT = [
    Var("slime_fanout_artifacts", List(Choice("data", "model", "convert", "image")), "Artifacts fetched or produced "
        "once (on the seed) and spread storage to storage (docs/fleet.md); [] = every storage fetches its own."),
    Var("slime_fanout_source", Choice("node", "controller"), "node: the seed node's role fetches the artifact; "
        "controller: slime_fanout_controller_dir holds it (air-gapped fleets)."),
    Var("slime_fanout_seed", Name(empty_ok=True), "The node that fetches and seeds (default: the first storage's "
        "first node)."),
    Var("slime_fanout_controller_dir", ControllerPath(empty_ok=True), "Controller directory holding the artifacts "
        "by their base names (slime_fanout_source: controller)."),
    Var("slime_fanout_controller_address", Ip(empty_ok=True), "The controller's address on the fleet network; "
        "its seed server binds there."),
    Var("slime_fanout_image_archive", Path(empty_ok=True), "Node path of the training image's docker save archive "
        "that the image fan-out spreads (\"\": /data/mtslime/images/<container_image, / and : as _>.tar)."),
    Var("slime_fanout_port", Port(), "TCP port of the fan-out servers (bound to each node's fleet address)."),
    Var("slime_fanout_timeout", Int(1), "Longest a spread may take (s)."),
    Var("slime_fanout_stall_timeout", Int(10), "A node that gets no piece from any upstream for this long fails "
        "alone (a rerun resumes it); a server that gets no request for this long stops (s)."),
]

SMOKE = [
    Var("smoke_dir", Path(), "Scratch directory of the smoke run (playbooks/smoke.yml) where the stages run; a failed "
        "run's is moved aside as <smoke_dir>.failed-<UTC time>."),
    Var("smoke_num_layers", Int(1, 64), "Layers of the smoke run's model; the converter runs min(GPUs, layers) "
        "processes."),
    Var("smoke_timeout", Int(1), "Longest the smoke conversion may run (s)."),
    Var("smoke_poll_interval", Int(1), "Seconds between the smoke conversion's progress lines."),
    Var("smoke_master_port", Port(), "torchrun's rendezvous port for the smoke conversion (not "
        "convert_master_port: a conversion may be running)."),
]

VARS = PATHS + ACCELERATOR + CONTAINER + DATA + MODEL + CONVERT + RAY + TRAIN + NODE + FANOUT + SMOKE
BY_NAME = {var.name: var for var in VARS}
TOPICS = (("Paths", PATHS), ("Accelerator", ACCELERATOR), ("Container", CONTAINER), ("Data", DATA),
          ("Model", MODEL), ("Conversion", CONVERT), ("Ray", RAY), ("Training job", TRAIN),
          ("Node, cluster and controller", NODE), ("Fan-out", FANOUT), ("Smoke run", SMOKE))
# Variables the plays compute (facts.yml, preflight); never set in the inventory. Those a role's argument spec
# names have a type and a description here.
COMPUTED_VARS = [
    Var("slime_cluster_info", Dict(), "This node's training cluster: name, head, workers, nodes, size, gpus, "
        "addresses (set by the facts play)."),
    Var("slime_accelerator_profile", Dict(), "The node's entry of slime_accelerator_profiles, for its "
        "slime_accelerator (set by the facts play)."),
]
COMPUTED = frozenset(("slime_storage_info", "slime_topology", "slime_storage_layout", "slime_stage", "slime_run_id",
                      "slime_node_accelerator", "slime_log_file", "slime_container_state", "slime_container_missing",
                      "slime_job_files", "slime_train_effective_args")) | {var.name for var in COMPUTED_VARS}
if not all(ENV_NAME_RE.fullmatch(v.name) for v in VARS):
    raise ValueError("not a name of the form ENV_NAME_RE: %s"
                     % ", ".join(v.name for v in VARS if not ENV_NAME_RE.fullmatch(v.name)))
