# SPDX-License-Identifier: MIT
"""RuntimeClient against agentix-server over TLS: a certificate from a CA (as agentd's runtime
CA issues) verifies with that CA; another CA, a self-signed impostor on the same address, or no
CA at all are refused; given a sandbox id, a certificate of the CA that names another sandbox
(a neighbour on the same swarm node's address), or this sandbox on another address, is
refused."""

import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

from agentix import RuntimeClient, ServerUnreachable
from conftest import TOKEN
from harness import free_port, server_binary

pytestmark = pytest.mark.asyncio


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki():
    d = tempfile.mkdtemp(prefix="agentix-py-tls-")
    p = lambda name: os.path.join(d, name)  # noqa: E731
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", p("ca.key"), "-out", p("ca.crt"), "-days", "1", "-subj", "/CN=test CA",
            "-addext", "basicConstraints=critical,CA:TRUE")
    openssl("req", *ec, "-keyout", p("server.key"), "-out", p("server.csr"), "-subj", "/CN=127.0.0.1")
    with open(p("ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", p("server.csr"), "-CA", p("ca.crt"), "-CAkey", p("ca.key"), "-CAcreateserial",
            "-out", p("server.crt"), "-days", "1", "-extfile", p("ext"))
    # As agentd issues them: the address and the sandbox's name.
    for sandbox, ip in (("a1a1", "127.0.0.1"), ("b2b2", "127.0.0.1"), ("a1a1-away", "127.0.0.2")):
        openssl("req", *ec, "-keyout", p(f"{sandbox}.key"), "-out", p(f"{sandbox}.csr"), "-subj", f"/CN={ip}")
        with open(p(f"{sandbox}.ext"), "w") as f:
            f.write(f"subjectAltName=IP:{ip},DNS:{sandbox.split('-')[0]}.sandbox.agentix\n")
        openssl("x509", "-req", "-in", p(f"{sandbox}.csr"), "-CA", p("ca.crt"), "-CAkey", p("ca.key"),
                "-CAcreateserial", "-out", p(f"{sandbox}.crt"), "-days", "1", "-extfile", p(f"{sandbox}.ext"))
    openssl("req", "-x509", *ec, "-keyout", p("impostor.key"), "-out", p("impostor.crt"), "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1")
    yield p
    shutil.rmtree(d, ignore_errors=True)


class TlsServer:
    def __init__(self, cert, key):
        self.port = free_port()
        self.proc = subprocess.Popen([server_binary(), "--host", "127.0.0.1", "--port", str(self.port),
                                      "--tls-cert", cert, "--tls-key", key],
                                     env=dict(os.environ, AGENTIX_TOKEN=TOKEN), stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        self.url = f"https://127.0.0.1:{self.port}"
        for _ in range(400):
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                break
            except OSError:
                time.sleep(0.025)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture
def tls_server(pki):
    s = TlsServer(pki("server.crt"), pki("server.key"))
    yield s
    s.stop()


def read(path):
    with open(path) as f:
        return f.read()


async def test_a_runtime_whose_certificate_chains_to_the_ca_is_used(tls_server, pki):
    async with RuntimeClient(tls_server.url, TOKEN, ca=read(pki("ca.crt"))) as rt:
        assert (await rt.exec("echo over-tls"))["output"] == "over-tls\n"


async def test_the_ca_may_come_from_agentix_ca_file(tls_server, pki, monkeypatch):
    monkeypatch.setenv("AGENTIX_CA_FILE", pki("ca.crt"))
    async with RuntimeClient(tls_server.url, TOKEN) as rt:
        assert (await rt.exec("echo from-env"))["output"] == "from-env\n"


async def test_another_ca_refuses_the_runtime(tls_server, pki):
    with pytest.raises(ServerUnreachable) as e:
        async with RuntimeClient(tls_server.url, TOKEN, ca=read(pki("impostor.crt")), reconnect=False):
            pass
    assert "does not verify" in str(e.value), e.value


async def test_an_impostor_on_the_same_address_is_refused(pki):
    impostor = TlsServer(pki("impostor.crt"), pki("impostor.key"))
    try:
        with pytest.raises(ServerUnreachable) as e:
            async with RuntimeClient(impostor.url, TOKEN, ca=read(pki("ca.crt")), reconnect=False):
                pass
        assert "does not verify" in str(e.value), e.value
    finally:
        impostor.stop()


async def test_no_ca_no_connection(tls_server, monkeypatch):
    monkeypatch.delenv("AGENTIX_CA_FILE", raising=False)
    with pytest.raises(ValueError) as e:
        RuntimeClient(tls_server.url, TOKEN)
    assert "CA" in str(e.value)


async def test_given_its_id_the_sandboxs_own_certificate_is_used(pki):
    server = TlsServer(pki("a1a1.crt"), pki("a1a1.key"))
    try:
        async with RuntimeClient(server.url, TOKEN, ca=read(pki("ca.crt")), sandbox_id="a1a1") as rt:
            assert (await rt.exec("echo named"))["output"] == "named\n"
    finally:
        server.stop()


async def test_a_neighbours_certificate_on_the_same_address_is_refused(pki):
    # Genuine (the CA's), for this address, but for sandbox b2b2: without the id it would pass.
    server = TlsServer(pki("b2b2.crt"), pki("b2b2.key"))
    try:
        with pytest.raises(ServerUnreachable) as e:
            async with RuntimeClient(server.url, TOKEN, ca=read(pki("ca.crt")), sandbox_id="a1a1", reconnect=False):
                pass
        assert "another sandbox than a1a1" in str(e.value), e.value
    finally:
        server.stop()


async def test_the_sandboxs_certificate_for_another_address_is_refused(pki):
    # a1a1's name, but made for 127.0.0.2: its key served from here is not a1a1's runtime.
    server = TlsServer(pki("a1a1-away.crt"), pki("a1a1-away.key"))
    try:
        with pytest.raises(ServerUnreachable) as e:
            async with RuntimeClient(server.url, TOKEN, ca=read(pki("ca.crt")), sandbox_id="a1a1", reconnect=False):
                pass
        assert "another address" in str(e.value), e.value
    finally:
        server.stop()


async def test_an_id_that_is_no_dns_label_is_refused():
    with pytest.raises(ValueError):
        RuntimeClient("https://127.0.0.1:1", TOKEN, ca="x", sandbox_id="a.b")
