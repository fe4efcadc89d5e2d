"""The training-suite test image and its stand-ins behave like the guide's MT image.

Builds (or reuses) the images with tests/images/build, starts one container (default bridge
network, no published ports) and drives it with `docker exec`, as the guide's commands would.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import uuid

import pytest

from ansible_collections.mtslime.posttrain.plugins.module_utils.logs import scan as logscan

pytestmark = pytest.mark.docker

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
GUIDE_DIFF = os.path.join(REPO, "tests", "standins", "convert_forms", "guide_musa_patch.diff")
MCORE = "/data/LLMs/MCORE/Qwen3-8B_slime"
PRISTINE = "/tmp/convert_hf_to_torch_dist.pristine.py"
CONVERT = ('cd /home/slime && source scripts/models/qwen3-8B.sh && PYTHONPATH=$PWD:/home/Megatron-LM '
           'torchrun --nproc-per-node 8 {script} "${{MODEL_ARGS[@]}}" --hf-checkpoint /data/models/Qwen3-8B '
           '--save {save} --use-cpu-initialization')

# The guide's section 4.2 arrays (paths as in the guide), written to /tmp/guide_args.sh in the container.
GUIDE_ARGS = r"""
source /home/slime/scripts/models/qwen3-8B.sh
CKPT_ARGS=(--hf-checkpoint /data/models/Qwen3-8B --ref-load /data/LLMs/MCORE/Qwen3-8B_slime
  --load /data/LLMs/MCORE/Qwen3-8B_slime --save /tmp/Qwen3-8B_slime/ --save-interval 200)
DATASET_PATH="/data/models/data"
ROLLOUT_ARGS=(--prompt-data $DATASET_PATH/amt_math17k_d_qweninstruct.parquet --input-key prompt
  --label-key reward_model --apply-chat-template --rollout-shuffle --rm-type zero2one --num-rollout 3000
  --rollout-batch-size 16 --n-samples-per-prompt 8 --rollout-max-prompt-len 1024 --rollout-max-response-len 512
  --num-steps-per-rollout 1 --balance-data --rollout-temperature 1 --rollout-top-p 1)
EVAL_ARGS=(--eval-interval 5 --eval-prompt-data $DATASET_PATH/aime_2025.parquet --n-samples-per-eval-prompt 8
  --eval-max-response-len 512 --eval-temperature 0.6 --eval-top-p 0.95 --log-passrate
  --tensorboard-dir /home/slime/musa_example/qwen_32b_sherry/qwen3-8b_tensorboard --seed 0)
PERF_ARGS=(--tensor-model-parallel-size 4 --sequence-parallel --pipeline-model-parallel-size 1
  --context-parallel-size 1 --expert-model-parallel-size 1 --expert-tensor-parallel-size 1 --micro-batch-size 1
  --use-dynamic-batch-size --max-tokens-per-gpu 8192 --calculate-per-token-loss --use-tis)
GRPO_ARGS=(--advantage-estimator grpo --kl-loss-coef 0.00 --kl-loss-type low_var_kl --entropy-coef 0.00
  --eps-clip 0.0 --eps-clip-high 0.0)
OPTIMIZER_ARGS=(--optimizer adam --lr 1e-6 --lr-decay-style constant --lr-warmup-iters 10 --weight-decay 0.01
  --adam-beta1 0.9 --adam-beta2 0.999)
SGLANG_ARGS=(--sglang-mem-fraction-static 0.7 --rollout-num-gpus-per-engine 2 --sglang-attention-backend fa3
  --sglang-cuda-graph-max-bs 64 --sglang-disable-overlap-schedule)
MISC_ARGS=(--attention-dropout 0.0 --hidden-dropout 0.0 --accumulate-allreduce-grads-in-fp32
  --attention-softmax-in-fp32 --attention-backend flash)
ARGS=(--actor-num-nodes 1 --actor-num-gpus-per-node 4 --rollout-num-gpus 4 ${MODEL_ARGS[@]} ${CKPT_ARGS[@]}
  ${ROLLOUT_ARGS[@]} ${OPTIMIZER_ARGS[@]} ${GRPO_ARGS[@]} ${PERF_ARGS[@]} ${EVAL_ARGS[@]} ${SGLANG_ARGS[@]}
  ${MISC_ARGS[@]})
