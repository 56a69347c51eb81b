#!/usr/bin/env bash
# `make vm-test`: the stock-kernel tier. Runs a command inside a guest with a stock Linux kernel
# (user-mode Linux from the distro's user-mode-linux package: openvswitch, sch_red, sch_netem and
# tcp_dctcp as modules), with this checkout mounted at the same path (hostfs), and returns the
# command's exit status. This host's kernel has none of those modules (shared/reference/platform.md).
#   sudo bash scripts/vm_test.sh                 # doctor's report, then the stock-kernel tests (tests/stock)
#   sudo bash scripts/vm_test.sh CMD [ARGS...]   # any command, run from the checkout inside the guest
#   sudo bash scripts/vm_test.sh --check         # exit 0 if a guest boots on this machine, else 3 and
#                                                # one line naming the reason (on stderr)
# The guest's root filesystem (a debootstrapped minbase of the host's own distribution and mirror,
# with scripts/packages.txt installed and the UML kernel's modules) is built once and cached in
# .vm/ under a hash of its inputs; each boot writes to a throw-away copy-on-write file. `make clean`
# removes .vm/. Nothing is left running after an interrupt: the guest runs in its own process group,
# which is killed on exit.
# Whether a guest boots is found by a boot probe before anything is built: the UML kernel boots with
# the host's / as its root (hostfs) and an init that only writes one file under .vm/ and powers
# off, a few seconds (scripts/uml_boot_probe.sh). Some hosts cannot boot user-mode Linux at all (the kernel panics before its
# init runs); the probe's verdict and reason are cached in .vm/ under a hash of the UML kernel's
# version, the CPU's model and flags and this script, so --check and the tier probe once per host.
# VM_PROBE_RESULT=ok|REASON stands in for the probe (the tests of the decision use it).
# Exit status: the command's; 3 environment problem (not root, a package that will not install,
# user-mode Linux cannot boot here, the image build failed, the guest did not report a status);
# 124 the guest ran past VM_TIMEOUT_S.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd -P)
VM=${VM_DIR:-$ROOT/.vm}
say() { printf 'vm-test: %s\n' "$*" >&2; }
die() { printf 'vm-test: %s\n' "$*" >&2; exit 3; }

DEFAULT=(bash -c "bash scripts/setup.sh && .venv/bin/interleave doctor && .venv/bin/python -m pytest -v -p no:cacheprovider tests/stock")
MEM=${VM_MEM:-4G}
TIMEOUT_S=${VM_TIMEOUT_S:-2400}

HOST_PKGS=(user-mode-linux debootstrap e2fsprogs)
host_missing() {
  local p out=()
  for p in "${HOST_PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || out+=("$p")
  done
  echo "${out[@]}"
}

# can_boot: 0 when a guest boots here, else 3 with the reason on stderr; the verdict is cached
can_boot() {
  local verdict
  if [ -n "${VM_PROBE_RESULT:-}" ]; then
    verdict=$VM_PROBE_RESULT
  else
    local uml key cache
    uml=$(command -v linux.uml || true)
    [ -x "$uml" ] || { say "linux.uml is not on PATH -- fix: apt-get install user-mode-linux"; return 3; }
    key=$( { dpkg-query -W -f='${Version}' user-mode-linux 2>/dev/null; sha256sum "$uml"
             grep -m1 '^model name' /proc/cpuinfo; grep -m1 '^flags' /proc/cpuinfo
             cat "$ROOT/scripts/uml_boot_probe.sh"; } | sha256sum | cut -c1-16)
    cache=$VM/boot-probe-$key
    mkdir -p "$VM"
    if [ ! -f "$cache" ]; then
      say "probing whether a user-mode-Linux guest boots on this host (cached as ${cache#"$ROOT"/})"
      bash "$ROOT/scripts/uml_boot_probe.sh" "$uml" "$VM" > "$cache.tmp" && mv "$cache.tmp" "$cache"
    fi
    verdict=$(cat "$cache")
  fi
  [ "$verdict" = ok ] && return 0
  say "$verdict"
  return 3
}

install_host_packages() {
  local missing
  missing=$(host_missing)
  [ -z "$missing" ] && return 0
  [ "$(id -u)" -eq 0 ] || die "needs root to install $missing -- fix: sudo make vm-test"
  say "installing on this machine: $missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || die "apt-get update failed -- fix: check the package mirror"
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null || die "apt-get install failed for: $missing"
}

# whether a guest boots here, before anything is built (--check stops there)
[ -n "${VM_PROBE_RESULT:-}" ] || install_host_packages
can_boot || exit 3
[ "${1:-}" = "--check" ] && exit 0

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, mkfs, the guest's fabric) -- fix: sudo make vm-test"
install_host_packages
UML=$(command -v linux.uml || true)
[ -x "$UML" ] || die "user-mode-linux installed but linux.uml is not on PATH"
KVER=$(ls /usr/lib/uml/modules 2>/dev/null | head -1)
[ -n "$KVER" ] || die "no modules under /usr/lib/uml/modules -- fix: apt-get install --reinstall user-mode-linux"

