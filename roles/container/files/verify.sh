# shellcheck shell=bash
# Runs inside the training container: the guide's paths (§1.2 `ls -ld`) and the
# accelerators it can see (`mthreads-gmi` / `nvidia-smi`, else torch). Prints JSON.
smi=$1; shift
missing=()
for path in "$@"; do
    [ -d "$path" ] || missing+=("$path")
done
count=$("$smi" -L 2>/dev/null | grep -cE '^GPU ?[0-9]+')
source=$smi
if [ "${count:-0}" -eq 0 ]; then
    count=$(python3 -c 'import torch
try:
    import torch_musa  # noqa: F401
    print(torch.musa.device_count())
except ImportError:
    print(torch.cuda.device_count())' 2>/dev/null || echo 0)
    source=torch
fi
printf '{"missing_paths": ['
sep=""
for path in "${missing[@]}"; do printf '%s"%s"' "$sep" "$path"; sep=", "; done
printf '], "accelerators": %s, "source": "%s"}\n' "${count:-0}" "$source"
