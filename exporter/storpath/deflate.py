"""Exposition text kept deflated, and gzip answers put together from it.

A family's text is deflated once, when it is rendered (storpath.families.FamilyTexts),
and only its deflated form is kept: on the 1024-drive benchmark host the text is 4 MB
and its deflated form 200 KB. A gzip answer (what Prometheus asks for) is the deflated
pieces one after another; an uncompressed one inflates them.

Each piece is raw deflate ended with a full flush: byte-aligned and free of references
to earlier data, so pieces put one after another and closed with an empty final block
are one valid deflate stream, as parallel gzip tools build theirs. The gzip trailer
needs the CRC-32 of the whole text: each piece keeps the CRC-32 and length of its own
text, and CRC-32s of consecutive texts combine without the texts (crc32_combine).
"""

from __future__ import annotations

import struct
import zlib
from typing import Dict, Iterable, List

# gzip level 1. Measured on the 4 MB text of the 1024-drive benchmark host: level 1 takes
# 6.5 ms of CPU for 161 KB, level 6 27 ms for 139 KB.
GZIP_LEVEL = 1

_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # magic, deflate, no flags, no mtime, OS unknown
_FINAL_BLOCK = b"\x03\x00"  # an empty final block with fixed Huffman codes


class Packed:
    """A text, deflated (raw, ended with a full flush), with its CRC-32 and length."""

    __slots__ = ("deflated", "crc", "size")

    def __init__(self, text: bytes, level: int = GZIP_LEVEL):
        compressor = zlib.compressobj(level, zlib.DEFLATED, -15)
        self.deflated = compressor.compress(text) + compressor.flush(zlib.Z_FULL_FLUSH)
        self.crc = zlib.crc32(text)
        self.size = len(text)

    def text(self) -> bytes:
        return zlib.decompressobj(-15).decompress(self.deflated)


# ---- CRC-32 of two texts from theirs -------------------------------------------------
# CRC-32 (the gzip one, bits reflected) is the remainder of the text, as a polynomial
# over GF(2), modulo the generator. Appending n bytes multiplies the remainder of what
# came before by x^(8n), so crc(A + B) = crc(A) * x^(8 len(B)) mod P, plus crc(B).
# Polynomials are 32-bit integers with the x^0 coefficient in the top bit.

_POLY = 0xEDB88320  # the generator, reflected
_ONE = 1 << 31  # x^0


def _multiply(a: int, b: int) -> int:
    """a * b modulo the generator."""
    product = 0
    bit = _ONE
    while a:
        if a & bit:
            product ^= b
            a ^= bit
        bit >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1
    return product


def _powers_of_two() -> List[int]:
    """x^(2^k) modulo the generator, k = 0..31 (they repeat from 32 on, as far as needed here)."""
    powers = [_ONE >> 1]  # x^1
    for _ in range(31):
        powers.append(_multiply(powers[-1], powers[-1]))
    return powers


_X_2K = _powers_of_two()
_SHIFTS: Dict[int, int] = {}  # length in bytes -> x^(8 length) mod P
_SHIFTS_MAX = 4096  # lengths of changing texts keep coming: bounded


def _shift(size: int) -> int:
    """x^(8 size) modulo the generator."""
    shift = _SHIFTS.get(size)
    if shift is None:
        shift, exponent, k = _ONE, size, 3  # x^(8 size) = x^(size * 2^3)
        while exponent:
            if exponent & 1:
                shift = _multiply(_X_2K[k & 31], shift)
            exponent >>= 1
            k += 1
        if len(_SHIFTS) >= _SHIFTS_MAX:
            _SHIFTS.clear()
        _SHIFTS[size] = shift
    return shift


def crc32_combine(first: int, second: int, second_size: int) -> int:
    """The CRC-32 of A + B from crc32(A), crc32(B) and len(B)."""
    if not second_size:
        return first
    return _multiply(_shift(second_size), first) ^ second


def gzip_parts(pieces: Iterable[Packed]) -> List[bytes]:
    """A gzip stream (RFC 1952) of the pieces' texts one after another, as a list of
    bytes to send in order."""
    out = [_GZIP_HEADER]
    crc = size = 0
    for piece in pieces:
        out.append(piece.deflated)
        crc = crc32_combine(crc, piece.crc, piece.size)
        size += piece.size
    out.append(_FINAL_BLOCK)
    out.append(struct.pack("<II", crc, size & 0xFFFFFFFF))
    return out
