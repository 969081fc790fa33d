#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""agentixctl build against a real dockerd: the example bundle (bash, coreutils, git, python3
and a C module) overlaid with a stopped carrier and --volumes-from onto a libc-free static
busybox image and a Debian image made with debootstrap; a stock Socket.IO client
(python-socketio) drives agentix-server from /nix/runtime/bin in both. Also: nothing mapped
from the task image, same inputs give the same image id byte for byte, rebuilds come from the
cache, layers are shared between bundles, and every failure is one clear line with nothing
loaded into Docker.

Needs: AGENTIXCTL, AGENTIX_RUNTIME_DIR (agentix-server and agentix-worker), AGENTIX_INCLUDE_DIR,
EXAMPLE_DIR (examples/bundle-example), and a running dockerd."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "interop"))
from harness import RpcClient, health_ok, main, test  # noqa: E402

AGENTIXCTL = os.environ["AGENTIXCTL"]
EXAMPLE = os.environ["EXAMPLE_DIR"]
BUSYBOX_IMAGE = "agentix-test/busybox:1"
DEBIAN_IMAGE = "agentix-test/debian:bookworm"
TOKEN = "bundle-test-token"
# One cache for the tests that only need a built bundle (a cold build is done once).
CACHE = tempfile.mkdtemp(prefix="agentix-bundle-cache-")


def docker(*args, check=True, text=True, **kw):
    r = subprocess.run(["docker", *args], capture_output=True, text=text, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"docker {' '.join(args)}: {r.stderr.strip()}")
    return r


def image_exists(ref):
    return docker("image", "inspect", ref, check=False).returncode == 0


def task_image(kind, ref):
    """Make the image with make-task-images.sh (once; Docker keeps it)."""
    if not image_exists(ref):
        r = subprocess.run([os.path.join(os.path.dirname(os.path.abspath(__file__)), "make-task-images.sh"), kind],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
    return ref


def busybox_image():
    """A task image with no libc at all: busybox-static and its applet links."""
    return task_image("busybox", BUSYBOX_IMAGE)


def debian_image():
    """A Debian 12 task image from debootstrap (minbase)."""
    return task_image("debian", DEBIAN_IMAGE)


# The example bundle as the tests build it, with the runtime of the build under test (a sanitizer
# build, say): under a tag of its own, so that example-bundle:0.1.0 stays the user's.
TEST_TAG = "agentix-test/example-bundle:0.1.0"


def build(directory=EXAMPLE, *args, cache=CACHE, check=True):
    if directory == EXAMPLE:
        args = ("--tag", TEST_TAG, *args)
    r = subprocess.run([AGENTIXCTL, "build", "--json", "--cache-dir", cache, *args, directory],
                       capture_output=True, text=True)
    if check:
        assert r.returncode == 0, f"agentixctl build failed ({r.returncode}): {r.stderr}"
        return json.loads(r.stdout)
    return r


def write_project(directory, manifest, files=None):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "agentix-bundle.conf"), "w") as f:
        f.write(manifest)
    for name, text in (files or {}).items():
        with open(os.path.join(directory, name), "w") as f:
            f.write(text)
    return directory


