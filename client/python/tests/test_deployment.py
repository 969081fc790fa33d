# SPDX-License-Identifier: MIT
"""AgentdDeployment and session() against a real agentd (on a private bus with the project's
policy) and a real dockerd: a sandbox for a block, deleted after it, also when it raises."""

import asyncio
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "agentd"))
from agentd_env import BUSYBOX, Agentd, bundle, managed_containers  # noqa: E402

from agentix import AgentdDeployment, AgentdError, SandboxConfig, SandboxGone, session  # noqa: E402



@pytest.fixture(scope="module")
def agentd():
    bundle()
    before = managed_containers()
    a = Agentd("python")
    old = os.environ.get("DBUS_SYSTEM_BUS_ADDRESS")
    os.environ["DBUS_SYSTEM_BUS_ADDRESS"] = a.address
    yield a
    if old is None:
        del os.environ["DBUS_SYSTEM_BUS_ADDRESS"]
    else:
        os.environ["DBUS_SYSTEM_BUS_ADDRESS"] = old
    assert a.stop() == 0, a.log_text()[-2000:]
    assert managed_containers() <= before, "the tests left sandboxes behind"


@pytest.mark.asyncio
async def test_a_session_runs_code_and_deletes_its_sandbox(agentd):
    deployment = AgentdDeployment()
    config = SandboxConfig(image=BUSYBOX, bundle=bundle(), memory=256 << 20, env={"GREETING": "hello"})
    async with session(deployment, config, initial_files=[("/work/input.txt", b"42\n")]) as sandbox:
        info = await deployment.get(sandbox.id)
        assert info.state == "running" and info.image == BUSYBOX and info.token
        assert info.pool == ""  # agentd here has no warm pool: made for this create
        assert "listening on port 8000" in await deployment.logs(sandbox.id, 20)
        stats = await deployment.stats(sandbox.id)
        assert stats["memory_limit"] == 256 << 20 and stats["memory_current"] > 0, stats
        assert stats["pids_current"] >= 1 and isinstance(stats["cpu_percent"], float), stats
        r = await sandbox.aexecute("echo $GREETING; python3 -c 'print(int(open(\"/work/input.txt\").read()) + 1)'")
        assert (r.output, r.exit_code) == ("hello\n43\n", 0)
        (down,) = await sandbox.adownload_files(["/work/input.txt"])
        assert down.content == b"42\n"
        assert sandbox.id in [s.id for s in await deployment.list()]
        sid = sandbox.id
    with pytest.raises(SandboxGone):
        await deployment.get(sid)
    assert f"agentix-{sid}" not in managed_containers()
    deployment.close()


@pytest.mark.asyncio
async def test_pause_resume_and_a_snapshot_a_create_can_name(agentd):
    deployment = AgentdDeployment()
    tag = "agentix-test/py-snap:1"
    try:
        async with session(deployment, SandboxConfig(image=BUSYBOX, bundle=bundle())) as sandbox:
            await sandbox.aexecute("echo from-python > /snap.txt")
            await deployment.pause(sandbox.id)
            assert (await deployment.get(sandbox.id)).state == "paused"
            await deployment.resume(sandbox.id)
            assert (await deployment.get(sandbox.id)).state == "running"
            # A web server in the sandbox, through its port's URL.
            await sandbox.aexecute("mkdir -p /www && echo from-the-sandbox > /www/i.txt && cd /www && "
                                   "(python3 -m http.server 8080 >/dev/null 2>&1 &)")
            url, token = await deployment.port_url(sandbox.id, 8080)
            assert url.endswith("/proxy/8080/")
            import urllib.error
            import urllib.request

            def fetch(headers):
                try:
                    with urllib.request.urlopen(urllib.request.Request(url + "i.txt", headers=headers), timeout=5) as r:
                        return r.status, r.read()
                except urllib.error.HTTPError as e:
                    return e.code, b""
                except OSError:
                    return 0, b""
            for _ in range(100):
                got = fetch({"Authorization": f"Bearer {token}"})
                if got[0] == 200:
                    break
                await asyncio.sleep(0.1)
            assert got == (200, b"from-the-sandbox\n"), got
            assert fetch({})[0] == 401
            assert await deployment.snapshot(sandbox.id, tag=tag) == tag
            (snap,) = [s for s in await deployment.list_snapshots() if s.image == tag]
            assert snap.sandbox_id == sandbox.id and snap.owner == 0 and snap.size > 0
        async with session(deployment, SandboxConfig(image=tag, bundle=bundle())) as again:
            assert (await again.aexecute("cat /snap.txt")).output == "from-python\n"
    finally:
        await deployment.delete_snapshot(tag)
    assert tag not in [s.image for s in await deployment.list_snapshots()]
    deployment.close()


def runsc_registered():
    import json
    import subprocess
    r = subprocess.run(["docker", "info", "--format", "{{json .Runtimes}}"], capture_output=True, text=True)
    return r.returncode == 0 and "runsc" in json.loads(r.stdout)


