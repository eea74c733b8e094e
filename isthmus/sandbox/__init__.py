"""A real multi-region OpenStack on one machine, for trying Isthmus and testing it.

Product code never imports this package: it only starts stock OpenStack services
(plus the sandbox-only port binder) and points them at each other.
"""
