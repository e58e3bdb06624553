"""The chart's `raidTools` value (deploy/helm/storpath/values.yaml, docs/raid-tools.md): off by
default (the exporter as uid 9866 without any capability, no tool directory mounted); on, the
exporter container runs privileged as root with SYS_ADMIN and SYS_RAWIO named, and each of
`raidTools.hostPaths` is mounted read-only at its own path from the node. helm lint, the strict
validator and kubeconform run on it in test_chart.py (the `raid-tools` case)."""

from __future__ import annotations

from tests.packaging.test_chart import RAID_TOOLS, helm, render  # noqa: F401 (helm: the fixture)

import pytest

pytestmark = pytest.mark.integration


def _exporter(objects):
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    pod = daemonset["spec"]["template"]["spec"]
    (container,) = [c for c in pod["containers"] if c["name"] == "storpath"]
    return pod, container


def test_off_by_default_grants_nothing(helm):  # noqa: F811
    pod, container = _exporter(render(helm))
    assert pod["securityContext"]["runAsUser"] == 9866 and pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert "privileged" not in container["securityContext"]
    assert not [v for v in pod["volumes"] if v["name"].startswith("raid-tools")]


def test_on_grants_what_the_tools_need_and_mounts_their_directories_read_only(helm):  # noqa: F811
    pod, container = _exporter(render(helm, *RAID_TOOLS))
    assert pod["securityContext"]["runAsUser"] == 0
    context = container["securityContext"]
    assert context["privileged"] is True
    assert context["capabilities"] == {"drop": ["ALL"], "add": ["SYS_ADMIN", "SYS_RAWIO"]}
    assert context["readOnlyRootFilesystem"] is True
    mounts = {m["name"]: m for m in container["volumeMounts"] if m["name"].startswith("raid-tools")}
    volumes = {v["name"]: v for v in pod["volumes"] if v["name"].startswith("raid-tools")}
    assert sorted(m["mountPath"] for m in mounts.values()) == ["/opt/MegaRAID/storcli",
                                                                "/opt/smartstorageadmin/ssacli/bin"]
    for name, mount in mounts.items():
        assert mount["readOnly"] is True
        assert volumes[name]["hostPath"] == {"path": mount["mountPath"], "type": "Directory"}


def test_nvme_identify_alone_keeps_its_own_grant(helm):  # noqa: F811
    _, container = _exporter(render(helm, "--set", "privileged=true"))
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["SYS_ADMIN"]}
