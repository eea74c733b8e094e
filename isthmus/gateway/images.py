"""Images: one master Glance, replicated to other regions with the same UUID.

Why not one shared Glance: every region keeps booting from its own image store when
the master region or the WAN is down, image data crosses regions once (not on every
compute-host cache miss), and each region's Nova keeps talking to its local Glance
as it does without Isthmus. The same UUID everywhere keeps ``imageRef`` valid in
every region. CentralRegion's ``image`` endpoint is the master region's Glance.

The copy runs with the gateway's service credentials (admin: it keeps the image's
owner and visibility) and is idempotent: an image already active is left alone, a
half-made copy (queued) gets its data, a concurrent copy (409) is waited for.
"""

from __future__ import annotations

import logging
import uuid

from isthmus.polling import poll

LOG = logging.getLogger(__name__)

# Glance sets or owns these; they are not copied as properties.
_READ_ONLY = {"status", "checksum", "size", "virtual_size", "created_at", "updated_at", "file", "schema", "self",
              "direct_url", "locations", "os_hash_algo", "os_hash_value", "stores", "os_hidden"}
_CORE = ("name", "disk_format", "container_format", "visibility", "min_disk", "min_ram", "owner", "protected", "tags")


def ensure_image(session, image_id: str, source_region: str, target_region: str, interface: str = "public",
                 wait: float = 120.0) -> bool:
    """Make ``image_id`` active in ``target_region``; True if a copy was made."""
    src = {"service_type": "image", "region_name": source_region, "interface": interface}
    dst = {"service_type": "image", "region_name": target_region, "interface": interface}
    here = session.get(f"/v2/images/{image_id}", endpoint_filter=src, raise_exc=False)
    if here.status_code != 200:
        return False  # not a master image: Nova answers for it
    image = here.json()
    there = session.get(f"/v2/images/{image_id}", endpoint_filter=dst, raise_exc=False)
    if there.status_code == 200 and there.json().get("status") == "active":
        return False
    if there.status_code == 404:
        body = {k: image[k] for k in _CORE if image.get(k) is not None}
        body.update({k: v for k, v in image.items()
                     if k not in _READ_ONLY and k not in _CORE and k != "id" and not k.startswith("os_glance")})
        body["id"] = image_id
        created = session.post("/v2/images", json=body, endpoint_filter=dst, raise_exc=False)
        if created.status_code not in (201, 409):
            created.raise_for_status()
    state = session.get(f"/v2/images/{image_id}", endpoint_filter=dst).json().get("status")
    if state == "queued":
        data = session.get(f"/v2/images/{image_id}/file", endpoint_filter=src, stream=True)
        upload = session.put(f"/v2/images/{image_id}/file", endpoint_filter=dst, raise_exc=False,
                             data=data.iter_content(1 << 20), headers={"Content-Type": "application/octet-stream"})
        if upload.status_code not in (204, 409):
            upload.raise_for_status()
        LOG.info("image %s copied from %s to %s", image_id, source_region, target_region)

    def active() -> bool:
        status = session.get(f"/v2/images/{image_id}", endpoint_filter=dst).json().get("status")
        if status in ("killed", "deleted", "deactivated"):
            raise RuntimeError(f"copy of image {image_id} in {target_region} is {status}")
        return status == "active"

    return poll(active, wait, f"copy of image {image_id} to {target_region} active", interval=0.5)


def is_image_id(value: str) -> bool:
    try:
        uuid.UUID(value)
    except (ValueError, TypeError, AttributeError):
        return False
    return True


def visible_to(session, image_id: str, region: str, token: str, interface: str = "public") -> bool:
    """Whether ``token`` (the caller's) can read the image in ``region``'s Glance:
    the copy with service credentials is only for images the caller may use."""
    resp = session.get(f"/v2/images/{image_id}", raise_exc=False, authenticated=False,
                       headers={"X-Auth-Token": token},
                       endpoint_filter={"service_type": "image", "region_name": region, "interface": interface})
    return resp.status_code == 200


def image_refs(server: dict) -> list[str]:
    """Images a server create uses: imageRef and image-sourced block devices."""
    refs = []
    ref = server.get("imageRef")
    if isinstance(ref, str) and ref:
        refs.append(ref.rstrip("/").rsplit("/", 1)[-1])
    for bdm in server.get("block_device_mapping_v2") or []:
        if isinstance(bdm, dict) and bdm.get("source_type") == "image" and bdm.get("uuid"):
            refs.append(str(bdm["uuid"]))
    return list(dict.fromkeys(refs))
