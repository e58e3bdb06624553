"""Property-based tests of the hardware RAID tools' parsers (storcli/perccli JSON, ssacli,
arcconf, MegaCli, smartctl).

Properties: garbage never raises anything but the parsers' own RaidOutputError (a tool's
output is never trusted); whatever they return is possible (rates among the link rates SAS
and SATA have, progress within 0..1, states from the sets); what the fixture builders write
the way the tools do reads back."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from storpath.analysis import raid as analysis
from storpath.readers import raid_arcconf, raid_megacli, raid_smartctl, raid_ssacli, raid_storcli
from storpath.readers.raid_records import (BATTERY_STATES, DRIVE_STATES, PLAUSIBLE_RATES, VOLUME_STATES,
                                           RaidInventory, RaidOutputError)
from tests.fixtures import builders_raid as build

_RATES = st.sampled_from(["1.5Gb/s", "3.0Gb/s", "6.0Gb/s", "12.0Gb/s", "Unknown", "", "0.0Gb/s", "6,0Gb/s"])
_JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70), st.floats(),
                               st.text(max_size=12)),
                     lambda children: st.one_of(st.lists(children, max_size=4),
                                                st.dictionaries(st.sampled_from(
                                                    ["Controllers", "Command Status", "Response Data", "Controller",
                                                     "Drive /c0/e252/s0", "Drive /c0/e252/s0 - Detailed Information",
                                                     "Drive /c0/e252/s0 Device attributes", "Device Speed",
                                                     "Link Speed", "/c0/v0", "VD0 Properties", "State", "Cache",
                                                     "DG", "Drives List", "Virtual Drives", "VD Info", "Bus",
                                                     "Basics", "BBU_Info", "EID:Slt", "Path Information"]),
                                                    children, max_size=5)),
                     max_leaves=30)


def assert_possible(inventory: RaidInventory) -> None:
    for drive in inventory.drives:
        assert drive.state in DRIVE_STATES
        assert drive.negotiated_rate in PLAUSIBLE_RATES + (None,)
        assert drive.capability in PLAUSIBLE_RATES + (None,)
    for volume in inventory.volumes:
        assert volume.state in VOLUME_STATES
        assert volume.progress is None or 0 <= volume.progress <= 1
        assert volume.strip_bytes is None or 512 <= volume.strip_bytes <= 1 << 30
    for ctrl in inventory.controllers:
        assert ctrl.battery in BATTERY_STATES + (None,)
        assert ctrl.port_rate in PLAUSIBLE_RATES + (None,)


@given(_JSON)
def test_storcli_any_json_structure(data):
    text = json.dumps(data)
    for parse in (raid_storcli.parse_controllers, raid_storcli.parse_drives, raid_storcli.parse_volumes):
        try:
            assert_possible(parse(text))
        except RaidOutputError:
            pass


@given(st.text(max_size=400))
def test_text_parsers_of_any_text(text):
    for parse in (raid_ssacli.parse_config_detail, raid_megacli.parse_listing, lambda t: raid_arcconf.parse_config(t, 1)):
        try:
            assert_possible(parse(text))
        except RaidOutputError:
            pass
    raid_megacli.parse_bbu(text)
    for operation, progress in raid_arcconf.parse_status(text).values():
        assert progress is None or 0 <= progress <= 1
    try:
        raid_smartctl.parse_smartctl(text)
    except RaidOutputError:
        pass


@given(st.lists(st.tuples(_RATES, _RATES, st.sampled_from(["Onln", "Rbld", "GHS", "UBad", "JBOD", "?"])),
                min_size=1, max_size=8))
def test_storcli_drives_read_back(drives):
    written = [build.StorcliDrive(252, slot, did=slot, device_speed=device, link_speed=link, state=state)
               for slot, (device, link, state) in enumerate(drives)]
    inventory = raid_storcli.parse_drives(build.storcli_drives(0, written))
    assert_possible(inventory)
    assert [d.slot for d in inventory.drives] == [f"252:{n}" for n in range(len(drives))]
    for drive, (device, link, _) in zip(inventory.drives, drives):
        rate = {"1.5Gb/s": 1.5e9, "3.0Gb/s": 3e9, "6.0Gb/s": 6e9, "12.0Gb/s": 12e9}
        assert drive.capability == rate.get(device)
        # The record keeps storcli's rate; above the drive's own it is the expander's link.
        assert drive.negotiated_rate == rate.get(link)
        assert analysis.rate_is_expander_link(drive) == bool(rate.get(link) and rate.get(device)
                                                             and rate[link] > rate[device])


@settings(max_examples=50)
@given(st.lists(st.tuples(st.sampled_from(["1.5Gbps", "3.0Gbps", "6.0Gbps, Unknown", "Unknown"]),
                          st.sampled_from(["OK", "Failed", "Rebuilding", "Predictive Failure"])),
                min_size=1, max_size=6), st.data())
def test_ssacli_reads_back_and_survives_cut_lines(drives, data):
    text = build.ssacli_config([build.SsaController(
        "Smart Array P212", "5", "6.64", "0000:14:00.0",
        arrays=[build.SsaArray("A", "SATA", [build.SsaLogical(1)],
                               [build.SsaDrive("2E", 1, bay + 1, rate=rate, status=status)
                                for bay, (rate, status) in enumerate(drives)])])])
    inventory = raid_ssacli.parse_config_detail(text)
    assert_possible(inventory)
    assert len(inventory.drives) == len(drives)
    cut = data.draw(st.integers(0, len(text)))
    try:
        assert_possible(raid_ssacli.parse_config_detail(text[:cut]))
    except RaidOutputError:
        pass
