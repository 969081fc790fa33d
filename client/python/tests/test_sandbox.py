# SPDX-License-Identifier: MIT
"""AgentixSandbox's deepagents methods against a real agentix-server: results and error codes
as deepagents defines them, sync and async."""

import pytest

from agentix import AgentixSandbox
from conftest import TOKEN


@pytest.fixture
def sandbox(server, tmp_path):
    sb = AgentixSandbox(server.url, TOKEN, id="test-sandbox")
    yield sb
    sb.close()


def test_execute_combines_output_and_reports_the_exit_code(sandbox):
    r = sandbox.execute("echo one; echo two >&2; exit 4")
    assert (r.output, r.exit_code, r.truncated) == ("one\ntwo\n", 4, False)
    r = sandbox.execute("sleep 5", timeout=1)
    assert "timed out" in r.output
    assert sandbox.id == "test-sandbox"


def test_upload_and_download_keep_order_and_report_each_file(sandbox, tmp_path):
    d = tmp_path / "dir"
    d.mkdir()
    up = sandbox.upload_files([(f"{tmp_path}/a.txt", b"alpha"), ("relative.txt", b"x"), (f"{tmp_path}/b/c.bin", b"\0\1")])
    assert [(r.path, r.error) for r in up] == [(f"{tmp_path}/a.txt", None), ("relative.txt", "invalid_path"),
                                               (f"{tmp_path}/b/c.bin", None)]
    down = sandbox.download_files([f"{tmp_path}/b/c.bin", f"{tmp_path}/missing", str(d), f"{tmp_path}/a.txt", "rel"])
    assert [(r.path, r.content, r.error) for r in down] == [
        (f"{tmp_path}/b/c.bin", b"\0\1", None), (f"{tmp_path}/missing", None, "file_not_found"),
        (str(d), None, "is_directory"), (f"{tmp_path}/a.txt", b"alpha", None), ("rel", None, "invalid_path")]


def test_read_write_edit(sandbox, tmp_path):
    f = f"{tmp_path}/notes.txt"
    assert sandbox.write(f, "one\ntwo\nthree\n").error is None
    assert sandbox.write(f, "again").error == f"Error: File '{f}' already exists"
    assert sandbox.read(f) == "     1\tone\n     2\ttwo\n     3\tthree"
    assert sandbox.read(f, offset=1, limit=1) == "     2\ttwo"
    assert sandbox.read(f"{tmp_path}/nope") == f"Error: File '{tmp_path}/nope' not found"
    empty = f"{tmp_path}/empty"
    sandbox.write(empty, "")
    assert sandbox.read(empty) == "System reminder: File exists but has empty contents"
    r = sandbox.edit(f, "two", "TWO")
    assert (r.error, r.occurrences) == (None, 1)
    assert "String not found" in sandbox.edit(f, "four", "x").error
    sandbox.write(f"{tmp_path}/dup", "x x x")
    assert sandbox.edit(f"{tmp_path}/dup", "x", "y").error.startswith("Error: String 'x' appears 3 times in file.")
    assert sandbox.edit(f"{tmp_path}/dup", "x", "y", replace_all=True).occurrences == 3


def test_ls_grep_glob(sandbox, tmp_path):
    sandbox.upload_files([(f"{tmp_path}/src/a.py", b"import os\nprint('needle')\n"),
                          (f"{tmp_path}/src/b.txt", b"a needle here\n"), (f"{tmp_path}/top.py", b"x = 1\n")])
    ls = sandbox.ls_info(str(tmp_path))
    assert [(e["path"], e["is_dir"]) for e in ls] == [(f"{tmp_path}/src", True), (f"{tmp_path}/top.py", False)]
    assert sandbox.ls_info(f"{tmp_path}/missing") == []
    matches = sandbox.grep_raw("needle", str(tmp_path))
    assert [(m["path"], m["line"]) for m in matches] == [(f"{tmp_path}/src/a.py", 2), (f"{tmp_path}/src/b.txt", 1)]
    assert [m["path"] for m in sandbox.grep_raw("needle", str(tmp_path), glob="*.py")] == [f"{tmp_path}/src/a.py"]
    # An error is a string, not an exception (deepagents <= 0.4).
    assert sandbox.grep_raw("needle", "relative") == "Error: Path must be absolute: 'relative'"
    assert sorted(e["path"] for e in sandbox.glob_info("*.py", str(tmp_path))) == ["src/a.py", "top.py"]
    # Matching directories come too, with is_dir (deepagents' BaseSandbox lists them).
    assert sorted((e["path"], e["is_dir"]) for e in sandbox.glob_info("*", str(tmp_path))) == \
        [("src", True), ("src/a.py", False), ("src/b.txt", False), ("top.py", False)]
    assert sandbox.glob_info("*.rs", str(tmp_path)) == []


@pytest.mark.asyncio
async def test_the_async_twins(server, tmp_path):
    async with AgentixSandbox(server.url, TOKEN) as sb:
        assert sb.is_running
        assert (await sb.aexecute("echo hi")).output == "hi\n"
        assert (await sb.awrite(f"{tmp_path}/x", "1\n")).error is None
        assert await sb.aread(f"{tmp_path}/x") == "     1\t1"
    assert not sb.is_running
