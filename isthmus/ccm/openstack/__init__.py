"""The CCM's providers, OpenStack side: one Keystone session and per-region clients
(``clients``), a node's server found across regions (``instances``, ``providerid``)
and its addresses (``addresses``), and Octavia load balancers per region
(``loadbalancer``: a pure planner, ``plan``, and a client that converges one
region, ``octavia``)."""
