#!/usr/bin/env python3
"""A throwaway PostgreSQL cluster for the tests: initdb into a temporary directory, a server
listening only on a Unix socket in that directory (no TCP port to collide with), torn down
(stopped, directory removed) at the end, also when the test fails.

PostgreSQL refuses to run as root, and CI runs the tests as root: then the cluster is made and
run as the `postgres` user (runuser), and connected to as the database user `postgres` (trust
authentication: the socket directory is the only way in).

    python3 pgcluster.py run [--durable] [--tcp] -- COMMAND ARGS...

starts a cluster, runs COMMAND with KRONOS_TEST_PG_ADMIN_URL (the `postgres` database, to
create more) and KRONOS_TEST_PG_URL (an empty database `kronos_test`) set, stops the cluster,
and exits with COMMAND's status. The cluster runs with fsync off (fast, and a test's data need
not survive a power cut) unless --durable (for benchmarks: PostgreSQL's defaults). Exits 77
(ctest's skip code) when PostgreSQL is not installed: `bash scripts/install-deps.sh --scale`
installs it. With --tcp the server also listens on 127.0.0.1 at a free port, without SSL,
and KRONOS_TEST_PG_TCP_URL names the `postgres` database there (the tests of what only a TCP
connection does: SSL).
"""
import glob
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile

SKIP = 77


def find_bin(name):
    """PostgreSQL's server programs: on PATH, else Debian's /usr/lib/postgresql/N/bin."""
    p = shutil.which(name)
    if p:
        return p
    cands = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                   key=lambda s: int(s.split("/")[4]) if s.split("/")[4].isdigit() else 0)
    return cands[-1] if cands else None


class Cluster:
    def __init__(self, durable=False, tcp=False):
        self.durable = durable
        self.tcp = tcp
        self.initdb, self.pg_ctl = find_bin("initdb"), find_bin("pg_ctl")
        if not self.initdb or not self.pg_ctl:
            raise FileNotFoundError("PostgreSQL is not installed (initdb, pg_ctl not found); "
                                    "run: bash scripts/install-deps.sh --scale")
        self.as_user = []
        self.top = tempfile.mkdtemp(prefix="kronos-pg-")
        self.running = False
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                shutil.rmtree(self.top, ignore_errors=True)
                raise FileNotFoundError("running as root but there is no 'postgres' user "
                                        "(the Debian postgresql package creates it)")
            os.chown(self.top, pw.pw_uid, pw.pw_gid)
            os.chmod(self.top, 0o755)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.data = os.path.join(self.top, "data")
        self.sock = self.top  # the socket file is .s.PGSQL.<port> in here
        # Without tcp it only names the socket file: nothing listens on TCP.
        if tcp:
            sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
            from ports import free_port
            self.port = free_port()
        else:
            self.port = 5432
        self.log = os.path.join(self.top, "server.log")

    def _run(self, args, **kw):
        return subprocess.run(self.as_user + args, check=True, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, **kw)

    def start(self):
        try:
            self._run([self.initdb, "-D", self.data, "-U", "postgres", "-A", "trust",
                       "-E", "UTF8", "--locale=C", "--no-sync"])
            self.resume()
        except subprocess.CalledProcessError as e:
            log = ""
            if os.path.exists(self.log):
                with open(self.log) as f:
                    log = f.read()[-2000:]
            self.stop()
            raise RuntimeError(f"starting PostgreSQL failed: {' '.join(e.cmd)}\n{e.stdout}\n{log}")
        self.running = True
        return self

    def url(self, db="postgres"):
        return f"postgresql://postgres@/{db}?host={self.sock}&port={self.port}"

    def tcp_url(self, db="postgres"):
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def psql(self, sql, db="postgres"):
        psql = find_bin("psql")
        return subprocess.run([psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", self.url(db),
                               "-At", "-c", sql], check=True, stdout=subprocess.PIPE,
                              text=True).stdout

    def createdb(self, name):
        self.psql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def _opts(self):
        listen = "127.0.0.1" if self.tcp else ""
        opts = (f"-k {self.sock} -p {self.port} -c listen_addresses='{listen}' "
                f"-c max_connections=200")
        if not self.durable:
            opts += " -c fsync=off -c full_page_writes=off"
        return opts

    def halt(self):
        """Stops the server the way a crash does (immediate: no checkpoint, clients cut off),
        keeping the data directory for resume()."""
        self._run([self.pg_ctl, "-D", self.data, "-m", "immediate", "-w", "stop"])
        self.running = False

    def resume(self):
        """Starts the halted server again on the same data (crash recovery first)."""
        self._run([self.pg_ctl, "-D", self.data, "-l", self.log, "-o", self._opts(), "-w",
                   "-t", "60", "start"])
        self.running = True

    def pids(self):
        """The postmaster and its children (backends, checkpointer, walwriter...)."""
        with open(os.path.join(self.data, "postmaster.pid")) as f:
            master = int(f.readline())
        out = [master]
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            # pid (comm) state ppid ...: comm may hold spaces and parentheses.
            if int(stat[stat.rindex(")") + 2:].split()[1]) == master:
                out.append(int(entry))
        return out

    def freeze(self):
        """SIGSTOPs every process of the server, as a paused VM or a partition looks from a
        client: connections stay open, nothing answers. thaw() (or stop()) resumes them."""
        self.frozen = self.pids()
        for pid in self.frozen:
            os.kill(pid, signal.SIGSTOP)

    def thaw(self):
        for pid in getattr(self, "frozen", []):
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.frozen = []

    def stop(self):
        self.thaw()  # a stopped server would never take pg_ctl's stop signal
        if self.running:
            # immediate: nothing to keep, and it never waits for clients still connected.
            subprocess.run(self.as_user + [self.pg_ctl, "-D", self.data, "-m", "immediate",
                                           "-w", "stop"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.running = False
        shutil.rmtree(self.top, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main(argv):
    if len(argv) < 3 or argv[1] != "run" or "--" not in argv:
        print(__doc__, file=sys.stderr)
        return 2
    cmd = argv[argv.index("--") + 1:]
    try:
        opts = argv[:argv.index("--")]
        cluster = Cluster(durable="--durable" in opts, tcp="--tcp" in opts)
    except FileNotFoundError as e:
        print(f"SKIPPED: {e}")
        return SKIP
    # ctest's timeout sends SIGTERM first: tear down then too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        cluster.start()
        env = dict(os.environ, KRONOS_TEST_PG_ADMIN_URL=cluster.url(),
                   KRONOS_TEST_PG_URL=cluster.createdb("kronos_test"))
        if cluster.tcp:
            env["KRONOS_TEST_PG_TCP_URL"] = cluster.tcp_url()
        return subprocess.call(cmd, env=env)
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