"""
TRAIN = "source /tmp/guide_args.sh && cd /home/slime && python3 train.py \"${{ARGS[@]}}\" {extra}"


def run(cmd, timeout=600, check=False):
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if check and result.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s\n%s" % (cmd, result.returncode, result.stdout, result.stderr))
    return result


def docker_usable():
    return shutil.which("docker") and run(["docker", "info"], timeout=60).returncode == 0


@pytest.fixture(scope="module")
def image():
    if not docker_usable():
        pytest.skip("Docker engine not reachable")
    base = run(["docker", "image", "inspect", "mtslime-test/node-base:current"])
    if not shutil.which("debootstrap") and base.returncode:
        pytest.skip("debootstrap is not installed (apt-get install -y debootstrap)")
    result = run([os.path.join(REPO, "tests", "images", "build")], timeout=900, check=True)
    suites = [tag for tag in result.stdout.split() if tag.startswith("mtslime-test/training-suite:")]
    assert suites, result.stdout
    return suites[-1]


@pytest.fixture(scope="module")
def container(image, tmp_path_factory):
    root = tmp_path_factory.mktemp("standin-fixtures")
    run([sys.executable, os.path.join(FIXTURES, "make_hf_model.py"), str(root / "Qwen3-8B")], check=True)
    run([sys.executable, os.path.join(FIXTURES, "make_dataset.py"), str(root / "dl")], check=True)
    (root / "data").mkdir()
    run(["tar", "-xzf", str(root / "dl" / "AIME_data.tgz"), "-C", str(root / "data"), "--strip-components=1"],
        check=True)
    name = "mtslime-standin-test-" + uuid.uuid4().hex[:8]
    run(["docker", "run", "-d", "--name", name, "--env", "MTHREADS_DRIVER_CAPABILITIES=all",
         "-v", "%s:/data/models/Qwen3-8B:ro" % (root / "Qwen3-8B"),
         "-v", "%s:/data/models/data:ro" % (root / "data"), image], check=True)
    try:
        run(["docker", "cp", GUIDE_DIFF, name + ":/tmp/guide_musa_patch.diff"], check=True)
        exec_sh(name, "cp /home/slime/tools/convert_hf_to_torch_dist.py %s && cat > /tmp/guide_args.sh <<'EOF'\n%s\nEOF"
                % (PRISTINE, GUIDE_ARGS), check=True)
        yield name
    finally:
        run(["docker", "rm", "-f", name])


def exec_sh(name, script, env=None, timeout=300, check=False):
    cmd = ["docker", "exec"]
    for key, value in (env or {}).items():
        cmd += ["-e", "%s=%s" % (key, value)]
    return run(cmd + [name, "bash", "-c", script], timeout=timeout, check=check)


def files(name, path):
    out = exec_sh(name, "cd %s 2>/dev/null && find . -mindepth 1 | sort" % path).stdout.split()
    return [p[2:] for p in out]


@pytest.fixture(scope="module")
def patched(container):
    """Applies the guide's section 3.2 diff in place, as the guide tells the user to."""
    exec_sh(container, "cd /home/slime && patch -p1 < /tmp/guide_musa_patch.diff", check=True)
    return container


@pytest.fixture(scope="module")
def converted(patched):
    """The guide's conversion into /data/LLMs/MCORE/Qwen3-8B_slime with the patched converter."""
    return exec_sh(patched, "rm -f /tmp/pg.jsonl; " + CONVERT.format(script="tools/convert_hf_to_torch_dist.py",
                                                                     save=MCORE),
                   env={"MTSLIME_STANDIN_PG_LOG": "/tmp/pg.jsonl"})


def test_guide_paths_python_and_versions(container):
    r = exec_sh(container, "ls -ld /home/slime /home/Megatron-LM /home/megatron-lm-musa-patch "
                "/home/slime/musa_example/qwen_32b_sherry && python3 -c 'import ray, pandas, pyarrow' && "
                "command -v python3 ray torchrun && python3 -c 'import sglang; print(sglang.__version__)' && "
                "cat /etc/mtslime-standin-versions.json", check=True)
    assert "/opt/venv/bin/python3\n/opt/venv/bin/ray\n" in r.stdout
    versions = json.loads(r.stdout[r.stdout.index("{"):])
    assert versions["ray"] == "2.60.0" and versions["torch"].endswith("+standin")
    env = exec_sh(container, "echo $PYTHONUNBUFFERED", check=True).stdout.strip()
    assert env == "1"


