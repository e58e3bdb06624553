"""The RAID tools' parsers against output that is broken or hostile: a number too long to be
one, a line of thousands of spaces, more drives than any controller has, a field holding
garbage, a parser that fails outright. Each charges the tool that printed it (a problem for
the field, or that tool's `tool_up 0` with the reason) and nothing else: the other tools'
inventories stand.

The outputs are the project's own (tests.fixtures.builders_raid), with the hostile part
spliced into the place a real output has it."""

from __future__ import annotations

import json

import pytest

from storpath.readers.raid import (arcconf as raid_arcconf, megacli as raid_megacli,
                                   smartctl as raid_smartctl, ssacli as raid_ssacli,
                                   storcli as raid_storcli)
from storpath.readers.raid import RaidReader
from storpath.readers.raid.records import PARSER_FAILED, RaidInventory, RaidOutputError
from storpath.base.roots import Roots
from tests.fixtures import builders_raid as build
from tests.hang_guard import finishes

FIVE_THOUSAND_DIGITS = "9" * 5000


def _ssacli_p212(cache_ratio="25% Read / 75% Write"):
    return build.ssacli_config([build.SsaController(
        "Smart Array P212", "5", "6.64", "0000:14:00.0", cache_ratio=cache_ratio,
        arrays=[build.SsaArray("A", "SATA", [build.SsaLogical(1)],
                               [build.SsaDrive("2E", 1, bay) for bay in (1, 2)])])])


def _storcli(captured, drives_json=None):
    (captured / "storcli").mkdir(parents=True, exist_ok=True)
    drives = [build.StorcliDrive(32, slot, did=slot) for slot in range(2)]
    (captured / "storcli/controllers.json").write_text(build.storcli_controllers(
        0, "PERC H730P Mini", "4.300", (0, 3, 0, 0), "SAS-12G"))
    (captured / "storcli/drives.json").write_text(drives_json or build.storcli_drives(0, drives))
    (captured / "storcli/volumes.json").write_text(build.storcli_volumes(0, [build.StorcliVolume(
        0, 0, state="Dgrd", drives=drives)]))


def _read(tmp_path, captured):
    return RaidReader(Roots(sysfs=str(tmp_path), captured=str(captured))).read()


def _messages(problems):
    return [(p.message, dict(p.fields)) for p in problems]


def _attributes(problems):
    return {dict(p.fields).get("attribute") for p in problems}


# ---- numbers too long to be numbers ---------------------------------------------------------

def test_smartctl_integer_of_400_digits_is_that_fields_problem_and_storcli_stands(tmp_path):
    """10**400 as IDENTIFY's units per second: float() of it overflowed and the whole RAID pass
    failed, storcli's degraded volume with it."""
    captured = tmp_path / "captured"
    _storcli(captured)
    (captured / "smartctl").mkdir()
    document = '{"smartctl": {"exit_status": 0}, "device": {"protocol": "ATA"}, "interface_speed": ' \
               '{"max": {"units_per_second": %s, "bits_per_unit": 100000000}, ' \
               '"current": {"units_per_second": 15, "bits_per_unit": 100000000}}}'
    (captured / "smartctl/c0-0.json").write_text(document % ("1" + "0" * 400))
    (captured / "smartctl/c0-1.json").write_text(document % FIVE_THOUSAND_DIGITS)  # past json's own 4300-digit limit
    snapshot = _read(tmp_path, captured)
    assert snapshot.tools["storcli"].ok and snapshot.tools["smartctl"].ok
    assert [(v.id, v.state) for v in snapshot.inventory.volumes] == [("0/0", "degraded")]
    assert [d.slot for d in snapshot.inventory.drives] == ["32:0", "32:1"]
    assert [(d.slot, d.capability, d.negotiated_rate) for d in snapshot.inventory.drives] == \
        [("32:0", 6e9, 6e9), ("32:1", 6e9, 6e9)]  # storcli's own; smartctl's maximum unreadable
    assert [(dict(p.fields)["device"], dict(p.fields)["attribute"]) for p in snapshot.inventory.problems] == \
        [("smartctl/c0-0.json", "interface_speed.max"), ("smartctl/c0-1.json", "interface_speed.max")]


