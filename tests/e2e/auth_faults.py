#!/usr/bin/env python3
"""Fault and attack cases before authentication, against a real `commprof aggregate` process and
real collectors (docs/wire-protocol.md, "Handshake" and "Before authentication").

Usage: auth_faults.py CASE --build BUILD_DIR --work WORK_DIR

The "real rank" of every case is tests/e2e/c_api_program (libcommprof linked in, no MPI: rank 0
of 1) configured by COMMPROF_* variables, as `commprof run` would set them. Hand-made peers speak
the protocol from the document (struct + hmac here, an implementation independent of
core/wire.cc).

Cases:
  replay        a spooled hello and a captured TCP hello replayed to a live aggregator are refused
                (with the reasons the document gives), nothing of them is stored, and the real rank
                then connects; spool files are 0600 in a 0700 directory; a world_size over 2^20 is
                refused naming the field.
  flood         300 peers that send nothing or announce a 16 MiB frame: the aggregator's RSS grows
                by less than 32 MiB, it keeps at most 64 waiting peers, and a real rank still gets
                in well before the silent peers' 10 s hello deadline.
  fd_exhaustion the aggregator under a small RLIMIT_NOFILE, all its descriptors taken by idle
                peers: over 2 s it uses < 0.5 s of CPU and logs < 20 lines; once the peers close,
                a real rank is accepted.
"""
import hashlib
import hmac
import os
import resource
import socket
import stat
import struct
import subprocess
import threading
import time

import h5py

from e2e_support import case_arguments, expect

MAGIC = 0x46575043
VERSION = 1
T_HELLO, T_HELLO_ACK, T_BYE, T_EVENTS, T_CHALLENGE = 1, 2, 6, 4, 9
MAX_PAYLOAD = 16 << 20


def header(ftype, length):
    return struct.pack("<IHHII", MAGIC, VERSION, ftype, length, 0)


