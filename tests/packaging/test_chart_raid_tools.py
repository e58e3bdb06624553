"""The chart's privilege split (deploy/helm/storpath/values.yaml `privileged`, `raidTools`;
docs/raid-tools.md): the exporter container never has a capability, is never privileged, runs as
uid 9866 on a read-only root and mounts none of the node's devices or tool folders, whatever the
values; with a privileged source on, a storpath-helper container holds exactly the grants that
source needs, the tools' folders read-only, and shares its socket with the exporter (`serve
--helper.socket`) on an emptyDir no other container mounts. helm lint, the strict validator and
kubeconform run on it in test_chart.py (the `raid-tools` case)."""

from __future__ import annotations

import shutil

import pytest
import yaml

from tests.packaging.test_chart import (CHART, FULL, OPERATOR, RAID_TOOLS, helm,  # noqa: F401 (helm: the fixture)
                                        render, run)

pytestmark = pytest.mark.integration

SOCKET = "/run/storpath-helper/helper.sock"
UNPRIVILEGED = {"readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}


def _pod(objects):
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    pod = daemonset["spec"]["template"]["spec"]
    return pod, {c["name"]: c for c in pod["containers"]}


def _exporter_is_unprivileged(pod, containers):
    exporter = containers["storpath"]
    assert pod["securityContext"]["runAsUser"] == 9866 and pod["securityContext"]["runAsNonRoot"] is True
    assert exporter["securityContext"] == UNPRIVILEGED  # no privileged, no runAsUser of its own: the pod's 9866
    mounted = {m["name"] for m in exporter["volumeMounts"]}
    host = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert {host[name] for name in mounted if name in host} == {"/sys", "/proc", "/var/lib/storpath"}
    assert "--path.dev=/dev" in exporter["args"]


@pytest.mark.parametrize("values", [[], ["--set-json", 'raidTools.hostPaths=["/opt/MegaRAID/storcli"]']],
                         ids=["defaults", "folders-but-raid-tools-off"])
def test_without_a_privileged_source_no_helper_and_no_grant(helm, values):  # noqa: F811
    pod, containers = _pod(render(helm, *values))
    assert list(containers) == ["storpath"]
    _exporter_is_unprivileged(pod, containers)
    assert not [a for a in containers["storpath"]["args"] if a.startswith("--helper.socket")]
    assert not [v for v in pod["volumes"] if v["name"].startswith(("raid-tools", "helper"))]


@pytest.mark.parametrize("values,grants", [
    (RAID_TOOLS, ["SYS_ADMIN", "SYS_RAWIO"]),
    (["--set", "privileged=true"], ["SYS_ADMIN"]),
    (FULL, ["SYS_ADMIN"]),
    (["--set", "privileged=true", *RAID_TOOLS], ["SYS_ADMIN", "SYS_RAWIO"]),
], ids=["raid-tools", "nvme-identify", "privileged-tls-probes", "both"])
def test_the_grants_are_the_helpers_and_the_exporter_asks_it(helm, values, grants):  # noqa: F811
    pod, containers = _pod(render(helm, *values))
    assert list(containers) == ["storpath", "storpath-helper"]
    _exporter_is_unprivileged(pod, containers)
    exporter, helper = containers["storpath"], containers["storpath-helper"]
    assert f"--helper.socket={SOCKET}" in exporter["args"]
    assert helper["args"] == ["helper", f"--helper.socket={SOCKET}", "--helper.socket-mode=0660"]
    context = helper["securityContext"]
    assert context["capabilities"] == {"drop": ["ALL"], "add": grants}
    assert context["privileged"] is True and context["readOnlyRootFilesystem"] is True
    # root (the device nodes are root's), in the exporter's group: the socket is root:9866 0660
    assert (context["runAsUser"], context["runAsGroup"], context["runAsNonRoot"]) == (0, 9866, False)
    assert "ports" not in helper
    # The socket's folder: an emptyDir, mounted by these two containers only.
    volumes = {v["name"]: v for v in pod["volumes"]}
    users = [c["name"] for c in [*pod["containers"], *pod.get("initContainers", [])]
             for m in c["volumeMounts"] if m["mountPath"] == "/run/storpath-helper"]
    assert users == ["storpath", "storpath-helper"]
    (name,) = {m["name"] for c in pod["containers"] for m in c["volumeMounts"]
               if m["mountPath"] == "/run/storpath-helper"}
    assert "emptyDir" in volumes[name]


def test_the_tool_folders_are_mounted_read_only_in_the_helper_only(helm):  # noqa: F811
    pod, containers = _pod(render(helm, *RAID_TOOLS))
    assert not [m for m in containers["storpath"]["volumeMounts"] if m["name"].startswith("raid-tools")]
    mounts = {m["name"]: m for m in containers["storpath-helper"]["volumeMounts"] if m["name"].startswith("raid-tools")}
    volumes = {v["name"]: v for v in pod["volumes"] if v["name"].startswith("raid-tools")}
    assert sorted(m["mountPath"] for m in mounts.values()) == ["/opt/MegaRAID/storcli",
                                                                "/opt/smartstorageadmin/ssacli/bin"]
    for name, mount in mounts.items():
        assert mount["readOnly"] is True
        assert volumes[name]["hostPath"] == {"path": mount["mountPath"], "type": "Directory"}


def test_notes_say_who_holds_the_grants(helm, tmp_path):  # noqa: F811
    # NOTES.txt's define rendered into a document of its own (as test_chart.py's notes test does).
    chart = tmp_path / "storpath"
    shutil.copytree(CHART, chart)
    (chart / "templates" / "notes.yaml").write_text('notes: {{ include "storpath.notes" . | toJson }}\n')

    def notes(*values):
        text = run(helm, "template", *OPERATOR, "storpath", str(chart), "--show-only", "templates/notes.yaml", *values)
        return yaml.safe_load(text)["notes"]

    assert "exporter container (uid 9866) holds no capability" in notes()
    assert "storpath-helper" not in notes() and "raidTools.enabled: a helper container" in notes()
    assert "storpath-helper container holds the grants (SYS_ADMIN, SYS_RAWIO," in notes(*RAID_TOOLS)
    assert "storpath-helper container holds the grants (SYS_ADMIN," in notes("--set", "privileged=true")
