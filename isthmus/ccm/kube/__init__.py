"""The CCM's controller framework, Kubernetes side: informers (LIST then WATCH into a
cache), the work queue and its per-key backoff, the Node and Service API adapters,
and the event recorder. Controllers (``isthmus.ccm.controllers``) are built on it;
leader election is the Lease elector the operator shares (``isthmus.kube.leader``).

They talk to the API server through the official ``kubernetes`` client only, so
tests against an emulator exercise the same calls as a real cluster."""
