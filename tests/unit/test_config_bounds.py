"""Every YAML file storpath reads goes through one bounded loader: a nested-alias bomb, a
huge file or deep nesting is refused at once and in little memory, and no message quotes a
whole value. Bounds on time and memory are generous: the faults they catch cost 30 s and
2.5 GB (the alias bomb) or a minute (50 MB)."""

from __future__ import annotations

import os
import time
import tracemalloc

import pytest

from storpath.base import configfile
from storpath.cli import build_parser
from storpath.commands.options import resolve_config
from storpath.commands import serve
from storpath.base.config import MAX_REQUESTS, ConfigError, validate
from storpath.base.configfile import load_file
from storpath.http import webconfig
from tests.conftest import log_records
from tests.unit.test_config import collector_defaults

LOADERS = [configfile.PythonLoader]
if configfile.CParser is not None:
    LOADERS.append(configfile.LibyamlLoader)


@pytest.fixture(params=LOADERS, ids=lambda loader: loader.__name__)
def loader(request, monkeypatch):
    """Each loader storpath may run with: libyaml's, and PyYAML's own where libyaml is absent."""
    monkeypatch.setattr(configfile, "LOADER", request.param)
    return request.param


def alias_bomb(under: str, levels: int = 9, width: int = 9) -> str:
    """The value of the key path `under`: `levels` anchored lists, each of `width` aliases
    of the one before, so that the last expands into width**levels strings (9 of 9: 387
    million). All of it under the one key, where a config's own checks reach it."""
    lists = ["&lol0 [" + ", ".join(['"lol"'] * width) + "]"]
    for level in range(1, levels):
        lists.append(f"&lol{level} [" + ", ".join([f"*lol{level - 1}"] * width) + "]")
    keys = under.split(".")
    nested = "".join(f"{'  ' * depth}{key}:\n" for depth, key in enumerate(keys[:-1]))
    return nested + f"{'  ' * (len(keys) - 1)}{keys[-1]}: [{', '.join(lists)}]\n"


def measured(call):
    """(exception raised, seconds, peak bytes allocated) of call()."""
    tracemalloc.start()
    began = time.monotonic()
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - what was raised is the result
        raised = exc
    else:
        raised = None
    seconds = time.monotonic() - began
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return raised, seconds, peak


@pytest.mark.parametrize("under", ["web.listen_address", "collectors.pcie.enabled", "probes.fio"])
def test_an_alias_bomb_is_refused_at_once_in_little_memory(tmp_path, loader, under):
    """Before: validate() formatted the value with repr, which expanded the aliases: 30 s
    and 2.5 GB, then a MemoryError traceback."""
    path = tmp_path / "bomb.yml"
    path.write_text(alias_bomb(under))
    raised, seconds, peak = measured(lambda: validate(load_file(str(path)), collector_defaults()))
    assert isinstance(raised, ConfigError), raised
    assert "anchors and aliases" in str(raised) and str(path) in str(raised)
    assert seconds < 5 and peak < 20 << 20, (seconds, peak)


def test_the_web_config_file_is_loaded_with_the_same_bounds(tmp_path, loader):
    path = tmp_path / "web.yml"
    path.write_text(alias_bomb("basic_auth_users.prometheus"))
    raised, seconds, peak = measured(lambda: webconfig.load(str(path)))
    assert isinstance(raised, webconfig.WebConfigError) and "anchors and aliases" in str(raised), raised
    assert seconds < 5 and peak < 20 << 20, (seconds, peak)


