"""What the Docker tests that run the collection's plays against one training container on this machine's engine
share: the docker CLI, and the inventory values that put the container on a test image with its own /data."""
from __future__ import annotations

import subprocess


def docker(*args, check=True):
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check)


def container_values(name, image, root, **extra):
    """Extra vars for a local node whose training container `name` runs `image` (never pulled, not privileged) with
    `root`/data as /data and its run files rendered under `root`/rendered."""
    return dict({
        "container_name": name,
        "container_image": image,
        "container_pull": "never",
        "container_privileged": False,
        "container_volumes": ["%s/data:/data" % root],
        "slime_render_dir": str(root / "rendered"),
        # these tests look at one stage each; the supervisor's keeper is proven by the default scenario
        "train_job_supervise": False,
    }, **extra)
