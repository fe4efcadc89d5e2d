#!/usr/bin/env bash
# Runs inside the build container: copies tests/standins/rootfs/ over / and records versions.
set -euo pipefail
(cd /standins/rootfs && tar -c --owner=0 --group=0 --exclude=__pycache__ --exclude='*.pyc' .) | tar -x -C /
chmod 0755 /usr/local/bin/torchrun /usr/local/bin/mthreads-gmi /usr/local/bin/nvidia-smi
mkdir -p /data
python3 -m compileall -q /home/slime /home/Megatron-LM /home/megatron-lm-musa-patch \
    /opt/venv/lib/python3.11/site-packages/torch /opt/venv/lib/python3.11/site-packages/sglang
cd /home/slime
PYTHONPATH=/home/slime:/home/Megatron-LM:/home/megatron-lm-musa-patch python3 - >/etc/mtslime-standin-versions.json <<'PY'
import json, platform
import megatron, musa_patch, pandas, pyarrow, ray, sglang, slime, torch
print(json.dumps({"standin": True, "image": "registry.mthreads.com/mcctest/training-suite:v2.1.6",
                  "python": platform.python_version(), "torch": torch.__version__, "sglang": sglang.__version__,
                  "megatron": megatron.__version__, "musa_patch": musa_patch.__version__, "slime": slime.__version__,
                  "ray": ray.__version__, "pandas": pandas.__version__, "pyarrow": pyarrow.__version__}, indent=2))
PY
cat /etc/mtslime-standin-versions.json