def read_exactly(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def read_frame(sock):
    magic, version, ftype, length, reserved = struct.unpack("<IHHII", read_exactly(sock, 16))
    expect(magic == MAGIC and version == VERSION and reserved == 0, "a bad header from the aggregator")
    return ftype, read_exactly(sock, length)


def hello_body(rank, world, pid, host, job):
    def s(v):
        b = v.encode()
        return struct.pack("<I", len(b)) + b
    return struct.pack("<IIIQQ", rank, world, pid, 1, 2) + s(host) + s(job)


def tcp_hello(body, secret, nonce):
    """The TCP proof of docs/wire-protocol.md: HMAC-SHA256(secret, nonce || body)."""
    payload = body + hmac.new(secret.encode(), nonce + body, hashlib.sha256).digest()
    return header(T_HELLO, len(payload)) + payload


def decode_ack(payload):
    accepted = payload[0] != 0
    (n,) = struct.unpack_from("<I", payload, 1)
    return accepted, payload[5:5 + n].decode()


def connect(port, timeout=10.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def send_hello_frame(port, frame_for_nonce):
    """Connects, reads the challenge, sends frame_for_nonce(nonce), returns (accepted, reason)."""
    with connect(port) as s:
        ftype, nonce = read_frame(s)
        expect(ftype == T_CHALLENGE and len(nonce) == 32, f"first frame type {ftype}, {len(nonce)} bytes")
        s.sendall(frame_for_nonce(nonce))
        ftype, payload = read_frame(s)
        expect(ftype == T_HELLO_ACK, f"answer type {ftype}")
        return decode_ack(payload)


class Aggregator:
    """`commprof aggregate --expect N` on 127.0.0.1:<any port>, stderr into a file."""

    def __init__(self, ctx, name, expect_n=1, timeout_s=60, nofile=None):
        self.secret_file, self.addr_file = ctx.path(f"{name}.secret"), ctx.path(f"{name}.addr")
        self.out = ctx.path(f"{name}.h5")
        self.err_path = ctx.path(f"{name}.stderr")
        self.job = name
        self.err = open(self.err_path, "w")
        limit = None if nofile is None else (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile)))
        self.proc = subprocess.Popen(
            [ctx.commprof, "aggregate", "-q", "--expect", str(expect_n), "--listen", "127.0.0.1:0", "--job-id", name,
             "--secret-file", self.secret_file, "--address-file", self.addr_file, "--timeout", str(timeout_s),
             "-o", self.out], stdout=subprocess.DEVNULL, stderr=self.err, preexec_fn=limit)
        for _ in range(400):
            if os.path.exists(self.addr_file) and open(self.addr_file).read().strip():
                break
            expect(self.proc.poll() is None, f"{name}: aggregate exited early:\n{self.stderr()}")
            time.sleep(0.05)
        self.address = open(self.addr_file).read().strip()
        self.port = int(self.address.rsplit(":", 1)[1])
        self.secret = open(self.secret_file).read().strip()

    def stderr(self):
        with open(self.err_path) as f:  # the child writes it; our handle is only passed on
            return f.read()

    def env(self, spool_dir):
        return {"COMMPROF_AGGREGATOR": self.address, "COMMPROF_SECRET": self.secret, "COMMPROF_JOB_ID": self.job,
                "COMMPROF_SPOOL_DIR": spool_dir}

    def wait(self, timeout=120):
        rc = self.proc.wait(timeout=timeout)
        self.err.close()
        return rc

    def cpu_s(self):
        fields = open(f"/proc/{self.proc.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime

    def rss_bytes(self):
        for line in open(f"/proc/{self.proc.pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.err.close()


def run_rank(ctx, env, timeout=60):
    full = {k: v for k, v in os.environ.items() if not k.startswith("COMMPROF_")}
    full.update(env)
    p = subprocess.run([ctx.test_program("c_api_program")], env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout)
    expect(p.returncode == 0, f"c_api_program: exit code {p.returncode}\n{p.stderr}")
    return p


def check_rank_stored(agg, pid=None):
    with h5py.File(agg.out, "r") as f:
        ranks = sorted(f["ranks"])
        expect(ranks == ["0"], f"ranks stored: {ranks}")
        g = f["ranks"]["0"]
        expect(g.attrs["status"] == "complete", f"status {g.attrs['status']}")
        n = g["events"].shape[0]
        expect(n > 0, "the real rank's events are stored")
        if pid is not None:
            expect(int(g.attrs["pid"]) == pid, f"stored pid {g.attrs['pid']}, the real rank's is {pid}")


def spool_files(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".cpspool")) if os.path.isdir(d) else []


# ---------------------------------------------------------------------------------------------

def case_replay(ctx):
    agg = Aggregator(ctx, "replay")
    try:
        # 1. A spool written by a real collector that could not reach the aggregator: private.
        spool = ctx.path("spool/a/b")
        old_umask = os.umask(0)
        try:
            run_rank(ctx, {"COMMPROF_SECRET": agg.secret, "COMMPROF_JOB_ID": agg.job, "COMMPROF_SPOOL_DIR": spool})
        finally:
            os.umask(old_umask)
        files = spool_files(spool)
        expect(len(files) == 1, f"one spool file: {files}")
        spool_path = os.path.join(spool, files[0])
        for d in (ctx.path("spool"), ctx.path("spool/a"), spool):
            expect(stat.S_IMODE(os.stat(d).st_mode) == 0o700, f"{d}: mode {oct(os.stat(d).st_mode)}")
        expect(stat.S_IMODE(os.stat(spool_path).st_mode) == 0o600, f"spool mode {oct(os.stat(spool_path).st_mode)}")
        raw = open(spool_path, "rb").read()
        _, _, ftype, length, _ = struct.unpack_from("<IHHII", raw)
        expect(ftype == T_HELLO, "the spool starts with a hello")
        spool_hello = raw[:16 + length]
        body, proof = spool_hello[16:-32], spool_hello[-32:]
        expect(hmac.compare_digest(proof, hmac.new(agg.secret.encode(), body, hashlib.sha256).digest()),
               "the spool's hello carries the nonce-less proof of the document")

        # 2. Replaying the spool's hello over TCP.
        accepted, reason = send_hello_frame(agg.port, lambda nonce: spool_hello)
        expect(not accepted and "replayed" in reason and "spool" in reason, f"spool replay: {accepted} {reason!r}")

        # 3. A hello captured on the wire: a proxy in front of the aggregator records what a real
        #    collector sends over it and lets the connection die (the collector then spools).
        captured = {}
        lsock = socket.socket()
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(1)

        def proxy():
            c, _ = lsock.accept()
            with c, connect(agg.port) as up:
                ftype, nonce = read_frame(up)
                c.sendall(header(ftype, len(nonce)) + nonce)
                h = read_exactly(c, 16)
                captured["hello"] = h + read_exactly(c, struct.unpack_from("<I", h, 8)[0])
        t = threading.Thread(target=proxy)
        t.start()
        env = agg.env(ctx.path("spool-proxied"))
        env["COMMPROF_AGGREGATOR"] = f"127.0.0.1:{lsock.getsockname()[1]}"
        env["COMMPROF_CONNECT_TIMEOUT_MS"] = "1000"
        run_rank(ctx, env)
        t.join(timeout=30)
        lsock.close()
        expect("hello" in captured, "the proxy captured no hello")
        accepted, reason = send_hello_frame(agg.port, lambda nonce: captured["hello"])
        expect(not accepted and "wrong HMAC proof" in reason and "challenge" in reason,
               f"captured replay: {accepted} {reason!r}")

        # 4. Hello sanity: a world above 2^20 is refused at decode, naming the field.
        big = hello_body(0, (1 << 20) + 1, 99, "h", agg.job)
        accepted, reason = send_hello_frame(agg.port, lambda nonce: tcp_hello(big, agg.secret, nonce))
        expect(not accepted and "'world_size'" in reason and "1048576" in reason, f"huge world: {reason!r}")

        # 5. The real rank connects (and nothing of the replays was stored).
        real_spool = ctx.path("spool-real")
        p = run_rank(ctx, agg.env(real_spool))
        expect(spool_files(real_spool) == [], f"the real rank spooled instead:\n{p.stderr}")
        rc = agg.wait()
        err = agg.stderr()
        expect(rc == 0, f"aggregate exit code {rc}:\n{err}")
        expect(err.count("refused connection") == 3, f"three refusals logged:\n{err}")
        check_rank_stored(agg)
    finally:
        agg.kill()


def case_flood(ctx):
    agg = Aggregator(ctx, "flood")
    peers = []
    try:
        time.sleep(0.2)
        rss0 = agg.rss_bytes()
        for i in range(300):
            s = connect(agg.port)
            if i % 2:
                s.sendall(header(T_EVENTS, MAX_PAYLOAD))  # announces 16 MiB, sends nothing more
            peers.append(s)
        time.sleep(1.0)  # let the aggregator take all of them (bounded by the backlog either way)
        growth = agg.rss_bytes() - rss0
        expect(growth < 32 << 20, f"RSS grew by {growth} bytes for 300 unauthenticated peers")
        spool = ctx.path("spool-flood")
        t0 = time.monotonic()
        p = run_rank(ctx, agg.env(spool))
        took = time.monotonic() - t0
        expect(spool_files(spool) == [], f"the real rank spooled instead of connecting:\n{p.stderr}")
        expect(took < 10.0, f"the real rank took {took:.1f} s: it waited for the silent peers' deadline")
        rc = agg.wait()
        err = agg.stderr()
        expect(rc == 0, f"aggregate exit code {rc}:\n{err}")
        expect("still open" not in err, f"aggregate waited for unauthenticated peers as if they were ranks:\n{err}")
        check_rank_stored(agg)
        lines = err.count("\n")
        expect(lines < 60, f"{lines} log lines for 300 bad peers (rate-limited to 5 per second per kind):\n{err}")
        print(f"flood: RSS +{growth / 1048576:.1f} MiB, real rank in {took:.2f} s, {lines} log lines")
    finally:
        for s in peers:
            s.close()
        agg.kill()


def case_fd_exhaustion(ctx):
    agg = Aggregator(ctx, "fds", nofile=48)
    peers = []
    try:
        # Idle peers until the aggregator's log says it ran out of descriptors (strerror(EMFILE),
        # whatever line carries it: the check is on what the aggregator does next).
        deadline = time.monotonic() + 30
        while "Too many open files" not in agg.stderr():
            expect(time.monotonic() < deadline, f"no EMFILE after {len(peers)} peers:\n{agg.stderr()}")
            expect(agg.proc.poll() is None, f"aggregate exited:\n{agg.stderr()}")
            peers.append(connect(agg.port))
            time.sleep(0.01)
        for _ in range(50):  # more waiting in the backlog
            peers.append(connect(agg.port))
        lines0 = agg.stderr().count("\n")
        cpu0 = agg.cpu_s()
        time.sleep(2.0)
        cpu = agg.cpu_s() - cpu0
        lines = agg.stderr().count("\n") - lines0
        expect(cpu < 0.5, f"the aggregator used {cpu:.2f} s of CPU in 2 s out of descriptors (a spinning accept loop)")
        expect(lines < 20, f"{lines} log lines in 2 s out of descriptors:\n{agg.stderr()[-3000:]}")
        for s in peers:
            s.close()
        peers = []
        spool = ctx.path("spool-fds")
        p = run_rank(ctx, agg.env(spool))
        expect(spool_files(spool) == [], f"the real rank spooled instead of connecting:\n{p.stderr}")
        rc = agg.wait()
        err = agg.stderr()
        expect(rc == 0, f"aggregate exit code {rc}:\n{err}")
        check_rank_stored(agg)
        print(f"fd_exhaustion: {cpu:.3f} s CPU and {lines} log lines in 2 s out of descriptors")
    finally:
        for s in peers:
            s.close()
        agg.kill()


CASES = {"replay": case_replay, "flood": case_flood, "fd_exhaustion": case_fd_exhaustion}


def main():
    a, ctx = case_arguments(CASES)
    CASES[a.case](ctx)
    print(f"{a.case}: ok")


if __name__ == "__main__":
    main()
