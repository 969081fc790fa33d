# SPDX-License-Identifier: MIT
"""A real agentix-server on the host for each test that asks for one (AGENTIX_SERVER: its
binary); nothing heavy runs in it."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "tests", "interop"))

from harness import Server, free_port  # noqa: E402

TOKEN = "python-client-token"


@pytest.fixture
def server():
    with Server(env={"AGENTIX_TOKEN": TOKEN}) as s:
        yield s


@pytest.fixture
def unused_url():
    return f"http://127.0.0.1:{free_port()}"