def test_megacli_adapter_of_5000_digits_is_skipped_with_a_problem_and_the_rest_stands(tmp_path):
    captured = tmp_path / "captured"
    _storcli(captured)
    (captured / "ssacli").mkdir()
    (captured / "ssacli/config-detail.txt").write_text(_ssacli_p212())
    (captured / "megacli").mkdir()
    good = build.megacli_pdlist(0, [build.MegaDrive(252, 0, 10)])
    hostile = build.megacli_pdlist(1, [build.MegaDrive(252, 1, 11)]).replace("Adapter #1", f"Adapter #{FIVE_THOUSAND_DIGITS}")
    (captured / "megacli/pdlist.txt").write_text(good + hostile)
    snapshot = _read(tmp_path, captured)
    assert all(status.ok for status in snapshot.tools.values()), snapshot.tools
    assert sorted(c.name for c in snapshot.inventory.controllers) == ["megacli/a0", "ssacli/slot5", "storcli/c0"]
    assert [(d.controller, d.slot) for d in snapshot.inventory.drives if d.controller.startswith("megacli")] == \
        [("megacli/a0", "252:0")]
    assert "adapter number" in _attributes(snapshot.inventory.problems)


def test_megacli_fields_of_5000_digits_are_problems_not_exceptions():
    text = build.megacli_pdlist(0, [build.MegaDrive(252, 0, 10), build.MegaDrive(252, 1, 11)])
    text = text.replace("Device Id: 11", f"Device Id: {FIVE_THOUSAND_DIGITS}").replace(
        "Slot Number: 0", f"Slot Number: {FIVE_THOUSAND_DIGITS}")
    inventory = raid_megacli.parse_listing(text)
    assert [(d.slot, d.device_id) for d in inventory.drives] == [("252:1", None)]
    assert {"Slot Number", "Device Id"} <= _attributes(inventory.problems)
    ldinfo = build.megacli_ldinfo(0, [dict(id=0, level="Primary-5, Secondary-0, RAID Level Qualifier-3",
                                           size="24.555 TB", state="Optimal", strip="64 KB", drives=12,
                                           default="WriteBack", current="WriteBack")])
    [volume] = raid_megacli.parse_listing(ldinfo.replace("Size                : 24.555 TB",
                                                         f"Size                : {FIVE_THOUSAND_DIGITS} TB")).volumes
    assert (volume.level, volume.size_bytes) == ("raid5", None)


def test_ssacli_cache_ratio_of_5000_digits_is_that_fields_problem(tmp_path):
    inventory = raid_ssacli.parse_config_detail(_ssacli_p212(f"{FIVE_THOUSAND_DIGITS}% Read / {FIVE_THOUSAND_DIGITS}% Write"))
    assert [c.name for c in inventory.controllers] == ["ssacli/slot5"]
    assert [(d.slot, d.negotiated_rate) for d in inventory.drives] == [("2E:1:1", 1.5e9), ("2E:1:2", 1.5e9)]
    [volume] = inventory.volumes
    assert (volume.state, volume.write_back_configured) == ("optimal", None)
    [problem] = inventory.problems
    assert dict(problem.fields)["attribute"] == "Cache Ratio" and dict(problem.fields)["device"] == "ssacli/slot5"
    captured = tmp_path / "captured"
    _storcli(captured)
    (captured / "ssacli").mkdir()
    (captured / "ssacli/config-detail.txt").write_text(_ssacli_p212(f"{FIVE_THOUSAND_DIGITS}% Write"))
    snapshot = _read(tmp_path, captured)
    assert snapshot.tools["storcli"].ok and snapshot.tools["ssacli"].ok
    assert len(snapshot.inventory.drives) == 4


