"""Send generated requests to a stock service and to its Isthmus counterpart, and compare.

A *pair* is (API, stock endpoint, Isthmus endpoint). Each request goes to the
stock endpoint first, then to the Isthmus one, each with its own ids filled in
(every target has its own network, subnet, port, security group, ...). A
**diff** is a request the stock service answered below 500 and Isthmus with
500 or more (or not at all): a 5xx Isthmus added. A pair without a stock
endpoint (the Admin API) is held to its own spec: no 5xx at all.

5xx that the stock service gives itself are counted and listed, never hidden
(docs/fuzzing.md keeps the list).
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.fuzz.generate import Api, Request, requests_for

# A member of a collection the target has none of: an id that exists nowhere.
MISSING_ID = "8e9c4d3c-0000-4000-8000-00000000f022"
_PLACEHOLDER = re.compile(r"\{[a-z_-]+\}")
NO_ANSWER = 599  # a timeout or a dropped connection, counted as a 5xx
TIMEOUT = 60.0


@dataclass
class Endpoint:
    """Where one side of a pair answers: ``send(method, path, body, headers) -> status``
    with ``fill`` naming its own ids, per token kind ("member"/"admin")."""

    name: str
    send: Callable[[str, str, bytes | None, Mapping[str, str]], int]
    tokens: Mapping[str, str]
    fill: Mapping[str, Mapping[str, str]]  # token kind -> {placeholder: value}
    prefix: str = ""  # before every path, placeholders filled too (Cinder's "/{project}")

    def answer(self, request: Request) -> int:
        who = "admin" if request.admin else "member"
        path, body = self.prefix + request.path, request.body
        for mark, value in self.fill[who].items():
            path = path.replace(mark, value)
            if body is not None:
                body = body.replace(mark.encode(), value.encode())
        path = _PLACEHOLDER.sub(MISSING_ID, path)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.tokens.get(who):
            headers["X-Auth-Token"] = self.tokens[who]
        try:
            return self.send(request.method, path, body, headers)
        except (OSError, http.client.HTTPException):  # no answer is an answer: counted, never raised
            return NO_ANSWER


def http_sender(base_url: str, timeout: float = TIMEOUT) -> Callable[..., int]:
    """Plain http.client, one connection per request: a server that answers before
    reading the body (gunicorn's 414 for a long request line) and closes is still
    heard, where a client that fails on the unsent body would report no answer."""
    from urllib.parse import urlsplit

    from requests.utils import requote_uri

    base = urlsplit(base_url)
    host = base.hostname
    assert host is not None, base_url

    def send(method: str, path: str, body: bytes | None, headers: Mapping[str, str]) -> int:
        conn = http.client.HTTPConnection(host, base.port, timeout=timeout)
        try:
            conn.putrequest(method, requote_uri(base.path.rstrip("/") + path), skip_accept_encoding=True)
            for name, value in {**headers, "Content-Length": str(len(body or b""))}.items():
                conn.putheader(name, value)
            conn.endheaders()
            try:
                if body:
                    conn.send(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # answered (and closed) before the body was read: read that answer
            return conn.getresponse().status
        finally:
            conn.close()

    return send


@dataclass
class Pair:
    name: str
    api: Api
    isthmus: Endpoint
    stock: Endpoint | None = None  # None: no 5xx at all is the baseline


@dataclass
class Outcome:
    index: int
    request: Request
    stock: int | None
    isthmus: int

    @property
    def is_diff(self) -> bool:
        return self.isthmus >= 500 and (self.stock is None or self.stock < 500)


@dataclass
class PairResult:
    pair: str
    api: str
    seed: int
    count: int = 0  # how many were drawn with the seed (the draw depends on it too)
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def diffs(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.is_diff]

    @property
    def stock_5xx(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.stock is not None and o.stock >= 500]

    def classes(self, side: str) -> Counter:
        counts: Counter = Counter()
        for o in self.outcomes:
            status = o.stock if side == "stock" else o.isthmus
            if status is not None:
                counts[f"{status // 100}xx"] += 1
        return counts

    def replay(self, outcome: Outcome) -> str:
        return (f"{self.pair} #{outcome.index}: stock {outcome.stock}, isthmus {outcome.isthmus}: "
                f"{outcome.request.show()}\n    replay: .venv/bin/python tools/fuzz.py replay --pair {self.pair} "
                f"--seed {self.seed} --count {self.count} --index {outcome.index}")


def run(pair: Pair, seed: int, count: int, requests: list[Request] | None = None,
        deadline: float | None = None, stop: Callable[[], bool] = lambda: False) -> PairResult:
    """Every request to the stock endpoint then to Isthmus; stops early only at ``deadline``
    (time.monotonic()) or once ``stop()``, so a campaign stays bounded in time as well as in count."""
    started = time.monotonic()
    result = PairResult(pair.name, pair.api.name, seed, count)
    for index, request in enumerate(requests if requests is not None else requests_for(pair.api, seed, count)):
        if (deadline is not None and time.monotonic() > deadline) or stop():
            break
        stock = pair.stock.answer(request) if pair.stock is not None else None
        result.outcomes.append(Outcome(index, request, stock, pair.isthmus.answer(request)))
    result.seconds = time.monotonic() - started
    return result


def table(results: list[PairResult]) -> str:
    """Per pair: requests, 2xx/4xx/5xx of stock and of Isthmus, diffs."""
    head = ("pair", "seed", "requests", "stock 2xx/4xx/5xx", "isthmus 2xx/4xx/5xx", "diffs", "seconds")
    rows = [head]
    for r in results:
        def cls(side: str) -> str:
            if side == "stock" and all(o.stock is None for o in r.outcomes):  # noqa: B023 - called within this iteration
                return "- (own spec)"
            c = r.classes(side)  # noqa: B023 - called within this iteration
            return f"{c['2xx']}/{c['4xx']}/{c['5xx']}"
        rows.append((r.pair, str(r.seed), str(len(r.outcomes)), cls("stock"), cls("isthmus"), str(len(r.diffs)),
                     f"{r.seconds:.0f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |" for row in rows]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def report(results: list[PairResult]) -> dict[str, Any]:
    """A JSON-able report: figures, every diff and every stock 5xx with what to replay."""
    return {
        "table": table(results),
        "pairs": [{
            "pair": r.pair, "seed": r.seed, "requests": len(r.outcomes), "seconds": round(r.seconds, 1),
            "stock": dict(r.classes("stock")), "isthmus": dict(r.classes("isthmus")),
            "diffs": [r.replay(o) for o in r.diffs],
            # The whole request too: a replay by seed is exact for the same code and Hypothesis.
            "diff_requests": [{"index": o.index, "method": o.request.method, "path": o.request.path,
                               "admin": o.request.admin, "what": o.request.what,
                               "body_base64": base64.b64encode(o.request.body).decode()
                               if o.request.body is not None else None} for o in r.diffs],
            "stock_5xx": [f"#{o.index} {o.stock}: {o.request.show(120)}" for o in r.stock_5xx],
        } for r in results],
    }


def dump(results: list[PairResult], path) -> None:
    with open(path, "w") as out:
        json.dump(report(results), out, indent=2)