class Sandbox:
    """A carrier (the bundle image, created, never started) and a task container that takes
    /nix from it and runs agentix-server from the bundle, port 8000 on 127.0.0.1."""

    def __init__(self, bundle, image):
        tag = uuid.uuid4().hex[:8]
        self.carrier, self.name = f"agentix-test-carrier-{tag}", f"agentix-test-sandbox-{tag}"
        docker("create", "--name", self.carrier, bundle)
        try:
            # SYS_PTRACE: the maps check reads /proc/1/maps, and agentix-server is not dumpable
            # (its token must stay out of its commands' reach), so that needs the capability.
            docker("run", "-d", "--name", self.name, "--volumes-from", self.carrier,
                   "-e", f"AGENTIX_TOKEN={TOKEN}", "-p", "127.0.0.1::8000", "--pids-limit", "256",
                   "--memory", "1g", "--cap-add", "SYS_PTRACE", "--entrypoint", "/nix/runtime/bin/agentix-server",
                   image)
            port = docker("port", self.name, "8000/tcp").stdout.split()[0].rsplit(":", 1)[1]
            self.url = f"http://127.0.0.1:{port}"
            self.wait_healthy()
        except BaseException:
            self.remove()
            raise

    def wait_healthy(self, timeout=20):
        deadline = time.time() + timeout
        while not health_ok(self.url):
            if time.time() > deadline:
                logs = docker("logs", self.name, check=False)
                raise AssertionError(f"agentix-server did not answer /health: {logs.stdout}{logs.stderr}")
            time.sleep(0.05)

    def remove(self):
        docker("rm", "-f", "-v", self.name, check=False)
        docker("rm", "-f", "-v", self.carrier, check=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def execute(client, command, wait=60):
    return client.call("sandbox::exec", command=command, timeout=wait)


# Run by the bundle's python3 from the bundle's bash: the files mapped by agentix-server (PID 1),
# its worker, that bash and python3 itself that are not in /nix/store.
MAPS_SCRIPT = """
import os, sys
pids = {1, os.getpid(), int(sys.argv[1])}
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            if b"agentix-worker" in open(f"/proc/{p}/cmdline", "rb").read():
                pids.add(int(p))
        except OSError:
            pass
assert len(pids) == 4, pids
import ssl, sqlite3, json, locale
bad = set()
for pid in pids:
    for line in open(f"/proc/{pid}/maps"):
        f = line.split(maxsplit=5)
        if len(f) == 6 and f[5].startswith("/") and not f[5].startswith("/nix/store/"):
            bad.add(f[5].strip())
print("\\n".join(sorted(bad)))
"""


def foreign_mappings(client):
    client.call("fs::write", "/tmp/agentix-maps.py", MAPS_SCRIPT, True)
    # "; true" keeps bash from exec()ing python3, so $$ is still bash.
    r = execute(client, "bash -c 'python3 /tmp/agentix-maps.py $$; true'")
    assert r["exit_code"] == 0, r
    return r["output"].split()


def check_example_bundle(image):
    bundle = build()
    assert bundle["tags"] == [TEST_TAG], bundle
    with Sandbox(TEST_TAG, image) as sb:
        client = RpcClient(sb.url, TOKEN, transports=["websocket"])
        try:
            r = execute(client, "bash -c 'echo bash $BASH_VERSION; command -v bash python3 git ls'")
            assert r["exit_code"] == 0, r
            lines = r["output"].splitlines()
            assert lines[0].startswith("bash 5."), r
            assert lines[1:] == ["/nix/runtime/bin/bash", "/nix/runtime/bin/python3", "/nix/runtime/bin/git",
                                 "/nix/runtime/bin/ls"], r

            r = execute(client, "python3 -c 'import json, ssl, sqlite3, sys; "
                                "print(sys.prefix); print(ssl.OPENSSL_VERSION); print(sqlite3.sqlite_version)'")
            assert r["exit_code"] == 0, r
            prefix, openssl, sqlite = r["output"].splitlines()
            assert prefix.startswith("/nix/store/") and "python3" in prefix, r
            assert openssl.startswith("OpenSSL 3"), r

            # terminfo comes with ncurses (ncurses-base, which no ELF file names).
            r = execute(client, "python3 -c \"import curses; curses.setupterm('xterm-256color'); "
                                "print(curses.tigetnum('colors'))\"")
            assert r == {**r, "exit_code": 0, "output": "256\n"}, r

            r = execute(client, "set -e; cd /tmp && rm -rf repo && git init -q repo && cd repo && "
                                "echo hello > f && git add f && git commit -q -m first && git log --format=%s:%an")
            assert r["exit_code"] == 0 and r["output"].strip() == "first:agent", r

            assert client.call("example::add", 2, 40) == 42
            assert client.call("example::greet", "bundle") == "Hello, bundle!"

            # Nothing is loaded from the task image's /lib or /usr: not by the server, its
            # worker, the bundle's bash, nor its python3 with ssl and sqlite3 imported.
            assert foreign_mappings(client) == []
        finally:
            client.close()
    return bundle


@test
def example_bundle_on_static_busybox():
    image = busybox_image()
    # The task image really has no libc: nothing but busybox in /bin.
    r = docker("run", "--rm", "--entrypoint", "/bin/sh", image, "-c", "ls / /lib 2>&1; echo rc=$?")
    assert "rc=1" in r.stdout and "No such file" in r.stdout, r.stdout
    check_example_bundle(image)


@test
def example_bundle_on_debootstrap_debian():
    check_example_bundle(debian_image())


@test
def rebuild_is_cached_and_gives_the_same_image():
    first = build()
    again = build()
    assert again["id"] == first["id"]
    # A cache hit: no store path made, no layer written, nothing loaded into Docker, and no
    # file read to hash it except the example module's, which is compiled anew each build.
    # (How fast that is belongs to bench/bundle, not to an assertion.)
    assert again["store_paths_made"] == 0 and not again["loaded"], again
    assert again["layers_written"] == 0, again
    assert again["store_paths_hashed"] <= 1, again
    # Another cache, from nothing: the same id, and the same archive byte for byte.
    with tempfile.TemporaryDirectory() as other, tempfile.TemporaryDirectory() as out:
        a, b = os.path.join(out, "a.tar"), os.path.join(out, "b.tar")
        build(EXAMPLE, "-o", a)
        cold = build(EXAMPLE, "-o", b, cache=other)
        assert cold["id"] == first["id"] and cold["store_paths_made"] == cold["store_paths"], cold
        with open(a, "rb") as fa, open(b, "rb") as fb:
            assert fa.read() == fb.read(), "two builds of the same inputs differ"


def build_inputs():
    """What a build of the example bundle is made of besides the cache: the host's packages
    (name=version) and the runtime's programs (their bytes). Two builds with the same inputs
    name the same store paths."""
    r = subprocess.run(["dpkg-query", "-W", "-f", "${binary:Package}=${Version} ${db:Status-Abbrev}\n"],
                       capture_output=True, text=True, check=True)
    runtime = os.environ["AGENTIX_RUNTIME_DIR"]
    programs = {}
    for name in ("agentix-server", "agentix-worker", "agentix-exec-as"):
        with open(os.path.join(runtime, name), "rb") as f:
            programs[name] = hashlib.sha256(f.read()).hexdigest()
    return set(r.stdout.splitlines()), programs


@test
def gc_removes_what_no_bundles_latest_build_uses_and_nothing_else():
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as out:
        inputs = build_inputs()
        first = build(EXAMPLE, "-o", os.path.join(out, "a.tar"), cache=cache)

        def gc():
            r = subprocess.run([AGENTIXCTL, "--json", "build", "--gc", "--cache-dir", cache], capture_output=True,
                               text=True)
            assert r.returncode == 0, r.stderr
            return json.loads(r.stdout)

        assert gc() == {"cache_dir": cache, "bundles": 1, "store_paths_removed": 0, "layers_removed": 0,
                        "bytes_freed": 0}
        # A bundle whose tools changed: the store paths only its older build used go.
        store = os.path.join(cache, "store")
        before = set(os.listdir(store))
        project = write_project(os.path.join(out, "p"), "[Bundle]\nName=agentix-test-gc\nVersion=1\n"
                                                        "[Tools]\nPackages=lz4\n")
        build(project, "-o", os.path.join(out, "p1.tar"), cache=cache)
        only_old = set(os.listdir(store)) - before
        assert any("-lz4-" in p for p in only_old), only_old
        write_project(project, "[Bundle]\nName=agentix-test-gc\nVersion=1\n")
        build(project, "-o", os.path.join(out, "p2.tar"), cache=cache)
        all_paths = set(os.listdir(store))
        used = set()
        for root in os.listdir(os.path.join(cache, "roots")):
            with open(os.path.join(cache, "roots", root)) as f:
                used |= set(json.load(f)["store"])
        assert before <= used and any("-lz4-" in p for p in all_paths - used), used
        got = gc()
        assert got["bundles"] == 2 and got["store_paths_removed"] == len(all_paths - used) and \
            got["layers_removed"] >= 1 and got["bytes_freed"] > 0, got
        assert set(os.listdir(store)) == used
        # What the kept builds use is all still there: rebuilding hits the cache. (Unless the
        # inputs changed meanwhile, a package upgraded under the test, say: then the rebuild
        # names other store paths, and which is the cause is said.)
        again = build(EXAMPLE, "-o", os.path.join(out, "b.tar"), cache=cache)
        (packages, programs), (packages_now, programs_now) = inputs, build_inputs()
        changed = sorted(packages ^ packages_now) + [p for p in programs if programs[p] != programs_now[p]]
        assert again["id"] == first["id"] and again["store_paths_made"] == 0 and again["layers_written"] == 0, \
            (again, f"the build's inputs changed during the test: {changed}" if changed else "same inputs")
        # Without a cache there is nothing to do; a bad option combination is a usage error.
        r = subprocess.run([AGENTIXCTL, "build", "--gc", "--cache-dir", os.path.join(out, "none")],
                           capture_output=True, text=True)
        assert r.returncode == 0 and "0 B freed" in r.stdout, (r.stdout, r.stderr)
        r = subprocess.run([AGENTIXCTL, "build", "--gc", EXAMPLE], capture_output=True, text=True)
        assert r.returncode == 64, r.stderr


@test
def image_records_platform_volume_and_tags():
    bundle = build()
    info = json.loads(docker("image", "inspect", bundle["id"]).stdout)[0]
    assert (info["Os"], info["Architecture"]) == ("linux", "amd64"), (info["Os"], info["Architecture"])
    assert info["Config"]["Volumes"] == {"/nix": {}}
    assert info["Config"]["Entrypoint"] == ["/nix/runtime/bin/agentix-server"]
    assert info["RepoTags"] == [TEST_TAG], info["RepoTags"]
    assert info["Config"]["Labels"]["org.agentix.bundle"] == bundle["name"] == "example-bundle", info["Config"]["Labels"]
    # One layer per store path (plus /nix/runtime).
    assert len(info["RootFS"]["Layers"]) == bundle["layers"] == bundle["store_paths"] + 1, bundle


@test
def a_tagged_build_leaves_the_bundles_own_tags_alone():
    """--tag: the image gets that one tag; NAME:VERSION and NAME:latest stay where they were
    (the release build a user made, or nothing)."""
    with tempfile.TemporaryDirectory() as out:
        project = write_project(out, "[Bundle]\nName=agentix-test-tagged\nVersion=1\n[Tools]\nPackages=bash\n")
        docker("rmi", "-f", "agentix-test-tagged:1", "agentix-test-tagged:latest", "agentix-test/tagged:x",
               "agentix-test/tagged:latest", check=False)
        res = build(project, "--tag", "agentix-test/tagged:x")
        assert res["tags"] == ["agentix-test/tagged:x"] and res["loaded"], res
        assert not image_exists("agentix-test-tagged:1") and not image_exists("agentix-test-tagged:latest")
        # Docker has the image already: only the tag is set; no tag means :latest.
        res = build(project, "--tag", "agentix-test/tagged")
        assert res["tags"] == ["agentix-test/tagged:latest"] and not res["loaded"], res
        tags = json.loads(docker("image", "inspect", res["id"]).stdout)[0]["RepoTags"]
        assert sorted(tags) == ["agentix-test/tagged:latest", "agentix-test/tagged:x"], tags
        # Without --tag: the manifest's own tags, beside the others.
        res = build(project)
        assert res["tags"] == ["agentix-test-tagged:1", "agentix-test-tagged:latest"], res
        for bad in ("Upper/case", "a:", "a b", "a:-x"):
            r = build(project, "--tag", bad, check=False)
            assert r.returncode == 64 and "--tag=" in r.stderr and "not an image name" in r.stderr, (bad, r.stderr)
        docker("rmi", "-f", "agentix-test-tagged:1", "agentix-test-tagged:latest", "agentix-test/tagged:x",
               "agentix-test/tagged:latest", check=False)


@test
def output_archive_loads_with_the_same_id():
    with tempfile.TemporaryDirectory() as out:
        project = write_project(os.path.join(out, "p"), "[Bundle]\nName=agentix-test-archive\nVersion=1\n"
                                                      "[Tools]\nPackages=bash\n")
        archive = os.path.join(out, "bundle.tar")
        docker("rmi", "-f", "agentix-test-archive:1", "agentix-test-archive:latest", check=False)
        res = build(project, "-o", archive)
        assert res["output"] == archive and not res["loaded"]
        assert not image_exists("agentix-test-archive:1"), "--output must not load the image"
        with open(archive, "rb") as f:
            loaded = docker("load", stdin=f, text=False).stdout
        assert b"agentix-test-archive:1" in loaded, loaded
        assert json.loads(docker("image", "inspect", "agentix-test-archive:1").stdout)[0]["Id"] == res["id"]
        docker("rmi", "-f", "agentix-test-archive:1", "agentix-test-archive:latest", check=False)


@test
def bundles_share_the_layers_they_have_in_common():
    example = build()
    with tempfile.TemporaryDirectory() as out:
        project = write_project(out, "[Bundle]\nName=agentix-test-small\nVersion=1\n[Tools]\nPackages=bash\n")
        build(project)
        layers = lambda ref: set(json.loads(docker("image", "inspect", ref).stdout)[0]["RootFS"]["Layers"])
        shared = layers(example["id"]) & layers("agentix-test-small:1")
        # glibc, bash and the runtime's libraries are the same store paths, hence the same layers.
        assert len(shared) >= 10, len(shared)
        docker("rmi", "-f", "agentix-test-small:1", "agentix-test-small:latest", check=False)


@test
def programs_files_prebuilt_modules_and_environment_reach_the_sandbox():
    """A program not from any package, a module built elsewhere ([Module] File=), a file
    ([Files] Copy=) and the manifest's environment, on the libc-free image."""
    with tempfile.TemporaryDirectory() as out:
        with open(os.path.join(out, "hello.c"), "w") as f:
            f.write('#include <stdio.h>\n#include <zlib.h>\n'
                    'int main(void) { printf("hello from zlib %s\\n", zlibVersion()); return 0; }\n')
        subprocess.run(["cc", "-O2", "-o", os.path.join(out, "hello"), os.path.join(out, "hello.c"), "-lz"], check=True)
        example_c = os.path.join(os.path.dirname(EXAMPLE), "module-example", "example.c")
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-I", os.environ["AGENTIX_INCLUDE_DIR"],
                        "-o", os.path.join(out, "prebuilt.so"), example_c], check=True)
        with open(os.path.join(out, "prompt.txt"), "w") as f:
            f.write("you are a careful agent\n")
        project = write_project(out, "[Bundle]\nName=agentix-test-extras\nVersion=2\n"
                                     "[Tools]\nPackages=bash\nPrograms=" + os.path.join(out, "hello") + "\n"
                                     "[Module example]\nFile=prebuilt.so\n"
                                     "[Files]\nCopy=prompt.txt share/prompts/system.txt\n"
                                     "[Environment]\nEnvironment=AGENT_MODE=careful ${PATH}\n")
        build(project)
    try:
        with Sandbox("agentix-test-extras:2", busybox_image()) as sb:
            client = RpcClient(sb.url, TOKEN, transports=["polling"])
            try:
                r = execute(client, "hello; cat /nix/runtime/share/prompts/system.txt; echo \"$AGENT_MODE\"")
                assert r["exit_code"] == 0, r
                lines = r["output"].splitlines()
                assert lines[0].startswith("hello from zlib 1."), lines
                assert lines[1] == "you are a careful agent", lines
                assert lines[2].startswith("careful /nix/runtime/bin:"), lines  # ${PATH} after the bundle's
                assert client.call("example::add", 1, 2) == 3
                manifest = json.loads(execute(client, "cat /nix/runtime/manifest.json")["output"])
                names = {p["name"] for p in manifest["store_paths"]}
                assert {"hello", "agentix-module-example", "zlib", "glibc", "bash", "agentix"} <= names, names
                zlib = next(p for p in manifest["store_paths"] if p["name"] == "zlib")
                assert zlib["source"] == "zlib" and zlib["packages"][0].startswith("zlib1g="), zlib
            finally:
                client.close()
    finally:
        docker("rmi", "-f", "agentix-test-extras:2", "agentix-test-extras:latest", check=False)


