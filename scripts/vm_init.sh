#!/bin/bash
# PID 1 of the stock-kernel guest, run from the checkout by the image's /sbin/interleave-vm-init
# (scripts/vm_test.sh), which has mounted /proc and the checkout over hostfs at its host path:
# mounts what a Debian system has, loads the stock
# kernel's modules the backends need, starts nothing else, runs the one command from the run
# directory in the checkout, writes its exit status there and powers off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 TERM=dumb
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm
ln -sf /proc/self/fd /dev/fd
ln -sf /proc/self/fd/0 /dev/stdin; ln -sf /proc/self/fd/1 /dev/stdout; ln -sf /proc/self/fd/2 /dev/stderr
mount -t devpts devpts /dev/pts
for d in /run /tmp /dev/shm; do mount -t tmpfs tmpfs "$d"; done
mount -t bpf bpf /sys/fs/bpf 2>/dev/null
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
mount -o remount,rw /
hostname interleave-vm
ip link set lo up

# minbase has no poweroff: the reboot system call, which ends a UML guest
off() { sync; python3 -c 'import ctypes; ctypes.CDLL(None).reboot(0x4321FEDC)'; }

arg() { tr ' ' '\n' < /proc/cmdline | sed -n "s/^$1=//p" | head -1; }
root=$(arg interleave.root)
run=$(arg interleave.run)
# a checkout under /tmp or /run was hidden by the tmpfs mounted there: mount it again
mountpoint -q "$root" || { mkdir -p "$root" && mount -t hostfs none "$root" -o "$root"; }
touch "$run/started"
for m in openvswitch sch_red sch_netem sch_htb sch_prio cls_u32 cls_bpf tcp_dctcp veth tun; do
  modprobe "$m" 2>/dev/null || echo "vm-init: modprobe $m failed" > /dev/console
done
cd "$root"
bash -c "$(cat "$run/command")" < /dev/null > /dev/console 2>&1
echo "$?" > "$run/status.tmp" && mv "$run/status.tmp" "$run/status"
off
