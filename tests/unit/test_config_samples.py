"""The sample configuration files in etc/ are what oslo-config-generator writes
from the code now, and each holds every option its service registers.

Regenerate them after changing an option: ``tools/config-samples.sh``."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from oslo_config import cfg, generator

REPO = Path(__file__).resolve().parents[2]
GENERATOR_CONFIGS = sorted((REPO / "etc" / "oslo-config-generator").glob("*.conf"))


def _sample_of(config: Path) -> Path:
    line = next(x for x in config.read_text().splitlines() if x.startswith("output_file"))
    return REPO / line.split("=", 1)[1].strip()


def _options_in(sample: str) -> set[tuple[str, str]]:
    """(group, option) of every option a sample shows (commented out, as generated)."""
    found, group = set(), "DEFAULT"
    for line in sample.splitlines():
        if m := re.fullmatch(r"\[([^\]]+)\]", line):
            group = m.group(1)
        elif m := re.fullmatch(r"#([a-z_0-9]+) =.*", line):
            found.add((group, m.group(1)))
    return found


def _registered(register: Callable[[cfg.ConfigOpts], None]) -> set[tuple[str, str]]:
    conf = cfg.ConfigOpts()
    register(conf)
    out = set()
    for name in conf:  # DEFAULT options and group names
        item = conf[name]
        if isinstance(item, cfg.ConfigOpts.GroupAttr):
            out |= {(name, opt) for opt in item}
        else:
            out.add(("DEFAULT", name))
    return out


def test_there_is_a_generator_config_per_service() -> None:
    assert [p.stem for p in GENERATOR_CONFIGS] == ["isthmus-admin", "isthmus-gateway", "isthmus-neutron",
                                                   "isthmus-xjob"]


@pytest.mark.parametrize("config", GENERATOR_CONFIGS, ids=lambda p: p.stem)
def test_the_sample_is_what_the_generator_writes_now(config: Path, tmp_path: Path) -> None:
    written = tmp_path / "sample.conf"
    generator.main(["--config-file", str(config), "--output-file", str(written)])
    assert written.read_text() == _sample_of(config).read_text(), \
        f"{_sample_of(config).name} is stale: run tools/config-samples.sh"


def _xjob(conf: cfg.ConfigOpts) -> None:
    from isthmus.gateway import resync
    from isthmus.jobs import config
    from isthmus.network.reconcilers import settings

    config.register_opts(conf)
    settings.register_opts(conf)
    resync.register_opts(conf)


def _gateway(conf: cfg.ConfigOpts) -> None:
    from isthmus.gateway import config

    config.register_opts(conf)


def _admin(conf: cfg.ConfigOpts) -> None:
    from isthmus.admin import config

    config.register_opts(conf)


def _neutron(conf: cfg.ConfigOpts) -> None:
    from isthmus.clients.regions import register_auth_opts
    from isthmus.network import config

    conf.register_opts(config.OPTS, group=config.GROUP)
    register_auth_opts(conf, config.CENTRAL_AUTH_GROUP)


@pytest.mark.parametrize("service,register", [("isthmus-xjob", _xjob), ("isthmus-gateway", _gateway),
                                              ("isthmus-admin", _admin), ("isthmus-neutron", _neutron)])
def test_the_sample_holds_every_option_the_service_registers(
        service: str, register: Callable[[cfg.ConfigOpts], None]) -> None:
    """An option registered without its list_opts entry would be missing from the sample."""
    sample = _options_in(_sample_of(REPO / "etc" / "oslo-config-generator" / f"{service}.conf").read_text())
    missing = sorted(_registered(register) - _registered(lambda conf: None) - sample)  # less oslo.config's own
    assert missing == [], f"{service}: registered but not in its sample (add them to its list_opts)"
