"""A support folder (a sosreport beside an lspci dump) read inside itself by mechanism
(base.sysfs.inside / open_inside): a link out of it, a FIFO, a device node are refused on the
opened descriptor, never read; what is refused is said, and the rest of the folder is read."""

import os
import shutil
import threading
import time

from storpath.base import sysfs
from storpath.readers.lspci import read_dump
from tests.conftest import ROOT

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "lspci")

# /proc/mdstat as the kernel's md.c (md_seq_show) prints it: md1 raid1 with one member failed.
MDSTAT = ("Personalities : [raid1] \n"
          "md1 : active raid1 vdd[1](F) vdc[0]\n      64512 blocks super 1.2 [2/1] [U_]\n      \n"
          "unused devices: <none>\n")


def _sosreport(folder):
    os.makedirs(folder / "sos_commands" / "pci")
    shutil.copy(os.path.join(FIXTURES, "quad-nic-x4.txt"), folder / "sos_commands" / "pci" / "lspci_-nnvv")
    os.makedirs(folder / "proc")
    (folder / "proc" / "mdstat").write_text(MDSTAT)
    md = folder / "sys" / "block" / "md1" / "md"
    os.makedirs(md)
    (md / "level").write_text("raid1\n")
    return md


def _in_thread(call, seconds=5.0):
    """call() in a thread: (its result, whether it returned within `seconds`)."""
    out = []
    thread = threading.Thread(target=lambda: out.append(call()), daemon=True)
    thread.start()
    thread.join(seconds)
    return (out[0] if out else None), not thread.is_alive()


def test_a_link_out_a_fifo_and_a_device_node_are_refused_and_the_rest_is_read(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("PRIVATE-KEY-MATERIAL\n")
    folder = tmp_path / "sos"
    md = _sosreport(folder)
    os.symlink(secret, md / "array_state")
    os.mkfifo(md / "sync_action")
    os.symlink("/dev/null", md / "degraded")
    (record, problems), returned = _in_thread(lambda: read_dump(str(folder)))
    assert returned, "a FIFO in the folder was opened for reading"
    refused = sorted(dict(p.fields)["why"] for p in problems if p.message == "md attributes of the archive not read")
    assert len(refused) == 3, refused
    assert any("array_state" in why and "leads outside" in why for why in refused)
    assert any("sync_action" in why and "not a regular file" in why for why in refused)
    assert any("degraded" in why and "leads outside" in why for why in refused)
    assert "PRIVATE-KEY-MATERIAL" not in repr((record, problems))
    # What could be read is read: md1 from mdstat and its level file, its failed member seen.
    (md1,) = record.md
    assert md1.name == "md1" and md1.level == "raid1" and md1.degraded == 1


def test_a_listing_that_leads_out_is_refused_not_a_traceback(tmp_path):
    outside = tmp_path / "elsewhere"
    os.makedirs(outside / "md9" / "md")
    (outside / "md9" / "md" / "level").write_text("raid5\n")
    folder = tmp_path / "sos"
    _sosreport(folder)
    shutil.rmtree(folder / "sys" / "block")
    os.symlink(outside, folder / "sys" / "block")
    record, problems = read_dump(str(folder))
    refused = [dict(p.fields)["why"] for p in problems if p.message == "md attributes of the archive not read"]
    assert refused and all("leads outside" in why for why in refused), refused
    assert "md9" not in repr(record.md)


def test_an_unreadable_block_folder_is_said_not_a_traceback(tmp_path):
    # sys/block that cannot be listed (here a link to itself: ELOOP, as root can read anything)
    # used to raise RootUnreadable out of `check --lspci` (a traceback, exit 1).
    folder = tmp_path / "sos"
    _sosreport(folder)
    shutil.rmtree(folder / "sys" / "block")
    os.symlink("block", folder / "sys" / "block")
    record, problems = read_dump(str(folder))
    refused = [dict(p.fields)["why"] for p in problems if p.message == "md attributes of the archive not read"]
    assert refused == [f"{folder}/sys/block: {os.strerror(40)}"], refused
    assert record.md is None


def test_a_link_inside_the_folder_is_followed(tmp_path):
    folder = tmp_path / "sos"
    md = _sosreport(folder)
    os.makedirs(folder / "sys" / "devices" / "virtual")
    (folder / "sys" / "devices" / "virtual" / "state").write_text("clean\n")
    os.symlink("../../../devices/virtual/state", md / "array_state")
    record, problems = read_dump(str(folder))
    assert not [p for p in problems if p.message == "md attributes of the archive not read"]
    assert record.md[0].array_state == "clean"


def test_reads_outside_a_confined_folder_are_as_before(tmp_path):
    # The mechanism holds only inside the folder given: a machine's own sysfs reads are unchanged.
    (tmp_path / "attr").write_text("x\n")
    other = tmp_path / "other"
    os.makedirs(other)
    os.symlink(tmp_path / "attr", other / "link")
    with sysfs.inside(str(tmp_path / "sos")):
        assert sysfs.read_attr(str(other / "link")) == "x"
    with sysfs.inside(str(other)) as refusals:
        assert sysfs.read_attr_why(str(other / "link"))[0] is None
        assert sysfs.list_dir(str(other)) == ["link"]
    assert len(refusals) == 1 and "leads outside" in refusals[0]
    assert sysfs.read_attr(str(other / "link")) == "x"  # the confinement ends with its block


def test_a_fifo_read_inside_returns_at_once(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    with sysfs.inside(str(tmp_path)) as refusals:
        start = time.monotonic()
        assert sysfs.read_bytes(str(tmp_path / "fifo")) is None
        assert sysfs.read_attr_why(str(tmp_path / "fifo")) == (None, "not a regular file: not read")
        assert time.monotonic() - start < 1.0
    assert len(refusals) == 2


def test_many_reads_at_once_stay_inside_too(tmp_path):
    """read_many (the AER counters of each function) goes through the confinement as read_attr
    does: a link out of the folder and a FIFO are refused, what is inside is read."""
    (tmp_path / "secret").write_text("key\n")
    folder = tmp_path / "sos"
    folder.mkdir()
    (folder / "aer_dev_fatal").write_text("TOTAL_ERR_FATAL 0\n")
    os.symlink(tmp_path / "secret", folder / "aer_dev_nonfatal")
    os.mkfifo(folder / "aer_dev_correctable")
    with sysfs.inside(str(folder)) as refusals:
        start = time.monotonic()
        got = sysfs.read_many([str(folder / n) for n in ("aer_dev_fatal", "aer_dev_nonfatal", "aer_dev_correctable")])
        assert time.monotonic() - start < 1.0
    assert got == [b"TOTAL_ERR_FATAL 0\n", None, None]
    assert len(refusals) == 2 and any("leads outside" in r for r in refusals)
    assert sysfs.read_many([str(folder / "aer_dev_nonfatal")]) == [b"key\n"]  # outside a confinement: as before
