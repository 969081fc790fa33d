# SPDX-License-Identifier: MIT
"""RuntimeClient against a real agentix-server: every call shape, errors, cancel, deadlines,
and a call that outlives a dropped connection."""

import asyncio
import time

import pytest

from agentix import (ArgumentError, Cancelled, ContextNotFound, DeadlineExceeded, KernelNotFound, NoSuchCallable,
                     RemoteError, RuntimeClient, ServerUnreachable, SessionBusy, SessionNotFound, Unauthorized)
from conftest import TOKEN

pytestmark = pytest.mark.asyncio


async def test_unary_calls_return_values_and_raise_typed_errors(server):
    async with RuntimeClient(server.url, TOKEN) as rt:
        r = await rt.exec("echo out; echo err >&2; exit 3")
        assert r == {"exit_code": 3, "output": "out\nerr\n", "truncated": False, "timed_out": False}
        assert (await rt.fs("write", "/tmp/agentix-py-rt.txt", "a\nb\n", overwrite=True))["error"] is None
        assert (await rt.fs("read", "/tmp/agentix-py-rt.txt"))["content"] == "     1\ta\n     2\tb"
        with pytest.raises(NoSuchCallable) as e:
            await rt.call("nosuch::thing")
        assert e.value.type == "NoSuchCallable" and "nosuch" in e.value.message
        with pytest.raises(ArgumentError):
            await rt.call("fs::read", 42)
        # Many at once, all answered, each with its own result.
        results = await asyncio.gather(*(rt.exec(f"echo {i}") for i in range(50)))
        assert [r["output"] for r in results] == [f"{i}\n" for i in range(50)]


async def test_stream_items_arrive_in_order_then_the_end(server):
    async with RuntimeClient(server.url, TOKEN) as rt:
        items = [x async for x in await rt.exec_stream("for i in 1 2 3; do echo $i; sleep 0.05; done")]
        out = b"".join(x["data"] for x in items if "data" in x)
        assert out == b"1\n2\n3\n" and items[-1]["exit_code"] == 0


async def test_bidi_sends_to_the_inbox_and_reads_the_items(server):
    async with RuntimeClient(server.url, TOKEN) as rt:
        ch = await rt.bidi("sandbox::exec", "tr a-z A-Z")
        await ch.send({"stdin": b"hello "})
        await ch.send({"stdin": "world\n"})
        await ch.end()
        items = [x async for x in ch]
        assert b"".join(x["data"] for x in items if "data" in x) == b"HELLO WORLD\n"
        assert items[-1]["exit_code"] == 0


async def test_cancel_ends_the_call_with_cancelled(server):
    async with RuntimeClient(server.url, TOKEN) as rt:
        s = await rt.exec_stream("echo started; sleep 30")
        first = await s.__anext__()
        assert first["data"] == b"started\n"
        await s.cancel()
        with pytest.raises(Cancelled) as e:  # not the command's end 30 s later: its output would end it
            async for _ in s:
                pass
        assert e.value.cancelled


async def test_watch_reports_changes_and_stops_with_the_loop(server, tmp_path):
    async with RuntimeClient(server.url, TOKEN) as rt:
        seen = []

        async def poke():  # until the watch reports, it may not be in place yet
            while not seen:
                (tmp_path / "ready").write_text("x")
                await asyncio.sleep(0.02)

        poker = asyncio.ensure_future(poke())
        async for change in rt.watch(str(tmp_path)):
            seen.append((change["event"], change["path"][len(str(tmp_path)):]))
            if change["path"].endswith("/ready") and len(seen) == 1:
                (tmp_path / "sub").mkdir()
            elif change["path"].endswith("/sub"):
                (tmp_path / "sub" / "f").write_bytes(b"")  # in a directory made after the watch began
            elif change["path"].endswith("/f"):
                break  # leaving the loop cancels the watch
        await poker
        assert seen[-2:] == [("created", "/sub"), ("created", "/sub/f")], seen
        with pytest.raises(RemoteError) as e:
            async for _ in rt.watch(str(tmp_path / "nope")):
                pass
        assert e.value.type == "file_not_found"


async def test_a_deadline_ends_a_call_that_runs_too_long(server):
    async with RuntimeClient(server.url, TOKEN) as rt:
        with pytest.raises(DeadlineExceeded):
            await rt.call("sandbox::exec", "sleep 20", deadline=0.3)
        assert (await rt.exec("echo after"))["output"] == "after\n"  # the connection is fine