def test_gpu_tools(container):
    listing = exec_sh(container, "mthreads-gmi -L", check=True).stdout
    assert len(re.findall(r"^GPU [0-9]+", listing, re.M)) == 8
    assert "GPU 0 : MTT S4000 (UUID : " in listing and "GPU-" not in listing  # MT UUIDs have no GPU- prefix
    detail = json.loads(exec_sh(container, "mthreads-gmi -q --json", check=True).stdout)
    assert detail["GPU"][7]["FB Memory Usage"]["Total"] == "49152MiB" and detail["GPU"][7]["Index"] == "7"
    table = exec_sh(container, "mthreads-gmi", check=True).stdout
    assert len(re.findall(r"^[0-7]    MTT S4000 +\|", table, re.M)) == 8
    none = exec_sh(container, "MTSLIME_STANDIN_GPUS=0 mthreads-gmi")
    assert (none.returncode, none.stdout) == (0, "Error: No MT GPU device found.\n")
    few = exec_sh(container, "echo 4 > /etc/mtslime-standin-gpus; mthreads-gmi -L; nvidia-smi -L; "
                  "rm /etc/mtslime-standin-gpus", check=True).stdout
    assert len(re.findall(r"^GPU [0-9]+", few, re.M)) == 8  # 4 MUSA + 4 NVIDIA
    csv = exec_sh(container, "nvidia-smi --query-gpu=index,name,uuid,memory.total,driver_version "
                  "--format=csv,noheader,nounits", check=True).stdout.splitlines()
    assert len(csv) == 8 and csv[0].startswith("0, NVIDIA A100-SXM4-80GB, GPU-") and ", 81920, " in csv[0]
    topo = exec_sh(container, "nvidia-smi topo -m 2>/dev/null | grep -o 'NV[0-9][0-9]*' | wc -l").stdout.strip()
    assert topo == "0"
    assert exec_sh(container, "nvidia-smi topo -m").stdout.startswith("\t\x1b[4mGPU0\t")  # underlined, as the real one
    unknown = exec_sh(container, "nvidia-smi --query-gpu=index,fan.bogus --format=csv")
    assert unknown.returncode == 2 and 'Field "fan.bogus" is not a valid field to query.' in unknown.stderr


def test_unpatched_converter_fails_on_musa_node(container):
    r = exec_sh(container, CONVERT.format(script=PRISTINE, save="/tmp/unpatched"),
                env={"MTSLIME_STANDIN_CONVERT_SECONDS": "0.3"})
    assert r.returncode == 1
    # Every rank fails the same way; which one torchrun observes first depends on the machine's load (the others
    # are then sent SIGTERM, possibly before they reach the assertion), so the root cause names the rank.
    root = re.search(r"^Root Cause \(first observed failure\):\n\[0\]:\n(?:.*\n)*?  rank      : (\d+) \(local_rank: "
                     r"\1\)$", r.stderr, re.M)
    assert root, r.stderr
    # like torch >= 2.4 under torchrun: the ranks' tracebacks carry their prefix, then torchrun's own
    raised = {int(n) for n in re.findall(r"^\[rank(\d)\]: AssertionError: Torch not compiled with CUDA enabled$",
                                         r.stderr, re.M)}
    assert int(root.group(1)) in raised
    assert "torch.distributed.elastic.multiprocessing.errors.ChildFailedError" in r.stderr
    assert "ProcessGroupNCCL" not in r.stderr  # it died before init_process_group: no c10d exit warning
    fatal = logscan.fatal_error(r.stderr.splitlines())
    assert fatal["exception"] == "AssertionError: Torch not compiled with CUDA enabled" and fatal["rank"] in raised


