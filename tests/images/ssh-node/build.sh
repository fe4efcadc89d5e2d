#!/usr/bin/env bash
# Builds mtslime-test/ssh-node:<hash> on top of node-base: a node of the fleet scenario reached over SSH.
# Debian's openssh-server, sudo and python3-requests (packages.txt), and the Docker CLI taken from
# Debian's docker.io package (only /usr/bin/docker: the engine is the machine's, through its socket
# mounted into each node). setup.sh adds the login user and the start script; see README.md.
# Usage: build.sh TAG INPUTS_HASH BASE_TAG   (called by tests/images/build)
set -euo pipefail
tag=$1
inputs=$2
base=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cname="mtslime-image-build-ssh-node-$$"
work=$(mktemp -d "${TMPDIR:-/tmp}/mtslime-ssh-node.XXXXXX")
trap 'docker rm -f "$cname" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

# Only the build container gets the host network and proxy settings (apt needs them), from a mounted
# file, so `docker commit` keeps none of them.
for var in HTTP_PROXY HTTPS_PROXY NO_PROXY http_proxy https_proxy no_proxy; do
    if [ -n "${!var:-}" ]; then printf 'export %s=%q\n' "$var" "${!var}"; fi
done >"$work/build.env"
docker run --name "$cname" --network host -v "$work/build.env:/run/build.env:ro" -v "$here:/build:ro" \
    -e MTSLIME_DEBIAN_MIRROR="${MTSLIME_DEBIAN_MIRROR:-http://deb.debian.org/debian}" \
    "$base" /bin/bash /build/setup.sh >"$work/setup.log" 2>&1 || { tail -n 30 "$work/setup.log" >&2; exit 1; }
docker commit \
    --change 'ENTRYPOINT []' \
    --change 'CMD ["/usr/local/sbin/ssh-node", "2222"]' \
    --change "LABEL org.mtslime.inputs=$inputs org.mtslime.image=ssh-node org.mtslime.base=$base" \
    "$cname" "$tag" >/dev/null
