"""``--dataplane``'s preflight: one line naming what is missing."""

from isthmus.sandbox.dataplane.host import CAP_NET_ADMIN, CAP_SYS_ADMIN, preflight_problem

ALL_TOOLS = lambda tool: f"/usr/bin/{tool}"  # noqa: E731 - a one-line stand-in for shutil.which


def test_root_with_the_tools_passes():
    assert preflight_problem(1 << CAP_NET_ADMIN | 1 << CAP_SYS_ADMIN, ALL_TOOLS) is None


def test_without_cap_net_admin_one_line_names_it():
    problem = preflight_problem(1 << CAP_SYS_ADMIN, ALL_TOOLS)
    assert problem is not None
    assert "CAP_NET_ADMIN" in problem and "CAP_SYS_ADMIN" not in problem and "\n" not in problem


def test_missing_tools_name_their_packages():
    problem = preflight_problem(1 << CAP_NET_ADMIN | 1 << CAP_SYS_ADMIN, lambda t: None if t == "ping" else "/x")
    assert problem is not None
    assert "iputils-ping" in problem and "iproute2" not in problem


def test_without_nft_it_names_nftables():
    """Routers NAT with nftables: without it floating IPs and SNAT could not work."""
    problem = preflight_problem(1 << CAP_NET_ADMIN | 1 << CAP_SYS_ADMIN, lambda t: None if t == "nft" else "/x")
    assert problem is not None
    assert problem.endswith("nftables (run tools/setup.sh as root)") and "\n" not in problem
