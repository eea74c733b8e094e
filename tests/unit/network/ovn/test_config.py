"""The worker's ``[ovn:<region>]`` sections (isthmus/network/reconcilers/settings.py, worker.py)."""

import pytest
from oslo_config import cfg

from isthmus.network.reconcilers.settings import register_opts
from isthmus.network.reconcilers.worker import load_ovn_regions


def conf_from(tmp_path, text: str) -> cfg.ConfigOpts:
    path = tmp_path / "xjob.conf"
    path.write_text(text)
    conf = cfg.ConfigOpts()
    conf([], default_config_files=[str(path)])
    register_opts(conf)
    return conf


def test_each_section_names_a_region_with_its_two_databases(tmp_path):
    conf = conf_from(tmp_path, "[ovn:RegionTwo]\nnb_connection = tcp:10.0.0.1:6641,tcp:10.0.0.2:6641\n"
                               "sb_connection = tcp:10.0.0.1:6642\ntimeout = 3\n[isthmus]\n")
    regions = load_ovn_regions(conf)
    assert list(regions) == ["RegionTwo"]
    two = regions["RegionTwo"]
    assert two.nb.remotes == ["tcp:10.0.0.1:6641", "tcp:10.0.0.2:6641"] and two.nb.timeout == 3
    assert two.sb.remotes == ["tcp:10.0.0.1:6642"]


def test_a_section_without_both_databases_is_refused_by_name(tmp_path):
    conf = conf_from(tmp_path, "[ovn:RegionTwo]\nnb_connection = tcp:10.0.0.1:6641\n")
    with pytest.raises(ValueError, match=r"\[ovn:RegionTwo\]: nb_connection and sb_connection"):
        load_ovn_regions(conf)
    assert load_ovn_regions(conf_from(tmp_path, "[isthmus]\n")) == {}
