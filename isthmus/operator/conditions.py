"""``metav1.Condition`` lists: the rules every resource's status follows.

* Conditions are written whole (a JSON merge patch replaces lists), ``Ready``
  first, then by type, so ``kubectl get`` can show ``conditions[0]``.
* ``lastTransitionTime`` changes only when status, reason or message change.
* ``Ready`` is True when every other condition is True; otherwise it mirrors the
  highest-priority one: False+Error > False+Warning > False+Info > Unknown > True,
  the most recent transition winning ties (openstack-k8s-operators' lib-common rule).
  metav1.Condition has no severity field, so the severity of a False condition is
  read from its reason (:data:`ERROR_REASONS`, :data:`WARNING_REASONS`).
* A parent mirrors a child: True only if the child's Ready is True *for the
  child's current generation*; otherwise the child's Ready, prefixed with
  ``Kind name:``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"
READY = "Ready"

ERROR, WARNING, INFO = "Error", "Warning", "Info"

# Reasons of False conditions that need a person (the spec or an input is wrong).
ERROR_REASONS = frozenset({"Error", "InvalidSpec", "CreationFailed", "BackoffLimitExceeded", "RangeMismatch",
                           "ControlPlaneNotFound", "NotOwned", "NamespaceNotAllowed", "UpdateFailed",
                           "CertManagerMissing"})
# Reasons of False conditions that resolve once something else appears.
WARNING_REASONS = frozenset({"SecretNotFound", "NetworkAttachmentNotFound", "TLSSecretNotFound", "RegionHeld"})


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str = ""
    last_transition_time: str = ""
    observed_generation: int | None = None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Condition:
        return cls(raw["type"], raw.get("status", UNKNOWN), raw.get("reason", ""), raw.get("message", ""),
                   raw.get("lastTransitionTime", ""), raw.get("observedGeneration"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type, "status": self.status, "reason": self.reason,
                               "message": self.message, "lastTransitionTime": self.last_transition_time}
        if self.observed_generation is not None:
            out["observedGeneration"] = self.observed_generation
        return out

    def same_state(self, other: Condition) -> bool:
        return (self.status, self.reason, self.message) == (other.status, other.reason, other.message)


def true(type_: str, reason: str = "Ready", message: str = "") -> Condition:
    return Condition(type_, TRUE, reason, message or f"{type_[:-5] if type_.endswith('Ready') else type_} ready")


def false(type_: str, reason: str, message: str) -> Condition:
    return Condition(type_, FALSE, reason, message)


def unknown(type_: str, reason: str = "Requested", message: str = "") -> Condition:
    return Condition(type_, UNKNOWN, reason, message or "in progress")


def severity(condition: Condition) -> str | None:
    if condition.status != FALSE:
        return None
    if condition.reason in ERROR_REASONS:
        return ERROR
    if condition.reason in WARNING_REASONS:
        return WARNING
    return INFO


def priority(condition: Condition) -> int:
    """Lower is more important (shown first)."""
    if condition.status == FALSE:
        return {ERROR: 0, WARNING: 1, INFO: 2}[severity(condition) or INFO]
    return 3 if condition.status == UNKNOWN else 4


def worst(conditions: Iterable[Condition]) -> Condition | None:
    """The condition Ready should mirror; ties go to the most recent transition."""
    candidates = [c for c in conditions if c.type != READY]
    if not candidates:
        return None
    # ISO 8601 UTC timestamps of one format sort as text; newest first within a priority.
    newest_first = sorted(candidates, key=lambda c: c.last_transition_time, reverse=True)
    return min(newest_first, key=priority)


def sort_key(condition: Condition) -> tuple[int, str]:
    return (0 if condition.type == READY else 1, condition.type)


def summarise(conditions: Iterable[Condition], ready_message: str = "Setup complete") -> Condition:
    """The Ready condition for a set of sub-conditions."""
    subs = [c for c in conditions if c.type != READY]
    mirrored = worst(subs)
    if mirrored is None or mirrored.status == TRUE:
        return Condition(READY, TRUE, "Ready", ready_message)
    return Condition(READY, mirrored.status, mirrored.reason, mirrored.message)


def now_iso(now: datetime | None = None) -> str:
    moment = (now or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def merge(previous: Iterable[Mapping[str, Any]], desired: Iterable[Condition], generation: int | None,
          now: datetime | None = None) -> list[dict[str, Any]]:
    """The complete new ``conditions`` list: ``desired`` plus a computed Ready (unless
    given), transition times kept for unchanged conditions, Ready first. Conditions
    absent from ``desired`` are dropped (a disabled feature loses its condition)."""
    old = {c["type"]: Condition.from_dict(c) for c in previous}
    wanted = {c.type: c for c in desired}
    if READY not in wanted:
        wanted[READY] = summarise(wanted.values())
    stamp = now_iso(now)
    out = []
    for condition in sorted(wanted.values(), key=sort_key):
        before = old.get(condition.type)
        when = before.last_transition_time if before is not None and before.same_state(condition) else stamp
        out.append(replace(condition, last_transition_time=when, observed_generation=generation).to_dict())
    return out


def find(conditions: Iterable[Mapping[str, Any]], type_: str) -> Condition | None:
    for raw in conditions:
        if raw.get("type") == type_:
            return Condition.from_dict(raw)
    return None


def child_ready(child: Mapping[str, Any]) -> bool:
    """Ready True for the child's current spec (status.observedGeneration == generation)."""
    status = child.get("status") or {}
    ready = find(status.get("conditions") or [], READY)
    generation = (child.get("metadata") or {}).get("generation")
    current = generation is None or status.get("observedGeneration") == generation
    return bool(ready and ready.status == TRUE and current)


def mirror(type_: str, child: Mapping[str, Any] | None, label: str) -> Condition:
    """A parent's condition for one child (``label`` is e.g. ``Region RegionTwo``)."""
    if child is None:
        return unknown(type_, "Requested", f"{label}: not created yet")
    if child_ready(child):
        return true(type_)
    status = child.get("status") or {}
    ready = find(status.get("conditions") or [], READY)
    if ready is None:
        return unknown(type_, "Requested", f"{label}: setup started")
    if ready.status == TRUE:  # Ready, but for an older generation
        generation = (child.get("metadata") or {}).get("generation")
        return unknown(type_, "Requested", f"{label}: applying generation {generation}")
    return Condition(type_, ready.status, ready.reason, f"{label}: {ready.message}")


def mirror_many(type_: str, children: Iterable[tuple[str, Mapping[str, Any] | None]]) -> Condition:
    """One condition over several children (RegionsReady): the worst child's state, the
    message listing every child that is not ready."""
    mirrored = [mirror(type_, child, label) for label, child in children]
    failing = [c for c in mirrored if c.status != TRUE]
    if not failing:
        return true(type_)
    top = min(failing, key=priority)
    return Condition(type_, top.status, top.reason, "; ".join(c.message for c in sorted(failing, key=priority)))
