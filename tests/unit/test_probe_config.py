"""The `probes:` config section: defaults, targets, profiles, and every write refused at load."""

from __future__ import annotations

import os

import pytest

from storpath.base import config as config_module
from storpath.base.config import ConfigError
from storpath.scrape.probes import config as probes_config
from storpath.scrape.probes.config import check, parse_rate


def load(section):
    """Through the real config loader, as `storpath serve --config.file` does."""
    return config_module.validate({"probes": section}, {})["probes"]


def test_the_section_is_registered_with_the_config_loader():
    assert config_module.SECTION_VALIDATORS["probes"] is check
    with pytest.raises(ConfigError, match=r"unknown key probes\.bogus"):
        load({"bogus": 1})


def test_defaults():
    cfg = load({"targets": ["/dev/nvme0n1"]})
    assert (cfg.runtime, cfg.interval, cfg.io_priority, cfg.busy_threshold) == (5.0, 3600.0, "idle", 0.5)
    assert cfg.hard_timeout == 35.0
    target = cfg.targets[0]
    assert (target.kind, target.path, target.name, target.profiles) == ("device", "/dev/nvme0n1", "/dev/nvme0n1",
                                                                         ("seqread", "randread"))
    assert dict(cfg.profiles["seqread"].options) == {"rw": "read", "bs": "1M", "iodepth": "16"}
    assert dict(cfg.profiles["randread"].options) == {"rw": "randread", "bs": "4k", "iodepth": "32"}


def test_durations_sizes_and_rates():
    cfg = load({"runtime": "10s", "interval": "30m", "jitter": "1m", "timeout": "1m", "io_budget_per_hour": "20GiB",
                "file_size": "256MiB", "busy_threshold": None,
                "targets": [{"device": "/dev/md0", "expected_read_bytes_per_second": "28GB/s"}]})
    assert (cfg.runtime, cfg.interval, cfg.jitter, cfg.hard_timeout) == (10.0, 1800.0, 60.0, 60.0)
    assert cfg.io_budget_per_hour == 20 << 30 and cfg.file_size == 256 << 20
    assert cfg.busy_threshold is None
    target = cfg.targets[0]
    assert cfg.expected_for(target, "seqread") == 28e9
    assert cfg.expected_for(target, "randread") is None  # a 4 KiB probe measures IOPS, not the link


@pytest.mark.parametrize("text,value", [("7.3GB/s", 7.3e9), ("3500 MB/s", 3.5e9), ("1GiB/s", 1 << 30),
                                        (7300000000, 7.3e9), ("2e9", 2e9)])
def test_parse_rate(text, value):
    assert parse_rate(text) == value


@pytest.mark.parametrize("text", ["fast", "7.3 GT/s", "-1", 0, "7.3 Gb/s"])
def test_parse_rate_rejects(text):
    with pytest.raises(ValueError):
        parse_rate(text)


def test_expectation_per_profile():
    cfg = load({"targets": [{"device": "/dev/nvme0n1",
                             "expected_read_bytes_per_second": {"seqread": "7.3GB/s", "randread": "3.2GB/s"}}]})
    assert cfg.expected_for(cfg.targets[0], "randread") == 3.2e9
    with pytest.raises(ConfigError, match="not probed on this target"):
        load({"targets": [{"device": "/dev/nvme0n1", "profiles": ["seqread"],
                           "expected_read_bytes_per_second": {"randread": "1GB/s"}}]})


@pytest.mark.parametrize("options,named", [
    ({"rw": "write"}, "rw"),
    ({"rw": "randwrite"}, "rw"),
    ({"rw": "randrw"}, "rw"),
    ({"readwrite": "trim"}, "readwrite"),
    ({"rw": "read", "verify": "md5"}, "verify"),
    ({"rw": "read", "do_verify": 1}, "do_verify"),
    ({"rw": "read", "trim_percentage": 10}, "trim_percentage"),
    ({"rw": "read", "rwmixwrite": 50}, "rwmixwrite"),
    ({"rw": "read", "fill_device": 1}, "fill_device"),
    ({"rw": "read", "exec_prerun": "rm -rf /"}, "exec_prerun"),
    ({"rw": "read", "write_iolog": "/tmp/x"}, "write_iolog"),
    ({"rw": "read", "readonly": 0}, "readonly"),
    ({"rw": "read", "direct": 0}, "direct"),
    ({"rw": "read", "filename": "/dev/sda"}, "filename"),
    ({"rw": "read", "zonemode": "zbd"}, "zonemode"),
    ({"rw": "read", "ioscheduler": "none"}, "ioscheduler"),
])
def test_write_options_are_refused_at_load_naming_the_option(options, named):
    with pytest.raises(ConfigError) as error:
        load({"profiles": {"mine": options}})
    message = str(error.value)
    assert f"probes.profiles.mine.{named}" in message
    assert "only ever read" in message


