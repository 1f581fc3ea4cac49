#!/usr/bin/python3
"""steptime.py: run a training command and time its per-step log lines.

    steptime.py --batch 64 --skip 50 --steps 400 --log FILE -- COMMAND ARGS...

Starts COMMAND with its stdout (and stderr) on a pipe, takes the launch time
with time.monotonic() just before the fork, and stamps every line it reads
with the seconds since launch.  A step line is one in trainc's format,
    Train Epoch: E [SEEN/TOTAL (P%)]\tLoss: L
which trainc prints after every optimizer step when train.log_interval=1 and
bench/torch_cnn.py always prints; both flush stdout after each line.  The
k-th step line marks the end of step k (its optimizer update included).

Prints one line of key=value pairs:
  first_step_s   launch to the end of step 1 (process start, data loading,
                 setup and the first step)
  steady_ips     images/s from the end of step --skip to the end of step
                 --steps: (steps - skip) * batch / (t[steps] - t[skip])
  median_ips     batch / the median step time over the same steps; robust
                 to a few steps slowed by other work on the machine
  steps_seen     step lines read
  wall_s         launch to exit
  rc             COMMAND's exit status
  t0             the launch time itself, on CLOCK_MONOTONIC (the clock of
                 perf record -k CLOCK_MONOTONIC), to line up with a profile
  others         CPU time used by everything else on the machine during the
                 run, per second of wall time (busy time from /proc/stat less
                 the CPU time of COMMAND and its children): 0.1 means a tenth
                 of a core was taken by other work, and the figures above are
                 suspect well before it reaches 1
Every stamped line goes to --log.  Needs only Python's standard library.
"""
import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time

STEP = re.compile(r"^Train Epoch: \d+ \[\d+/\d+ \(\d+%\)\]")


def busy_seconds():
    """CPU seconds all cores have spent busy since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)  # idle + iowait
    return (sum(v[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def self_cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--skip", type=int, default=50)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--log", required=True)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not cmd:
        sys.exit("steptime.py: no command")

    ends = []
    with open(a.log, "w") as log:
        b0, c0, s0 = busy_seconds(), children_cpu(), self_cpu()
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0)
        for raw in proc.stdout:
            t = time.monotonic() - t0
            line = raw.decode(errors="replace").rstrip("\n")
            if STEP.match(line):
                ends.append(t)
            log.write(f"{t:10.4f}\t{line}\n")
            log.flush()
        rc = proc.wait()
        wall = time.monotonic() - t0
        others = (busy_seconds() - b0) - (children_cpu() - c0) - (self_cpu() - s0)

    out = {"first_step_s": f"{ends[0]:.3f}" if ends else "nan",
           "steady_ips": "nan", "median_ips": "nan", "steps_seen": str(len(ends)), "wall_s": f"{wall:.3f}", "rc": str(rc),
           "t0": f"{t0:.6f}",
           "others": f"{max(others, 0.0) / wall:.2f}"}
    if a.skip >= 1 and len(ends) >= a.steps > a.skip:
        dt = ends[a.steps - 1] - ends[a.skip - 1]
        if dt > 0:
            out["steady_ips"] = f"{(a.steps - a.skip) * a.batch / dt:.1f}"
        med = statistics.median(ends[i] - ends[i - 1] for i in range(a.skip, a.steps))
        if med > 0:
            out["median_ips"] = f"{a.batch / med:.1f}"
    print(" ".join(f"{k}={v}" for k, v in out.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
