"""Registry errors; each maps to one HTTP status in the Admin API."""


class RegistryError(Exception):
    status = 400


class Invalid(RegistryError, ValueError):
    """Bad input; the message names the field."""

    status = 400


class NotFound(RegistryError, LookupError):
    status = 404


class Conflict(RegistryError):
    status = 409


class UnknownAvailabilityZone(Invalid):
    """An availability-zone hint that is neither a known AZ nor a region."""

    status = 404

    def __init__(self, hint: str) -> None:
        super().__init__(f"availability_zone_hints: {hint!r} is neither an availability zone nor a region")
        self.hint = hint
