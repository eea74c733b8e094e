"""Seeded request generation with Hypothesis: each API's own body schema, then mutated.

A request body starts as a value that fits the API's JSON schema (the schema is
the service's own: neutron-lib's attribute maps, Nova's and Cinder's validation
schemas, the Admin API's fields; see :mod:`tests.fuzz.apis`), and then one
mutation is applied to it: a field of the wrong type, a required field dropped,
an unknown field added, a boundary number, odd unicode, an oversized string,
deep nesting, or the whole body replaced by malformed JSON. Paths are every
method on every collection and member, with real ids and odd ones.

Hypothesis draws the requests; a seed fixes them (``requests_for(api, seed, n)``
gives the same list every time for the same code), so a failure is replayed by
(api, seed, count, index): Hypothesis's draw depends on how many it draws.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH")


@dataclass(frozen=True)
class Operation:
    """One thing an API does: ``path`` may hold ``{placeholders}`` that each
    target fills with its own ids (``{project}``, ``{network}``, ``{id}`` = an odd id)."""

    method: str
    path: str
    schema: Mapping[str, Any] | None = None  # the request body's JSON schema; None: no body expected


@dataclass(frozen=True)
class Api:
    name: str
    operations: tuple[Operation, ...]
    collections: tuple[str, ...]  # paths every method is tried on, with and without a member id
    query_keys: tuple[str, ...] = ()  # list filters and paging parameters worth abusing
    admin_share: float = 0.25  # how often a request goes with the admin token


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # with placeholders, and possibly a query string
    body: bytes | None = None
    admin: bool = False
    what: str = ""  # which generator made it (for the report)
    headers: tuple[tuple[str, str], ...] = field(default=())

    def show(self, limit: int = 300) -> str:
        body = "" if self.body is None else self.body[:limit].decode("utf-8", "backslashreplace")
        more = "" if self.body is None or len(self.body) <= limit else f"... ({len(self.body)} bytes)"
        who = "admin" if self.admin else "member"
        path = self.path if len(self.path) <= limit else f"{self.path[:limit]}... ({len(self.path)} chars)"
        return f"{self.method} {path} [{who}, {self.what}] {body}{more}"


# --- hostile values -----------------------------------------------------------------

BOUNDARY_INTS = (0, -1, 1, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**30, -(10**30))
BOUNDARY_FLOATS = (0.5, -0.0, 1e308, -1e308, 1e-308, math.inf, -math.inf, math.nan)
ODD_STRINGS = (
    "", " ", "\u0000", "a\u0000b", "\ud800", "\udfff", "\uffff", "\u202e\u0635\u0648\u0631\u0629", "😀" * 3,
    "Ω≈ç√∫", "%s%n%x", "../../etc/passwd", "'; DROP TABLE networks; --", "null", "None", "true", "0", "-1",
    "1e309", "\t\n\r", "<script>", "a" * 256, "\\", "/", "?", "#", "%", "%00", "%2F",
)
ODD_IDS = (
    "", " ", "0", "-1", "null", "None", "..", ".", "%2E%2E", "%2F", "%00", "%ff", "%E2%80%AE", "%F0%9F%98%80",
    "00000000-0000-0000-0000-000000000000", "8e9c4d3c-0000-4000-8000-000000000000",
    "8E9C4D3C-0000-4000-8000-000000000000", "8e9c4d3c00004000800000000000000", "{}", "[]", "1.5", "1e3",
    str(2**63), str(2**64), str(10**40), "-" + str(2**64), "x" * 300, "x" * 5000, "detail", "a;b", "a,b",
    "a%20b", "%0d%0aX-Injected:%201",
)


def odd_string() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(ODD_STRINGS),
        st.text(max_size=40),
        st.integers(255, 70_000).map(lambda n: "x" * n),  # oversized
    )


def number() -> st.SearchStrategy[Any]:
    return st.one_of(st.sampled_from(BOUNDARY_INTS), st.sampled_from(BOUNDARY_FLOATS), st.integers(), st.floats())


def hostile() -> st.SearchStrategy[Any]:
    """A value of any JSON type (and a few that JSON has no word for: NaN, Infinity)."""
    scalar = st.one_of(st.none(), st.booleans(), number(), odd_string())
    return st.one_of(
        scalar,
        st.lists(scalar, max_size=4),
        st.dictionaries(st.text(max_size=8), scalar, max_size=3),
        st.integers(20, 400).map(_nested_value),  # json.dumps recurses; deeper ones go as text
    )


def _nested_value(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = [value] if i % 2 else {"a": value}
    return value


# --- schema-driven values -----------------------------------------------------------

_STRATEGIES: dict[str, st.SearchStrategy[Any]] = {}


def _cached(kind: str, schema: Any, build) -> st.SearchStrategy[Any]:
    """Strategies are built once per schema (building them is most of the cost of a draw)."""
    key = kind + json.dumps(schema, sort_keys=True, default=str)
    if key not in _STRATEGIES:
        _STRATEGIES[key] = build()
    return _STRATEGIES[key]


def valid(schema: Mapping[str, Any] | bool, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values that fit ``schema`` (best effort; a near miss is a fine test case too)."""
    if depth == 0:
        return _cached("valid", schema, lambda: _valid(schema, 0))
    return _valid(schema, depth)


