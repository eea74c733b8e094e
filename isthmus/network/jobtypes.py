"""Job types of cross-region networking (shared by central, which queues them,
and the reconcilers, which run them)."""

# Make every regional copy of a network converge on central: copies exist where
# routed, attributes and subnets match, shadow ports mirror ports bound in
# other regions, ports deleted at central are gone.
NETWORK_SYNC = "network_sync"
# Make every regional copy of a project's security groups converge on central,
# including rules that admit remote-group members bound in other regions.
SECURITY_GROUP_SYNC = "security_group_sync"
