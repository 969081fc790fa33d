# SPDX-License-Identifier: MIT
"""`pip install ./client/python` into a fresh venv made with --system-site-packages (the
Debian packages it needs come from there; no package index is reachable here), then the
installed package, not this checkout, drives a real agentix-server."""

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile

from conftest import TOKEN

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_DIR = os.path.dirname(HERE)


def test_pip_install_into_a_venv_and_use_it(server, tmp_path):
    # A copy, so that whatever the build leaves behind stays out of the checkout.
    src = tmp_path / "src"
    shutil.copytree(PACKAGE_DIR, src, ignore=shutil.ignore_patterns("tests", "__pycache__"))
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--no-input", "--disable-pip-version-check"]
    env = dict(os.environ, PIP_NO_INDEX="1")  # prove it: nothing may come from an index
    env.pop("PYTHONPATH", None)
    r = subprocess.run(pip + ["install", str(src)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run(pip + ["show", "-f", "agentix"], capture_output=True, text=True, env=env, check=True)
    assert "Version: 0.1.0" in r.stdout and "agentix/runtime.py" in r.stdout, r.stdout

    script = textwrap.dedent(f"""
        import asyncio, agentix
        assert "/venv/" in agentix.__file__, agentix.__file__
        async def main():
            async with agentix.AgentixSandbox({server.url!r}, {TOKEN!r}) as sb:
                r = await sb.aexecute("echo installed")
                print(r.exit_code, r.output.strip())
        asyncio.run(main())
    """)
    r = subprocess.run([str(venv / "bin" / "python"), "-c", script], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and r.stdout == "0 installed\n", r.stdout + r.stderr

    # The wheel and the sdist the backend makes are complete.
    out = tmp_path / "dist"
    r = subprocess.run(pip + ["wheel", "--no-deps", "-w", str(out), str(src)], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (wheel,) = out.glob("agentix-0.1.0-py3-none-any.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "agentix/sandbox.py" in names and "agentix-0.1.0.dist-info/RECORD" in names, names
    sys.path.insert(0, str(src / "build_backend"))
    import agentix_build
    sdist = agentix_build.build_sdist(str(tmp_path))
    assert sdist == "agentix-0.1.0.tar.gz"