def test_failed_nccl_conversion_under_torchrun_prints_the_launcher_noise(container):
    """CUDA simulated: the ranks' NCCL groups exist when rank 0 dies, so c10d warns at its exit; the failure report
    (logs/scan.py, as async_progress uses it) still names rank 0's exception."""
    r = exec_sh(container, "rm -rf /tmp/nccl_die; " + CONVERT.format(script=PRISTINE, save="/tmp/nccl_die"),
                env={"MTSLIME_STANDIN_CUDA": "1", "MTSLIME_STANDIN_CONVERT_DIE_AT": "before_save",
                     "MTSLIME_STANDIN_CONVERT_SECONDS": "0.3"})
    assert r.returncode == 1
    assert "[rank0]: RuntimeError: stand-in conversion killed at before_save" in r.stderr
    assert re.search(r"^\[rank0\]:\[W\d{3,4} [\d:.]+ ProcessGroupNCCL\.cpp:\d+\] Warning: WARNING: "
                     r"destroy_process_group\(\) was not called", r.stderr, re.M)
    first, fatal = logscan.first_error(r.stderr.splitlines()), logscan.fatal_error(r.stderr.splitlines())
    died = "RuntimeError: stand-in conversion killed at before_save (MTSLIME_STANDIN_CONVERT_DIE_AT)"
    assert first["exception"] == fatal["exception"] == died
    assert fatal["rank"] == 0 and "ChildFailedError" not in fatal["exception"]


def test_converter_via_accelerator_env_uses_mccl(container):
    r = exec_sh(container, "rm -f /tmp/pg.jsonl; " + CONVERT.format(script=PRISTINE, save="/tmp/env_route"),
                env={"MUSA_PATCH_PATH": "/home/megatron-lm-musa-patch", "MTSLIME_STANDIN_CONVERT_SECONDS": "0.3",
                     "MTSLIME_STANDIN_PG_LOG": "/tmp/pg.jsonl"})
    assert r.returncode == 0, r.stderr
    groups = [json.loads(line) for line in exec_sh(container, "cat /tmp/pg.jsonl").stdout.splitlines()]
    assert sorted(g["rank"] for g in groups) == list(range(8))
    assert {g["backend"] for g in groups} == {"mccl"} and {g["device_id"] for g in groups} == {None}


def test_patched_conversion_complete_layout_then_nesting_trap(patched, converted):
    r = converted
    assert r.returncode == 0, r.stderr
    assert "Using pipeline model parallel size: 8" in r.stdout
    assert "successfully saved checkpoint from iteration       1 to %s [ t 1/1, p 1/8 ]" % MCORE in r.stdout
    layout = files(patched, MCORE)
    # Megatron's torch_dist through DCP: two shards per rank (writer thread_count 2), .metadata, common.pt
    assert layout == ["latest_checkpointed_iteration.txt", "release", "release/.metadata"] + [
        "release/__%d_%d.distcp" % (i, k) for i in range(8) for k in (0, 1)] + [
        "release/common.pt", "release/metadata.json"]
    assert exec_sh(patched, "cat %s/latest_checkpointed_iteration.txt" % MCORE).stdout == "release"
    meta = json.loads(exec_sh(patched, "cat %s/release/metadata.json" % MCORE).stdout)
    assert meta == {"sharded_backend": "torch_dist", "sharded_backend_version": 1,
                    "common_backend": "torch", "common_backend_version": 1}
    groups = [json.loads(line) for line in exec_sh(patched, "cat /tmp/pg.jsonl").stdout.splitlines()]
    assert {g["backend"] for g in groups} == {"musa:mccl,cpu:gloo"} and len(groups) == 8
    # Re-running into the same --save moves iter_0000001 *into* release/ (shutil.move semantics).
    nested = "/tmp/nested"
    exec_sh(patched, "cp -a %s %s" % (MCORE, nested), check=True)
    r = exec_sh(patched, CONVERT.format(script="tools/convert_hf_to_torch_dist.py", save=nested),
                env={"MTSLIME_STANDIN_CONVERT_SECONDS": "0.3"})
    assert r.returncode == 0, r.stderr
    assert "release/iter_0000001/metadata.json" in files(patched, nested)


