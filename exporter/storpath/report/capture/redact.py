"""Replacing what identifies a piece of hardware (serial numbers, WWNs, EUI-64/NGUIDs,
SAS addresses) by stand-ins, consistently across every file of a capture.

Identities are learned from what names them: text attributes (`serial`, `wwid`...),
JSON keys and text of command outputs, and the fields of binary structures (VPD pages,
IDENTIFY data, NVMe Identify, SAS mode pages; storpath.report.capture.layouts). Every file is
then rewritten: binary structures field by field, and every file for every learned
identity in each form it takes there: as text in either case, and a WWN, EUI-64 or SAS
address also as its raw bytes and with the bytes of each 16-bit word swapped (how ATA
stores words). A stand-in has the length of what it replaces, so pages keep their length
fields and fixed-width fields their width."""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

from storpath.base import boundedjson
from storpath.report.capture.files import Tree
from storpath.report.capture.layouts import NUMBER, OPAQUE, Layout, layout_of, swap_pairs

# Text attributes whose whole value identifies a piece of hardware (serial numbers, world
# wide names, EUI-64/NGUID, SAS addresses, NQNs that embed a serial). The binary VPD pages
# (vpd_pg80, vpd_pg83) are read field by field: storpath.report.capture.layouts.
SECRET_ATTRIBUTES = frozenset({"serial", "wwid", "wwn", "eui", "nguid", "uuid",
                               "sas_address", "subsysnqn", "hostnqn", "unique_id", "port_name", "node_name"})
# NQNs embed the serial among other words (vendor, model): the serial is replaced inside
# them, and the whole NQN only when no known serial is found in it.
NQN_ATTRIBUTES = frozenset({"subsysnqn", "hostnqn"})
FC_WWN = re.compile(r"(?<=[np]n-)0x[0-9a-fA-F]{16}\b")
# Keys of JSON command outputs (nvme-cli, zpool -j) with the same kind of values.
SECRET_JSON_KEYS = frozenset({"sn", "serial", "serial_number", "eui64", "nguid", "uuid", "subnqn", "wwn", "wwid",
                              "guid", "pool_guid", "vdev_guid", "devid", "phys_path", "load_guid",
                              # storcli's keys (spaces read as `_`): the fields its parser reads
                              # (readers.raid.storcli) and those beside them that name hardware
                              "sas_address", "scsi_naa_id", "naa_id", "unique_identifier", "world_wide_name",
                              "serial_no", "serialnumber", "wwn_id"})
# `Key: value` lines of the RAID tools' text outputs (ssacli, arcconf, MegaCli; storcli's text)
# whose value identifies hardware: serial numbers (controllers', drives', batteries'), SAS
# addresses (MegaCli's `SAS Address(0)`), WWNs/WWIDs, volume NAA ids (`Unique Identifier`,
# `SCSI NAA Id`), arcconf's `World-wide name`. The key may carry spaces before the colon
# (arcconf pads it to a column).
RAID_TEXT_FIELD = re.compile(
    r"(?mi)^[ \t]*(?:(?:controller|adapter|drive|disk|battery|cache|board|backplane|enclosure)[ _])?"
    r"(?:serial[ _]?(?:number|no\.?)?|sas[ _]address(?:\(\d{1,3}\))?|wwn|wwid|world[ -]wide[ _]name|"
    r"scsi[ _]naa[ _]id|naa[ _]id|unique[ _]identifier)[ \t]*[:=][ \t]*(\S[^\r\n]{0,127}?)[ \t]*$")
# MegaCli's `Inquiry Data:` runs the drive's INQUIRY strings together, as the drive gives them:
# a SATA drive's IDENTIFY serial (20 characters, right-aligned), model (40) and firmware (8);
# a SAS drive's vendor (8), product (16), revision (4) and serial (the rest).
MEGACLI_INQUIRY = re.compile(r"(?m)^[ \t]*Inquiry Data: ([^\r\n]{1,128})$")
# storcli's `"Inquiry Data"`: the same bytes as hex pairs (a SAS drive's INQUIRY page, a SATA
# drive's IDENTIFY words, whose strings have the bytes of each 16-bit word swapped).
STORCLI_INQUIRY = re.compile(r'("Inquiry Data"\s*:\s*")((?:[0-9a-fA-F]{2} ?){8,1024})(")')
# Shorter secrets are only replaced where they are a whole value: replacing "12" in
# every file would garble numbers.
MIN_SUBSTRING_SECRET = 6
# Hex identifiers at least this long (8 bytes: a WWN, an EUI-64, a SAS address) are also
# looked for as raw bytes; shorter byte strings would match by chance.
MIN_BINARY_HEX = 16

