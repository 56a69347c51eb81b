#!/usr/bin/env bash
# The stock-kernel tier's boot probe (scripts/vm_test.sh caches its verdict per host): boots the
# user-mode-Linux kernel UML with the host's / as its root (hostfs) and an init that only writes a
# file under DIR and powers off. Prints "ok" when that init ran, else one line naming why the guest
# did not boot: the kernel's first ptrace or panic line (or its last line), the host's CPU model and
# any AMX flags. A few seconds; at most 30 s. Nothing of the guest outlives it.
#   bash scripts/uml_boot_probe.sh UML DIR
set -uo pipefail
uml=${1:?usage: uml_boot_probe.sh UML DIR} parent=${2:?usage: uml_boot_probe.sh UML DIR}
dir=$(mktemp -d "$parent/probe.XXXXXX")
trap 'rm -rf "$dir"' EXIT
cat > "$dir/init" <<PROBE
#!/bin/sh
echo booted > $dir/booted
exec python3 -c 'import ctypes; ctypes.CDLL(None).reboot(0x4321FEDC)'
PROBE
chmod 0755 "$dir/init"
# the guest in its own process group, killed with whatever it left however the probe ends
setsid "$uml" mem=128M root=/dev/root rootfstype=hostfs rootflags=/ rw init="$dir/init" \
  con0=null,fd:1 con=null ssl=null > "$dir/console" 2>&1 < /dev/null &
pid=$! t=0
while kill -0 "$pid" 2>/dev/null && [ "$t" -lt 60 ]; do sleep 0.5; t=$((t + 1)); done
kill -KILL -- "-$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null
if [ -f "$dir/booted" ]; then
  echo ok
  exit 0
fi
out=$(tr -d '\r' < "$dir/console")
line=$(printf '%s\n' "$out" | grep -m1 -iE 'ptrace.*(fail|err)' || printf '%s\n' "$out" | grep -m1 -i 'panic' || true)
[ -n "$line" ] || line=$(printf '%s\n' "$out" | grep -v '^[[:space:]]*$' | tail -1)
[ "$t" -ge 60 ] && line="no init within 30 s${line:+; last line: $line}"
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
amx=$(grep -o -w 'amx_[a-z0-9]*' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "user-mode Linux cannot boot on this host (its kernel stops before the guest's init runs: ${line:-no output}; host CPU: ${cpu:-unknown}${amx:+, flags ${amx% }})"
