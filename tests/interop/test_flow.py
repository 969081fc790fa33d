# SPDX-License-Identifier: MIT
"""Flow control of stream output, seen by a stock python-socketio client (no flow control of its
own): a client that reads slower than a call produces slows the call down instead of making
the server buffer everything; a call whose client went away pauses until it is resumed.

The server credits the worker for a call's items only once they have left its queue for the
client, so its memory per call stays at about a window (FRAME_OUT_WINDOW, 4 MiB); the client
sees nothing new on the wire."""

import logging
import os
import time

import msgpack

import harness
from harness import RssWatch, main, test, wait_until

_own_tests = len(harness._tests)
from test_rpc import Client, server  # noqa: E402

del harness._tests[_own_tests:]  # test_rpc's tests run in their own suite

MiB = 1 << 20


def flow_server():
    # Sanitizer builds keep freed memory in a quarantine (256 MB by default) that would count as
    # the server's here; no effect on other builds.
    opts = os.environ.get("ASAN_OPTIONS", "")
    return server(env={"ASAN_OPTIONS": (opts + ":" if opts else "") + "quarantine_size_mb=8"})


class SlowClient(Client):
    """Counts the data bytes of one call's items; its handler (on the read thread: in_order())
    sleeps `pause` seconds at the first item and `per_item` after each, so the client takes
    items slower than the call makes them and the connection backs up."""

    def __init__(self, server, transports, pause=0.0, per_item=0.0):
        self.pause, self.per_item = pause, per_item
        self.data_bytes, self.n_items, self.final = 0, 0, None
        super().__init__(server, transports)

    def _handler(self, ev):
        record = super()._handler(ev)
        if ev != "call:item":
            return record

        def on(data):
            m = msgpack.unpackb(data, raw=False)
            v = m["value"]
            if self.n_items == 0 and self.pause:
                time.sleep(self.pause)
            self.n_items += 1
            if "data" in v:
                self.data_bytes += len(v["data"])
            else:
                self.final = v
            if self.per_item:
                time.sleep(self.per_item)
            # Keep only the final map (no 100 MB of items in the test's memory).
            if "data" not in v:
                record(data)
        return on

    def wait_end(self, call_id, timeout):
        ev, m = self.terminal(call_id, timeout)
        assert ev == "call:end", (ev, m)
        assert self.final and self.final["exit_code"] == 0, self.final


@test
def slow_reader_gets_every_byte():
    """A reader that stalls for a while and then reads slowly: every byte arrives, the command
    waits meanwhile (the server never holds much more than a window of it)."""
    with flow_server() as s:
        for transports, size in ((["websocket"], 200 * MiB), (["polling"], 48 * MiB)):
            c = SlowClient(s, transports, pause=3.0, per_item=0.0005)
            watch = RssWatch(s.proc.pid)
            cid = c.start("sandbox::exec", shape="stream",
                          kwargs={"command": f"head -c {size} /dev/zero", "max_output": 1 << 40})
            c.wait_end(cid, timeout=120)
            rss = watch.stop()
            assert c.data_bytes == size, (transports, c.data_bytes)
            assert rss < 100 * MiB, f"{transports}: server VmRSS reached {rss / MiB:.0f} MiB"
            c.close()


@test
def detached_call_pauses_until_resumed():
    """The client goes away in the middle of a fast stream: the call does not fail and does not
    pile up its output in the server — it waits — and a client that resumes it gets the rest."""
    size = 160 * MiB
    with flow_server() as s:
        c = SlowClient(s, ["websocket"])
        cid = c.start("sandbox::exec", shape="stream",
                      kwargs={"command": f"head -c {size} /dev/zero", "max_output": 1 << 40})
        wait_until(lambda: c.data_bytes > 0, timeout=10, what="the first item")
        watch = RssWatch(s.proc.pid)
        # The aborted client's read thread may still decode one attachment whose event it
        # has dropped, and python-engineio logs that as an error: expected here.
        logging.getLogger("engineio.client").setLevel(logging.CRITICAL)
        c.sio.eio.disconnect(abort=True)
        time.sleep(2)  # long enough for the whole output, were it not held back
        rss = watch.stop()
        assert rss < 100 * MiB, f"server VmRSS reached {rss / MiB:.0f} MiB with no client attached"

        c2 = SlowClient(s, ["websocket"])
        c2.emit("resume", {"call_ids": [cid]})
        c2.wait_end(cid, timeout=120)
        # What was on its way to the first client when it dropped is lost with it; the rest comes.
        got = c.data_bytes + c2.data_bytes
        assert size - 32 * MiB <= got <= size, (c.data_bytes, c2.data_bytes)
        assert c2.data_bytes > size // 2, c2.data_bytes
        c2.close()


if __name__ == "__main__":
    main()
