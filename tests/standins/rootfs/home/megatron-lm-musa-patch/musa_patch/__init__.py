"""Stand-in for megatron-lm-musa-patch's musa_patch package (real: MooreThreads/MT-MegatronLM,
public copies wangmx17/megatron-lm-musa-patch). Like the real one, importing it makes MUSA usable
from code written for CUDA: it registers the MUSA backend (torch.musa, "mccl"), aliases
torch.cuda.* to torch.musa.*, and rewrites backend "nccl" to "mccl" in init_process_group."""
import torch
import torch.distributed

__version__ = "0.1.0+standin"

torch._register_musa()
for _name in ("is_available", "device_count", "set_device", "current_device", "synchronize", "empty_cache"):
    setattr(torch.cuda, _name, getattr(torch.musa, _name))

_init_process_group = torch.distributed.init_process_group


def _musa_init_process_group(backend=None, *args, **kwargs):
    if isinstance(backend, str):
        backend = backend.replace("nccl", "mccl")
    return _init_process_group(backend, *args, **kwargs)


if getattr(_init_process_group, "__name__", "") != "_musa_init_process_group":
    torch.distributed.init_process_group = _musa_init_process_group
