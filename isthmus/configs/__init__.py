"""Pure configuration rendering shared by the sandbox and the Kubernetes operator.

Every function here maps plain values (frozen dataclasses) to INI sections or
text; nothing reads files, starts processes or knows about the sandbox's
Layout or a Kubernetes object. The sandbox (``isthmus/sandbox/*``) and the
operator (``isthmus/operator/objects/``) both call these functions, so the
files a sandbox runs and the ConfigMaps/Secrets an operator writes cannot
drift apart (tests/unit/configs/test_sandbox_parity.py and test_tls_parity.py check it).
"""
