"""Create-or-patch to the desired state, and prune what is no longer desired.

A managed object is patched only when a field the operator sets differs from
the stored one (fields the API server or others add are left alone), so a
re-run, a restart or a timer tick sends no write at all, and hand-made drift in
an operator-set field is undone. Generated objects (keys) are created once and
never patched; Jobs are never patched (their pod template is immutable).

Only what the operator owns is ever patched: an object already at a desired
name must carry this resource's controller owner reference (same namespace)
or its owner annotation and managed-by label (another namespace, where owner
references do not reach). Anything else raises :class:`NotOwned`, which the
reconciler turns into a condition: without this, whoever may create a
``CloudControllerConfig`` could have the operator overwrite
``kube-system/cloud-config`` (or any Secret at a name they choose) with
credentials of their own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from isthmus.operator import MANAGED_BY, model, objects
from isthmus.operator.crds import KINDS
from isthmus.operator.kube_client import Kube, encode_secret

LOG = logging.getLogger(__name__)
Obj = dict[str, Any]

# The fields of each kind the operator owns (besides labels, annotations and owners).
OWNED_FIELDS = {"Secret": ("data", "type"), "ConfigMap": ("data",), "Service": ("spec",),
                "Deployment": ("spec",), "Job": (), "EndpointRegistration": ("spec",)}
DEFAULT_OWNED = ("spec",)


class NotOwned(Exception):
    """An object at a desired name that this resource does not own: left alone."""

    def __init__(self, kind: str, namespace: str | None, name: str, owner: str, holder: str) -> None:
        super().__init__(f"{kind} {namespace}/{name} exists and is not managed by {owner} ({holder}); "
                         "the operator does not change it: delete it or choose another name")
        self.kind, self.namespace, self.name = kind, namespace, name


def _controller(meta: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((ref for ref in meta.get("ownerReferences") or [] if ref.get("controller")), None)


def owner_of(meta: Mapping[str, Any]) -> str:
    """Who holds an object, in words, for a condition's message."""
    ref = _controller(meta)
    if ref is not None:
        return f"controlled by {ref.get('kind')} {ref.get('name')}"
    mark = (meta.get("annotations") or {}).get(objects.OWNER_ANNOTATION)
    if mark and (meta.get("labels") or {}).get("app.kubernetes.io/managed-by") == MANAGED_BY:
        return f"managed for {mark}"
    return "not created by isthmus-operator"


def owns(desired: Obj, actual: Obj) -> bool:
    """Whether ``actual`` belongs to the resource that wants ``desired`` at its name."""
    want, have = desired["metadata"], actual["metadata"]
    wanted_ref = _controller(want)
    if wanted_ref is not None:
        ref = _controller(have)
        return (ref is not None and ref.get("kind") == wanted_ref["kind"] and ref.get("name") == wanted_ref["name"]
                # a uid on both sides must agree: a namesake resource's leftovers are not ours
                and (not ref.get("uid") or not wanted_ref.get("uid") or ref["uid"] == wanted_ref["uid"]))
    mark = (want.get("annotations") or {}).get(objects.OWNER_ANNOTATION)
    return bool(mark) and (have.get("annotations") or {}).get(objects.OWNER_ANNOTATION) == mark and (
        (have.get("labels") or {}).get("app.kubernetes.io/managed-by") == MANAGED_BY)


def covers(actual: Any, desired: Any) -> bool:
    """Every value set in ``desired`` is present and equal in ``actual``."""
    if isinstance(desired, Mapping):
        return isinstance(actual, Mapping) and all(covers(actual.get(k), v) for k, v in desired.items())
    if isinstance(desired, list):
        return (isinstance(actual, list) and len(actual) == len(desired)
                and all(covers(a, d) for a, d in zip(actual, desired, strict=True)))
    return actual == desired


def removed_keys(actual: Any, desired: Any) -> Obj:
    """Merge-patch nulls for the map keys ``actual`` has and ``desired`` no longer has (nested)."""
    out: Obj = {}
    if isinstance(actual, Mapping) and isinstance(desired, Mapping):
        for key, value in actual.items():
            if key not in desired:
                out[key] = None
            else:
                nested = removed_keys(value, desired[key])
                if nested:
                    out[key] = nested
    return out


def with_nulls(desired: Any, nulls: Obj) -> Any:
    if not nulls:
        return desired
    out = dict(desired)
    for key, value in nulls.items():
        inner = desired.get(key)
        out[key] = None if value is None else with_nulls(inner if isinstance(inner, Mapping) else {}, value)
    return out


