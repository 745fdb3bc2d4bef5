"""``TemporaryPostgres``: a throwaway PostgreSQL server on loopback, for tests, benchmarks and notebooks.

It runs the machine's own server binaries (Debian's ``postgresql-NN`` package, or whatever
``pg_config --bindir`` names): ``initdb`` into a temporary folder, a free loopback port, password
authentication over TCP, and ``pg_ctl stop`` at the end. PostgreSQL refuses to run as root, so
when this process is root the server runs as the ``postgres`` user. A missing binary is an error
with a clear message, never a silent skip.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from types import TracebackType

from repertory.errors import StoreError

__all__ = ["TemporaryPostgres", "find_pg_bindir"]


def find_pg_bindir() -> str:
    """The folder holding ``initdb`` and ``pg_ctl``; raises ``StoreError`` naming what to install."""
    env = os.environ.get("REPERTORY_PG_BINDIR")
    candidates = [env] if env else []
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False).stdout.strip()
        if out:
            candidates.append(out)
    for folder in candidates:
        if folder and os.path.exists(os.path.join(folder, "initdb")) and os.path.exists(os.path.join(folder, "pg_ctl")):
            return folder
    raise StoreError(
        "PostgreSQL server binaries (initdb, pg_ctl) not found: install the postgresql-15 package "
        "(apt-get install postgresql-15) or set REPERTORY_PG_BINDIR"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class TemporaryPostgres:
    """Start with ``start()`` (or ``with TemporaryPostgres() as pg:``); ``url`` is ready to use."""

    def __init__(self, *, user: str = "repertory", database: str = "repertory", port: int | None = None) -> None:
        self.bindir = find_pg_bindir()
        self.user = user
        self.database = database
        self.password = secrets.token_hex(12)
        self.port = port or _free_port()
        self.root = tempfile.mkdtemp(prefix="repertory-pg-")
        self.datadir = os.path.join(self.root, "data")
        self._as_postgres = os.geteuid() == 0
        self._started = False

    @property
    def url(self) -> str:
        """A ``postgresql://`` URL with user, password, loopback host, port and database."""
        return f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/{self.database}"

    def url_for(self, *, user: str | None = None, password: str | None = None, database: str | None = None) -> str:
        """The URL with some parts changed (for tests of refused logins and missing databases)."""
        return (
            f"postgresql://{user or self.user}:{password if password is not None else self.password}"
            f"@127.0.0.1:{self.port}/{database or self.database}"
        )

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [os.path.join(self.bindir, args[0]), *args[1:]]
        kwargs: dict[str, object] = {}
        if self._as_postgres:
            pw = pwd.getpwnam("postgres")

            def demote() -> None:
                os.setgid(pw.pw_gid)
                os.setuid(pw.pw_uid)

            kwargs["preexec_fn"] = demote
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=self.root, **kwargs)  # type: ignore[call-overload]
        if proc.returncode != 0:
            raise StoreError(f"{args[0]} failed ({proc.returncode}): {proc.stderr.strip() or proc.stdout.strip()}")
        return proc  # type: ignore[no-any-return]

    def start(self) -> TemporaryPostgres:
        """initdb (first time) and start the server; returns once it accepts connections."""
        if not os.path.exists(self.datadir):
            pwfile = os.path.join(self.root, "pw")
            with open(pwfile, "w") as fh:
                fh.write(self.password)
            if self._as_postgres:
                pw = pwd.getpwnam("postgres")
                for path in (self.root, pwfile):
                    os.chown(path, pw.pw_uid, pw.pw_gid)
            self._run(
                "initdb",
                "-D",
                self.datadir,
                "-U",
                self.user,
                f"--pwfile={pwfile}",
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "-E",
                "UTF8",
                "--no-sync",
            )
            os.unlink(pwfile)
            with open(os.path.join(self.datadir, "postgresql.conf"), "a") as fh:
                # fsync stays on: commits here are as durable as in production, so benchmarks are honest.
                fh.write(
                    f"listen_addresses = '127.0.0.1'\nport = {self.port}\nunix_socket_directories = '{self.root}'\n"
                    "max_connections = 200\nshared_buffers = 128MB\n"
                )
        self._run("pg_ctl", "-D", self.datadir, "-l", os.path.join(self.root, "server.log"), "-w", "-t", "60", "start")
        self._started = True
        if not self._database_exists():
            self._run("createdb", "-h", self.root, "-p", str(self.port), "-U", self.user, self.database)
        return self

    def _database_exists(self) -> bool:
        proc = self._run(
            "psql",
            "-h",
            self.root,
            "-p",
            str(self.port),
            "-U",
            self.user,
            "-d",
            "postgres",
            "-tAc",
            f"SELECT 1 FROM pg_database WHERE datname = '{self.database}'",
        )
        return proc.stdout.strip() == "1"

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (keeps the data folder, so ``start()`` brings it back)."""
        if self._started:
            self._run("pg_ctl", "-D", self.datadir, "-m", mode, "-w", "stop")
            self._started = False

    def restart(self) -> None:
        """Stop and start again, as a server restart in production would."""
        self.stop()
        self.start()

    def cleanup(self) -> None:
        """Stop the server and remove its folder."""
        try:
            self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> TemporaryPostgres:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cleanup()
