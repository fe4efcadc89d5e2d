"""Stand-in for slime.utils.accelerator (real: THUDM/slime slime/utils/accelerator/, added by #2216).

Selection as upstream: SLIME_ACCELERATOR=musa|cuda|auto; otherwise MUSA is requested when
MUSA_VISIBLE_DEVICES is set or MUSA_PATCH_PATH is non-empty; auto picks MUSA when torch.musa is
registered, else CUDA. Choosing MUSA appends MUSA_PATCH_PATH to sys.path and imports musa_patch
once; an explicit musa request without it raises RuntimeError (no silent NCCL fallback).
"""
import importlib
import os
import sys

import torch


def _select():
    explicit = os.environ.get("SLIME_ACCELERATOR", "auto").strip().lower() or "auto"
    if explicit not in ("musa", "cuda", "auto"):
        raise ValueError("SLIME_ACCELERATOR must be one of musa, cuda, auto; got %r" % explicit)
    requested = explicit
    if explicit == "auto" and (os.environ.get("MUSA_VISIBLE_DEVICES") is not None or os.environ.get("MUSA_PATCH_PATH")):
        requested = "musa"
    if requested == "musa":
        patch_path = os.environ.get("MUSA_PATCH_PATH", "")
        if patch_path and patch_path not in sys.path:
            sys.path.append(patch_path)
        try:
            importlib.import_module("musa_patch")
        except ImportError as exc:
            raise RuntimeError(
                "MUSA accelerator requested but torch.musa is not available (musa_patch import failed: %s); "
                "set MUSA_PATCH_PATH to the megatron-lm-musa-patch checkout" % exc
            ) from None
        return "musa"
    if requested == "auto" and torch._musa_registered:
        return "musa"
    return "cuda"


name = _select()


def is_musa_available():
    return torch._musa_registered and torch.musa.is_available()


def is_cuda_available():
    return torch.cuda.is_available()


def process_group_backend(default="nccl"):
    return "mccl" if name == "musa" else default


def weight_update_backend():
    return "cpu:gloo,musa:mccl" if name == "musa" else "nccl"


def device_name(local_rank=None):
    return name if local_rank is None else "%s:%d" % (name, local_rank)


def set_device(local_rank):
    (torch.musa if name == "musa" else torch.cuda).set_device(local_rank)


def distributed_device_id(local_rank):
    return None if name == "musa" else torch.device("cuda:%d" % local_rank)


def synchronize():
    (torch.musa if name == "musa" else torch.cuda).synchronize()


def empty_cache():
    (torch.musa if name == "musa" else torch.cuda).empty_cache()
