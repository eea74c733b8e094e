"""LoadBalancer Services on Octavia, one load balancer per region of the Service's nodes.

``options`` reads ``[LoadBalancer]``; ``model`` turns Services and Nodes into
plain records and parses annotations; ``plan`` computes the desired load
balancers (pure); ``octavia`` reads and converges one region's Octavia and
floating IPs; ``controller`` is the Kubernetes side (finalizer, status, events).
"""
