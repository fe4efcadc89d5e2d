#!/usr/bin/env bash
# Builds mtslime-test/training-suite:<hash> on top of node-base: the guide's paths and the GPU
# stand-ins of tests/standins/ (install.sh runs in a container without network, then docker commit).
# Stands in for registry.mthreads.com/mcctest/training-suite:v2.1.6.
# Usage: build.sh TAG INPUTS_HASH BASE_TAG   (called by tests/images/build)
set -euo pipefail
tag=$1
inputs=$2
base=$3
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
standins=$(cd "$here/../../standins" && pwd)
cname="mtslime-image-build-suite-$$"
trap 'docker rm -f "$cname" >/dev/null 2>&1 || true' EXIT

docker run --name "$cname" --network none \
    -v "$standins:/standins:ro" -v "$here:/build:ro" "$base" /bin/bash /build/install.sh >&2
docker commit \
    --change 'CMD ["sleep", "inf"]' \
    --change 'WORKDIR /home/slime' \
    --change "LABEL org.mtslime.inputs=$inputs org.mtslime.image=training-suite org.mtslime.base=$base org.mtslime.standin-for=registry.mthreads.com/mcctest/training-suite:v2.1.6" \
    "$cname" "$tag" >/dev/null