@pytest.mark.parametrize("point,tracker,present,absent", [
    ("before_save", None, [], ["iter_0000001", "release"]),
    ("mid_shards", None, ["iter_0000001/common.pt", "iter_0000001/__0_0.distcp"],
     ["iter_0000001/metadata.json", "iter_0000001/.metadata", "release"]),
    ("before_rename", "1", ["iter_0000001/metadata.json", "iter_0000001/.metadata"], ["release"]),
    ("after_tracker", "release", ["iter_0000001/metadata.json"], ["release"]),
])
def test_interrupted_conversion_layouts(patched, point, tracker, present, absent):
    save = "/tmp/die_" + point
    r = exec_sh(patched, "rm -rf %s; " % save + CONVERT.format(script="tools/convert_hf_to_torch_dist.py", save=save),
                env={"MTSLIME_STANDIN_CONVERT_DIE_AT": point, "MTSLIME_STANDIN_CONVERT_SECONDS": "0.3"})
    assert r.returncode == 1
    assert "RuntimeError: stand-in conversion killed at %s" % point in r.stderr
    assert "ChildFailedError" in r.stderr
    layout = files(patched, save)
    got = exec_sh(patched, "cat %s/latest_checkpointed_iteration.txt" % save)
    assert (got.stdout if got.returncode == 0 else None) == tracker
    assert all(p in layout for p in present), layout
    assert not any(p in layout for p in absent), layout


def test_two_conversions_on_one_port_collide(patched):
    script = (CONVERT.replace("torchrun ", "torchrun --master-port 29611 ").format(
        script="tools/convert_hf_to_torch_dist.py", save="/tmp/port_a") + " >/tmp/a.log 2>&1 & sleep 1; "
        + CONVERT.replace("torchrun ", "torchrun --master-port 29611 ").format(
            script="tools/convert_hf_to_torch_dist.py", save="/tmp/port_b") + "; echo rc=$?; wait")
    r = exec_sh(patched, script, env={"MTSLIME_STANDIN_CONVERT_SECONDS": "3"})
    assert "rc=1" in r.stdout
    assert "address already in use" in r.stderr and "port: 29611" in r.stderr


def test_config_mismatch_fails_like_hf_validate_args(patched):
    r = exec_sh(patched, CONVERT.format(script="tools/convert_hf_to_torch_dist.py", save="/tmp/mismatch"),
                env={"MODEL_ARGS_ROTARY_BASE": "10000", "MTSLIME_STANDIN_CONVERT_SECONDS": "0.3"})
    assert r.returncode == 1
    assert ("AssertionError: hf_validate_args failed: rope_theta in hf config 1000000 is not equal to "
            "rotary_base 10000, please check the config.") in r.stderr


