"""The privilege split with the storpath image (deploy/container/Dockerfile; the chart's and
kustomize's storpath-helper container; docs/raid-tools.md): the image run as two containers that
share the helper's socket on a named volume. The exporter container runs `serve --helper.socket`
as uid 9866 with every capability dropped and no-new-privileges; the helper container runs
`storpath helper` as 0:9866 with only SYS_ADMIN and SYS_RAWIO, no network, and the RAID tool's
folder mounted read-only, as the chart mounts raidTools.hostPaths. The exporter's effective
capabilities are 0 and it serves the RAID volume state that only the helper's storcli gives (a
fake storcli answering from JSON files of tests/fixtures/builders_raid.py, in storcli's output
format); dmsetup, smartctl, sg_modes and nvme-cli, which the helper's other commands run, are in
the image. The socket is root:9866 0660 in a folder root:9866 0750 (from the image): another user
cannot connect."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from tests.fixtures import builders_raid as build

from . import harness
from .conftest import missing

SOCKET_DIR = "/run/storpath-helper"
SOCKET = f"{SOCKET_DIR}/helper.sock"
CAP_SYS_RAWIO, CAP_SYS_ADMIN = 17, 21
DEGRADED = re.compile(r'^storpath_raid_volume_state\{[^}]*state="degraded"[^}]*\} 1(\.0)?$', re.M)
CONTROLLER = re.compile(r'^storpath_raid_controller_info\{[^}]*model="PERC H730P Mini"[^}]*\} 1(\.0)?$', re.M)
TOOL_UP = re.compile(r'^storpath_raid_tool_up\{[^}]*tool="storcli"[^}]*\} 1(\.0)?$', re.M)


@pytest.fixture(scope="module")
def storpath_image(docker_engine) -> str:
    """The storpath image only (built, or found with STORPATH_IT_BUILD=0)."""
    try:
        harness.build_images(["storpath"])
    except harness.Missing as exc:
        missing(str(exc))
    return harness.IMAGES["storpath"]


def _storcli(folder: Path) -> None:
    """storcli's three fixed commands answered from JSON files next to it (what the chart
    mounts from raidTools.hostPaths, here at /opt/MegaRAID/storcli, a folder the helper searches)."""
    (folder / "controllers.json").write_text(build.storcli_controllers(0, "PERC H730P Mini", "4.300", (0, 3, 0, 0),
                                                                       "SAS-12G"))
    (folder / "drives.json").write_text(build.storcli_drives(0, [build.StorcliDrive(32, 0, did=0)]))
    (folder / "volumes.json").write_text(build.storcli_volumes(0, [build.StorcliVolume(0, 0, state="Dgrd")]))
    script = folder / "storcli"
    script.write_text("#!/bin/sh\nhere=/opt/MegaRAID/storcli\ncase \"$1\" in\n"
                      "  /call) cat $here/controllers.json ;;\n  /call/eall/sall) cat $here/drives.json ;;\n"
                      "  /call/vall) cat $here/volumes.json ;;\n  *) exit 1 ;;\nesac\n")
    script.chmod(0o755)


def _status(container, field: str) -> str:
    code, out = container.exec_run(["cat", "/proc/1/status"])
    assert code == 0, out
    return re.search(rf"^{field}:\s+(.*)$", out.decode(), re.M).group(1)


def test_the_exporter_without_capabilities_serves_raid_values_only_the_helper_container_can_read(
        storpath_image, require_exporter, tmp_path):
    import docker

    client = docker.from_env()
    image = storpath_image
    tools = tmp_path / "storcli"
    tools.mkdir()
    _storcli(tools)
    sysfs = tmp_path / "sys"
    (sysfs / "bus/pci/drivers/megaraid_sas/0000:03:00.0").mkdir(parents=True)
    config = tmp_path / "etc"
    config.mkdir()
    (config / "storpath.yml").write_text("collectors:\n  raid:\n    timeout: 10s\n    startup_wait: 15s\n")
    harness.make_world_readable(tmp_path)
    (tools / "storcli").chmod(0o755)
    port = harness.free_port()
    name = f"storpath-helper-{uuid.uuid4().hex[:12]}"
    volume = client.volumes.create(name)
    started = []

    def run(**kwargs):
        container = client.containers.run(image, detach=True, read_only=True, tmpfs={"/tmp": ""}, **kwargs)
        started.append(container)
        return container

    try:
        helper = run(command=["helper", f"--helper.socket={SOCKET}"], user="0:9866", network_mode="none",
                     cap_drop=["ALL"], cap_add=["SYS_ADMIN", "SYS_RAWIO"], security_opt=["no-new-privileges"],
                     volumes={name: {"bind": SOCKET_DIR, "mode": "rw"},
                              str(tools): {"bind": "/opt/MegaRAID/storcli", "mode": "ro"}})
        harness.wait_until(lambda: helper.exec_run(["test", "-S", SOCKET])[0] == 0, 20, "the helper's socket",
                           diagnostics=lambda: helper.logs().decode()[-3000:])
        exporter = run(command=["serve", f"--web.listen-address=127.0.0.1:{port}", "--path.sysfs=/host/sys",
                                "--path.dev=/dev", "--config.file=/etc/storpath/storpath.yml",
                                f"--helper.socket={SOCKET}"],
                       network_mode="host", cap_drop=["ALL"], security_opt=["no-new-privileges"],
                       volumes={name: {"bind": SOCKET_DIR, "mode": "rw"},
                                str(sysfs): {"bind": "/host/sys", "mode": "ro"},
                                str(config): {"bind": "/etc/storpath", "mode": "ro"}})

        def scraped():
            status, body = harness.http_get(f"http://127.0.0.1:{port}/metrics")
            return body if status == 200 and DEGRADED.search(body) else None

        body = harness.wait_until(scraped, 40, "the degraded RAID volume served by the exporter",
                                  diagnostics=lambda: f"helper:\n{helper.logs().decode()[-3000:]}\n"
                                                      f"exporter:\n{exporter.logs().decode()[-3000:]}")
        assert CONTROLLER.search(body) and TOOL_UP.search(body), body[-3000:]

        # The serving process: not root, no capability at all (effective, permitted, bounding).
        assert _status(exporter, "Uid").split()[:2] == ["9866", "9866"]
        for field in ("CapEff", "CapPrm", "CapBnd"):
            assert int(_status(exporter, field), 16) == 0, field
        assert _status(exporter, "NoNewPrivs") == "1"
        assert exporter.exec_run(["test", "-e", "/opt/MegaRAID/storcli/storcli"])[0] != 0  # the tool is not here
        # The helper: exactly the two grants.
        assert int(_status(helper, "CapEff"), 16) == (1 << CAP_SYS_ADMIN) | (1 << CAP_SYS_RAWIO)
        assert _status(helper, "Uid").split()[0] == "0"
        # The helper's other tools are the image's own (its dmsetup-status, smartctl, sg-modes, nvme-identify).
        for tool in ("dmsetup", "smartctl", "sg_modes", "nvme"):
            assert helper.exec_run(["sh", "-c", f"command -v {tool}"])[0] == 0, f"{tool} is not in the image"

        # Only root and the exporter's group reach the socket: the folder (from the image) and the socket.
        code, out = exporter.exec_run(["stat", "-c", "%u:%g %a", SOCKET_DIR, SOCKET])
        assert code == 0 and out.decode().split("\n")[:2] == ["0:9866 750", "0:9866 660"], out
        code, out = exporter.exec_run(
            ["python3", "-c", f"import socket; socket.socket(socket.AF_UNIX).connect({SOCKET!r})"], user="65534:65534")
        assert code != 0 and b"PermissionError" in out, out
    finally:
        for container in started:
            container.remove(force=True, v=True)
        volume.remove(force=True)
