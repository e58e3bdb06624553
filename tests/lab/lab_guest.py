"""A booted guest: QEMU started on a topology, the command channel to the agent in the guest
(virtio-serial), files in and out over 9p."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

from lab_image import REPO_ROOT
from lab_image import Image, build
from lab_topologies import ALL_TOPOLOGIES, TOPOLOGY_VARIANTS

# --------------------------------------------------------------------------------------
# Booting and talking to a guest.
# --------------------------------------------------------------------------------------

class LabError(RuntimeError):
    pass


@dataclasses.dataclass
class Result:
    cmd: str
    rc: int
    stdout: str
    stderr: str
    seconds: float

    def check(self) -> "Result":
        if self.rc != 0:
            raise LabError(f"guest command failed (rc={self.rc}): {self.cmd}\n"
                           f"stdout:\n{self.stdout}\nstderr:\n{self.stderr}")
        return self


GUEST_ENV = {
    "PYTHONPATH": "/mnt/repo/exporter",
    "PYTHONDONTWRITEBYTECODE": "1",
}


class Guest:
    """One booted lab machine. Use as a context manager, or call start()/stop()."""

    def __init__(self, topology: str, image: Optional[Image] = None,
                 workdir: Optional[Path] = None, repo: Path = REPO_ROOT,
                 extra_kernel_args: Optional[List[str]] = None,
                 log: Callable[[str], None] = lambda s: None):
        if topology not in ALL_TOPOLOGIES:
            raise LabError(f"unknown topology {topology!r}; known: {', '.join(ALL_TOPOLOGIES)}")
        self.topology_name = topology
        self.image = image
        self.repo = repo
        self.extra_kernel_args = extra_kernel_args or []
        self.log = log
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix=f"storpath-lab-{topology}-"))
        self.out_dir = self.workdir / "out"
        self.console_log = self.workdir / "console.log"
        self.proc: Optional[subprocess.Popen] = None
        self.sock: Optional[socket.socket] = None
        self._buf = b""
        self._next_id = 1
        self.boot_seconds: Optional[float] = None
        self.hello: dict = {}

    # -- life cycle --------------------------------------------------------------------

    def qemu_command(self, sock_path: str) -> List[str]:
        image = self.image
        diskdir = self.workdir / "disks"
        diskdir.mkdir(parents=True, exist_ok=True)
        topo = ALL_TOPOLOGIES[self.topology_name](diskdir)
        self.topology = topo
        thread = os.environ.get("STORPATH_LAB_TCG_THREAD", "single")
        cmdline = ["console=ttyS0", "rdinit=/init", "panic=-1", "quiet",
                   "tsc=reliable"] + topo.kernel_args + self.extra_kernel_args
        return [
            "qemu-system-x86_64",
            "-machine", "q35", "-accel", f"tcg,thread={thread}",
            "-m", str(topo.memory_mib),
            "-smp", f"{topo.cpus},sockets={topo.cpus},cores=1,threads=1",
            "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
            "-kernel", str(image.kernel), "-initrd", str(image.initrd),
            "-append", " ".join(cmdline),
            "-serial", f"file:{self.console_log}",
            "-device", "virtio-serial-pci,id=vser0",
            "-chardev", f"socket,id=ctl,path={sock_path}",
            "-device", "virtserialport,bus=vser0.0,chardev=ctl,name=storpath.ctl",
            "-virtfs", f"local,path={self.repo},mount_tag=repo,security_model=none,readonly=on",
            "-virtfs", f"local,path={self.out_dir},mount_tag=out,security_model=none",
        ] + topo.qemu_args

    def start(self, timeout: float = 300) -> "Guest":
        if self.image is None:
            self.image = build(log=self.log,
                               variant=TOPOLOGY_VARIANTS.get(self.topology_name, "default"))
        if not shutil.which("qemu-system-x86_64"):
            raise LabError("qemu-system-x86_64 is not installed")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        # A short socket path: unix socket paths are limited to 108 bytes.
        self._sockdir = tempfile.mkdtemp(prefix="splab-")
        sock_path = os.path.join(self._sockdir, "ctl")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(sock_path)
        listener.listen(1)
        cmd = self.qemu_command(sock_path)
        (self.workdir / "qemu-command").write_text(" ".join(shlex.quote(c) for c in cmd) + "\n")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                     stdout=open(self.workdir / "qemu.log", "wb"),
                                     stderr=subprocess.STDOUT)
        listener.settimeout(0.5)
        deadline = t0 + 30
        try:
            while True:
                try:
                    self.sock, _ = listener.accept()
                    break
                except socket.timeout:
                    if self.proc.poll() is not None or time.monotonic() > deadline:
                        raise LabError("QEMU did not connect its control channel:\n"
                                       + self._diagnostics())
        finally:
            listener.close()
        self.hello = self._receive(deadline=t0 + timeout)
        if self.hello.get("event") != "ready":
            raise LabError(f"unexpected first message from the guest: {self.hello}")
        self.boot_seconds = time.monotonic() - t0
        self.log(f"lab guest {self.topology_name} ready after {self.boot_seconds:.1f} s")
        return self

    def stop(self, timeout: float = 30) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                if self.sock:
                    self._send({"op": "poweroff"})
                self.proc.wait(timeout=timeout)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        if self.sock:
            self.sock.close()
            self.sock = None
        if getattr(self, "_sockdir", None):
            shutil.rmtree(self._sockdir, ignore_errors=True)
        # The disk images are big (sparse) files; drop them unless asked to keep everything.
        if not os.environ.get("STORPATH_LAB_KEEP"):
            shutil.rmtree(self.workdir / "disks", ignore_errors=True)
            if self._own_workdir:
                shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "Guest":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- channel -----------------------------------------------------------------------

    def _diagnostics(self) -> str:
        parts = []
        for f in ("qemu.log", "console.log"):
            p = self.workdir / f
            if p.exists():
                text = p.read_text(errors="replace")
                parts.append(f"--- {f} (last 3000 chars) ---\n{text[-3000:]}")
        return "\n".join(parts)

    def _send(self, msg: dict) -> None:
        self.sock.sendall(json.dumps(msg).encode() + b"\n")

    def _receive(self, deadline: float) -> dict:
        while b"\n" not in self._buf:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LabError("timed out waiting for the guest\n" + self._diagnostics())
            self.sock.settimeout(min(remaining, 1.0))
            try:
                chunk = self.sock.recv(1 << 16)
            except socket.timeout:
                if self.proc.poll() is not None:
                    raise LabError("QEMU exited\n" + self._diagnostics())
                continue
            if not chunk:
                raise LabError("the guest closed its control channel\n" + self._diagnostics())
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def run(self, cmd: str, timeout: float = 120, check: bool = True,
            env: Optional[Dict[str, str]] = None, stdin: Optional[bytes] = None) -> Result:
        """Run a shell command in the guest as root and wait for it.

        A command that leaves a process running in the background must redirect that
        process's output (see spawn()), or the call waits until the process ends."""
        req_id = self._next_id
        self._next_id += 1
        merged = dict(GUEST_ENV)
        merged.update(env or {})
        req = {"id": req_id, "op": "run", "cmd": cmd, "timeout": timeout, "env": merged}
        if stdin is not None:
            req["stdin_b64"] = base64.b64encode(stdin).decode()
        self._send(req)
        resp = self._receive(deadline=time.monotonic() + timeout + 30)
        if resp.get("id") != req_id:
            raise LabError(f"out-of-order reply from the guest: {resp}")
        res = Result(cmd, resp["rc"],
                     base64.b64decode(resp["stdout_b64"]).decode(errors="replace"),
                     base64.b64decode(resp["stderr_b64"]).decode(errors="replace"),
                     resp["seconds"])
        return res.check() if check else res

    def sh(self, cmd: str, **kw) -> str:
        """Run a command that must succeed; return its stdout."""
        return self.run(cmd, **kw).stdout

    def read(self, path: str) -> str:
        """Content of one guest file, trailing newline removed."""
        return self.run(f"cat {shlex.quote(path)}").stdout.rstrip("\n")

    def read_many(self, *patterns: str) -> Dict[str, Optional[str]]:
        """Contents of guest files (shell glob patterns allowed) in one round trip:
        {path: text without trailing newline, or None if unreadable}."""
        script = ("for f in " + " ".join(patterns) + "; do "
                  "if v=$(cat \"$f\" 2>/dev/null); then printf '%s\\036%s\\037' \"$f\" \"$v\"; "
                  "else printf '%s\\036\\035\\037' \"$f\"; fi; done")
        out = self.run(script).stdout
        res: Dict[str, Optional[str]] = {}
        for rec in out.split("\x1f"):
            if "\x1e" in rec:
                k, v = rec.split("\x1e", 1)
                res[k] = None if v == "\x1d" else v
        return res

    def realpath(self, path: str) -> str:
        return self.run(f"readlink -f {shlex.quote(path)}").stdout.strip()

    def spawn(self, cmd: str, name: str) -> int:
        """Start a background process in the guest; its output goes to /tmp/NAME.log."""
        out = self.run(f"setsid sh -c {shlex.quote(cmd)} > /tmp/{name}.log 2>&1 < /dev/null & "
                       f"echo $!").stdout
        return int(out.strip())

    def wait_http(self, url: str, timeout: float = 60) -> str:
        """Fetch URL inside the guest, retrying until it answers; return the body."""
        script = ("import sys,time,urllib.request\n"
                  "end=time.time()+float(sys.argv[2])\n"
                  "while True:\n"
                  "    try:\n"
                  "        sys.stdout.write(urllib.request.urlopen(sys.argv[1],timeout=30)"
                  ".read().decode()); break\n"
                  "    except Exception as e:\n"
                  "        if time.time()>end: raise\n"
                  "        time.sleep(0.5)\n")
        return self.run(f"python3 -c {shlex.quote(script)} {shlex.quote(url)} {timeout}",
                        timeout=timeout + 60).stdout


def boot(topology: str, **kw) -> Guest:
    return Guest(topology, **kw).start()