def test_train_saves_and_resumes(patched, converted):
    env = {"MTSLIME_STANDIN_NO_RAY": "1", "MTSLIME_STANDIN_STEP_SECONDS": "0.1"}
    extra = "--load /tmp/run --save /tmp/run --save-interval 2 --num-rollout 3"
    r = exec_sh(patched, "rm -rf /tmp/run; " + TRAIN.format(extra=extra), env=env)
    assert r.returncode == 0, r.stderr
    # No tracker under --load: slime loads --ref-load (the converted release) as a finetune and starts at 0.
    assert " loading release distributed checkpoint from %s" % MCORE in r.stdout
    assert "Checkpoint %s/rollout/global_dataset_state_dict_-1.pt does not exist." % MCORE in r.stdout
    steps = re.findall(r"^\(MegatronTrainRayActor pid=\d+\) \[[\d\- :]+\] model\.py:\d+ - step (\d+): ", r.stdout, re.M)
    assert steps == ["0", "1", "2"]
    assert "'train/ppo_kl': nan" in r.stdout
    assert re.search(r"^\(RolloutManager pid=\d+\) \[.*\] rollout_metrics\.py:\d+ - eval 0: \{'eval/aime': ",
                     r.stdout, re.M)
    assert "passrate 2: {'passrate/pass@1': " in r.stdout and "'passrate/pass@8'" in r.stdout
    layout = files(patched, "/tmp/run")
    for it in ("iter_0000001", "iter_0000002"):
        assert {".metadata", "__0_0.distcp", "__0_1.distcp", "common.pt", "metadata.json"} <= {
            p.split("/", 1)[1] for p in layout if p.startswith(it + "/")}
    assert not any(p.startswith("iter_0000000") for p in layout)
    assert "rollout/global_dataset_state_dict_1.pt" in layout and "rollout/global_dataset_state_dict_2.pt" in layout
    assert exec_sh(patched, "cat /tmp/run/latest_checkpointed_iteration.txt").stdout == "2"
    rewards = [float(x) for x in re.findall(r"'rollout/raw_reward': ([0-9.]+)", r.stdout)]
    assert rewards == sorted(rewards)
    resumed = exec_sh(patched, TRAIN.format(extra=extra.replace("--num-rollout 3", "--num-rollout 5")), env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert " loading distributed checkpoint from /tmp/run at iteration 2" in resumed.stdout
    assert re.findall(r" - step (\d+): ", resumed.stdout) == ["3", "4"]
    assert "load metadata from /tmp/run/rollout/global_dataset_state_dict_2.pt" in resumed.stdout
    # The guide's own CKPT_ARGS load the converted release checkpoint: iteration 0, so rollout 1 first.
    guide = exec_sh(patched, TRAIN.format(extra="--num-rollout 2"), env=env)
    assert guide.returncode == 0, guide.stderr
    assert " loading release distributed checkpoint from %s" % MCORE in guide.stdout
    assert re.findall(r" - step (\d+): ", guide.stdout) == ["1"]
    # slime prints none of these (real-programs.md)
    for text in (r.stdout, resumed.stdout, guide.stdout):
        assert "start_rollout_id=" not in text and "training finished" not in text


def test_train_crash_knobs(patched, converted):
    extra = "--load /tmp/crash --save /tmp/crash --save-interval 1 --num-rollout 4"
    env = {"MTSLIME_STANDIN_NO_RAY": "1", "MTSLIME_STANDIN_STEP_SECONDS": "0.05", "MTSLIME_STANDIN_CRASH_AT_STEP": "1"}
    r = exec_sh(patched, "rm -rf /tmp/crash; " + TRAIN.format(extra=extra), env=env)
    assert r.returncode == 1
    assert "Traceback (most recent call last):" in r.stderr and "RuntimeError: stand-in crash at step 1" in r.stderr
    assert exec_sh(patched, "cat /tmp/crash/latest_checkpointed_iteration.txt").stdout == "0"
    assert "iter_0000001" not in files(patched, "/tmp/crash")
    control = exec_sh(patched, "echo '{\"crash_at_step\": 2, \"step_seconds\": 0.05}' > /etc/mtslime-standin.json; "
                      + TRAIN.format(extra=extra) + "; echo rc=$?; rm -f /etc/mtslime-standin.json",
                      env={"MTSLIME_STANDIN_NO_RAY": "1"})
    assert "rc=1" in control.stdout and "stand-in crash at step 2" in control.stderr
    assert " loading distributed checkpoint from /tmp/crash at iteration 0" in control.stdout
    assert re.findall(r" - step (\d+): ", control.stdout)[0] == "1"


@pytest.mark.parametrize("extra,error", [
    ("--no-such-flag 1", "train.py: error: unrecognized arguments: --no-such-flag 1"),
    ("--rollout-temperature 0", "ValueError: --rollout-temperature must be > 0"),
    ("--prompt-data /data/models/data/missing.parquet", "FileNotFoundError: --prompt-data not found"),
    ("--input-key question",
     "ValueError: --prompt-data /data/models/data/amt_math17k_d_qweninstruct.parquet has no column 'question'"),
    ("--save-interval 2 --save ''", "ValueError: --save-interval is set (2) but --save is not"),
])
def test_train_rejects_bad_input(patched, converted, extra, error):
    r = exec_sh(patched, TRAIN.format(extra=extra), env={"MTSLIME_STANDIN_NO_RAY": "1"})
    assert r.returncode == (2 if "unrecognized" in error else 1)
    assert error in r.stderr


def post_job(name, submission_id, entrypoint, env_vars, until=None):
    """Submit a job and wait until it ends, or (with `until`) until its log shows that text; then report
    its status and log, and stop it if it still runs."""
    body = json.dumps({"entrypoint": entrypoint, "submission_id": submission_id,
                       "runtime_env": {"env_vars": env_vars}})
    script = r"""
import json, sys, time, urllib.request
base = "http://127.0.0.1:8772/api/jobs/"
until = sys.argv[3] or None
req = urllib.request.Request(base, sys.argv[1].encode(), {"Content-Type": "application/json"})
urllib.request.urlopen(req).read()
for _ in range(240):
    job = json.load(urllib.request.urlopen(base + sys.argv[2]))
    logs = json.load(urllib.request.urlopen(base + sys.argv[2] + "/logs"))["logs"]
    if job["status"] in ("SUCCEEDED", "FAILED", "STOPPED") or (until and until in logs):
        break
    time.sleep(0.5)
status = job["status"]
if status not in ("SUCCEEDED", "FAILED", "STOPPED"):
    urllib.request.urlopen(urllib.request.Request(base + sys.argv[2] + "/stop", b"", method="POST")).read()
print(json.dumps({"status": status, "exit": job.get("driver_exit_code"), "logs": logs}))
"""
    r = run(["docker", "exec", name, "python3", "-c", script, body, submission_id, until or ""], timeout=200,
            check=True)
    return json.loads(r.stdout)


def test_ray_head_and_job_reach_step_lines(patched, converted):
    exec_sh(patched, "ray start --head --port 64379 --dashboard-port 8772 --dashboard-host 127.0.0.1 "
            "--num-cpus 64 --num-gpus 8 --disable-usage-stats", timeout=120, check=True)
    try:
        printed = exec_sh(patched, "source /tmp/guide_args.sh; printf '%s\\n' \"${ARGS[@]}\"", check=True)
        args = printed.stdout.split("\n")[:-1]
        entry = "python3 /home/slime/train.py " + " ".join(shlex.quote(a) for a in args) + " --num-rollout 4"
        job = post_job(patched, "standin-ok", entry, {"MTSLIME_STANDIN_STEP_SECONDS": "0.2",
                                                      "MTSLIME_STANDIN_HANDLED_TRACEBACK_AT_STEP": "2",
                                                      "MTSLIME_STANDIN_OOM_RECOVERED_AT_STEP": "2"})
        # A handled traceback and a recovered OOM are printed, and the job goes on to the end.
        assert job["status"] == "SUCCEEDED", job["logs"][-3000:]
        assert re.findall(r" - step (\d+): ", job["logs"]) == ["1", "2", "3"]
        assert re.search(r"^\(RolloutManager pid=\d+\) httpx\.ReadTimeout: timed out$", job["logs"], re.M)
        assert re.search(r"^\(SGLangEngine pid=\d+\) \[.* TP0\] Decode out of memory happened\.", job["logs"], re.M)
        assert "is ready" not in job["logs"] and "training finished" not in job["logs"]
        crashed = post_job(patched, "standin-ray-crash", entry, {"MTSLIME_STANDIN_STEP_SECONDS": "0.2",
                                                                 "MTSLIME_STANDIN_RAY_CRASH_AT_STEP": "2"})
        assert crashed["status"] == "FAILED" and crashed["exit"] == 1, crashed["logs"][-3000:]
        # Ray colours the actor's name (ANSI codes; the guide's sed removes them from the log file).
        plain = re.sub(r"\x1b\[[0-9;]*m", "", crashed["logs"])
        assert re.search(r"^ray\.exceptions\.RayTaskError\(AssertionError\): ray::MegatronTrainRayActor\.train\(\) "
                         r"\(pid=\d+, ip=", plain, re.M), plain[-3000:]
        assert "AssertionError: Expected 512, got 511" in crashed["logs"]
        # Not enough GPUs: slime waits without a time limit, printing its wait line.
        starved = post_job(patched, "standin-starved", entry + " --rollout-num-gpus 8",
                           {"MTSLIME_STANDIN_WAIT_LOG_SECONDS": "1"},
                           until="Waiting for placement group of 12 GPUs (elapsed 3s)")
        assert starved["status"] == "RUNNING", starved["logs"][-3000:]
        for elapsed in (1, 2, 3):
            assert ("Waiting for placement group of 12 GPUs (elapsed %ds): 8 GPUs registered with Ray, 8 available."
                    % elapsed in starved["logs"])
    finally:
        exec_sh(patched, "ray stop --force", timeout=120)