def test_storcli_numbers_too_long_are_problems_of_their_fields():
    drives = build.storcli_drives(0, [build.StorcliDrive(32, 0, did=7), build.StorcliDrive(32, 1, did=8)])
    drives = drives.replace('"DID": 8', f'"DID": {FIVE_THOUSAND_DIGITS}').replace('"DG": 0', '"DG": 1' + "0" * 400, 1)
    inventory = raid_storcli.parse_drives(drives, {("storcli/c0", "0"): "0/0"})
    assert [(d.slot, d.device_id, d.volume) for d in inventory.drives] == [("32:0", 7, None), ("32:1", None, "0/0")]
    assert {"DID", "DG"} <= _attributes(inventory.problems)
    controllers = build.storcli_drives(0, []).replace('"Controller": 0', f'"Controller": {FIVE_THOUSAND_DIGITS}')
    assert raid_storcli.parse_drives(controllers).drives == []


# ---- lines that made a pattern backtrack ----------------------------------------------------

def test_a_megacli_line_of_3000_spaces_parses():
    """The field pattern backtracked over the spaces for seconds to minutes, holding the GIL."""
    text = build.megacli_pdlist(0, [build.MegaDrive(252, 0, 10)]) + " " * 3000 + "a\n"
    assert [d.slot for d in finishes(raid_megacli.parse_listing, text).drives] == ["252:0"]


# Lines shaped against each pattern the parsers had or have: long runs of spaces between
# words, colons, digits and the words the patterns look for.
HOSTILE_LINES = [" " * 3000 + "a", "a" + " " * 3000 + "b", "  a" + " " * 3000 + "b", "   key: x" + " " * 3000 + "y",
                 "Adapter" + " " * 3000 + "x", "Adapter #" + " " * 3000 + "x", "Smart Array" + " " * 3000,
                 "   Segment 0 : Enclosure" + " " * 3000 + "x", "      Status : Impacted (" + " " * 3000 + "x",
                 "1" + " " * 3000 + "x", "(" * 3000, ":" * 3000, "9" * 3000 + "%", " :" * 1500, "a:" * 1500,
                 "Primary-" + "1" * 3000, "Drive /c0/e" + "1" * 3000, "Link Speed: 6" + " " * 3000 + "x"]


@pytest.mark.parametrize("parse", [
    raid_megacli.parse_listing, raid_megacli.parse_bbu, raid_ssacli.parse_config_detail,
    lambda text: raid_arcconf.parse_config(text, 1), raid_arcconf.parse_status])
def test_text_parsers_are_linear_on_hostile_lines(parse):
    """Every hostile line, 20 times each, after a valid header: a pattern quadratic in the line
    would take minutes here."""
    text = "Adapter #0\nSmart Array P212 in Slot 5\nController information\n   Status : Optimal\n" + \
        "\n".join(line for line in HOSTILE_LINES for _ in range(20))
    try:
        result = finishes(parse, text)
    except RaidOutputError as exc:  # refused as the tool's output: an answer too, in time
        assert PARSER_FAILED not in str(exc), str(exc)
        return
    assert result is None or isinstance(result, (RaidInventory, dict, int)), result


def test_storcli_and_smartctl_json_with_hostile_strings():
    hostile = {"Controllers": [{"Command Status": {"Controller": 0}, "Response Data": {
        f"Drive /c0/e252/s{n}": [{"State": line, "DG": line, "DID": line, "Med": line, "Intf": line}]
        for n, line in enumerate(HOSTILE_LINES)}}]}
    for key in ("Drive /c0/e252/s0", "Drive /c0/e252/s1"):
        hostile["Controllers"][0]["Response Data"][f"{key} - Detailed Information"] = {
            f"{key} Device attributes": {"Link Speed": HOSTILE_LINES[9], "Device Speed": HOSTILE_LINES[-1]}}
    inventory = finishes(raid_storcli.parse_drives, json.dumps(hostile))
    assert len(inventory.drives) == len(HOSTILE_LINES)
    finishes(raid_smartctl.parse_smartctl, json.dumps({"smartctl": {}, "serial_number": HOSTILE_LINES[0],
                                                        "interface_speed": {"max": HOSTILE_LINES[1]}}))


