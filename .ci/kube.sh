#!/usr/bin/env bash
# Makes sure the Kubernetes pool provider's tests have a real API server to talk to
# (runtime/src/test/.../KubeTestCluster.java starts it): Debian's etcd-server (apt, when root
# and missing) and kube-apiserver built from .ci/kube/go.mod into .stamps/kube/kube-apiserver.
# The build happens once: the binary is the stamp, rebuilt when go.mod or go.sum is newer. Go's
# module and build caches stay where Go keeps them (outside the tree), so a machine that has
# them rebuilds in seconds; a cold build takes 10-20 minutes on two cores.
#
# Exit status: 0 = /usr/bin/etcd and the API server are there; 3 = they cannot be had here (the
# reason is printed; the Kubernetes tests then skip, saying why).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/.stamps/kube/kube-apiserver"
go_cmd="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"

if ! [ -x /usr/bin/etcd ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "kube: /usr/bin/etcd is missing and this is not root with apt-get; install it" \
         "(Debian: sudo apt-get install etcd-server) or the Kubernetes tests skip" >&2
    exit 3
  fi
  echo "kube: installing etcd-server with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >/dev/null || { echo "kube: apt-get update failed" >&2; exit 3; }
  # The package's service does not start without systemd; the tests start their own etcd.
  apt-get install -y -q --no-install-recommends etcd-server >/dev/null \
    || { echo "kube: apt-get install etcd-server failed" >&2; exit 3; }
fi

if [ -x "$bin" ] && [ "$bin" -nt "$root/.ci/kube/go.mod" ] && [ "$bin" -nt "$root/.ci/kube/go.sum" ]; then
  exit 0
fi
if ! [ -x "$go_cmd" ]; then
  echo "kube: no Go toolchain (go on PATH, /usr/local/go/bin/go, or \$GO) to build" \
       "kube-apiserver from .ci/kube/go.mod (Go >= 1.26); the Kubernetes tests skip" >&2
  exit 3
fi
echo "kube: building kube-apiserver ($("$go_cmd" version | cut -d' ' -f3); minutes when cold)"
mkdir -p "$(dirname "$bin")"
start=$(date +%s)
(cd "$root/.ci/kube" && nice -n 19 "$go_cmd" build -o "$bin.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
mv "$bin.tmp" "$bin"
echo "kube: kube-apiserver built in $(( $(date +%s) - start )) s"