def test_options_outside_the_allow_list_are_refused():
    with pytest.raises(ConfigError, match=r"'gtod_reduce' is not allowed.*allowed: .*iodepth"):
        load({"profiles": {"mine": {"rw": "read", "gtod_reduce": 1}}})


@pytest.mark.parametrize("options,message", [
    ({"bs": "1M"}, "set rw"),
    ({"rw": "read", "iodepth": 0}, "from 1 to 4096"),
    ({"rw": "read", "bs": "huge"}, "block size"),
    ({"rw": "read", "ioengine": "sg"}, "one of libaio"),
    ({"rw": "read", "bs": "1M", "blocksize": "4k"}, "given twice"),
])
def test_bad_option_values(options, message):
    with pytest.raises(ConfigError, match=message):
        load({"profiles": {"mine": options}})


def test_user_profile_and_path_expectation_rule():
    cfg = load({"profiles": {"seq128k": {"rw": "read", "bs": "128k", "iodepth": 32, "ioengine": "io_uring"},
                             "small": {"rw": "randread", "bs": "16k"},
                             "mixed": {"rw": "randread", "bssplit": "4k/50:1M/50", "expect_path_bandwidth": True}},
                "targets": [{"device": "/dev/nvme0n1", "profiles": ["seq128k", "small", "mixed"]}]})
    assert cfg.profiles["seq128k"].options == (("rw", "read"), ("bs", "128k"), ("iodepth", "32"),
                                               ("ioengine", "io_uring"))
    assert cfg.profiles["seq128k"].path_expectation is True
    assert cfg.profiles["small"].path_expectation is False
    assert cfg.profiles["mixed"].path_expectation is True
    with pytest.raises(ConfigError, match="built-in profile"):
        load({"profiles": {"seqread": {"rw": "read"}}})


def test_targets_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="exactly one of"):
        load({"targets": [{"device": "/dev/sda", "file": "/srv/x"}]})
    with pytest.raises(ConfigError, match="absolute path"):
        load({"targets": [{"device": "sda"}]})
    with pytest.raises(ConfigError, match=r"targets\[0\]\.profiles: unknown profile 'nope'"):
        load({"targets": [{"device": "/dev/sda", "profiles": ["nope"]}]})
    with pytest.raises(ConfigError, match="two targets have the path"):
        load({"targets": ["/dev/sda", {"device": "/dev/sda", "name": "other"}]})
    with pytest.raises(ConfigError, match="unknown key 'size'"):
        load({"targets": [{"file": "/srv/x", "size": "1G"}]})
    with pytest.raises(ConfigError, match="only a file target"):
        load({"targets": [{"device": "/dev/sda", "file_size": "1G"}]})


def test_a_file_target_is_never_a_device_node(tmp_path):
    with pytest.raises(ConfigError, match="regular file on a filesystem"):
        load({"targets": [{"file": "/dev/nvme0n1"}]})
    link = tmp_path / "innocent-name"
    link.symlink_to("/dev/null")
    with pytest.raises(ConfigError, match=r"innocent-name \(really /dev/null\) is under /dev"):
        load({"targets": [{"file": str(link)}]})
    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(ConfigError, match="exists and is not a regular file"):
        load({"targets": [{"file": str(folder)}]})
    target = load({"targets": [{"file": str(tmp_path / "probe.dat"), "file_size": "64MiB"}]}).targets[0]
    assert (target.kind, target.file_size) == ("file", 64 << 20)


def test_a_bare_string_target():
    cfg = load({"targets": ["/dev/md0", "/srv/data/.probe"]})
    assert [t.kind for t in cfg.targets] == ["device", "file"]