# ---- counts beyond any controller ---------------------------------------------------------

def test_drives_beyond_a_controllers_bound_fail_that_tool_with_the_reason(tmp_path):
    from storpath.readers.raid.records import MAX_DRIVES_PER_CONTROLLER
    assert len(raid_storcli.parse_drives(build.storcli_drive_rows(0, MAX_DRIVES_PER_CONTROLLER)).drives) == MAX_DRIVES_PER_CONTROLLER
    with pytest.raises(RaidOutputError, match="MAX_DRIVES_PER_CONTROLLER"):
        raid_storcli.parse_drives(build.storcli_drive_rows(0, MAX_DRIVES_PER_CONTROLLER + 1))
    captured = tmp_path / "captured"
    _storcli(captured, build.storcli_drive_rows(0, MAX_DRIVES_PER_CONTROLLER + 1))
    (captured / "ssacli").mkdir()
    (captured / "ssacli/config-detail.txt").write_text(_ssacli_p212())
    snapshot = _read(tmp_path, captured)
    assert not snapshot.tools["storcli"].ok and "more than 4096 drives on storcli/c0" in snapshot.tools["storcli"].reason
    assert snapshot.tools["ssacli"].ok and [c.name for c in snapshot.inventory.controllers] == ["ssacli/slot5"]


def test_volumes_and_controllers_beyond_their_bounds_fail_the_tool():
    from storpath.readers.raid.records import MAX_CONTROLLERS, MAX_VOLUMES_PER_CONTROLLER
    volumes = {f"/c0/v{n}": [{"DG/VD": f"{n}/{n}", "TYPE": "RAID1", "State": "Optl"}]
               for n in range(MAX_VOLUMES_PER_CONTROLLER + 1)}
    with pytest.raises(RaidOutputError, match="MAX_VOLUMES_PER_CONTROLLER"):
        raid_storcli.parse_volumes(json.dumps({"Controllers": [{"Command Status": {"Controller": 0},
                                                                "Response Data": volumes}]}))
    ssacli = "\n".join(f"Smart Array P212 in Slot {n}\n   Controller Status: OK" for n in range(MAX_CONTROLLERS + 1))
    with pytest.raises(RaidOutputError, match="MAX_CONTROLLERS"):
        raid_ssacli.parse_config_detail(ssacli)
    drives = "Adapter #0\n" + "".join(f"Enclosure Device ID: 252\nSlot Number: {n}\n"
                                      for n in range(MAX_VOLUMES_PER_CONTROLLER * 4 + 1))
    with pytest.raises(RaidOutputError, match="MAX_DRIVES_PER_CONTROLLER"):
        raid_megacli.parse_listing(drives)


# ---- the fence ----------------------------------------------------------------------------

def test_a_parser_that_fails_outright_charges_its_tool_only(tmp_path, monkeypatch):
    def broken(*_):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(raid_ssacli, "_add_controller", broken)
    captured = tmp_path / "captured"
    _storcli(captured)
    (captured / "ssacli").mkdir()
    (captured / "ssacli/config-detail.txt").write_text(_ssacli_p212())
    snapshot = _read(tmp_path, captured)
    assert snapshot.tools["storcli"].ok and not snapshot.tools["ssacli"].ok
    assert "ssacli: parser failed on this output (ZeroDivisionError: a bug)" == snapshot.tools["ssacli"].reason
    assert [c.name for c in snapshot.inventory.controllers] == ["storcli/c0"]


# ---- a field holding garbage is a problem naming it ----------------------------------------

def test_a_garbage_field_is_a_problem_naming_it_and_unknown_is_none():
    drives = [build.StorcliDrive(32, 0, did=0, link_speed="Unknown"),
              build.StorcliDrive(32, 1, did=1, link_speed="fast", device_speed="6.0Gb/s")]
    inventory = raid_storcli.parse_drives(build.storcli_drives(0, drives))
    assert [(d.slot, d.negotiated_rate) for d in inventory.drives] == [("32:0", None), ("32:1", None)]
    assert _messages(inventory.problems) == [("storcli printed a field storpath cannot read", {
        "source": "raid", "device": "storcli/c0 32:1", "attribute": "Link Speed", "value": "fast"})]
    volumes = raid_storcli.parse_volumes(build.storcli_volumes(0, [build.StorcliVolume(0, 0, raid="RAID7")]))
    assert volumes.volumes[0].level is None and _attributes(volumes.problems) == {"TYPE"}


