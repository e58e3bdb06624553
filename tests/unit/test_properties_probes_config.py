"""Property-based tests of the probes' parsers (fio's JSON, the state file, /proc/diskstats,
profiles) and the config loader.

Properties: only the parser's own error comes out (FioError, ValueError, ConfigError);
results are physically possible (bytes, rates and latencies not negative and finite);
what storpath writes (the state file) reads back."""

from __future__ import annotations

import json
import math

from hypothesis import example, given, strategies as st

from storpath.base import config as config_module
from storpath.base import configfile
from storpath.collectors import load_all
from storpath.base.config import ConfigError
from storpath.scrape.probes import devices, fio, state
from storpath.scrape.probes.profiles import check_profile

NUMBER = st.one_of(st.integers(-(1 << 70), 1 << 70), st.floats(), st.text(max_size=4), st.none(), st.booleans())


# ---- fio's JSON ---------------------------------------------------------------------------

_READ = st.fixed_dictionaries({"io_bytes": NUMBER, "bw_bytes": NUMBER, "iops": NUMBER, "runtime": NUMBER},
                              optional={"clat_ns": st.fixed_dictionaries(
                                  {"percentile": st.dictionaries(st.sampled_from(["50.000000", "99.000000",
                                                                                  "99.900000"]), NUMBER)})})
_JOB = st.fixed_dictionaries({"read": _READ}, optional={"error": NUMBER, "write": st.fixed_dictionaries(
    {"io_bytes": NUMBER})})


@given(st.one_of(st.fixed_dictionaries({"jobs": st.lists(_JOB, max_size=2)}).map(json.dumps), st.text(max_size=80)),
       st.sampled_from(["", "fio: some warning\n"]))
@example('{"jobs": [{"error": 1e400, "read": {"io_bytes": 1, "bw_bytes": 1, "iops": 1, "runtime": 1}}]}', "")
@example('{"jobs": [{"read": {"io_bytes": 1e400, "bw_bytes": 1, "iops": 1, "runtime": 1}}]}', "")
@example('{"jobs": [{"read": {"io_bytes": 10, "bw_bytes": -5, "iops": NaN, "runtime": 1000}}]}', "")
@example('{"jobs": [{"error": 99999, "read": {"io_bytes": 1, "bw_bytes": 1, "iops": 1, "runtime": 1}}]}', "")
def test_fio_output_gives_a_possible_result_or_a_fio_error(text, prefix):
    try:
        result = fio.parse_output(prefix + text)
    except fio.FioError as exc:
        assert exc.reason in ("bad_output", "fio_error")
        return
    for value in (result.read_bytes_per_second, result.read_iops, result.runtime_seconds):
        assert math.isfinite(value) and value >= 0
    assert result.io_bytes > 0 and result.written_bytes >= 0 and result.runtime_seconds > 0
    for _, seconds in result.latency_seconds:
        assert math.isfinite(seconds) and seconds >= 0


# ---- the state file ---------------------------------------------------------------------

_FINITE = st.floats(0, 1e12, allow_nan=False)
_RESULT = st.builds(fio.FioResult, read_bytes_per_second=_FINITE, read_iops=_FINITE, io_bytes=st.integers(1, 1 << 60),
                    runtime_seconds=_FINITE, latency_seconds=st.lists(
                        st.tuples(st.sampled_from(["0.5", "0.99", "0.999"]), _FINITE), unique_by=lambda q: q[0]
                    ).map(lambda pairs: tuple(sorted(pairs))))
_RECORD = st.builds(state.ProbeRecord, result=st.none() | _RESULT, last_run=st.none() | _FINITE,
                    last_success=st.none() | _FINITE, duration=st.none() | _FINITE, runs=st.integers(0, 1 << 40),
                    failures=st.dictionaries(st.sampled_from(["timeout", "crashed"]), st.integers(0, 1 << 40)),
                    skipped=st.dictionaries(st.sampled_from(["busy", "budget"]), st.integers(0, 1 << 40)),
                    last_error=st.none() | st.text(max_size=30))
_NAME = st.text(min_size=1, max_size=12)