# What text outputs (zpool status before OpenZFS 2.3, nvme-cli without JSON) give away.
# /dev/disk/by-id names: the serial is the last `_` word (nvme-, ata-, scsi-SATA_...), or
# the name carries a WWN/EUI-64 (wwn-0x..., scsi-3..., nvme-eui....).
BY_ID_NAME = re.compile(r"(?<![\w.-])(?:nvme|ata|scsi|wwn|usb|sas|mmc)-[^\s/'\"(),]+")
BY_ID_HEX = re.compile(r"^(?:wwn-0x|scsi-[0-9]|nvme-eui\.|nvme-nvme\.|scsi-naa\.)([0-9a-fA-F]{12,})$")
# A vdev zpool status names by its GUID (a device that is gone: `<guid> UNAVAIL ... was
# /dev/...`, or `zpool status -g`): a row of the config table whose name is a number.
ZPOOL_GUID_ROW = re.compile(r"(?m)^\t\s*([0-9]{6,})\s+[A-Z]+\b")
# WWNs and SAS addresses as 0x and 16 hex digits, in any text.
HEX64 = re.compile(r"(?<![0-9A-Za-z])0x[0-9a-fA-F]{16}(?![0-9A-Za-z])")
# nvme-cli text (`nvme id-ctrl`, `nvme list`): `sn : ...`, `eui64 : ...`.
# NVMe over Fabrics: a controller's sysfs `address` (drivers/nvme/host/fabrics.c,
# nvmf_get_address) reads `traddr=192.168.1.10,trsvcid=4420,host_traddr=...,host_iface=...,
# src_addr=...`; the values name the hosts, as IPv4/IPv6 addresses or as host names (`nvme
# connect -a array1.example.com`), and the host's interface (FC's `nn-0x...:pn-0x...` is FC_WWN's).
FABRICS_ADDRESS = re.compile(r"(?:^|,)(?:traddr|host_traddr|src_addr)=([^,\s]+)")
FABRICS_FIELD = re.compile(r"(^|,)(traddr|host_traddr|src_addr|host_iface)=([^,\s]+)")
IP_ADDRESS = re.compile(r"^(?:[0-9]{1,3}(?:\.[0-9]{1,3}){3}|[0-9a-fA-F]{0,4}(?::[0-9a-fA-F]{0,4}){2,7}(?:%[\w.-]+)?)$")
# A host name (RFC 1123 labels), not an FC name (`nn-0x...:pn-0x...`, which has a colon).
HOST_NAME = re.compile(r"^(?=.*[A-Za-z])[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*\.?$")
# A network interface's name as the kernel allows it (IFNAMSIZ: at most 15 characters, no `/`).
IFACE_NAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")
# LUKS volumes: the dm name cryptsetup's tools give (`luks-<uuid>`) and the dm uuid
# (`CRYPT-LUKS2-<uuid, 32 hex>-<name>`, LUKS1 likewise) carry the volume's UUID.
LUKS_NAME_UUID = re.compile(r"(?<![0-9A-Za-z])luks-([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                            r"[0-9a-fA-F]{12})(?![0-9A-Za-z])")
CRYPT_UUID = re.compile(r"CRYPT-LUKS[12]-([0-9a-fA-F]{32})(?![0-9A-Za-z])")
NVME_CLI_FIELD = re.compile(r"(?mi)^\s*(sn|serial|subnqn|eui64|nguid|uuid|wwn|wwid)\s*:\s*(\S.*?)\s*$")


# ---- redaction ----------------------------------------------------------------------

