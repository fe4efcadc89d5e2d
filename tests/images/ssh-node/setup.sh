#!/usr/bin/env bash
# Runs inside the build container (host network): the packages, the Docker CLI, the login user.
set -euo pipefail
# shellcheck disable=SC1091
. /run/build.env
export DEBIAN_FRONTEND=noninteractive
echo "deb ${MTSLIME_DEBIAN_MIRROR} bookworm main" >/etc/apt/sources.list
apt-get update -qq
# shellcheck disable=SC2046
apt-get install -y -qq --no-install-recommends $(grep -v -e '^#' -e '^$' /build/packages.txt) >/dev/null
# The CLI alone from Debian's docker.io (the package would also bring a daemon, containerd and runc).
cd /tmp
apt-get download -qq docker.io
dpkg-deb -x docker.io_*.deb /tmp/docker.io
install -m 0755 /tmp/docker.io/usr/bin/docker /usr/bin/docker
rm -rf /tmp/docker.io /tmp/docker.io_*.deb
apt-get clean
rm -rf /var/lib/apt/lists/* /var/log/apt /var/log/dpkg.log /var/cache/debconf/*-old
rm -f /etc/ssh/ssh_host_*
# The login user: not root, not in a docker group; sudo without password is its "become".
useradd --create-home --shell /bin/bash tester
echo 'tester ALL=(ALL:ALL) NOPASSWD: ALL' >/etc/sudoers.d/tester
chmod 0440 /etc/sudoers.d/tester
install -m 0755 /build/ssh-node /usr/local/sbin/ssh-node
docker --version