def test_a_50_mb_config_is_refused_without_parsing_it(tmp_path):
    """Before: parsed for a minute, with no limit."""
    path = tmp_path / "huge.yml"
    with open(path, "w") as handle:
        handle.write("collectors:\n  pcie:\n")
        line = "    # " + "x" * 93 + "\n"
        handle.write(line * (50 * (1 << 20) // len(line)))
    raised, seconds, peak = measured(lambda: load_file(str(path)))
    assert isinstance(raised, ConfigError) and "larger than 1 MiB" in str(raised), raised
    assert seconds < 5 and peak < 8 << 20, (seconds, peak)


def test_a_config_just_under_the_limit_still_loads(tmp_path):
    path = tmp_path / "big.yml"
    targets = "".join(f"    - file: /srv/probe{i}\n" for i in range(10_000))
    text = "probes:\n  targets:\n" + targets
    assert len(text) < configfile.MAX_FILE_BYTES
    path.write_text(text)
    assert len(load_file(str(path))["probes"]["targets"]) == 10_000


def test_deep_nesting_is_refused_with_its_line(tmp_path, loader):
    path = tmp_path / "deep.yml"
    path.write_text("collectors: " + "[" * 200 + "]" * 200 + "\n")
    with pytest.raises(ConfigError, match="line 1: nested deeper than 64 levels"):
        load_file(str(path))
    path.write_text("collectors: " + "[" * 100_000 + "]" * 100_000 + "\n")  # libyaml stops at 1000 itself
    with pytest.raises(ConfigError, match="nest"):
        load_file(str(path))


def test_one_anchor_without_alias_is_refused_too(tmp_path, loader):
    path = tmp_path / "anchor.yml"
    path.write_text("log:\n  level: &lvl debug\n")
    with pytest.raises(ConfigError, match=r"line 2: YAML anchors and aliases \(&name, \*name\) are not accepted"):
        load_file(str(path))


def test_a_huge_value_is_cut_and_escaped_in_the_message(tmp_path):
    """Before: the message carried the whole value, 1 MB or ANSI escapes and all."""
    path = tmp_path / "long.yml"
    path.write_text('log:\n  level: "\\e[31m' + "x" * 500_000 + '"\n')
    with pytest.raises(ConfigError) as caught:
        validate(load_file(str(path)), collector_defaults())
    message = str(caught.value)
    assert message.startswith("log.level: '\\x1b[31mxxx") and len(message) < 200, message[:300]
    assert "\x1b" not in message


@pytest.mark.parametrize("value", ["1.0e+26", "100000000000000000000000000", str(MAX_REQUESTS + 1), "2.5"])
def test_max_requests_out_of_bounds_in_the_config_is_refused(tmp_path, value):
    """Before: 1.0e+26 and 2.5 were taken (threads = max_requests + 4)."""
    path = tmp_path / "storpath.yml"
    path.write_text(f"web:\n  max_requests: {value}\n")
    with pytest.raises(ConfigError, match=r"web\.max_requests: "):
        validate(load_file(str(path)), collector_defaults())


def test_max_requests_out_of_bounds_on_the_command_line_is_refused():
    args = build_parser().parse_args(["serve", "--web.max-requests=100000000000000000000000000"])
    with pytest.raises(ConfigError, match=rf"web\.max_requests: 1000000.*is not between 0 \(no limit\) and "
                                          rf"{MAX_REQUESTS}"):
        resolve_config(args)
    for fine in ("0", "40", str(MAX_REQUESTS)):
        assert resolve_config(build_parser().parse_args(["serve", f"--web.max-requests={fine}"]))["web"][
            "max_requests"] == int(fine)


def test_a_reload_that_raises_anything_keeps_the_running_configuration(monkeypatch):
    """Before: reload() caught only configuration errors; a MemoryError ended the loop that
    answers signals, and the exporter ignored SIGTERM and SIGHUP from then on."""
    def out_of_memory(args):
        raise MemoryError()

    monkeypatch.setattr(serve, "resolve_config", out_of_memory)
    service = serve.Service(args=None, config={}, web=None, built=None, server=None)
    with log_records("storpath") as records:
        assert service.reload() is False
    assert any(r.getMessage() == "reload failed, keeping the running configuration" and
               r.fields["err"].startswith("MemoryError") for r in records)


def test_a_fifo_at_the_config_path_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "storpath.yml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_file(str(fifo))