@pytest.mark.parametrize("section,message", [
    ({"runtime": "0s"}, "at least 1s"),
    ({"runtime": "5s", "timeout": "5s"}, "longer than probes.runtime"),
    ({"busy_threshold": 1.5}, "at most 1"),
    ({"io_priority": "realtime"}, "idle or best-effort"),
    ({"io_budget_per_hour": "lots"}, "invalid size"),
    ({"targets": "/dev/sda"}, "expected a list"),
    ({"fio": ""}, "fio binary"),
    ("yes", "expected a mapping"),
])
def test_broken_sections(section, message):
    with pytest.raises(ConfigError, match=message):
        load(section)


def test_default_state_file_follows_systemd_state_directory(monkeypatch):
    monkeypatch.setenv("STATE_DIRECTORY", "/var/lib/storpath:/var/lib/other")
    assert probes_config.default_state_file() == "/var/lib/storpath/probes.json"
    monkeypatch.delenv("STATE_DIRECTORY")
    assert probes_config.default_state_file() == os.path.join("/var/lib/storpath", "probes.json")


@pytest.mark.parametrize("value", ["/etc/passwd", "/tmp/probes.json", "../probes.json", "sub/../../x.json"])
def test_the_state_file_is_only_inside_the_state_directory(tmp_path, monkeypatch, value):
    """Before: probes.state_file pointed at any existing file replaced it with JSON."""
    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path / "state"))
    with pytest.raises(ConfigError, match=r"probes\.state_file: .* is outside storpath's state directory"):
        load({"state_file": value})


def test_the_state_directory_is_judged_on_its_real_path(tmp_path, monkeypatch):
    (tmp_path / "state").mkdir()
    os.symlink("/etc", tmp_path / "state" / "etc")
    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path / "state"))
    with pytest.raises(ConfigError, match="outside storpath's state directory"):
        load({"state_file": "etc/passwd"})
    assert load({"state_file": "probes.json"}).state_file == str(tmp_path / "state" / "probes.json")
    assert load({"state_file": str(tmp_path / "state" / "p.json")}).state_file == str(tmp_path / "state" / "p.json")


@pytest.mark.parametrize("section", [{"file_size": "1TiB"}, {"targets": [{"file": "/srv/p", "file_size": "65GiB"}]}])
def test_file_size_has_an_upper_bound(section):
    """Before: no bound (a tmpfs filled to ENOSPC)."""
    with pytest.raises(ConfigError, match=r"file_size: must be at most 68719476736 bytes"):
        load(section)


@pytest.mark.parametrize("path", ["/sys/kernel/x", "/proc/self/x", "/dev/shm/probe"])
def test_file_targets_under_pseudo_filesystems_are_refused(path):
    with pytest.raises(ConfigError, match="is under /dev, /sys or /proc"):
        load({"targets": [{"file": path}]})


def test_a_symlinked_folder_does_not_walk_around_the_refusal(tmp_path):
    """Before: a text-prefix check; /srv/x -> /dev made /srv/x/probe a file under /dev."""
    os.symlink("/dev", tmp_path / "innocent")
    with pytest.raises(ConfigError, match=r"innocent/probe \(really /dev/probe\) is under /dev"):
        load({"targets": [{"file": str(tmp_path / "innocent" / "probe")}]})


@pytest.mark.parametrize("path", ["/srv/probe ", "/srv/pro\nbe", "/srv/\x00"])
def test_paths_fio_cannot_be_given_are_refused(path):
    with pytest.raises(ConfigError, match="ends in a blank or holds a control character"):
        load({"targets": [{"file": path}]})


@pytest.mark.parametrize("value", [".nan", "1e999GB/s", float("nan"), float("inf"), "2PB/s", 1e16])
def test_expected_throughput_is_finite_and_bounded(value):
    with pytest.raises(ConfigError, match="expected_read_bytes_per_second"):
        load({"targets": [{"device": "/dev/sda", "expected_read_bytes_per_second": value}]})


@pytest.mark.parametrize("options", [{"rw": "read", "numjobs": "\u0663"}, {"rw": "read", "iodepth": "\u0661\u0666"},
                                     {"rw": "read", "bs": "\u0664k"}])
def test_profile_numbers_are_ascii_digits(options):
    with pytest.raises(ConfigError, match="expected"):
        load({"profiles": {"mine": options}})
