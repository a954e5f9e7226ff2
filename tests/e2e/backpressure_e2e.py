#!/usr/bin/env python3
"""Back-pressure in the aggregator (docs/scale.md#back-pressure): a writer slower than the ranks
must slow the ranks' shipping, not grow the aggregator's memory, and lose nothing.

Usage: backpressure_e2e.py CASE --build BUILD_DIR --work WORK_DIR

Case and its truth:
  bounded_queue  64 simulated ranks (bench/load_generator.cc, the real wire protocol over TCP) send
                 20000 events each in frames of 1000 (82 MB of records) to `commprof aggregate`,
                 whose writer is slowed to 2 ms per frame of 1000 (COMMPROF_TEST_WRITER_DELAY_US), far
                 slower than the ranks send. With --queue-mb 2 the queue of events received and
                 not yet written never exceeds 2 MiB plus one frame per connection
                 (ingest_queue_peak_bytes), sessions paused reading (ingest_read_pauses > 0), and
                 the file holds every event of every rank (20000 each, complete). The same load
                 with --queue-mb 1024 queues far more than that bound (so the bound is what held
                 it) and the aggregator's peak memory is larger by more than 30 MiB.
  congested_spool
                 A real 2-rank Open MPI job (100000 8-byte allreduces a rank) under `commprof run
                 --queue-mb 1` whose writer is slowed to 20 ms per 1000 events (50000 events/s, far
                 slower than the ranks; its connections get 64 KiB receive buffers), with
                 COMMPROF_SEND_TIMEOUT_MS=100: the aggregator stops reading, a rank's send does not
                 complete within 100 ms (long before its 65536-event ring fills), and the rank goes
                 on into its spool; at the end `run`
                 merges the spools. Truth: the job's exit code (0), every rank complete with every
                 event it recorded in the file (events_written == events_recorded, nothing dropped),
                 and at least one rank says spooled_congested = 1.
No timing is asserted: only counts, the stored bound figures and memory.
"""
import os
import subprocess
import sys
import time

import h5py

from e2e_support import expect, mpirun, run, run_cases

RANKS, EVENTS, BATCH = 64, 20000, 1000
FRAME_BYTES = 16 + 12 + BATCH * 64  # header, batch fields, records


def aggregate_once(ctx, name, queue_mb):
    secret_file, addr_file = ctx.path(f"{name}.secret"), ctx.path(f"{name}.addr")
    out = ctx.path(f"{name}.h5")
    env = dict(os.environ, COMMPROF_TEST_WRITER_DELAY_US="2000")
    err = open(ctx.path(f"{name}.stderr"), "w")
    agg = subprocess.Popen(
        [ctx.commprof, "aggregate", "-q", "--no-analysis", "--expect", str(RANKS), "--listen", "127.0.0.1:0",
         "--job-id", name, "--secret-file", secret_file, "--address-file", addr_file, "--timeout", "280",
         "--queue-mb", str(queue_mb), "-o", out], stdout=subprocess.DEVNULL, stderr=err, env=env)
    for _ in range(400):
        if os.path.exists(addr_file) and open(addr_file).read().strip():
            break
        expect(agg.poll() is None, f"{name}: aggregate exited early")
        time.sleep(0.05)
    port = open(addr_file).read().strip().rsplit(":", 1)[1]
    secret = open(secret_file).read().strip()
    gen = subprocess.run(
        [os.path.join(ctx.build, "bench", "commprof_load_generator"), "--port", port, "--secret", secret, "--job",
         name, "--ranks", str(RANKS), "--events", str(EVENTS), "--batch", str(BATCH), "--threads", "8"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=280)
    _, status, usage = os.wait4(agg.pid, 0)
    err.close()
    stderr = open(ctx.path(f"{name}.stderr")).read()
    expect(gen.returncode == 0, f"{name}: load generator failed:\n{gen.stdout}{gen.stderr}\naggregate:\n{stderr}")
    expect(os.waitstatus_to_exitcode(status) == 0, f"{name}: aggregate exit {status}:\n{stderr}")
    print(f"{name}: {gen.stdout.strip()}; aggregate peak RSS {usage.ru_maxrss / 1024:.1f} MiB")
    with h5py.File(out, "r") as f:
        peak = int(f.attrs["ingest_queue_peak_bytes"])
        pauses = int(f.attrs["ingest_read_pauses"])
        for r in range(RANKS):
            g = f["ranks"][str(r)]
            expect(g.attrs["status"] == "complete", f"{name}: rank {r} {g.attrs['status']}")
            expect(int(g.attrs["events_written"]) == EVENTS and g["events"].shape[0] == EVENTS,
                   f"{name}: rank {r} holds {g['events'].shape[0]} events, sent {EVENTS}")
            expect(int(g.attrs.get("batches_lost", 0)) == 0, f"{name}: rank {r} lost batches")
    print(f"{name}: queue peak {peak / 2**20:.2f} MiB, {pauses} read pauses")
    return peak, pauses, usage.ru_maxrss * 1024


def case_bounded_queue(ctx):
    bound = 2 << 20
    allowance = bound + RANKS * FRAME_BYTES
    peak, pauses, rss = aggregate_once(ctx, "bounded", 2)
    expect(peak <= allowance, f"queue peaked at {peak} bytes, over 2 MiB + one frame per connection ({allowance})")
    expect(pauses > 0, "no session ever paused: the writer was never behind, the case tests nothing")
    free_peak, _, free_rss = aggregate_once(ctx, "unbounded", 1024)
    expect(free_peak > allowance,
           f"without the bound the queue peaked at only {free_peak} bytes: the writer kept up, the case tests nothing")
    expect(free_rss > rss + (30 << 20),
           f"peak memory bounded {rss >> 20} MiB vs unbounded {free_rss >> 20} MiB: the bound saved under 30 MiB")


def case_congested_spool(ctx):
    out = ctx.path("congested.h5")
    env = {"COMMPROF_TEST_WRITER_DELAY_US": "20000", "COMMPROF_SEND_TIMEOUT_MS": "100",
           "COMMPROF_BUFFER_EVENTS": "1048576"}  # a ring the whole job fits in: a shipper thread starved of CPU
    # on a loaded 2-core machine must not drop what this case counts
    cmd = [ctx.commprof, "run", "--no-analysis", "--queue-mb", "1", "-o", out, "--"] + mpirun(2) + [
        ctx.example, "--iters", "100000", "--bytes", "8", "--compute-us", "0"]
    p = run(cmd, env=env, check_rc=0, timeout=280)
    expect("congested" in p.stderr, f"no rank reported the congestion:\n{p.stderr[-3000:]}")
    congested = 0
    with h5py.File(out, "r") as f:
        for r in ("0", "1"):
            g = f["ranks"][r]
            a = g.attrs
            expect(a["status"] == "complete", f"rank {r}: {a['status']} ({a.get('end_reason')})")
            recorded = int(a["events_recorded"])
            expect(int(a.get("dropped_events", 0)) == 0, f"rank {r} dropped events: {dict(a)}")
            expect(g["events"].shape[0] == recorded,
                   f"rank {r}: {g['events'].shape[0]} events in the file, {recorded} recorded")
            congested += int(a.get("spooled_congested", 0))
    expect(congested >= 1, "no rank went to its spool: the aggregator was never congested, the case tests nothing")
    print(f"congested_spool: {congested} rank(s) spooled while the aggregator was congested; every event stored")


CASES = {"bounded_queue": case_bounded_queue, "congested_spool": case_congested_spool}


if __name__ == "__main__":
    sys.exit(run_cases(CASES))
