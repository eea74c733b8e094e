"""Commands of ``openstack multiregion`` (Admin API v1.0)."""
