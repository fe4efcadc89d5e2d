#!/usr/bin/env bash
# Builds mtslime-test/node-base:<hash>: a Debian bookworm minbase root filesystem made by
# debootstrap, `docker import`ed, plus the /opt/venv of requirements.txt installed by
# `docker run --network host` + `docker commit` (no registry image is needed).
# Usage: build.sh TAG INPUTS_HASH   (called by tests/images/build)
set -euo pipefail
tag=$1
inputs=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mirror=${MTSLIME_DEBIAN_MIRROR:-http://deb.debian.org/debian}
ca=${MTSLIME_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
stage="mtslime-test/node-base-rootfs:$inputs"
cname="mtslime-image-build-base-$$"

work=$(mktemp -d "${TMPDIR:-/tmp}/mtslime-node-base.XXXXXX")
cleanup() {
    docker rm -f "$cname" >/dev/null 2>&1 || true
    docker rmi "$stage" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

t0=$(date +%s)
include=$(grep -v -e '^#' -e '^$' "$here/packages.txt" | paste -sd, -)
debootstrap --variant=minbase --include="$include" bookworm "$work/rootfs" "$mirror" \
    >"$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }
rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/* \
    "$work"/rootfs/var/log/*.log "$work"/rootfs/var/cache/debconf/*-old
t1=$(date +%s)
echo "node-base: debootstrap $((t1 - t0)) s" >&2

tar -C "$work/rootfs" --numeric-owner --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' -c . \
    | docker import - "$stage" >/dev/null
rm -rf "$work/rootfs"
t2=$(date +%s)
echo "node-base: docker import $((t2 - t1)) s" >&2

# Only the build container gets the host network, CA bundle and proxy/index settings (pip needs
# them here). They come from a mounted file, not `docker run -e`, so `docker commit` keeps none.
{
    echo "export PIP_CERT=/etc/ssl/certs/ca-certificates.crt REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt"
    echo "export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_DEFAULT_TIMEOUT=180"
    for var in PIP_INDEX_URL PIP_EXTRA_INDEX_URL HTTP_PROXY HTTPS_PROXY NO_PROXY http_proxy https_proxy no_proxy; do
        if [ -n "${!var:-}" ]; then printf 'export %s=%q\n' "$var" "${!var}"; fi
    done
} >"$work/build.env"
docker run --name "$cname" --network host \
    -v "$ca:/etc/ssl/certs/ca-certificates.crt:ro" -v "$work/build.env:/run/build.env:ro" \
    -v "$here:/build:ro" "$stage" /bin/sh -ec '
        . /run/build.env
        python3 -m venv /opt/venv
        /opt/venv/bin/pip install --no-cache-dir --quiet -r /build/requirements.txt -c /build/constraints.txt
        rm -rf /root/.cache
    ' >"$work/pip.log" 2>&1 || { tail -n 30 "$work/pip.log" >&2; exit 1; }
t3=$(date +%s)
echo "node-base: venv $((t3 - t2)) s" >&2

docker commit \
    --change 'ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV PYTHONUNBUFFERED=1' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["sleep", "inf"]' \
    --change "LABEL org.mtslime.inputs=$inputs org.mtslime.image=node-base" \
    "$cname" "$tag" >/dev/null
