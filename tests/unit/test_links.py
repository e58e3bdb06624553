"""The expected rate of SAS PHYs and SATA links: the lower of both ends' capability, and
what a verdict rests on when one end is unknown."""

from __future__ import annotations

from storpath.analysis.expectation import (BOTH_ENDS, DEVICE_ONLY, FAR_END_UNKNOWN, NONE, PORT_LIMIT_UNKNOWN,
                                           PORT_LIMIT_UNSET, LinkExpectation)
from storpath.analysis.links import at_lowered_minimum, expander_capabilities, sas_expectation, sata_expectation
from storpath.readers.ata import AtaLink
from storpath.readers.ata_identify import UNREPORTED, SataCapability
from storpath.readers.sas import SasPhy, SasRemote

G = 1e9


def phy(name="phy-0:0", negotiated=6 * G, minimum=1.5 * G, hw_max=12 * G, remote=None, parent="host0"):
    return SasPhy(name=name, sas_address=None, device_type="end device", initiator_port_protocols=None,
                  target_port_protocols=None, negotiated_rate=negotiated, negotiated_state=None, minimum_rate=minimum,
                  maximum_rate=hw_max, hardware_minimum_rate=1.5 * G, hardware_maximum_rate=hw_max, enabled=True,
                  port="port-0:0" if remote else None, attached=remote, parent=parent)


def remote(name="end_device-0:0", protocols="sata", sata=UNREPORTED):
    return SasRemote(name=name, device_type="end device", sas_address=None, target_port_protocols=protocols,
                     block_devices=("sda",), sata_capability=sata)


def link(speed=6 * G, hw=6 * G, drive=6 * G):
    return AtaLink(name="link1", port="ata1", speed=speed, hardware_limit=hw, limit=None, block_devices=("sda",),
                   device_capability=SataCapability(drive, None))


def test_sata_drive_on_a_12_gbit_phy_expects_6():
    expectation = sas_expectation(phy(remote=remote(sata=SataCapability(6 * G, 6 * G))), {})
    assert expectation == LinkExpectation(6 * G, 12 * G, 6 * G, BOTH_ENDS)
    assert expectation.verifiable and expectation.limited_by() == "device"


def test_wide_port_to_a_sas2_expander_expects_the_expanders_rate():
    exp_phys = [phy(f"phy-0:0:{n}", hw_max=6 * G, parent="expander-0:0") for n in range(4)]
    expanders = expander_capabilities(exp_phys + [phy()])
    assert expanders == {"expander-0:0": 6 * G}
    expectation = sas_expectation(phy(remote=remote("expander-0:0", "smp")), expanders)
    assert expectation == LinkExpectation(6 * G, 12 * G, 6 * G, BOTH_ENDS)
    # an expander whose PHYs are not in sysfs: unknown
    assert sas_expectation(phy(remote=remote("expander-0:1", "smp")), {}).basis == NONE


def test_sas_drive_is_unverifiable():
    expectation = sas_expectation(phy(remote=remote(protocols="ssp")), {})
    assert expectation == LinkExpectation(None, 12 * G, None, NONE, FAR_END_UNKNOWN)
    assert not expectation.verifiable and expectation.limited_by() == ""


def test_nothing_attached_is_no_expectation_and_no_port_limit_is_unknown():
    assert sas_expectation(phy(), {}) is None
    no_hw = phy(remote=remote(sata=SataCapability(6 * G, None)), hw_max=None)
    assert sas_expectation(no_hw, {}) == LinkExpectation(None, None, 6 * G, NONE, PORT_LIMIT_UNKNOWN)


def test_lowered_minimum_needs_no_far_end():
    assert at_lowered_minimum(phy(negotiated=1.5 * G, minimum=1.5 * G, hw_max=3 * G, remote=remote(protocols="ssp")))
    assert not at_lowered_minimum(phy(negotiated=3 * G, minimum=1.5 * G, hw_max=3 * G, remote=remote()))
    assert not at_lowered_minimum(phy(negotiated=1.5 * G, minimum=1.5 * G, hw_max=3 * G))  # nothing attached


def test_sata_links():
    assert sata_expectation(link()) == LinkExpectation(6 * G, 6 * G, 6 * G, BOTH_ENDS)
    held = sata_expectation(link(speed=1.5 * G, hw=3 * G, drive=6 * G))
    assert held.expected == 3 * G and held.limited_by() == "port"
    unset = sata_expectation(link(hw=None))
    assert unset == LinkExpectation(6 * G, None, 6 * G, DEVICE_ONLY, PORT_LIMIT_UNSET) and not unset.verifiable
    assert unset.limited_by() == "device"
    assert sata_expectation(link(drive=None)) == LinkExpectation(None, 6 * G, None, NONE, FAR_END_UNKNOWN)