def _valid(schema: Mapping[str, Any] | bool, depth: int = 0) -> st.SearchStrategy[Any]:
    if schema is True or not isinstance(schema, Mapping) or depth > 6:
        return st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=8))
    if schema is False:
        return st.nothing()
    if "enum" in schema and schema["enum"]:
        return st.sampled_from(list(schema["enum"]))
    if "const" in schema:
        return st.just(schema["const"])
    for combinator in ("oneOf", "anyOf"):
        if schema.get(combinator):
            return st.one_of([valid(s, depth + 1) for s in schema[combinator]])
    if schema.get("allOf"):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            if isinstance(part, Mapping):
                merged.update(part)
        return valid(merged, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([valid({**schema, "type": k}, depth + 1) for k in kind])
    if kind == "object" or "properties" in schema:
        return _object(schema, depth)
    if kind == "array":
        items = schema.get("items", True)
        if isinstance(items, list):
            return st.tuples(*(valid(s, depth + 1) for s in items)).map(list)
        low = int(schema.get("minItems", 0))
        high = min(int(schema.get("maxItems", low + 3)), low + 3)
        return st.lists(valid(items, depth + 1), min_size=low, max_size=max(low, high))
    if kind == "integer":
        return st.integers(schema.get("minimum", -10), schema.get("maximum", 10_000))
    if kind == "number":
        return st.floats(schema.get("minimum", -10), schema.get("maximum", 10_000), allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "string":
        return _string(schema)
    return st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=8))


SAMPLES_BY_FORMAT = {
    "uuid": st.uuids().map(str),
    "ipv4": st.ip_addresses(v=4).map(str),
    "ipv6": st.ip_addresses(v=6).map(str),
    "cidr": st.sampled_from(["10.0.0.0/24", "192.168.7.0/28", "fd00::/64", "10.0.0.0/33", "0.0.0.0/0"]),
    "mac": st.sampled_from(["fa:16:3e:00:00:01", "FA:16:3E:AA:BB:CC", "00:00:00:00:00:00", "zz:zz"]),
    "date-time": st.sampled_from(["2025-01-01T00:00:00Z", "2025-13-40T99:99:99", "yesterday"]),
    "uri": st.sampled_from(["http://127.0.0.1/x", "not a uri"]),
}


def _string(schema: Mapping[str, Any]) -> st.SearchStrategy[str]:
    fmt = schema.get("format")
    if fmt in SAMPLES_BY_FORMAT:
        return SAMPLES_BY_FORMAT[fmt]
    low = int(schema.get("minLength", 0))
    high = int(schema.get("maxLength", low + 20))
    return st.text(min_size=low, max_size=max(low, min(high, low + 20)))