class Redactor:
    """Replaces identifiers consistently: the same serial gets the same stand-in in
    sysfs, in nvme-cli and in zpool output. Stand-ins keep the value's shape (hex stays
    hex of the same length, a prefix such as `eui.` or `0x` stays) so readers parse them
    as before; they come from a random key, so they cannot be traced back."""

    def __init__(self, key: Optional[bytes] = None):
        self.key = key or secrets.token_bytes(16)
        self.mapping: Dict[str, str] = {}
        self._serials = 0
        self._addresses: set = set()
        # Host names and interface names met in fabrics addresses: replaced as whole names only,
        # and as whole components of file names whatever their length.
        self._names: Dict[str, str] = {}
        self._components: Dict[str, str] = {}  # a file name's component -> its redacted form

    def token(self, value: str) -> str:
        if value in self.mapping:
            return self.mapping[value]
        prefix, body = "", value
        # dm's uuid of a multipath map is "mpath-" and the WWID: the prefix says what the map is.
        match = re.match(r"^(0x|eui\.|naa\.|t10\.|nvme\.|uuid\.|mpath-|nqn\.[^:]*:)(.*)$", value, re.I)
        if match:
            prefix, body = match.group(1), match.group(2)
        hex_body = bool(body) and re.fullmatch(r"[0-9a-fA-F]+", body) is not None
        # Hex is keyed on its lower case, so `0x5000CCA2...`, `naa.5000cca2...` and the
        # `scsi-35000cca2...` by-id name share one stand-in.
        digest = hmac.new(self.key, (body.lower() if hex_body else value).encode(), hashlib.sha256).hexdigest() * 4
        if body and body.isdigit() and len(body) >= MIN_SUBSTRING_SECRET and not prefix:
            # A decimal GUID stays a number of the same length (JSON and text parse it).
            stand_in = str(int(digest[:32], 16))[:len(body)].rjust(len(body), "1")
            stand_in = ("1" + stand_in[1:]) if stand_in[0] == "0" else stand_in
        elif hex_body and (prefix or len(body) >= 12):
            if prefix and len(body) >= 12:
                # The bare hex gets the same stand-in where it appears without the prefix.
                return self.mapping.setdefault(value, prefix + self.token(body))
            stand_in = prefix + (digest[:len(body)].upper() if body.isupper() else digest[:len(body)])
        elif body and re.fullmatch(r"[0-9a-fA-F-]{36}", body):  # a UUID
            stand_in = prefix + "-".join(digest[a:b] for a, b in ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32)))
        else:
            self._serials += 1
            stand_in = prefix + numbered(self._serials, len(body), digest)
        if set(value) <= {"0", "x", "-", ".", "e", "u", "i"} or not value.strip("0x-."):
            stand_in = value  # all zeros: "not set", nothing to hide
        self.mapping[value] = stand_in
        return stand_in

    def learn_sysfs(self, tree: Tree) -> None:
        """Identity attributes by name, and the fields of binary attributes (VPD pages,
        IDENTIFY data)."""
        for rel, data in tree.files.items():
            name = os.path.basename(rel)
            self._learn_layout(name, data)
            if name in SECRET_ATTRIBUTES - NQN_ATTRIBUTES:
                value = data.decode("utf-8", "replace").strip()
                if value and not CRYPT_UUID.match(value):
                    self.token(value)
            elif name == "address":
                # An NVMe/FC controller's address names both ends' world wide node and port
                # names ("nn-0x...:pn-0x...", and traddr/host_traddr of the same form).
                text = data.decode("utf-8", "replace")
                for wwn in FC_WWN.findall(text):
                    self.token(wwn)
                for _, key, value in FABRICS_FIELD.findall(text.strip()):
                    self.token_fabrics(key, value)
            if name in ("name", "uuid"):
                self.learn_luks(data.decode("utf-8", "replace"))

    def token_address(self, value: str) -> str:
        """An IP address's stand-in: an address of the same family, from the benchmark and
        documentation ranges (RFC 2544, RFC 3849), numbered in the order they are met."""
        if value not in self.mapping:
            self._addresses.add(value)
            n = len(self._addresses)
            self.mapping[value] = f"198.{18 + (n >> 16) % 2}.{(n >> 8) & 255}.{n & 255}" if "." in value \
                else f"2001:db8::{n:x}"
        return self.mapping[value]

    def token_fabrics(self, key: str, value: str) -> Optional[str]:
        """The stand-in of one value of a fabrics address (`traddr`, `host_traddr`, `src_addr`:
        an IP address or a host name; `host_iface`: an interface's name); None for a value
        of another form, which is left as it is (an FC name, a PCI address)."""
        if key == "host_iface":
            if value not in self._names and IFACE_NAME.match(value):
                self._names[value] = f"nvmfif{len(self._names) + 1}"[:15]
            return self._names.get(value)
        if IP_ADDRESS.match(value):
            return self.token_address(value)
        if HOST_NAME.match(value):
            if value not in self._names:
                self._names[value] = f"host{len(self._names) + 1}.example" + ("." if value.endswith(".") else "")
            return self._names[value]
        return None

    def learn_luks(self, text: str) -> None:
        """A LUKS volume's UUID, as dashed (`luks-<uuid>`) and as 32 hex digits (the dm
        uuid): one stand-in, the dashed one with its dashes."""
        for dashed in LUKS_NAME_UUID.findall(text):
            self._luks(dashed.replace("-", ""))
        for plain in CRYPT_UUID.findall(text):
            self._luks(plain)

    def _luks(self, plain: str) -> None:
        stand_in = self.token(plain.lower())
        dashed = "-".join(plain.lower()[a:b] for a, b in ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32)))
        self.mapping[dashed] = "-".join(stand_in[a:b] for a, b in ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32)))

    def learn_outputs(self, tree: Tree) -> None:
        """Command outputs: binary structures by their layout, JSON by its keys, text by
        what names a device there (learn_text)."""
        for rel, data in tree.files.items():
            if self._learn_layout(os.path.basename(rel), data):
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if rel.endswith(".json"):
                try:
                    self.learn_json(boundedjson.loads(text))
                except ValueError:
                    pass
            self.learn_text(text)

    def _learn_layout(self, name: str, data: bytes) -> bool:
        layout = layout_of(name, data)
        if layout is not None:
            self._rewrite(layout, data)  # the stand-ins are made, and remembered, on the way
        return layout is not None

    def learn_json(self, value) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if re.sub(r"[\s-]+", "_", key.strip().lower()) in SECRET_JSON_KEYS and isinstance(item, (str, int)) \
                        and str(item).strip() and str(item).strip().upper() not in _NOT_SET:
                    self.token(str(item).strip())
                elif key.lower() == "wwn" and isinstance(item, dict) and isinstance(item.get("id"), int):
                    # smartctl's {"naa": 5, "oui": 9528, "id": 61107309629}: the id is the drive's own
                    self.token(str(item["id"]))
                else:
                    self.learn_json(item)
        elif isinstance(value, list):
            for item in value:
                self.learn_json(item)

    def learn_text(self, text: str) -> None:
        """Identifiers in command outputs that have no JSON form (zpool status before
        OpenZFS 2.3, nvme-cli text): by-id names, vdev GUIDs, 0x WWNs and SAS addresses."""
        for name in BY_ID_NAME.findall(text):
            name = re.sub(r"-part[0-9]+$", "", name)
            hex_match = BY_ID_HEX.match(name)
            if hex_match:
                self.token(hex_match.group(1))
                continue
            serial = name.rsplit("_", 1)[-1] if "_" in name else ""
            if len(serial) >= MIN_SUBSTRING_SECRET:
                self.token(serial)
        for guid in ZPOOL_GUID_ROW.findall(text):
            self.token(guid)
        for value in HEX64.findall(text):
            self.token(value)
        for _, value in NVME_CLI_FIELD.findall(text):
            self.token(value)
        self.learn_luks(text)
        self.learn_raid_text(text)

    def learn_raid_text(self, text: str) -> None:
        """The RAID tools' identifiers: `Serial Number:`-style fields, MegaCli's and storcli's
        Inquiry Data."""
        for value in RAID_TEXT_FIELD.findall(text):
            value = value.strip()
            if value and value.upper() not in _NOT_SET:
                self.token(value)
        for value in MEGACLI_INQUIRY.findall(text):
            serial = value[:20].strip() if len(value.rstrip()) > 56 else value[28:].strip()
            if len(serial) >= 4 and " " not in serial:
                self.token(serial)
        for match in STORCLI_INQUIRY.finditer(text):
            for serial in inquiry_serials(bytes.fromhex(match.group(2).replace(" ", ""))):
                self.token(serial)

    def apply(self, rel: str, data: bytes) -> bytes:
        name = os.path.basename(rel)
        if name == "config":
            return data[:256]  # the PCIe Device Serial Number capability lives above 0x100
        layout = layout_of(name, data)
        if layout is not None:
            return self._apply_bytes(self._rewrite(layout, data))
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return self._apply_bytes(data)
        if name == "address":
            # Every value of a fabrics address by its own stand-in, a short one included.
            text = FABRICS_FIELD.sub(lambda m: m.group(1) + m.group(2) + "="
                                     + (self.token_fabrics(m.group(2), m.group(3)) or m.group(3)), text)
        if name in SECRET_ATTRIBUTES - NQN_ATTRIBUTES and not CRYPT_UUID.match(text.strip()):
            value = text.strip()
            return text.replace(value, self.token(value)).encode() if value else data
        if "Inquiry Data" in text:
            text = STORCLI_INQUIRY.sub(self._inquiry_hex, text)
        replaced = self._substrings(text)
        if name in NQN_ATTRIBUTES and replaced == text and text.strip():
            value = text.strip()
            return text.replace(value, self.token(value)).encode()
        return replaced.encode()

    def _inquiry_hex(self, match) -> str:
        """storcli's hex Inquiry Data with every learned serial in it replaced (in a SATA drive's
        IDENTIFY words, in their swapped byte order)."""
        raw = bytearray(bytes.fromhex(match.group(2).replace(" ", "")))
        if _is_ata_identify(raw) and len(raw) >= 40:
            raw[20:40] = swap_pairs(self._apply_bytes(swap_pairs(bytes(raw[20:40]))))
        raw = bytearray(self._apply_bytes(bytes(raw)))
        trailing = " " if match.group(2).endswith(" ") else ""
        return match.group(1) + " ".join(f"{b:02x}" for b in raw) + trailing + match.group(3)

    def learn_names(self, paths: Iterable[str]) -> None:
        """Identities that file names carry (a by-id name, a WWN or WWID in a folder's name):
        learned as text is (learn_text)."""
        self.learn_text("\n".join(part for path in paths for part in path.split("/")))

    def apply_name(self, path: str) -> str:
        """A file name (a path, or a link's target) with every identity learned replaced in each
        of its components: a host or interface name of a fabrics address where it is the whole
        component, any other learned value anywhere in it."""
        return "/".join(self._component(part) for part in path.split("/"))

    def _component(self, part: str) -> str:
        if part in ("", ".", ".."):
            return part
        if part not in self._components:
            if part in self._names:
                self._components[part] = self._names[part]
            else:
                self._components[part] = self._substrings(part)
        return self._components[part]

    def _substrings(self, text: str) -> str:
        for name in sorted(self._names, key=len, reverse=True):
            # Host names as whole names only (array1 not inside array10 or array1-b), and only
            # names long enough not to match by chance; a short one is replaced where its
            # field says what it is (`address`, apply) and as a whole file name's component.
            if len(name) >= MIN_SUBSTRING_SECRET and name in text:
                text = re.sub(rf"(?<![0-9A-Za-z._-]){re.escape(name)}(?!\.?[0-9A-Za-z_-])", self._names[name], text)
        for secret in sorted(self.mapping, key=len, reverse=True):
            stand_in = self.mapping[secret]
            if len(secret) < MIN_SUBSTRING_SECRET or secret == stand_in:
                continue
            if secret in self._addresses:
                # an address, never the start of a longer one (10.0.0.1 in 10.0.0.12)
                text = re.sub(rf"(?<![0-9A-Za-z.:]){re.escape(secret)}(?![0-9A-Za-z.:])", stand_in, text)
            elif secret.isdigit():  # a decimal GUID, never the digits inside another number
                text = re.sub(rf"(?<![0-9]){secret}(?![0-9])", stand_in, text)
            elif re.fullmatch(r"[0-9a-fA-F]+", secret):  # hex in either case, the case kept
                text = re.sub(re.escape(secret), lambda m: stand_in.upper() if m.group(0).isupper()
                              else stand_in.lower(), text, flags=re.I)
            else:
                text = text.replace(secret, stand_in)
        return text

    def _rewrite(self, layout: Layout, data: bytes) -> bytes:
        """Every field of the layout replaced by its stand-in, in place."""
        plain = bytearray(layout.decode(data))
        for field in layout.fields:
            plain[field.start:field.end] = self._field(bytes(plain[field.start:field.end]), field.kind)
        return layout.encode(bytes(plain), data)

    def _field(self, raw: bytes, kind: str) -> bytes:
        if kind == OPAQUE:
            return bytes(len(raw))
        if kind == NUMBER:
            if not any(raw):
                return raw  # zero: not set
            try:
                stand_in = bytes.fromhex(self.token(raw.hex()))
            except ValueError:  # a shape token() keeps other than plain hex (a UUID's dashes)
                stand_in = b""
            return stand_in if len(stand_in) == len(raw) else bytes(len(raw))
        value = raw.strip(b" \x00")
        if not value:
            return raw
        at = raw.find(value)
        # latin-1: one character a byte, so any byte string goes through and keeps its length.
        stand_in = self.token(value.decode("latin-1")).encode("latin-1", "replace")
        return raw[:at] + stand_in[:len(value)].ljust(len(value), b" ") + raw[at + len(value):]

    def _apply_bytes(self, data: bytes) -> bytes:
        """Every learned identity in every form, each replaced by a stand-in of its length."""
        for old, new in self._byte_forms():
            data = data.replace(old, new)
        return data

    def _byte_forms(self) -> Iterator[Tuple[bytes, bytes]]:
        for secret in sorted(self.mapping, key=len, reverse=True):
            stand_in = self.mapping[secret]
            if len(secret) < MIN_SUBSTRING_SECRET or secret == stand_in or secret in self._addresses:
                continue  # (an address's stand-in has its own length: text only)
            forms: List[Tuple[str, str]] = [(secret, stand_in)]
            if re.fullmatch(r"[0-9a-fA-F]+", secret):
                forms += [(secret.lower(), stand_in.lower()), (secret.upper(), stand_in.upper())]
            for old_text, new_text in forms:
                old = old_text.encode("utf-8", "replace")
                yield old, new_text.encode("utf-8", "replace")[:len(old)].ljust(len(old), b" ")
            if len(secret) >= MIN_BINARY_HEX and len(secret) % 2 == 0 and len(stand_in) == len(secret) \
                    and re.fullmatch(r"[0-9a-fA-F]+", secret + stand_in):
                old, new = bytes.fromhex(secret), bytes.fromhex(stand_in)
                yield old, new
                yield swap_pairs(old), swap_pairs(new)


