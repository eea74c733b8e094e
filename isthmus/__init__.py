"""Isthmus: join OpenStack regions that share one Keystone into one cloud."""

__version__ = "0.1.0"