@given(st.dictionaries(st.tuples(_NAME, _NAME), _RECORD, max_size=4),
       st.dictionaries(_NAME, st.lists(st.tuples(_FINITE, st.integers(0, 1 << 60)), max_size=3), max_size=3),
       st.dictionaries(_NAME, _FINITE, max_size=3))
def test_the_state_file_round_trips(records, io, last_attempt):
    original = state.ProbeState(records=records, io=io, last_attempt=last_attempt)
    restored = state.from_json(state.to_json(original))
    assert (restored.records, restored.io, restored.last_attempt) == (records, io, last_attempt)


_ANY_JSON = st.recursive(st.one_of(st.integers(-(1 << 70), 1 << 70), st.floats(), st.text(max_size=5), st.none(),
                                   st.booleans()),
                         lambda c: st.lists(c, max_size=3) | st.dictionaries(
                             st.sampled_from(["version", "probes", "io", "last_attempt", "result", "runs",
                                              "failures", "read_bytes_per_second", "io_bytes", "t", "p", "md0"]),
                             c, max_size=4), max_leaves=20)


@given(st.one_of(_ANY_JSON.map(json.dumps), _ANY_JSON.map(lambda d: json.dumps({"version": 1, "probes": d})),
                 _ANY_JSON.map(lambda d: json.dumps({"version": 1, "io": d})), st.text(max_size=50)))
def test_a_broken_state_file_is_a_value_error(text):
    try:
        parsed = state.from_json(text)
    except ValueError:
        return
    assert isinstance(parsed, state.ProbeState)


# ---- /proc/diskstats -------------------------------------------------------------------

@given(st.lists(st.lists(st.one_of(st.integers(-5, 1 << 66).map(str), st.text(max_size=4), st.just("\u0663")),
                         min_size=0, max_size=20).map(" ".join), max_size=5))
def test_diskstats_counters_are_non_negative(lines):
    for stat in devices.parse_diskstats("\n".join(lines)).values():
        assert stat.sectors_read >= 0 and stat.io_ticks_ms >= 0


# ---- profiles and the config loader ---------------------------------------------------

_OPTIONS = st.dictionaries(st.sampled_from(["rw", "bs", "iodepth", "numjobs", "bssplit", "rate", "ramp_time", "size",
                                            "cpus_allowed", "verify", "filename", "expect_path_bandwidth"]),
                           st.one_of(st.sampled_from(["read", "randread", "write", "4k", "1M", "16", "0", "\u0663",
                                                      "4k/50:64k/50", "1_0", "+1", "9" * 30, "2s"]), NUMBER),
                           max_size=5)


@given(st.text(max_size=12), _OPTIONS)
def test_a_profile_is_a_read_only_profile_or_a_config_error(name, options):
    try:
        profile = check_profile(name, options)
    except ConfigError:
        return
    assert dict(profile.options)["rw"] in ("read", "randread")
    assert 1 <= profile.jobs <= 64
    for key, value in profile.options:
        assert value.isprintable() and key not in ("verify", "filename")


def _defaults():
    return {name: spec.cls.config_defaults for name, spec in load_all().items()}


_YAML_PIECES = st.sampled_from(["log:\n", "  level: info\n", "collectors:\n", "  zfs:\n", "    interval: ", ".nan",
                                ".inf", "0", "1h", "-5", "99999999999999999999w", "\n", "probes:\n", "  targets:\n",
                                "    - file: /dev/shm/x\n", "    - /dev/sda\n", "  state_file: /etc/passwd\n",
                                "  file_size: 1TiB\n", "web:\n", "  listen_address: ':9866'\n", "paths: {sysfs: /x}\n",
                                "&a [*a]\n", "!!python/object:os.system\n", "\t", "{", "[", "log:\n  level: a\n"])


@given(st.one_of(st.text(max_size=60), st.lists(_YAML_PIECES, max_size=12).map("".join)))
@example("log:\n  level: info\nlog:\n  level: debug\n")
@example("!!python/object/apply:os.system [echo]\n")
def test_the_config_loader_gives_a_config_or_a_config_error(text):
    try:
        config = config_module.validate(configfile.parse_text(text, "fuzz.yml"), _defaults())
    except ConfigError:
        return
    assert isinstance(config, dict) and "collectors" in config