mapfile -t PKGS < <(grep -v '^[[:space:]]*\(#\|$\)' scripts/packages.txt)
. /etc/os-release
SUITE=${VERSION_CODENAME:?}
# the machine's own mirror: the first deb822 URIs line, else the first one-line deb entry
MIRROR=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v security | head -1 || true)
[ -n "$MIRROR" ] || MIRROR=$(grep -h '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
                             | awk '{print $2}' | grep -v security | head -1 || true)
[ -n "$MIRROR" ] || die "no package mirror found in /etc/apt -- fix: configure apt"

HASH=$( { cat scripts/vm_test.sh scripts/packages.txt; echo "$SUITE $MIRROR"
          dpkg-query -W -f='${Version}' user-mode-linux; } | sha256sum | cut -c1-16)
IMG=$VM/rootfs-$HASH.ext4

# what this invocation creates, removed on any exit (the guest's process group killed first)
BUILD=$VM/build.$$ RUN=$VM/run.$$ pgid=""
cleanup() {
  [ -n "$pgid" ] && kill -KILL -- "-$pgid" 2>/dev/null || true
  rm -rf "$BUILD" "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

build_image() {
  local tmp=$BUILD
  rm -rf "$tmp"; mkdir -p "$tmp"
  local t0=$SECONDS
  say "building the guest image ($ID $SUITE from $MIRROR, ${#PKGS[@]} packages; cached as ${IMG#"$ROOT"/})"
  local inc
  inc=$(IFS=,; echo "${PKGS[*]},kmod,udev,ifupdown,netbase")
  debootstrap --variant=minbase --include="$inc" "$SUITE" "$tmp/root" "$MIRROR" > "$tmp/debootstrap.log" 2>&1 \
    || { tail -20 "$tmp/debootstrap.log" >&2; die "debootstrap failed (log above)"; }
  mkdir -p "$tmp/root/lib/modules"
  cp -a "/usr/lib/uml/modules/$KVER" "$tmp/root/lib/modules/"
  chroot "$tmp/root" depmod -a "$KVER" >/dev/null 2>&1 || true
  # PID 1 in the image only mounts the checkout and hands over to scripts/vm_init.sh there, so
  # changing the init does not rebuild the image
  cat > "$tmp/root/sbin/interleave-vm-init" <<'STUB'
#!/bin/sh
mount -t proc proc /proc
root=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^interleave.root=//p')
mkdir -p "$root" && mount -t hostfs none "$root" -o "$root" && exec /bin/bash "$root/scripts/vm_init.sh"
echo "vm-init: could not mount the checkout $root over hostfs" > /dev/console
python3 -c 'import ctypes; ctypes.CDLL(None).reboot(0x4321FEDC)'
STUB
  chmod 0755 "$tmp/root/sbin/interleave-vm-init"
  rm -rf "$tmp/root/var/cache/apt/archives/"*.deb "$tmp/root/var/lib/apt/lists/"*
  local mb
  mb=$(( $(du -sm "$tmp/root" | cut -f1) * 13 / 10 + 512 ))
  mkfs.ext4 -q -F -L interleave-vm -d "$tmp/root" "$tmp/img" "${mb}M" || die "mkfs.ext4 -d failed"
  rm -f "$VM"/rootfs-*.ext4
  mv "$tmp/img" "$IMG"
  say "image built in $((SECONDS - t0)) s ($(du -sm "$IMG" | cut -f1) MiB)"
}

mkdir -p "$VM"
[ -f "$IMG" ] || build_image

cmd=("$@"); [ "${#cmd[@]}" -gt 0 ] || cmd=("${DEFAULT[@]}")
mkdir -p "$RUN"
printf '%q ' "${cmd[@]}" > "$RUN/command"

say "booting the guest (UML $KVER, $MEM) to run: ${cmd[*]}"
# setsid: the guest's many host processes form one group, killed on any exit (cleanup)
setsid "$UML" mem="$MEM" ubd0="$RUN/cow,$IMG" root=/dev/ubda rw init=/sbin/interleave-vm-init \
  interleave.root="$ROOT" interleave.run="$RUN" con0=null,fd:1 con=null ssl=null loglevel=3 quiet &
uml=$!
pgid=$uml
# no watchdog process: one would outlive the guest and hold the caller's output open
deadline=$((SECONDS + TIMEOUT_S))
while kill -0 "$uml" 2>/dev/null && [ "$SECONDS" -lt "$deadline" ]; do sleep 1; done
kill -KILL -- "-$uml" 2>/dev/null || true
wait "$uml" || true
pgid=""
if [ ! -f "$RUN/status" ]; then
  [ "$SECONDS" -ge "$deadline" ] && { say "the guest ran past ${TIMEOUT_S} s"; exit 124; }
  die "the guest powered off without reporting a status (its console output is above)"
fi
status=$(cat "$RUN/status")
say "the command exited $status inside the guest"
exit "$status"
