"""The sandbox's private CA (isthmus/sandbox/tls.py)."""

import threading

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from isthmus.sandbox import tls


def test_concurrent_callers_get_one_ca_that_signed_the_server_certificate(tmp_path):
    # The gateway and the Admin API start side by side and both ask for it.
    threads = [threading.Thread(target=tls.ensure, args=(tmp_path,)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    made = tls.ensure(tmp_path)
    ca = x509.load_pem_x509_certificate(made.ca.read_bytes())
    cert = x509.load_pem_x509_certificate(made.cert.read_bytes())
    public = ca.public_key()
    assert isinstance(public, ec.EllipticCurvePublicKey)
    cert.verify_directly_issued_by(ca)  # raises unless the CA's key signed it
    before = made.ca.read_bytes()
    assert tls.ensure(tmp_path).ca.read_bytes() == before  # made once, kept
