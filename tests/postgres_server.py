"""A throwaway PostgreSQL server for tests: ``postgres_url`` yields an SQLAlchemy URL of a fresh database.

The server's binaries (``initdb``, ``pg_ctl``, ``createdb``) are looked for on PATH and in
``/usr/lib/postgresql/*/bin``; when missing, they are installed from the distribution's packages
(``apt-get install -y postgresql``) if this process is root.  The cluster lives in a temporary
directory (its unix socket too) and listens on a free loopback port; as root it runs as the
``postgres`` user (PostgreSQL refuses to run as root).  The test is skipped, with the reason, only
where the server or a Python driver (psycopg2 or psycopg) cannot be had.
"""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile

import pytest

TOOLS = ("initdb", "pg_ctl", "createdb")


def find_bin_dir() -> str | None:
    """The directory holding PostgreSQL's server tools, or None."""
    found = [shutil.which(t) for t in TOOLS]
    if all(found):
        return os.path.dirname(os.path.realpath(found[0]))
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(d.split("/")[-2].split(".")[0]),
                  reverse=True)
    return next((d for d in dirs if all(os.path.exists(os.path.join(d, t)) for t in TOOLS)), None)


def install() -> str:
    """Install the server from the distribution's packages; '' on success, else why not."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return "PostgreSQL is not installed (apt-get install postgresql needs root and apt)"
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "postgresql"]
    for attempt in range(2):
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if r.returncode == 0:
            return ""
        if attempt == 0:                   # a stale package list: refresh it once
            subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, timeout=300)
    return f"apt-get install postgresql failed: {(r.stderr or r.stdout).strip()[-400:]}"


def driver() -> str | None:
    """SQLAlchemy's dialect+driver for the installed PostgreSQL driver, or None."""
    for module, name in (("psycopg2", "postgresql+psycopg2"), ("psycopg", "postgresql+psycopg")):
        try:
            __import__(module)
            return name
        except ImportError:
            continue
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """``initdb`` + ``pg_ctl start`` in a temporary directory; ``url`` names a fresh database."""

    user = "tiletune"

    def __init__(self, bin_dir: str, dialect: str):
        self.bin_dir, self.dialect = bin_dir, dialect
        self.root = tempfile.mkdtemp(prefix="tiletune-pg-")
        self.data, self.log = os.path.join(self.root, "data"), os.path.join(self.root, "server.log")
        self.run_as = None
        if os.geteuid() == 0:
            try:
                self.run_as = pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError("running as root and there is no 'postgres' user to run the server as") from None
            os.chown(self.root, self.run_as.pw_uid, self.run_as.pw_gid)
        self.port = None

    def _run(self, tool: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        kw = {"user": self.run_as.pw_uid, "group": self.run_as.pw_gid} if self.run_as else {}
        r = subprocess.run([os.path.join(self.bin_dir, tool), *args], capture_output=True, text=True, timeout=timeout,
                           cwd=self.root, env=dict(os.environ, LC_ALL="C", LANG="C"), **kw)
        if r.returncode != 0:
            server_log = open(self.log).read()[-1500:] if os.path.exists(self.log) else ""
            raise RuntimeError(f"{tool} {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()[-1500:]}\n"
                               f"{server_log}")
        return r

    def start(self) -> "PostgresServer":
        self._run("initdb", "-D", self.data, "-U", self.user, "-A", "trust", "-E", "UTF8", "--no-sync")
        for attempt in range(3):                       # the free port may be taken between probe and bind
            self.port = free_port()
            opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100"
            try:
                self._run("pg_ctl", "-D", self.data, "-l", self.log, "-o", opts, "-w", "-t", "60", "start")
                break
            except RuntimeError:
                if attempt == 2:
                    raise
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, "tiletune_test")
        return self

    @property
    def url(self) -> str:
        return f"{self.dialect}://{self.user}@127.0.0.1:{self.port}/tiletune_test"

    def stop(self) -> None:
        try:
            if self.port is not None:
                self._run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop", timeout=60)
        except (RuntimeError, subprocess.TimeoutExpired):
            pass
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_url():
    """URL of a fresh database on a PostgreSQL server started for this test session."""
    dialect = driver()
    if dialect is None:
        pytest.skip("no PostgreSQL driver for SQLAlchemy: pip install 'tiletune[test]' (psycopg2-binary)")
    bin_dir = find_bin_dir()
    if bin_dir is None:
        why = install()
        bin_dir = find_bin_dir()
        if bin_dir is None:
            pytest.skip(why or "PostgreSQL's initdb/pg_ctl were not found after installing it")
    try:
        server = PostgresServer(bin_dir, dialect)
    except RuntimeError as e:
        pytest.skip(f"cannot run a PostgreSQL server here: {e}")
    try:
        yield server.start().url            # a server that is installed but does not start fails the test
    finally:
        server.stop()
