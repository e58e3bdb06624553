"""Exposition text kept deflated (storpath.deflate): the CRC-32 of joined texts from the
texts' own, and gzip answers put together from deflated pieces, checked against zlib and
Python's gzip reader."""

import gzip
import zlib

from hypothesis import example, given, strategies as st

from storpath.deflate import Packed, crc32_combine, gzip_parts


@given(st.binary(max_size=2000), st.binary(max_size=5000))
@example(b"", b"")
@example(b"a", b"")
@example(b"", b"b")
def test_crc32_of_joined_texts_from_theirs(first, second):
    assert crc32_combine(zlib.crc32(first), zlib.crc32(second), len(second)) == zlib.crc32(first + second)


def test_crc32_combine_over_long_texts():
    """Lengths of several megabytes: the text of a host of thousands of devices."""
    long = bytes(range(256)) * (5 * 4096 + 3)
    for first, second in ((b"head", long), (long, b"tail"), (long, long[:-7])):
        assert crc32_combine(zlib.crc32(first), zlib.crc32(second), len(second)) == zlib.crc32(first + second)


@given(st.lists(st.binary(max_size=3000), max_size=12))
def test_gzip_of_pieces_is_their_texts_joined(texts):
    pieces = [Packed(text) for text in texts]
    assert [piece.text() for piece in pieces] == texts
    assert [piece.size for piece in pieces] == [len(text) for text in texts]
    assert gzip.decompress(b"".join(gzip_parts(pieces))) == b"".join(texts)
