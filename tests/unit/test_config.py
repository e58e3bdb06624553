"""The config loader against hostile files: every bad value refused at start, naming the key."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from storpath.base import config as config_module
from storpath.collectors import load_all
from storpath.base.config import ConfigError, validate
from storpath.base.configfile import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def collector_defaults():
    return {name: spec.cls.config_defaults for name, spec in load_all().items()}


def load_text(tmp_path, text, encoding="utf-8"):
    path = tmp_path / "storpath.yml"
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return validate(load_file(str(path)), collector_defaults())


@pytest.mark.parametrize("key,value", [
    ("interval", ".nan"), ("interval", ".inf"), ("timeout", ".nan"), ("timeout", "-.inf"),
    ("interval", "99999999999999999999w"), ("runtime", ".nan"), ("jitter", ".inf"), ("busy_sample", ".nan"),
])
def test_probe_durations_are_finite_and_bounded(tmp_path, key, value):
    """Before: .nan ran probes back to back or turned the hard kill off, and .inf or a huge
    value raised OverflowError in a background thread."""
    with pytest.raises(ConfigError, match=rf"probes\.{key}: .*(finite|longer than 366 days|negative)"):
        load_text(tmp_path, f"probes:\n  {key}: {value}\n")


@pytest.mark.parametrize("collector,key", [("nvme", "identify_interval"), ("zfs", "interval"),
                                           ("sas", "error_counters_interval")])
@pytest.mark.parametrize("value", ["0", "0s", "1s", "500ms"])
def test_every_interval_has_a_minimum_named_in_the_refusal(tmp_path, collector, key, value):
    """Before: identify_interval 0 and zfs interval 0 busy-looped (Identify commands or zpool forks)."""
    with pytest.raises(ConfigError, match=rf"collectors\.{collector}\.{key}: must be at least 10s"):
        load_text(tmp_path, f"collectors:\n  {collector}:\n    {key}: {value}\n")


@pytest.mark.parametrize("collector,key", [("nvme", "identify_timeout"), ("zfs", "timeout"), ("nvme", "startup_wait")])
@pytest.mark.parametrize("value", [".nan", ".inf", "99999999999999999999w"])
def test_collector_durations_are_finite_and_bounded(tmp_path, collector, key, value):
    with pytest.raises(ConfigError, match=rf"collectors\.{collector}\.{key}: "):
        load_text(tmp_path, f"collectors:\n  {collector}:\n    {key}: {value}\n")


def test_an_interval_at_its_minimum_is_taken(tmp_path):
    config = load_text(tmp_path, "collectors:\n  zfs:\n    interval: 10s\n  nvme:\n    identify_interval: 1h\n")
    assert config["collectors"]["zfs"]["interval"] == 10.0
    assert config["collectors"]["nvme"]["identify_interval"] == 3600.0


@pytest.mark.parametrize("text,line", [
    ("log:\n  level: debug\nlog:\n  level: info\n", 3),
    ("collectors:\n  zfs:\n    interval: 1m\n    interval: 0\n", 4),
    ("probes:\n  targets: [/dev/sda]\n  runtime: 5s\n  targets: [/dev/sdb]\n", 4),
])
def test_a_key_given_twice_is_refused(tmp_path, text, line):
    """Before: YAML kept the last of two equal keys and silently dropped the first."""
    with pytest.raises(ConfigError, match=rf"storpath\.yml: the key '\w+' is given twice \(lines \d+ and {line}\)"):
        load_text(tmp_path, text)


def test_a_file_that_is_not_utf8_is_a_configuration_error_naming_the_file(tmp_path):
    """Before: a UnicodeDecodeError traceback."""
    with pytest.raises(ConfigError, match=r"storpath\.yml is not UTF-8 text: byte 15 is 0xe9"):
        load_text(tmp_path, "log:\n  level: d\xe9bug\n", encoding="latin-1")


def test_the_command_line_reports_an_encoding_error_without_a_traceback(tmp_path):
    path = tmp_path / "storpath.yml"
    path.write_bytes(b"\xff\xfe\x00garbage")
    result = subprocess.run([sys.executable, "-m", "storpath", "check", f"--config.file={path}"], capture_output=True,
                            text=True, timeout=60, env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "exporter")))
    assert "Traceback" not in result.stderr, result.stderr
    assert f"configuration error: config file {path} is not UTF-8 text" in result.stderr
    assert result.returncode != 0


def test_deeply_nested_yaml_is_a_configuration_error(tmp_path):
    """Before: RecursionError from the YAML composer, a traceback."""
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_text(tmp_path, "log: " + "[" * 1000 + "]" * 1000 + "\n")


def test_a_plain_number_setting_refuses_nan(tmp_path, monkeypatch):
    monkeypatch.setitem(config_module.DEFAULTS, "web", {"listen_address": ":9866", "limit": 1.5})
    with pytest.raises(ConfigError, match=r"web\.limit: expected a number, got nan"):
        validate({"web": {"limit": float("nan")}}, {})


@pytest.mark.parametrize("value,addresses", [(":9866", [":9866"]), ([":9866", "[::1]:9100"], [":9866", "[::1]:9100"]),
                                             ([":9866", ":9866"], [":9866"])])
def test_listen_address_is_one_address_or_a_list(value, addresses):
    assert validate({"web": {"listen_address": value}}, collector_defaults())["web"]["listen_address"] == addresses


@pytest.mark.parametrize("value", [[], [9866], [""], {"a": 1}, 9866])
def test_listen_address_refuses_what_is_no_address(value):
    with pytest.raises(ConfigError, match="web.listen_address"):
        validate({"web": {"listen_address": value}}, collector_defaults())


def test_repeated_listen_address_flags_are_all_kept():
    from storpath.cli import build_parser
    from storpath.commands.options import resolve_config

    args = build_parser().parse_args(["serve", "--web.listen-address=:9866", "--web.listen-address=127.0.0.1:9100"])
    assert resolve_config(args)["web"]["listen_address"] == [":9866", "127.0.0.1:9100"]


def test_the_helper_socket_is_a_config_key_the_flag_overrides(tmp_path):
    from storpath.cli import build_parser
    from storpath.commands.options import resolve_config

    path = tmp_path / "storpath.yml"
    path.write_text("helper:\n  socket: /run/storpath-helper/helper.sock\n")
    parse = build_parser().parse_args
    assert resolve_config(parse(["serve", f"--config.file={path}"]))["helper"]["socket"] == \
        "/run/storpath-helper/helper.sock"
    assert resolve_config(parse(["serve", f"--config.file={path}", "--helper.socket=/tmp/h.sock"]))["helper"][
        "socket"] == "/tmp/h.sock"
    assert resolve_config(parse(["serve"]))["helper"]["socket"] == ""  # the reads run here
    with pytest.raises(ConfigError, match="unknown key helper.sock "):
        validate({"helper": {"sock": "/x"}}, collector_defaults())
    with pytest.raises(ConfigError, match="helper.socket"):
        validate({"helper": {"socket": 5}}, collector_defaults())
