"""The setuid filter choir-agent loads, call by call, in a real process (`choir.agent.hardening`).

A child Python process hardens itself exactly as choir-agent does, then tries each way of giving a
file the setuid or setgid bit — each must fail with EPERM — and the ordinary calls next to them,
which must still work. `openat2` and `io_uring_setup` (whose file modes a filter cannot see) must
answer ENOSYS. The same child reports what the kernel then says of it: not dumpable, no
capabilities, no_new_privs, one seccomp filter.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

CHILD = r"""
import ctypes, errno, json, os, stat, sys
from choir.agent.hardening import harden

problems = harden()
libc = ctypes.CDLL(None, use_errno=True)
os.chdir(sys.argv[1])
open("plain", "w").close()
results = {"problems": problems}

def attempt(name, call):
    try:
        call()
        results[name] = "ok"
    except OSError as error:
        results[name] = errno.errorcode[error.errno]

def syscall(number, *args):
    if libc.syscall(number, *args) == -1:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))

dir_fd = os.open(".", os.O_RDONLY)
CREATE = os.O_CREAT | os.O_WRONLY
attempt("chmod 4755", lambda: os.chmod("plain", 0o4755))
attempt("chmod 2755", lambda: os.chmod("plain", 0o2755))
attempt("fchmod 6755", lambda: os.fchmod(os.open("plain", os.O_RDONLY), 0o6755))
attempt("fchmodat 4755", lambda: os.chmod("plain", 0o4755, dir_fd=dir_fd))
attempt("open O_CREAT 4755", lambda: os.open("a", CREATE, 0o4755))
attempt("openat O_CREAT 2755", lambda: os.open("b", CREATE, 0o2755, dir_fd=dir_fd))
attempt("open O_TMPFILE 4755", lambda: os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o4755))
attempt("mknod 4755", lambda: os.mknod("c", stat.S_IFREG | 0o4755))
attempt("chmod 0755", lambda: os.chmod("plain", 0o755))
attempt("chmod 1777", lambda: os.chmod("plain", 0o1777))
attempt("open O_CREAT 0644", lambda: os.close(os.open("d", CREATE, 0o644)))
attempt("open existing, mode ignored", lambda: os.close(os.open("plain", os.O_RDONLY, 0o4755)))
attempt("openat2", lambda: syscall(437, -100, b"plain", None, 0))
attempt("io_uring_setup", lambda: syscall(425, 1, None))
results["modes"] = {n: oct(os.stat(n).st_mode & 0o7777) for n in sorted(os.listdir("."))}
results["status"] = {
    k: v.strip() for k, _, v in (line.partition(":") for line in open("/proc/self/status"))
    if k in ("CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp", "Seccomp_filters")
}
results["dumpable"] = libc.prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE
print(json.dumps(results))
"""


@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="no filter here")
def test_every_way_to_a_setuid_file_is_refused_and_ordinary_modes_still_work(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen.pop("problems") == []
    modes = seen.pop("modes")
    status = seen.pop("status")
    assert seen.pop("dumpable") == 0
    assert seen == {
        "chmod 4755": "EPERM",
        "chmod 2755": "EPERM",
        "fchmod 6755": "EPERM",
        "fchmodat 4755": "EPERM",
        "open O_CREAT 4755": "EPERM",
        "openat O_CREAT 2755": "EPERM",
        "open O_TMPFILE 4755": "EPERM",
        "mknod 4755": "EPERM",
        "chmod 0755": "ok",
        "chmod 1777": "ok",
        "open O_CREAT 0644": "ok",
        "open existing, mode ignored": "ok",
        "openat2": "ENOSYS",
        "io_uring_setup": "ENOSYS",
    }
    assert modes == {"d": "0o644", "plain": "0o1777"}
    assert {k: v for k, v in status.items() if k.startswith("Cap")} == dict.fromkeys(
        ("CapPrm", "CapEff", "CapBnd", "CapAmb"), "0000000000000000"
    )
    assert (status["NoNewPrivs"], status["Seccomp"], status["Seccomp_filters"]) == ("1", "2", "1")