def _object(schema: Mapping[str, Any], depth: int) -> st.SearchStrategy[dict]:
    props: Mapping[str, Any] = schema.get("properties") or {}
    required = [k for k in schema.get("required") or () if k in props]
    optional = [k for k in props if k not in required]
    fixed = {k: valid(props[k], depth + 1) for k in required}

    @st.composite
    def build(draw) -> dict:
        out = draw(st.fixed_dictionaries(fixed)) if fixed else {}
        for key in draw(st.lists(st.sampled_from(optional), unique=True, max_size=len(optional))) if optional else ():
            out[key] = draw(valid(props[key], depth + 1))
        return out

    return build()


# --- mutations ----------------------------------------------------------------------

def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in a JSON value one could change (object keys and list items)."""
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += _paths(item, (*prefix, i))
    return out


def _replace(value: Any, path: tuple, new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


def _drop(value: Any, path: tuple) -> Any:
    if not path:
        return value
    if len(path) == 1:
        if isinstance(value, dict):
            return {k: v for k, v in value.items() if k != path[0]}
        return [v for i, v in enumerate(value) if i != path[0]]
    head = path[0]
    if isinstance(value, dict):
        return {**value, head: _drop(value[head], path[1:])}
    copy = list(value)
    copy[head] = _drop(copy[head], path[1:])
    return copy


def _add(value: Any, path: tuple, key: str, new: Any) -> Any:
    target = value
    for step in path:
        target = target[step]
    if isinstance(target, dict):
        return _replace(value, path, {**target, key: new})
    if isinstance(target, list):
        return _replace(value, path, [*target, new])
    return value


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


MALFORMED_BODIES = (
    b"", b"{", b"}", b"[", b"{\"a\":}", b"not json", b"\xff\xfe\x00", b"null", b"0", b"\"x\"", b"[]", b"{}",
    b"{\"a\": 1, \"a\": 2}", b"{\"x\": NaN}", b"{\"x\": Infinity}", b"\x00" * 8, "é".encode("latin-1"),
    b"{\"a\": \"\\ud800\"}", b"{\"a\": 1e99999}", b"{\"a\": 123456789012345678901234567890}",
)


def body_for(schema: Mapping[str, Any] | None) -> st.SearchStrategy[tuple[bytes | None, str]]:
    """(body, what was done to it)."""
    return _cached("body", schema, lambda: _body_for(schema))


@st.composite
def _body_for(draw, schema: Mapping[str, Any] | None) -> tuple[bytes | None, str]:
    if schema is None:
        choice = draw(st.sampled_from(("none", "none", "hostile", "malformed", "deep")))
        base: Any = None
    else:
        choice = draw(st.sampled_from(("valid", "wrong-type", "wrong-type", "drop", "unknown-field", "boundary",
                                       "odd-string", "oversized", "deep-field", "deep", "malformed", "hostile")))
        base = draw(valid(schema))
    if choice == "none":
        return None, "no body"
    if choice == "malformed":
        return draw(st.sampled_from(MALFORMED_BODIES)), "malformed JSON"
    if choice == "deep":
        depth = draw(st.sampled_from((100, 1000, 5000, 50_000)))
        opener, closer = draw(st.sampled_from((("[", "]"), ('{"a":', "}"))))
        return (opener * depth + "1" + closer * depth).encode(), f"nested {depth} deep"
    if choice == "hostile":
        return _dumps(draw(hostile())), "hostile body"
    if choice == "valid":
        return _dumps(base), "schema-valid"
    places = _paths(base)
    where = draw(st.sampled_from(places[1:] or places))
    label = "/".join(str(p) for p in where)
    if choice == "wrong-type":
        return _dumps(_replace(base, where, draw(hostile()))), f"wrong type at {label}"
    if choice == "drop":
        return _dumps(_drop(base, where)), f"dropped {label}"
    if choice == "unknown-field":
        containers = [p for p in places if _is_container(base, p)] or [()]
        at = draw(st.sampled_from(containers))
        key = draw(st.sampled_from(("unknown", "id", "tenant_id", "project_id", "", "\u0000", "x" * 300)))
        return _dumps(_add(base, at, key, draw(hostile()))), f"unknown field {key[:20]!r} at {'/'.join(map(str, at))}"
    if choice == "boundary":
        return _dumps(_replace(base, where, draw(number()))), f"boundary number at {label}"
    if choice == "odd-string":
        return _dumps(_replace(base, where, draw(st.sampled_from(ODD_STRINGS)))), f"odd string at {label}"
    if choice == "oversized":
        size = draw(st.sampled_from((256, 4096, 65_536, 200_000)))
        return _dumps(_replace(base, where, "x" * size)), f"{size}-char string at {label}"
    depth = draw(st.sampled_from((50, 500, 3000)))
    nested = ("[" * depth + "1" + "]" * depth).encode()
    text = _dumps(_replace(base, where, DEEP_MARK)).replace(_dumps(DEEP_MARK), nested)
    return text, f"{depth}-deep value at {label}"


DEEP_MARK = "\u2063deep\u2063"


def _is_container(value: Any, path: tuple) -> bool:
    for step in path:
        value = value[step]
    return isinstance(value, (dict, list))


# --- requests -----------------------------------------------------------------------

@st.composite
def query_for(draw, keys: tuple[str, ...]) -> str:
    if not keys or draw(st.integers(0, 2)):
        return ""
    from urllib.parse import quote

    pairs = []
    for key in draw(st.lists(st.sampled_from((*keys, "unknown_filter", "fields", "limit", "marker", "sort_key",
                                               "sort_dir")), min_size=1, max_size=3)):
        value = draw(st.one_of(st.sampled_from(ODD_IDS), st.sampled_from(ODD_STRINGS[:20]),
                               st.sampled_from(BOUNDARY_INTS).map(str)))
        pairs.append(f"{quote(key)}={quote(value.encode('utf-8', 'surrogatepass'), safe='%')}")
    return "?" + "&".join(pairs)


@st.composite
def request_for(draw, api: Api) -> Request:
    admin = draw(st.floats(0, 1)) < api.admin_share
    if draw(st.integers(0, 2)):  # an operation of the API's own, its body from its schema
        op = draw(st.sampled_from(api.operations))
        body, what = draw(body_for(op.schema))
        path = op.path
        if "{id}" in path:
            path = path.replace("{id}", draw(st.sampled_from(ODD_IDS)))
        query = draw(query_for(api.query_keys)) if op.method == "GET" else ""
        return Request(op.method, path + query, body, admin, what)
    # Every method on every collection and member, real ids and odd ones.
    method = draw(st.sampled_from(METHODS))
    collection = draw(st.sampled_from(api.collections))
    shape = draw(st.sampled_from(("collection", "collection/", "member", "member/extra", "odd")))
    if shape == "collection":
        path = collection
    elif shape == "collection/":
        path = collection + "/"
    else:
        own = "{" + collection.rstrip("/").rsplit("/", 1)[-1] + "}"  # a real one of the target's, where it has one
        member = draw(st.sampled_from(ODD_IDS)) if shape == "odd" else own
        path = f"{collection}/{member}" + ("/" + draw(st.sampled_from(ODD_IDS[:12])) if shape == "member/extra" else "")
    body, what = draw(body_for(None)) if method in ("POST", "PUT", "PATCH") else (None, "no body")
    query = draw(query_for(api.query_keys)) if method == "GET" else ""
    return Request(method, path + query, body, admin, f"{method} on {shape}; {what}")


def requests_for(api: Api, seed: int, count: int) -> list[Request]:
    """``count`` requests for ``api``, the same ones for the same seed and count."""
    drawn: list[Request] = []

    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate], derandomize=False,
              suppress_health_check=list(HealthCheck))
    @hypothesis_seed(seed)
    @given(request_for(api))
    def collect(request: Request) -> None:
        drawn.append(request)

    collect()
    return drawn[:count]
