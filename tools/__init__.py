"""Developer scripts; a package so the unit tests can import the Python ones."""