# ---- records immutable ---------------------------------------------------------------------

def test_getstatus_gives_a_new_inventory_and_leaves_the_parsed_one_as_it_was():
    config = build.arcconf_config("Adaptec 6405", "Optimal", [dict(id=0, name="data", level="RAID 10", status="Degraded",
                                                                   strip="256 KB", mode="Enabled (write-back)",
                                                                   setting="Enabled (write-back)", segments=[])], [])
    parsed = raid_arcconf.parse_config(config, 1)
    before = list(parsed.volumes)
    updated = raid_arcconf.apply_status(parsed, 1, raid_arcconf.parse_status(build.arcconf_status(0, "Rebuild", 40)))
    assert parsed.volumes == before and parsed.volumes[0].operation is None
    assert (updated.volumes[0].state, updated.volumes[0].operation, updated.volumes[0].progress) == \
        ("rebuilding", "rebuild", 0.4)


# ---- hpacucli's answers one command after another -----------------------------------------

def test_hpacucli_per_drive_blocks_under_repeated_headers():
    """Support tools collect hpacucli as `controller all show`, `controller slot=N show`, then a
    `show` per array, logical and physical drive, each under its controller's header again: one
    controller per slot, the drives with their rates, the spare's block outside any array."""
    shelf = [build.SsaDrive("2E", 1, bay, model="ATA     ST2000VX000-1ES1", serial=f"Z4Z{bay:05d}", size="2 TB")
             for bay in range(1, 5)]
    shelf[3].kind = "Spare Drive"
    p212 = build.SsaController("Smart Array P212", "2", "6.64", "", batteries=0, cache_ratio="100% Read / 0% Write",
                               arrays=[build.SsaArray("A", "SATA", [build.SsaLogical(1, size="18.2 TB", disk="/dev/sdb")],
                                                      shelf)])
    p410i = build.SsaController(
        "Smart Array P410i", "0", "6.64", "", embedded=True, cache_status="Temporarily Disabled",
        battery_status="Failed (Replace Batteries)",
        arrays=[build.SsaArray("A", "SAS", [build.SsaLogical(1, size="1.9 TB", disk="/dev/sda")],
                               [build.SsaDrive("1I", 1, bay, interface="SAS", model="HP      EG0300FCVBF",
                                               rate="3.0Gbps, Unknown") for bay in (1, 2)])])
    inventory = raid_ssacli.parse_config_detail(build.hpacucli_show_blocks([p212, p410i]))
    assert [(c.name, c.model, c.firmware, c.battery, c.cache_status) for c in inventory.controllers] == [
        ("ssacli/slot2", "Smart Array P212", "6.64", None, "OK"),
        ("ssacli/slot0", "Smart Array P410i", "6.64", "failed", "Temporarily Disabled")]
    assert [(d.controller, d.slot, d.interface, d.model, d.state, d.negotiated_rate, d.volume)
            for d in inventory.drives] == [
        ("ssacli/slot2", f"2E:1:{bay}", "SATA", "ST2000VX000-1ES1", "hotspare" if bay == 4 else "online", 1.5e9, "1")
        for bay in range(1, 5)] + [
        ("ssacli/slot0", f"1I:1:{bay}", "SAS", "HP EG0300FCVBF", "online", 3e9, "1") for bay in (1, 2)]
    assert [(v.controller, v.id, v.level, v.state, v.device, v.write_back_configured, v.write_back_current)
            for v in inventory.volumes] == [("ssacli/slot2", "1", "raid5", "optimal", "sdb", False, False),
                                            ("ssacli/slot0", "1", "raid5", "optimal", "sda", True, False)]
    assert inventory.problems == []
