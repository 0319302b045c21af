#!/usr/bin/env bash
# Makes sure the Kubernetes pool provider's tests have a real API server to talk to
# (runtime/src/test/.../KubeTestCluster.java starts it): Debian's etcd-server (apt, when root
# and missing) and kube-apiserver built from .ci/kube/go.mod into .stamps/kube/kube-apiserver.
# The build happens once: the binary is the stamp, rebuilt when go.mod or go.sum is newer. Go's
# module and build caches stay where Go keeps them (outside the tree), so a machine that has
# them rebuilds in seconds; a cold build takes 10-20 minutes on two cores.
#
# With --background (what `make test` uses) a build that is needed runs detached, its output in
# .stamps/kube/build.log and its pid in .stamps/kube/building, so that it overlaps the Java suite;
# the Kubernetes tests wait for it (KubeTestCluster) and fail if it fails.
#
# Exit status: 0 = /usr/bin/etcd and the API server are there (or being built, --background);
# 3 = they cannot be had here (the reason is printed; the Kubernetes tests then skip, saying why).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/.stamps/kube/kube-apiserver"
background=false
[ "${1:-}" = --background ] && background=true
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
building="$root/.stamps/kube/building"
if [ -f "$building" ] && kill -0 "$(cat "$building")" 2>/dev/null; then
  echo "kube: kube-apiserver is being built already (pid $(cat "$building"), .stamps/kube/build.log)"
  exit 0
fi
mkdir -p "$(dirname "$bin")"
build() {
  start=$(date +%s)
  (cd "$root/.ci/kube" && nice -n 19 "$go_cmd" build -o "$bin.tmp" k8s.io/kubernetes/cmd/kube-apiserver) \
    || { echo "kube: building kube-apiserver failed" >&2; return 1; }
  mv "$bin.tmp" "$bin" || return 1
  echo "kube: kube-apiserver built in $(( $(date +%s) - start )) s"
}
echo "kube: building kube-apiserver ($("$go_cmd" version | cut -d' ' -f3); minutes when cold)"
if $background; then
  log="$root/.stamps/kube/build.log"
  # setsid: the build outlives make's shell; the pid file goes when it ends, either way.
  export -f build; export root go_cmd bin
  setsid bash -c 'echo $$ > "$root/.stamps/kube/building"; build; rc=$?; rm -f "$root/.stamps/kube/building"; exit $rc' \
    >"$log" 2>&1 </dev/null &
  for _ in 1 2 3 4 5 6 7 8 9 10; do [ -f "$building" ] && break; sleep 0.2; done
  echo "kube: building in the background (pid $(cat "$building" 2>/dev/null || echo ?), $log);" \
       "the Kubernetes tests wait for it"
else
  build
fi
