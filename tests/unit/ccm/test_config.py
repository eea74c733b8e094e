"""cloud.conf vectors, plus properties."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from isthmus.ccm import gcfg
from isthmus.ccm.config import (
    ConfigError,
    check_metadata_search_order,
    load_config,
    merge_regions,
    parse_config,
)
from isthmus.ccm.gcfg import parse_bool
from isthmus.kube.durations import parse_duration

NO_ENV: dict[str, str] = {}


def conf(text: str, environ: dict[str, str] | None = None):
    return parse_config(textwrap.dedent(text), "cloud.conf", NO_ENV if environ is None else environ)


READ_CONFIG = """\
[Global]
 auth-url = http://auth.url
 user-id = user
 password = mypass
 tenant-name = demo
 tenant-domain-name = Default
 region = RegionOne
[LoadBalancer]
 create-monitor = yes
 monitor-delay = 1m
 monitor-timeout = 30s
 monitor-max-retries = 1
 monitor-max-retries-down = 3
[Metadata]
 search-order = configDrive, metadataService
"""


def test_read_config() -> None:
    cfg = conf(READ_CONFIG)
    g = cfg.global_
    assert (g.auth_url, g.user_id, g.password, g.tenant_name, g.tenant_domain_name, g.region) == (
        "http://auth.url", "user", "mypass", "demo", "Default", "RegionOne",
    )
    assert cfg.metadata.search_order == "configDrive, metadataService"  # verbatim, space kept
    assert cfg.metadata.request_timeout == 60.0
    assert cfg.regions == ("RegionOne",)
    assert cfg.warnings == ()  # [LoadBalancer] is OCCM's: not "unknown"


def test_no_config_file() -> None:
    with pytest.raises(ConfigError, match="no OpenStack cloud provider config file given"):
        load_config(None)


def test_read_clouds(tmp_path: Path) -> None:
    clouds = tmp_path / "clouds.yaml"
    clouds.write_text(textwrap.dedent("""\
        clouds:
          default:
            auth:
              domain_name: default
              auth_url: http://not-auth.url
              project_name: demo
              username: admin
              user_id: user
            region_name: RegionOne
        """))
    cfg = conf(f"""\
        [Global]
        auth-url = http://auth.url
        trust-id = mytrust
        password = mypass
        use-clouds = true
        clouds-file = {clouds}
        [Metadata]
        search-order = configDrive, metadataService
        """)
    g = cfg.global_
    assert g.auth_url == "http://auth.url"  # INI wins
    assert (g.user_id, g.username, g.password, g.region, g.tenant_name, g.trust_id) == (
        "user", "admin", "mypass", "RegionOne", "demo", "mytrust",
    )
    assert cfg.regions == ("RegionOne",)


def write_clouds(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "clouds.yaml"
    path.write_text(textwrap.dedent(body))
    return path


def test_clouds_regions_merge_with_ini(tmp_path: Path) -> None:
    clouds = write_clouds(tmp_path, """\
        clouds:
          k8s:
            auth: {auth_url: "https://keystone/v3", username: u, password: p, project_name: demo}
            region_name: R1
            regions:
              - R1
              - name: R2
                values: {}
              - name: X
                values: {auth: {auth_url: "https://other/v3"}}
              - R4
          other:
            auth: {auth_url: "https://nope/v3"}
        """)
    cfg = conf(f"""\
        [Global]
        use-clouds
        clouds-file = {clouds}
        cloud = k8s
        regions = R3
        regions = R2
        """)
    assert cfg.global_.auth_url == "https://keystone/v3"
    assert cfg.regions == ("R1", "R3", "R2", "R4")  # INI list kept; X (own auth) skipped
    assert any("'X' has its own auth" in w for w in cfg.warnings)


def test_clouds_region_name_plus_regions(tmp_path: Path) -> None:
    clouds = write_clouds(tmp_path, """\
        clouds:
          c: {auth: {auth_url: "http://k"}, region_name: R1, regions: [R1, R2]}
        """)
    assert conf(f"[Global]\nuse-clouds=true\nclouds-file={clouds}\n").regions == ("R1", "R2")
    # INI "R1,R2" splits: the first is the default region
    cfg = conf(f"[Global]\nregion=R0,R5\nuse-clouds=true\nclouds-file={clouds}\n")
    assert cfg.global_.region == "R0"
    assert cfg.regions == ("R0", "R5", "R1", "R2")


def test_clouds_selection(tmp_path: Path) -> None:
    clouds = write_clouds(tmp_path, """\
        clouds:
          a: {auth: {auth_url: "http://a"}, region_name: RA}
          b: {auth: {auth_url: "http://b"}, region_name: RB}
        """)
    ini = f"[Global]\nuse-clouds=true\nclouds-file={clouds}\n"
    with pytest.raises(ConfigError, match="several clouds"):
        conf(ini)
    assert conf(ini, {"OS_CLOUD": "b"}).global_.auth_url == "http://b"
    with pytest.raises(ConfigError, match="'zz' not found"):
        conf(ini + "cloud=zz\n")
    with pytest.raises(ConfigError, match="no clouds.yaml"):
        conf(f"[Global]\nuse-clouds=true\nclouds-file={tmp_path / 'missing.yaml'}\n")


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (["region=R1"], ("R1",)),
        (["region=R1", "regions=R1", "regions=R2"], ("R1", "R2")),
        (["region=R1", "regions=R2", "regions=R3"], ("R1", "R2", "R3")),  # OCCM as coded: [R2, R3]
        (["regions=R1", "regions=R1"], ("R1",)),  # OCCM as coded: [R1, R1]
        (["region=RegionTwo", "regions=RegionTwo", "regions=RegionTwo"], ("RegionTwo",)),
        (["region=R1", "regions=R2", "regions", "regions=R3"], ("R1", "R3")),  # bare key resets
        (["region=R1", "regions="], ("R1",)),  # empty entries dropped
        (["REGION=R1", "Regions=R2", "rEgIoNs=R3"], ("R1", "R2", "R3")),
    ],
)
def test_region_search_list(lines: list[str], expected: tuple[str, ...]) -> None:
    cfg = conf("[Global]\n" + "\n".join(lines) + "\n")
    assert cfg.regions == expected
    assert cfg.default_region == expected[0]


def test_no_region_is_an_error() -> None:
    with pytest.raises(ConfigError, match="no region configured"):
        conf("[Global]\nauth-url=http://k\n")


def test_networking_and_metadata() -> None:
    cfg = conf("""\
        [Global]
        region = R
        [Networking]
        ipv6-support-disabled
        public-network-name = ext-a
        public_network_name = "ext b"
        Internal-Network-Name = int
        address-sort-order = 10.0.0.0/8, 192.168.0.0/16
        [Metadata]
        request-timeout = 1m30s
        """)
    n = cfg.networking
    assert n.ipv6_support_disabled is True
    assert n.public_network_name == ["ext-a", "ext b"]
    assert n.internal_network_name == ["int"]
    assert n.address_sort_order == "10.0.0.0/8, 192.168.0.0/16"
    assert cfg.metadata.search_order == "configDrive,metadataService"  # the default
    assert cfg.metadata.request_timeout == 90.0


def test_unknown_keys_and_sections_warn() -> None:
    cfg = conf("""\
        [Global]
        region = R
        bogus = 1
        [Global "other"]
        region = Z
        [Nonsense]
        x = y
        """)
    assert cfg.regions == ("R",)  # [Global "other"] ignored
    assert len(cfg.warnings) == 3
    assert "unknown key 'bogus'" in cfg.warnings[0]
    assert 'global "other"' in cfg.warnings[1]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[Global]\nregion\n", "blank value not supported"),
        ("[Global]\nregion=R\nuse-clouds=maybe\n", "failed to parse 'maybe' as bool"),
        ("[Global]\nregion=R\n[Metadata]\nrequest-timeout=10\n", "invalid duration"),
        ("region=R\n", "expected section header"),
        ("[Global\nregion=R\n", "expected right bracket"),
        ('[Global]\nregion="R\n', "string not terminated"),
        ("[Global]\nregion R\n", "expected '='"),
        ("[Global]\nregion=a\\q\n", "unknown escape sequence"),
        ('[Global ""]\n', "empty subsection name"),
        ("[Global] x\n", "expected EOL, EOF, or comment"),
        ("[Global]\n=R\n", "expected section header or variable declaration"),
        ("[Global]\nregion=R\x00\n", "NUL"),
    ],
)
def test_fatal_errors(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        conf(text)


def test_value_syntax() -> None:
    stmts = gcfg.parse(
        '\ufeff[Sec "Sub \\"q\\""]\n'
        '  a = plain value  ; comment\n'
        'b = "quoted ; # kept " tail # c\n'
        "c = one \\\n  two\n"
        "d =\n"
        "e\n"
        'f = x"  "y\\t\n'
        "# whole-line comment\r\n"
        "G_h-I = v\r\n"
    )
    assert stmts[0] == gcfg.Statement("sec", 'Sub "q"', None, None, 1)
    got = {s.name: s.value for s in stmts[1:]}
    assert got == {
        "a": "plain value",
        "b": "quoted ; # kept  tail",
        "c": "one   two",  # gcfg keeps the next line's indentation
        "d": "",
        "e": None,
        "f": "x  y\t",
        "g-h-i": "v",
    }


def test_metadata_search_order_errors() -> None:
    check_metadata_search_order("configDrive")
    check_metadata_search_order("metadataService, configDrive")
    with pytest.raises(ConfigError) as err:
        check_metadata_search_order("")
    assert str(err.value) == "invalid value in section [Metadata] with key `search-order`. Value cannot be empty"
    with pytest.raises(ConfigError) as err:
        check_metadata_search_order("value1,value2,value3")
    assert str(err.value) == (
        "invalid value in section [Metadata] with key `search-order`. Value cannot contain more than 2 elements"
    )
    with pytest.raises(ConfigError) as err:
        check_metadata_search_order("value1")
    assert str(err.value) == (
        'invalid element "value1" found in section [Metadata] with key `search-order`.'
        'Supported elements include "configDrive" and "metadataService"'
    )
    with pytest.raises(ConfigError, match="invalid element"):
        conf("[Global]\nregion=R\n[Metadata]\nsearch-order=configDrive,bogus\n")


@pytest.mark.parametrize(("text", "seconds"), [("0", 0.0), ("30s", 30.0), ("1m", 60.0), ("1.5h", 5400.0),
                                               ("-2ms", -0.002), ("1h2m3s", 3723.0), (".5s", 0.5)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "s", "1x", "1m 2s", ".s", "+"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_parse_bool() -> None:
    assert [parse_bool(v) for v in (None, "YES", "On", "1", "true")] == [True] * 5
    assert [parse_bool(v) for v in ("no", "OFF", "0", "False")] == [False] * 4


# --- properties -------------------------------------------------------------

names = st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,10}", fullmatch=True)
SURROGATES: tuple[Literal["Cs"]] = ("Cs",)  # hypothesis types category names as literals
values = st.text(st.characters(exclude_characters="\x00\r", exclude_categories=SURROGATES), max_size=20)


@given(st.lists(st.tuples(names, values), max_size=8), st.text(max_size=5).filter(lambda s: "\x00" not in s))
def test_gcfg_quote_round_trip(pairs: list[tuple[str, str]], comment: str) -> None:
    text = "[s]\n" + "".join(f"  {k} = {gcfg.quote(v)}  ;{comment.splitlines()[0] if comment.splitlines() else ''}\n"
                             for k, v in pairs)
    stmts = gcfg.parse(text)
    assert [(s.name, s.value) for s in stmts[1:]] == [(gcfg.normalise_name(k), v) for k, v in pairs]


@given(st.text(max_size=80))
def test_gcfg_never_crashes(text: str) -> None:
    try:
        stmts = gcfg.parse(text)
    except gcfg.GcfgSyntaxError as exc:
        assert exc.line >= 1
    else:
        assert all(s.section for s in stmts)


@given(st.text(alphabet="[]\"=;#\\ \nabRgionsGlobal-_", max_size=60))
def test_parse_config_only_raises_config_error(text: str) -> None:
    try:
        cfg = conf(text)
    except ConfigError:
        return
    assert cfg.regions and all(cfg.regions)


@given(st.lists(st.lists(st.sampled_from(["", "A", "B", "C", "D"]), max_size=4), max_size=3))
def test_merge_regions_properties(groups: list[list[str]]) -> None:
    merged = merge_regions(*groups)
    flat = [r for g in groups for r in g if r]
    assert len(merged) == len(set(merged)) and set(merged) == set(flat)
    assert list(merged) == sorted(set(flat), key=flat.index)  # first occurrence order
