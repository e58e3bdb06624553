"""Replacing what identifies a piece of hardware (serial numbers, WWNs, EUI-64/NGUIDs,
SAS addresses) by stand-ins, consistently across every file of a capture."""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from typing import Dict, Optional

from storpath.capture.files import Tree

# Attributes whose whole value identifies a piece of hardware (serial numbers, world wide
# names, EUI-64/NGUID, SAS addresses, NQNs that embed a serial).
SECRET_ATTRIBUTES = frozenset({"serial", "vpd_pg80", "vpd_pg83", "wwid", "wwn", "eui", "nguid", "uuid",
                               "sas_address", "subsysnqn", "hostnqn", "unique_id", "port_name", "node_name"})
# NQNs embed the serial among other words (vendor, model): the serial is replaced inside
# them, and the whole NQN only when no known serial is found in it.
NQN_ATTRIBUTES = frozenset({"subsysnqn", "hostnqn"})
# Keys of JSON command outputs (nvme-cli, zpool -j) with the same kind of values.
SECRET_JSON_KEYS = frozenset({"sn", "serial", "serial_number", "eui64", "nguid", "uuid", "subnqn", "wwn", "wwid",
                              "guid", "pool_guid", "vdev_guid", "devid", "phys_path", "load_guid"})
# Shorter secrets are only replaced where they are a whole value: replacing "12" in
# every file would garble numbers.
MIN_SUBSTRING_SECRET = 6

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

    def token(self, value: str) -> str:
        if value in self.mapping:
            return self.mapping[value]
        prefix, body = "", value
        match = re.match(r"^(0x|eui\.|naa\.|t10\.|nvme\.|uuid\.|nqn\.[^:]*:)(.*)$", value, re.I)
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
            stand_in = prefix + f"REDACTED{self._serials:04d}"
        if set(value) <= {"0", "x", "-", ".", "e", "u", "i"} or not value.strip("0x-."):
            stand_in = value  # all zeros: "not set", nothing to hide
        self.mapping[value] = stand_in
        return stand_in

    def learn_files(self, tree: Tree) -> None:
        for rel, data in tree.files.items():
            if os.path.basename(rel) in SECRET_ATTRIBUTES - NQN_ATTRIBUTES:
                value = data.decode("utf-8", "replace").strip()
                if value:
                    self.token(value)

    def learn_json(self, value) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key.lower() in SECRET_JSON_KEYS and isinstance(item, (str, int)) and str(item).strip():
                    self.token(str(item).strip())
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

    def apply(self, rel: str, data: bytes) -> bytes:
        name = os.path.basename(rel)
        if name == "config":
            return data[:256]  # the PCIe Device Serial Number capability lives above 0x100
        if name.endswith(".id-ns") and len(data) >= 128:
            # Identify Namespace: NGUID at bytes 104-119, EUI-64 at 120-127 (NVMe base spec).
            out = bytearray(data)
            for start, end in ((104, 120), (120, 128)):
                if any(out[start:end]):
                    token = self.token(out[start:end].hex())
                    out[start:end] = bytes.fromhex(token)[:end - start]
            return bytes(out)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return self._apply_bytes(data)
        if name in SECRET_ATTRIBUTES - NQN_ATTRIBUTES:
            value = text.strip()
            return text.replace(value, self.token(value)).encode() if value else data
        replaced = self._substrings(text)
        if name in NQN_ATTRIBUTES and replaced == text and text.strip():
            value = text.strip()
            return text.replace(value, self.token(value)).encode()
        return replaced.encode()

    def _substrings(self, text: str) -> str:
        for secret in sorted(self.mapping, key=len, reverse=True):
            stand_in = self.mapping[secret]
            if len(secret) < MIN_SUBSTRING_SECRET or secret == stand_in:
                continue
            if secret.isdigit():  # a decimal GUID, never the digits inside another number
                text = re.sub(rf"(?<![0-9]){secret}(?![0-9])", stand_in, text)
            elif re.fullmatch(r"[0-9a-fA-F]+", secret):  # hex in either case, the case kept
                text = re.sub(re.escape(secret), lambda m: stand_in.upper() if m.group(0).isupper()
                              else stand_in.lower(), text, flags=re.I)
            else:
                text = text.replace(secret, stand_in)
        return text

    def _apply_bytes(self, data: bytes) -> bytes:
        for secret in sorted(self.mapping, key=len, reverse=True):
            stand_in = self.mapping[secret]
            if len(secret) >= MIN_SUBSTRING_SECRET and secret != stand_in:
                data = data.replace(secret.encode(), stand_in.encode()[:len(secret)].ljust(len(secret), b" "))
        return data
