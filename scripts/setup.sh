#!/usr/bin/env bash
# The one setup script: used by `make setup` (so `make demo` / `make test`), by .ci/run and by the
# Vagrantfile. Idempotent: a second run with nothing to do only checks and takes a few seconds.
#   1. distro packages (Debian 12 / Ubuntu 22.04+): Mininet, Open vSwitch, tc/BPF toolchain, iperf3...
#   2. socket buffers for the OVS userspace datapath (before ovs-vswitchd starts; platform notes)
#   3. ovsdb-server + ovs-vswitchd, started by ovs-ctl when no init system did
#   4. the BPF ECN marker, compiled from harness/bpf/ecn_marker.c when the source is newer
#   5. .venv from the distro python3 (--system-site-packages, so it sees Mininet), the project
#      installed editable with [test], re-run only when setup.py changed
#   --docs: also what `make docs` needs: mkdocs in .venv ([docs]) and the distro's chromium (the
#      test that opens the built site in a headless browser)
# Exit status: 0 ready; 3 environment problem (not root, a package that will not install).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'setup: %s\n' "$*" >&2; }
die() { printf 'setup: %s\n' "$*" >&2; exit 3; }

[ "$(id -u)" -eq 0 ] || die "needs root -- fix: sudo make setup"

DOCS=0; [ "${1:-}" = "--docs" ] && DOCS=1
mapfile -t PKGS < <(grep -v '^[[:space:]]*\(#\|$\)' scripts/packages.txt)
[ "$DOCS" = 1 ] && PKGS+=(chromium)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  say "installing distro packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || die "apt-get update failed -- fix: check the package mirror"
  # Ubuntu ships bpftool inside linux-tools; fall back to it when the package is absent.
  if ! apt-cache show bpftool >/dev/null 2>&1; then
    missing=("${missing[@]/bpftool/linux-tools-common}")
    missing+=("linux-tools-$(uname -r)")
  fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install failed for: ${missing[*]}"
fi

# 2. socket buffers: OVS's userspace datapath sends into throttled ports through one AF_PACKET
#    socket; a small send buffer makes OVS drop packets itself (invisible to tc).
want=8388608
for key in net.core.wmem_default net.core.wmem_max; do
  cur=$(sysctl -n "$key")
  [ "$cur" -ge "$want" ] || sysctl -qw "$key=$want"
done

# 3. OVS daemons
ovsctl=/usr/share/openvswitch/scripts/ovs-ctl
if ! ovs-vsctl -t 2 show >/dev/null 2>&1; then
  say "starting ovsdb-server"
  "$ovsctl" --no-ovs-vswitchd --system-id=random start >/dev/null 2>&1 || true
fi
if ! ovs-appctl -t ovs-vswitchd version >/dev/null 2>&1; then
  say "starting ovs-vswitchd"
  "$ovsctl" --no-ovsdb-server start >/dev/null 2>&1 || true
fi
ovs-vsctl -t 5 show >/dev/null 2>&1 || die "ovsdb-server is not answering -- fix: $ovsctl start"
ovs-appctl -t ovs-vswitchd version >/dev/null 2>&1 || die "ovs-vswitchd did not start -- fix: see /var/log/openvswitch/ovs-vswitchd.log"

# 4. BPF ECN marker
src=harness/bpf/ecn_marker.c obj=harness/bpf/ecn_marker.o
if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ]; then
  say "compiling $src"
  inc=(); [ -d "/usr/include/$(uname -m)-linux-gnu" ] && inc=(-I"/usr/include/$(uname -m)-linux-gnu")
  clang -O2 -g -target bpf "${inc[@]}" -c "$src" -o "$obj.tmp" && mv "$obj.tmp" "$obj" \
    || die "could not compile $src -- fix: apt-get install clang llvm libbpf-dev"
fi

# 5. Python environment
if [ ! -x .venv/bin/python ]; then
  say "creating .venv (distro python3, --system-site-packages)"
  /usr/bin/python3 -m venv --system-site-packages .venv
fi
stamp=.venv/.interleave-installed
if [ ! -f "$stamp" ] || [ setup.py -nt "$stamp" ]; then
  say "installing the project and its Python dependencies into .venv"
  .venv/bin/pip install -q --no-compile --disable-pip-version-check -e ".[test]" || die "pip install failed"
  # byte-compiled once here, on every core, instead of by each test worker and command at its first
  # import (a fresh clone's unit tier: 72.4 s without, 9.9 s here + 51.0 s with)
  .venv/bin/python -m compileall -q -j 0 .venv/lib/python3*/site-packages harness agents workloads controllers \
    topologies interleave >/dev/null || say "some files did not byte-compile (each compiles when first imported)"
  touch "$stamp"
fi
if [ "$DOCS" = 1 ] && [ ! -x .venv/bin/mkdocs ]; then
  say "installing the documentation tools into .venv"
  .venv/bin/pip install -q --no-compile --disable-pip-version-check -e ".[test,docs]" || die "pip install failed"
fi
.venv/bin/python -c "import mininet.net, os_ken, networkx" 2>/dev/null \
  || die "the venv cannot import mininet/os_ken/networkx -- fix: rm -rf .venv && sudo make setup"
say "ready"
