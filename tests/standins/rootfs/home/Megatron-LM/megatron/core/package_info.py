"""Stand-in for megatron/core/package_info.py (real: NVIDIA/Megatron-LM)."""
MAJOR = 0
MINOR = 13
PATCH = 0
PRE_RELEASE = "+standin"
__version__ = "%d.%d.%d%s" % (MAJOR, MINOR, PATCH, PRE_RELEASE)
