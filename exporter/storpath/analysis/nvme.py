"""Which LBA format a namespace should use (pure functions, no I/O).

A namespace can only be reformatted to a format with the same metadata size without
changing what the host stores per block (protection information, an application's
per-block tags), so the candidates are the formats with the metadata size in use. Among
them the drive's own Relative Performance field ranks first (0 Best .. 3 Degraded), then
the larger data size breaks ties: the same data in 4 KiB blocks takes eight times fewer
LBAs (mapping entries, DMA descriptors) than in 512 B blocks. The FireCuda 530 story: it
ships at 512 B while its 4 KiB format is rated better.
"""

from __future__ import annotations

import sys
from typing import Iterable, Optional, Tuple

from storpath.base.records import datarecord
from storpath.readers.nvme import IdentifyNamespace, IdentifyResult, LbaFormat, NvmeNamespace


def best_format(formats: Iterable[LbaFormat], in_use: LbaFormat) -> LbaFormat:
    """The best format with the metadata size of `in_use`; `in_use` itself when none beats it.
    Ties (same performance and data size) keep the format in use, else the lowest index."""
    candidates = [f for f in formats if f.metadata_size == in_use.metadata_size]
    best = in_use
    for fmt in sorted(candidates, key=lambda f: f.index):
        if (fmt.relative_performance, -fmt.data_size) < (best.relative_performance, -best.data_size):
            best = fmt
    return best


@datarecord(frozen=True)
class FormatVerdict:
    """A namespace's LBA format in use and the best one it could be reformatted to."""

    in_use: LbaFormat
    best: LbaFormat

    @property
    def improvable(self) -> bool:
        """A better format exists: reformatting (which erases the namespace) would help."""
        return self.best.index != self.in_use.index


def judge(identify: IdentifyNamespace) -> Optional[FormatVerdict]:
    in_use = identify.in_use
    if in_use is None:
        return None
    return FormatVerdict(in_use=in_use, best=best_format(identify.formats, in_use))


@datarecord(frozen=True)
class Identified:
    """What one Identify pass gives a namespace's series, derived once per pass."""

    fingerprint: Tuple  # the namespace when read: served only while it still reads so
    result: IdentifyResult
    in_use_size: Optional[int]  # data size of the format in use; None while the formats are unknown
    best_size: Optional[int]
    formats: Tuple[Tuple[str, ...], ...]  # label values of each storpath_nvme_namespace_lba_format_info series


def _label(number: int) -> str:
    return sys.intern(str(number))


def identified(ns: NvmeNamespace, result: IdentifyResult) -> Identified:
    """What a namespace's series take from its Identify result (the nvme collector's task
    and `storpath check` alike)."""
    verdict = judge(result.identify) if result.identify is not None else None
    if verdict is None:
        return Identified(ns.fingerprint, result, None, None, ())
    # The label values repeat across namespaces (one drive model's table): interned, a
    # thousand namespaces share the same few strings.
    formats = tuple((ns.device, _label(fmt.index), _label(fmt.data_size), _label(fmt.metadata_size),
                     fmt.relative_performance_name, "true" if fmt.index == verdict.in_use.index else "false")
                    for fmt in result.identify.formats)
    return Identified(ns.fingerprint, result, verdict.in_use.data_size, verdict.best.data_size, formats)