@pytest.mark.asyncio
@pytest.mark.skipif(not runsc_registered(), reason="dockerd has no runsc (scripts/dockerd.sh registers it)")
async def test_a_sandbox_under_gvisor(agentd):
    deployment = AgentdDeployment()
    config = SandboxConfig(image=BUSYBOX, bundle=bundle(), runtime="runsc")
    async with session(deployment, config) as sandbox:
        r = await sandbox.aexecute("uname -r; python3 -c 'print(6 * 7)'")
        # gVisor's own kernel answers, not the host's.
        assert (r.output, r.exit_code) == ("4.4.0\n42\n", 0), r.output
    deployment.close()


@pytest.mark.asyncio
async def test_an_egress_list_goes_to_agentd(agentd):
    import json
    import subprocess
    deployment = AgentdDeployment()
    config = SandboxConfig(image=BUSYBOX, bundle=bundle(), egress=[])  # no network at all
    async with session(deployment, config) as sandbox:
        info = json.loads(subprocess.run(["docker", "inspect", f"agentix-{sandbox.id}"], capture_output=True,
                                         text=True, check=True).stdout)[0]
        assert info["Config"]["Labels"]["org.agentix.egress"] == ""
        assert list(info["NetworkSettings"]["Networks"]) == ["agentix-egress"]
        r = await sandbox.aexecute("echo still answering")
        assert (r.output, r.exit_code) == ("still answering\n", 0)
    with pytest.raises(AgentdError) as e:
        await deployment.create(SandboxConfig(image=BUSYBOX, bundle=bundle(), egress=["10.0.0.0/99"]))
    assert e.value.name == "InvalidConfig" and "'10.0.0.0/99' is not a CIDR" in e.value.message
    deployment.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("runtime", ["runc", "runsc"])
async def test_the_deepagents_operations_under_each_runtime(agentd, runtime):
    if runtime == "runsc" and not runsc_registered():
        pytest.skip("dockerd has no runsc (scripts/dockerd.sh registers it)")
    deployment = AgentdDeployment()
    async with session(deployment, SandboxConfig(image=BUSYBOX, bundle=bundle(), runtime=runtime)) as sb:
        assert (await sb.awrite("/work/src/a.py", "import os\nprint('needle')\n")).error is None
        r = await sb.aedit("/work/src/a.py", "needle", "thread")
        assert (r.error, r.occurrences) == (None, 1)
        assert await sb.aread("/work/src/a.py") == "     1\timport os\n     2\tprint('thread')"
        up = await sb.aupload_files([("/work/top.py", b"x = 1\n"), ("/work/src/b.txt", b"a thread here\n")])
        assert [u.error for u in up] == [None, None]
        assert [(e["path"], e["is_dir"]) for e in await sb.als_info("/work")] == [("/work/src", True),
                                                                                 ("/work/top.py", False)]
        matches = await sb.agrep_raw("thread", "/work")
        assert [(m["path"], m["line"]) for m in matches] == [("/work/src/a.py", 2), ("/work/src/b.txt", 1)]
        assert sorted(e["path"] for e in await sb.aglob_info("*.py", "/work")) == ["src/a.py", "top.py"]
        (down,) = await sb.adownload_files(["/work/src/b.txt"])
        assert down.content == b"a thread here\n"
        r = await sb.aexecute("python3 /work/src/a.py")
        assert (r.output, r.exit_code) == ("thread\n", 0)
    deployment.close()


@pytest.mark.asyncio
async def test_a_block_that_raises_still_deletes_its_sandbox(agentd):
    deployment = AgentdDeployment()
    sid = None
    with pytest.raises(RuntimeError, match="the agent failed"):
        async with session(deployment, SandboxConfig(image=BUSYBOX, bundle=bundle())) as sandbox:
            sid = sandbox.id
            raise RuntimeError("the agent failed")
    assert sid and f"agentix-{sid}" not in managed_containers()
    deployment.close()


@pytest.mark.asyncio
async def test_agentd_errors_name_what_to_fix(agentd):
    deployment = AgentdDeployment()
    with pytest.raises(AgentdError) as e:
        await deployment.create(SandboxConfig(image="agentix-test/no-such-image:1", bundle=bundle()))
    assert e.value.name == "ImageNotFound" and "no-such-image" in e.value.message
    with pytest.raises(SandboxGone):
        await deployment.get("a000000000000000")
    await deployment.delete("a000000000000000")  # already gone: no error
    deployment.close()


def test_the_example_runs(agentd):
    import subprocess
    root = os.path.join(os.path.dirname(__file__), "..", "..", "..")
    r = subprocess.run(["/usr/bin/python3", os.path.join(root, "examples", "python-example", "example.py"), BUSYBOX,
                        bundle()], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=os.path.join(root, "client", "python")))
    assert r.returncode == 0, r.stderr
    assert "hello agentix\nsum 12\n" in r.stdout and "2\tDONE: check" in r.stdout, r.stdout
