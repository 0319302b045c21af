#!/usr/bin/env bash
# Makes sure the build's own tools are here: a JDK 17 or newer, Maven, and Python >= 3.10 that
# can make a venv, and a C compiler (an executor compiles bulletin/_native/lend.c, the NumPy
# allocator that computes large results into store memory; without one results are copied). On
# a Debian machine as root it installs what is missing with apt (openjdk-17-jdk-headless, maven,
# python3-venv, gcc, libc6-dev); elsewhere it says what to install and fails.
# Cheap when everything is present: `make build` runs it every time.
set -euo pipefail

PYTHON=${PYTHON_BOOT:-python3}
missing=()

java_major() {
  java -version 2>&1 | sed -n 's/.*version "\([0-9]*\)[."].*/\1/p' | head -1
}

if ! command -v java >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1 \
    || [ "$(java_major)" -lt 17 ] 2>/dev/null; then
  missing+=(openjdk-17-jdk-headless)
fi
command -v mvn >/dev/null 2>&1 || missing+=(maven)
optional=()
command -v cc >/dev/null 2>&1 || optional+=(gcc libc6-dev)
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "toolchain: $PYTHON is missing or older than 3.10; install Python >= 3.10 (or set" \
       "PYTHON_BOOT=/path/to/python3.x)" >&2
  exit 1
fi
"$PYTHON" -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)

[ ${#missing[@]} -eq 0 ] && [ ${#optional[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "toolchain: installing ${missing[*]} ${optional[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" "${optional[@]}" >/dev/null
  exit 0
fi
if [ ${#optional[@]} -gt 0 ]; then
  echo "toolchain: no C compiler (cc): executors will copy large results into the store" \
       "instead of computing them there, and those tests skip (Debian: apt-get install" \
       "${optional[*]})" >&2
fi
[ ${#missing[@]} -eq 0 ] && exit 0
echo "toolchain: missing ${missing[*]}; install them (Debian/Ubuntu: sudo apt-get install" \
     "${missing[*]}) and run make again" >&2
exit 1