def expect_failure(manifest, needle, *args, files=None, name="agentix-test-broken"):
    with tempfile.TemporaryDirectory() as out:
        project = write_project(out, manifest, files)
        r = build(project, *args, check=False)
        assert r.returncode != 0, r.stdout
        lines = r.stderr.strip().splitlines()
        message = lines[-1]
        # One line; only a compiler may say more before it.
        assert message.startswith("agentixctl: build: ") and (len(lines) == 1 or "compile" in message), lines
        assert needle in message, message
        assert "%m" not in message, message  # a format directive printed instead of the reason
        assert not image_exists(f"{name}:latest"), "a failed build left an image behind"
        return message


@test
def failures_are_one_clear_line_and_load_nothing():
    head = "[Bundle]\nName=agentix-test-broken\nVersion=1\n"
    expect_failure(head + "[Tools]\nPackages=bash no-such-package-xyz\n",
                   "package 'no-such-package-xyz' is not installed on the build host")
    expect_failure(head + "[Tools]\nPrograms=/no/such/program\n", "/no/such/program: No such file or directory")
    expect_failure(head + "[Module broken]\nSources=missing.c\n", "missing.c: No such file or directory")
    expect_failure(head + "[Module broken]\nSources=broken.c\n", "[Module broken] does not compile",
                   files={"broken.c": "this is not C\n"})
    expect_failure(head + "Colour=blue\n", "agentix-bundle.conf:4: unknown key 'Colour' in [Bundle]")
    expect_failure("[Bundle]\nVersion=1\n", "Name= is missing")
    expect_failure("[Bundle]\nName=Bad_Name\nVersion=1\n", "Name=Bad_Name is not a valid bundle name")
    expect_failure(head + "[Tools]\nPackages=bash\n", "cannot build a bundle for linux/arm64 on this linux/amd64",
                   "--platform", "linux/arm64")
    expect_failure(head + "Platform=linux/s390x\n", "cannot build a bundle for linux/s390x")
    # A project that is not there: the reason, not a literal "%m".
    r = build("/nonexistent", check=False)
    assert r.returncode != 0 and r.stderr == \
        "agentixctl: build: cannot read /nonexistent/agentix-bundle.conf: No such file or directory\n", r.stderr


if __name__ == "__main__":
    try:
        main()
    finally:
        shutil.rmtree(CACHE, ignore_errors=True)