# Values that say a field is not set: nothing to hide, and replacing them would garble text.
_NOT_SET = frozenset({"N/A", "NA", "NONE", "UNKNOWN", "NOT AVAILABLE", "-", "0", "0X0"})


def _is_ata_identify(raw: bytes) -> bool:
    """A SATA drive's IDENTIFY data rather than a SCSI INQUIRY page: the INQUIRY's vendor
    (bytes 8-15) is printable ASCII."""
    return len(raw) < 16 or not all(32 <= b < 127 for b in raw[8:16])


def inquiry_serials(raw: bytes) -> List[str]:
    """The serial number in an INQUIRY page (bytes 36 on: the vendor-specific part, where
    drives put their serial) or IDENTIFY data (words 10-19, each word's bytes swapped)."""
    if _is_ata_identify(raw):
        field = swap_pairs(raw[20:40]) if len(raw) >= 40 else b""
    else:
        field = raw[36:56].split(b"\0", 1)[0]
    serial = field.decode("latin-1").strip()
    return [serial] if len(serial) >= 4 and serial.isprintable() and " " not in serial else []


def numbered(count: int, length: int, digest: str) -> str:
    """The `count`th serial's stand-in, as long as the serial: REDACTED0003 for twelve
    characters, REDACTE3 for eight; the key's digest where the number does not fit."""
    number = str(count)
    if len(number) >= length:
        return digest[:length].upper()
    if length >= len("REDACTED") + len(number):
        return "REDACTED" + number.rjust(length - len("REDACTED"), "0")
    return "REDACTED"[:length - len(number)] + number