async def test_a_call_outlives_a_dropped_connection(server):
    async with RuntimeClient(server.url, TOKEN) as rt:
        task = asyncio.ensure_future(rt.exec("sleep 0.5; echo finished"))
        await asyncio.sleep(0.2)
        rt._ws.abort()  # the network drops; the client reconnects and resumes
        r = await asyncio.wait_for(task, 10)
        assert r["output"] == "finished\n"
        # And a call made while it reconnects goes out once it is back.
        rt._ws.abort()
        assert (await asyncio.wait_for(rt.exec("echo again"), 10))["output"] == "again\n"


async def test_errors_a_person_can_act_on(server, unused_url):
    with pytest.raises(Unauthorized, match="refused the token"):
        async with RuntimeClient(server.url, "wrong"):
            pass
    with pytest.raises(ServerUnreachable, match="No agentix runtime answers"):
        async with RuntimeClient(unused_url, TOKEN, connect_timeout=2):
            pass
    with pytest.raises(ValueError):
        RuntimeClient("127.0.0.1:8000", TOKEN)


async def test_code_contexts_keep_state_give_rich_results_and_stay_apart(server):
    async with RuntimeClient(server.url, TOKEN) as rt, RuntimeClient(server.url, TOKEN) as other:
        await rt.run_code("x = 20")
        seen = []
        ex = await rt.run_code("print('out')\nx + 1", on_item=seen.append)
        assert (ex.stdout, ex.text, ex.error) == ("out\n", "21", None), ex.items
        assert [i["type"] for i in seen] == [i["type"] for i in ex.items]
        ex = await rt.run_code("import matplotlib\nmatplotlib.use('module://matplotlib_inline.backend_inline')\n"
                               "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()")
        assert [m for m, _ in ex.images] == ["image/png"] and ex.images[0][1][:4] == b"\x89PNG", ex.items
        ex = await rt.run_code("1/0")
        assert ex.error["name"] == "ZeroDivisionError" and ex.text is None

        async with await rt.create_code_context(cwd="/tmp") as ctx:
            assert (await ctx.run("import os; os.getcwd()")).text == "'/tmp'"
            assert (await ctx.run("x")).error["name"] == "NameError"  # contexts do not share
            running = asyncio.ensure_future(ctx.run("import time\nwhile True: time.sleep(0.05)"))
            for _ in range(200):
                if any(c["id"] == ctx.id and c["running"] for c in await other.code_contexts()):
                    break
                await asyncio.sleep(0.01)
            await other.code_context(ctx.id).interrupt()
            assert (await running).error["name"] == "KeyboardInterrupt"
            assert (await ctx.run("2 * 3", timeout=5)).text == "6"
            await ctx.run("kept = 1")
            await ctx.restart()
            assert (await ctx.run("kept")).error["name"] == "NameError"
        with pytest.raises(ContextNotFound):
            await rt.code_context(ctx.id).run("1")
        with pytest.raises(KernelNotFound, match="python3"):
            await rt.create_code_context(language="cobol")
        assert [c["id"] for c in await rt.code_contexts()] == ["default-python3"]
        await rt.code_context("default-python3").delete()


async def test_a_shell_session_keeps_its_state_across_runs_and_clients(server):
    async with RuntimeClient(server.url, TOKEN) as rt, RuntimeClient(server.url, TOKEN) as other:
        sh = await rt.open_shell(cwd="/")
        assert await sh.run("cd /tmp && export AGX_PY=3") == {"output": "", "exit_code": 0, "timed_out": False,
                                                               "truncated": False, "ended": False}
        assert (await sh.run("pwd; echo $AGX_PY"))["output"] == "/tmp\n3\n"
        hung = await sh.run("echo a; sleep 60", timeout=0.5)
        assert hung["timed_out"] and hung["output"].startswith("a\n")
        # A prompt answered from another client while the run waits; a second run is refused.
        reading = asyncio.ensure_future(sh.run("read -r x; echo \"got $x\""))
        for _ in range(200):
            if any(s["id"] == sh.id and s["running"] for s in await other.list_shells()):
                break
            await asyncio.sleep(0.01)
        with pytest.raises(SessionBusy):
            await sh.run("true")
        await other.shell(sh.id).input("py\n")
        assert (await reading)["output"] == "got py\n"
        assert [(s["id"], s["cwd"]) for s in await other.list_shells()] == [(sh.id, "/tmp")]
        r = await sh.run("exit 9")
        assert r["ended"] and r["exit_code"] == 9
        with pytest.raises(SessionNotFound):
            await sh.run("true")
        assert await rt.list_shells() == []
