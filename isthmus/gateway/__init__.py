"""isthmus-gateway: one Nova v2.1 / Cinder v3 endpoint over every region.

An asyncio reverse proxy (aiohttp). Requests go to the region that owns the
resource (routing table in the Isthmus registry) with their bodies intact and
the user's token; lists fan out to every region concurrently and are merged.
See docs/gateway.md.
"""