def desired_patch(desired: Obj, actual: Obj) -> Obj | None:
    """The merge patch that brings ``actual`` to ``desired``, or None if nothing differs."""
    patch: Obj = {}
    meta_patch: Obj = {}
    for key in ("labels", "annotations"):
        wanted = desired["metadata"].get(key) or {}
        if not covers(actual["metadata"].get(key) or {}, wanted):
            meta_patch[key] = wanted
    if desired["metadata"].get("ownerReferences") and not covers(
            actual["metadata"].get("ownerReferences") or [], desired["metadata"]["ownerReferences"]):
        meta_patch["ownerReferences"] = desired["metadata"]["ownerReferences"]
    if meta_patch:
        patch["metadata"] = meta_patch
    for field in OWNED_FIELDS.get(desired["kind"], DEFAULT_OWNED):
        if field in desired and not covers(actual.get(field), desired[field]):
            patch[field] = desired[field]
    if desired["kind"] in KINDS and "spec" in desired:
        # Fix: a child resource's spec is the operator's alone, and a merge patch never
        # removes a key it does not name, so a field dropped from the umbrella (say
        # regions[].neutron.vniRanges) stayed in the child for good and "covers" saw no
        # difference. Null out the keys the stored spec has beyond the desired one; the
        # desired one is taken with the CRD's defaults, which an API server adds back.
        nulls = removed_keys(actual.get("spec"), model.defaulted_spec(desired["kind"], desired["spec"]))
        if nulls:
            patch["spec"] = with_nulls(patch.get("spec", desired["spec"]), nulls)
    return patch or None


_UNREAD: Any = object()  # ensure() reads the stored object itself


async def ensure(kube: Kube, desired: Obj, actual: Obj | None = _UNREAD) -> Obj:
    """Create ``desired`` or patch the stored object to it; return the stored object.
    ``actual``: the stored object (None: there is none) when the caller has just read it."""
    desired = encode_secret(desired)
    meta = desired["metadata"]
    if actual is _UNREAD:
        actual = await kube.get(desired["kind"], meta.get("namespace"), meta["name"])
    if actual is None:
        LOG.info("creating %s %s/%s", desired["kind"], meta.get("namespace"), meta["name"])
        return await kube.create(desired)
    if not owns(desired, actual):
        owner = (_controller(meta) or {}).get("kind", "") + " " + (_controller(meta) or {}).get("name", "")
        raise NotOwned(desired["kind"], meta.get("namespace"), meta["name"],
                       owner.strip() or (meta.get("annotations") or {}).get(objects.OWNER_ANNOTATION, "?"),
                       owner_of(actual["metadata"]))
    annotations = meta.get("annotations") or {}
    if annotations.get(objects.GENERATED) or annotations.get(objects.CREATE_ONLY):
        return actual
    patch = desired_patch(desired, actual)
    if patch is None:
        return actual
    LOG.info("patching %s %s/%s: %s", desired["kind"], meta.get("namespace"), meta["name"], sorted(patch))
    return await kube.patch(desired["kind"], meta.get("namespace"), meta["name"], patch) or actual


async def ensure_all(kube: Kube, desired: Iterable[Obj],
                     read: Mapping[tuple[str, str], Obj | None] | None = None) -> dict[tuple[str, str], Obj]:
    """Ensure each object in order; the stored objects by (kind, name). ``read``: those
    the caller has just read, by (kind, name), not read again."""
    out = {}
    for obj in desired:
        key = (obj["kind"], obj["metadata"]["name"])
        out[key] = await ensure(kube, obj, (read or {}).get(key, _UNREAD))
    return out


def owned_by(obj: Obj, owner: Obj) -> bool:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == owner["kind"] and ref.get("name") == owner["metadata"]["name"] and ref.get("controller"):
            return True
    return False


async def prune(kube: Kube, owner: Obj, kinds: Iterable[str], keep: Iterable[Obj],
                namespace: str | None = None) -> list[str]:
    """Delete the objects of ``kinds`` that ``owner`` manages but no longer wants
    (a disabled feature, a removed region, a superseded Job)."""
    wanted = {(o["kind"], o["metadata"]["name"]) for o in keep}
    selector = {"app.kubernetes.io/managed-by": MANAGED_BY,
                "app.kubernetes.io/instance": owner["metadata"]["name"]}
    where = namespace or owner["metadata"].get("namespace")
    deleted = []
    for kind in kinds:
        for obj in await kube.list(kind, where, selector):
            key = (kind, obj["metadata"]["name"])
            if key in wanted:
                continue
            # Same-namespace objects must be ours by owner reference; cross-namespace
            # ones (the CCM's Secret) by the owner annotation.
            if where == owner["metadata"].get("namespace"):
                if not owned_by(obj, owner):
                    continue
            elif (obj["metadata"].get("annotations") or {}).get(objects.OWNER_ANNOTATION) != objects.owner_mark(owner):
                continue
            LOG.info("deleting %s %s/%s (no longer desired)", kind, where, key[1])
            await kube.delete(kind, where, key[1])
            deleted.append(f"{kind}/{key[1]}")
    return deleted
