#!/usr/bin/env python3
"""storpath lab guest agent: runs commands sent by the host over a virtio-serial port.

Protocol: one JSON object per line in each direction.
  host -> guest  {"id": N, "op": "run", "cmd": "...", "timeout": S, "env": {...},
                  "stdin_b64": "..."}
                 {"op": "poweroff"}
  guest -> host  {"event": "ready", "release": ..., "uptime": ...}      (once, at start)
                 {"id": N, "rc": RC, "stdout_b64": ..., "stderr_b64": ..., "seconds": S}
Commands run one at a time, as root, through /bin/sh, in their own session; on timeout
the whole session is killed and rc is -9.
"""

import base64
import glob
import json
import os
import signal
import subprocess
import sys
import time

PORT_NAME = "storpath.ctl"


def find_port(timeout=30.0):
    end = time.time() + timeout
    while time.time() < end:
        for d in glob.glob("/sys/class/virtio-ports/*"):
            try:
                with open(os.path.join(d, "name")) as f:
                    if f.read().strip() == PORT_NAME:
                        return "/dev/" + os.path.basename(d)
            except OSError:
                pass
        time.sleep(0.1)
    raise SystemExit(f"storpath-lab agent: no virtio port named {PORT_NAME}")


def write_all(fd, data):
    while data:
        n = os.write(fd, data)
        data = data[n:]


def send(fd, msg):
    write_all(fd, json.dumps(msg).encode() + b"\n")


def run(req):
    env = dict(os.environ)
    env.update(req.get("env") or {})
    stdin = base64.b64decode(req["stdin_b64"]) if req.get("stdin_b64") else b""
    t0 = time.monotonic()
    proc = subprocess.Popen(["/bin/sh", "-c", req["cmd"]], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            cwd="/root" if os.path.isdir("/root") else "/",
                            start_new_session=True)
    try:
        out, err = proc.communicate(stdin, timeout=req.get("timeout") or 120)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = proc.communicate()
        err += b"\nstorpath-lab agent: command timed out\n"
        rc = -9
    return {"id": req.get("id"), "rc": rc,
            "stdout_b64": base64.b64encode(out).decode(),
            "stderr_b64": base64.b64encode(err).decode(),
            "seconds": round(time.monotonic() - t0, 3)}


def main():
    path = find_port()
    fd = os.open(path, os.O_RDWR)
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    send(fd, {"event": "ready", "release": os.uname().release, "uptime": uptime})
    buf = b""
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            # The host side is not connected (yet, or any more).
            time.sleep(0.2)
            continue
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if not line.strip():
                continue
            try:
                req = json.loads(line)
            except ValueError:
                send(fd, {"id": None, "rc": -1, "stdout_b64": "",
                          "stderr_b64": base64.b64encode(b"bad request").decode(),
                          "seconds": 0})
                continue
            if req.get("op") == "poweroff":
                os.sync()
                with open("/proc/sysrq-trigger", "w") as f:
                    f.write("o")
                time.sleep(30)
                return 0
            send(fd, run(req))


if __name__ == "__main__":
    sys.exit(main())
