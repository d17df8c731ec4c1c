# ===- launch.py - Starting Braid's runners for tests and benchmarks -----===#
#
# Part of Braid.
#
# ===----------------------------------------------------------------------===#
"""How e2e.py and bench/gpu start braid-exec(-cuda) and friends.

- braid_env(): the environment for Braid's own binaries. When
  BRAID_RUN_LIBRARY_PATH is set (bench/gpu/run_all.sh sets it to the
  bundle's libraries and the machine's CUDA and NCCL), it goes in front of
  LD_LIBRARY_PATH for those processes only, never for the Python process or
  PyTorch, which must keep finding their own libraries.
- run(): one process with a wall-clock limit; a process past it is killed
  and reported as exit status 124 with what it printed so far.
- mpirun(): the command line that starts N ranks through
  scripts/mpirun.sh (a private Open MPI session directory per job, so that
  concurrent tests never share one).
- run_ranks(): N processes, one per GPU, NCCL bootstrapped through a fresh
  id file (BRAID_NCCL_ID_FILE, BRAID_RANK, BRAID_WORLD_SIZE and
  BRAID_LOCAL_RANK), no MPI launcher needed; when one rank fails the others
  get a few seconds to report before they are killed.
"""
import os
import signal
import subprocess
import tempfile
import time


MPIRUN = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "scripts", "mpirun.sh")


def mpirun(ranks, *options):
    """`scripts/mpirun.sh -np RANKS OPTIONS...`: append the program and its
    arguments."""
    return [MPIRUN, "-np", str(ranks), *options]


class Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


def braid_env(extra=None):
    env = dict(os.environ)
    libs = os.environ.get("BRAID_RUN_LIBRARY_PATH")
    if libs:
        old = env.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = libs + (":" + old if old else "")
    if extra:
        env.update(extra)
    return env


_live = set()


def _kill_live(signum, frame):
    # A run in its own process group is not in ours: when we are told to
    # stop (run_all.sh's timeout sends SIGTERM to our group), it must not
    # outlive us and keep the GPU.
    for proc in list(_live):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    os._exit(128 + signum)


def _start(cmd, out, err, env):
    # Its own process group, so that a kill also takes whatever it started
    # (a wrapper's children, mpirun's ranks).
    if not _live:
        try:
            signal.signal(signal.SIGTERM, _kill_live)
            signal.signal(signal.SIGINT, _kill_live)
        except ValueError:  # not the main thread
            pass
    proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env,
                            start_new_session=True)
    _live.add(proc)
    return proc


def _done(proc):
    _live.discard(proc)


def _kill(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()
    _done(proc)


def _read(f):
    f.seek(0)
    return f.read().decode(errors="replace")


def run(cmd, timeout, env=None):
    """Runs cmd; returns a Result (returncode 124 after `timeout` seconds)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = _start(cmd, out, err, env if env is not None else braid_env())
        try:
            rc = proc.wait(timeout=timeout)
            _done(proc)
        except subprocess.TimeoutExpired:
            _kill(proc)
            return Result(124, _read(out),
                          _read(err) + f"\nkilled after {timeout:.0f} s\n")
        return Result(rc, _read(out), _read(err))


def run_ranks(cmd, ranks, id_file, timeout, env=None):
    """Runs cmd as `ranks` NCCL processes (id-file bootstrap); rank 0's
    output first, the others' prefixed with their rank."""
    if os.path.exists(id_file):
        os.remove(id_file)
    base = env if env is not None else braid_env()
    procs, files = [], []
    for rank in range(ranks):
        out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
        rank_env = dict(base, BRAID_NCCL_ID_FILE=id_file, BRAID_RANK=str(rank),
                        BRAID_WORLD_SIZE=str(ranks),
                        BRAID_LOCAL_RANK=str(rank))
        procs.append(_start(cmd, out, err, rank_env))
        files.append((out, err))
    deadline = time.monotonic() + timeout
    failed_at = None
    codes = [None] * ranks
    while any(c is None for c in codes):
        for i, proc in enumerate(procs):
            if codes[i] is None:
                codes[i] = proc.poll()
                if codes[i] is not None:
                    _done(proc)
                if codes[i] not in (None, 0) and failed_at is None:
                    failed_at = time.monotonic()
        now = time.monotonic()
        # A failed rank takes the job down (the runtime aborts its peers);
        # whoever is still there after 5 s, or at the deadline, is killed.
        if now > deadline or (failed_at is not None and now > failed_at + 5):
            for i, proc in enumerate(procs):
                if codes[i] is None:
                    _kill(proc)
                    codes[i] = 124
            break
        time.sleep(0.02)
    stdout, stderr = "", ""
    for rank, (out, err) in enumerate(files):
        prefix = "" if rank == 0 else f"[rank {rank}] "
        stdout += "".join(prefix + line + "\n"
                          for line in _read(out).splitlines())
        stderr += "".join(prefix + line + "\n"
                          for line in _read(err).splitlines())
        out.close()
        err.close()
    if os.path.exists(id_file):
        os.remove(id_file)
    rc = next((c for c in codes if c), 0)
    if rc == 124:
        stderr += f"killed after {timeout:.0f} s\n"
    return Result(rc, stdout, stderr)
