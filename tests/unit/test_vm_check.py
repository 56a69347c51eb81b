"""The stock-kernel tier's decision: whether a user-mode-Linux guest boots on this host
(scripts/uml_boot_probe.sh, cached by scripts/vm_test.sh), and what `.ci/run` and `make vm-test`
do with the verdict. The probe's result is faked (a stand-in kernel, or VM_PROBE_RESULT), so these
run on any host, whether or not its CPU lets user-mode Linux boot."""
import os
import subprocess

from tests.helpers import ROOT

PANIC = """Core dump limits :
	soft - 0
Checking environment variables for a tempdir...none found
userspace - ptrace set fp regs failed, errno = 14
Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b
"""
REASON = "user-mode Linux cannot boot on this host (faked for the test)"


def fake_kernel(tmp_path, boots):
    """A stand-in for linux.uml: either it 'boots' (does what the probe's init would: writes the
    file the init writes, without running the init on this host) or it prints a boot panic."""
    k = tmp_path / "linux.uml"
    if boots:
        body = 'for a; do case $a in init=*) i=${a#init=};; esac; done\necho booted > "$(dirname "$i")/booted"\n'
    else:
        body = f"cat <<'OUT'\n{PANIC}OUT\nexit 1\n"
    k.write_text("#!/bin/sh\n" + body)
    k.chmod(0o755)
    return k


def probe(tmp_path, boots):
    p = subprocess.run(["bash", str(ROOT / "scripts/uml_boot_probe.sh"), str(fake_kernel(tmp_path, boots)),
                        str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip().splitlines()


def test_probe_says_ok_when_the_guest_init_runs(tmp_path):
    assert probe(tmp_path, boots=True) == ["ok"]
    assert not list(tmp_path.glob("probe.*")), "the probe left its directory"


def test_probe_names_the_kernel_line_that_stopped_the_boot(tmp_path):
    [line] = probe(tmp_path, boots=False)
    assert line.startswith("user-mode Linux cannot boot on this host"), line
    assert "userspace - ptrace set fp regs failed, errno = 14" in line, line
    assert "host CPU: " in line, line
    assert not list(tmp_path.glob("probe.*"))


def vm_test(tmp_path, verdict, *args):
    env = dict(os.environ, VM_PROBE_RESULT=verdict, VM_DIR=str(tmp_path / "vm"))
    return subprocess.run(["bash", str(ROOT / "scripts/vm_test.sh"), *args], capture_output=True, text=True,
                          env=env, timeout=60)


def test_check_follows_the_probe(tmp_path):
    assert vm_test(tmp_path, "ok", "--check").returncode == 0
    p = vm_test(tmp_path, REASON, "--check")
    assert p.returncode == 3
    assert p.stderr.strip() == f"vm-test: {REASON}"


def test_tier_stops_with_the_reason_before_building_anything(tmp_path):
    p = vm_test(tmp_path, REASON)
    assert p.returncode == 3, p.stderr
    assert p.stderr.strip().splitlines()[-1] == f"vm-test: {REASON}"
    assert not (tmp_path / "vm").exists() or not any((tmp_path / "vm").iterdir())


def ci(tmp_path, verdict):
    """.ci/run with `make` replaced by a recorder: (what make was asked, ci's output)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "make.log"
    (bindir / "make").write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    (bindir / "make").chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", VM_PROBE_RESULT=verdict,
               VM_DIR=str(tmp_path / "vm"))
    p = subprocess.run(["bash", str(ROOT / ".ci/run")], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    return log.read_text().split("\n")[:-1], p.stdout


def test_ci_runs_the_tier_where_a_guest_boots(tmp_path):
    made, out = ci(tmp_path, "ok")
    assert made == ["test", "docs", "vm-test"]
    assert "SKIPPED" not in out


def test_ci_skips_the_tier_with_the_hosts_reason(tmp_path):
    made, out = ci(tmp_path, REASON)
    assert made == ["test", "docs"]
    assert out.strip().splitlines()[-1] == f"ci: stock-kernel tier SKIPPED on this host: {REASON}"
