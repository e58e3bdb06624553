"""Property-based tests of the hardware RAID tools' parsers (storcli/perccli JSON, ssacli,
arcconf, MegaCli, smartctl).

Properties: any text (or JSON) fed to any parser never raises but the parsers' own
RaidOutputError, the "this is not the tool's output" the task layer makes `tool_up 0`, and
that never from the fence (readers.raid_records.fenced: a parser that failed on its own); a
tool's output is never trusted, numbers of any length and lines of any shape included;
whatever they return is possible (rates among the link rates SAS and SATA have, progress
within 0..1, states from the sets); what the fixture builders write the way the tools do
reads back."""

from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st

from storpath.analysis import raid as analysis
from storpath.readers.raid import (arcconf as raid_arcconf, megacli as raid_megacli,
                                   smartctl as raid_smartctl, ssacli as raid_ssacli,
                                   storcli as raid_storcli)
from storpath.readers.raid.records import (BATTERY_STATES, DRIVE_STATES, PARSER_FAILED, PLAUSIBLE_RATES,
                                           VOLUME_STATES, RaidInventory, RaidOutputError)
from tests.fixtures import builders_raid as build

_RATES = st.sampled_from(["1.5Gb/s", "3.0Gb/s", "6.0Gb/s", "12.0Gb/s", "Unknown", "", "0.0Gb/s", "6,0Gb/s"])
_JSON = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70),
                               st.integers(-(10 ** 600), 10 ** 600), st.floats(), st.text(max_size=12),
                               st.sampled_from(["6.0Gb/s", "12.0Gb/s", "Unknown", "SAS-12G", "0/0", "252:0", "RWBD",
                                                "Rebuild (11%)", "64 KB", "9" * 400 + " KB", " " * 300 + "x"])),
                     lambda children: st.one_of(st.lists(children, max_size=4),
                                                st.dictionaries(st.sampled_from(
                                                    ["Controllers", "Command Status", "Response Data", "Controller",
                                                     "Drive /c0/e252/s0", "Drive /c0/e252/s0 - Detailed Information",
                                                     "Drive /c0/e252/s0 Device attributes", "Device Speed",
                                                     "Link Speed", "/c0/v0", "VD0 Properties", "State", "Cache",
                                                     "DG", "Drives List", "Virtual Drives", "VD Info", "Bus",
                                                     "Basics", "BBU_Info", "EID:Slt", "Path Information",
                                                     "DID", "DG/VD", "TYPE", "Strip Size", "Size", "Domain ID",
                                                     "Bus Number", "Device Interface", "Active Operations",
                                                     "interface_speed", "max", "units_per_second", "bits_per_unit",
                                                     "smartctl"]),
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


def assert_refused_or_possible(parse, text) -> None:
    """parse(text) returns something possible, or refuses the text as the tool's output; it never
    raises anything else, and never fails inside (the fence's message)."""
    try:
        result = parse(text)
    except RaidOutputError as exc:
        assert PARSER_FAILED not in str(exc), str(exc)
        return
    if isinstance(result, RaidInventory):
        assert_possible(result)


_JSON_PARSERS = (raid_storcli.parse_controllers, raid_storcli.parse_drives, raid_storcli.parse_volumes,
                 raid_smartctl.parse_smartctl)
_TEXT_PARSERS = (raid_ssacli.parse_config_detail, raid_megacli.parse_listing, raid_megacli.parse_bbu,
                 lambda t: raid_arcconf.parse_config(t, 1), lambda t: raid_arcconf.parse_config(t, 1, t),
                 raid_arcconf.parse_status, raid_arcconf.controller_count) + _JSON_PARSERS


@given(_JSON)
def test_storcli_and_smartctl_any_json_structure(data):
    text = json.dumps(data)
    for parse in _JSON_PARSERS:
        assert_refused_or_possible(parse, text)
    if isinstance(data, dict):  # under the keys each parser looks for
        for wrapped in ({"Controllers": [{"Command Status": {"Controller": 0}, "Response Data": data}]},
                        {"smartctl": {}, "interface_speed": data}):
            for parse in _JSON_PARSERS:
                assert_refused_or_possible(parse, json.dumps(wrapped))


@given(st.text(max_size=400))
def test_text_parsers_of_any_text(text):
    for parse in _TEXT_PARSERS:
        assert_refused_or_possible(parse, text)


# Pieces of the tools' outputs, and of what made their patterns backtrack or int() raise: any
# text made of them is fed to every parser.
_PIECES = st.sampled_from([
    "\n", " ", " " * 40, ":", " : ", ": ", ",", "(", ")", "%", "#", "/", "9" * 25, "0", "1", "6.0", "Gb/s", "Gbps",
    "Adapter #", "BBU status for Adapter: ", "Virtual Drive: ", "Enclosure Device ID: ", "Slot Number: ",
    "Device Id: ", "Link Speed: ", "Device Speed: ", "Firmware state: ", "Drive's position: DiskGroup: ",
    "RAID Level: Primary-", ", Secondary-", "Smart Array P212 in Slot ", "   Array: ", "   array ", "   Unassigned",
    "      Logical Drive: ", "      logicaldrive ", "      physicaldrive ", "2E:1:", "         ", "Status: ",
    "PHY Transfer Rate: ", "Cache Ratio: ", "% Write", "Fault Tolerance: ", "Strip Size: ", " KB", " TB",
    "Controller information", "Logical device number ", "      Device #", "   Segment 0", "Enclosure ", "Slot ",
    "Transfer Speed", "Programmed Max Speed", "Logical device", "Current operation", "Percentage complete",
    "Rebuild", "Impacted ( Build/Verify with fix ", "Controllers found: "])


@settings(max_examples=300)
@given(st.lists(st.one_of(_PIECES, st.text(max_size=3)), max_size=80).map("".join))
def test_text_parsers_of_text_made_of_their_words(text):
    for parse in _TEXT_PARSERS:
        assert_refused_or_possible(parse, text)


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
    assert_refused_or_possible(raid_ssacli.parse_config_detail, text[:cut])
