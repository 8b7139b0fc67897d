"Launched trainers end with the process that launched them."
import os, subprocess, sys, textwrap, time
from pathlib import Path


def _alive(pid:int) -> bool:
    try: os.kill(pid, 0)
    except ProcessLookupError: return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def test_launched_processes_end_with_their_caller(tmp_path):
    "SIGKILL the process that called `launched`: both processes it started stop too, none is left running a trainer."
    script = tmp_path / "caller.py"
    script.write_text(textwrap.dedent(f"""
        from calirl.training import launched
        def job(folder):
            import os, time
            open(os.path.join(folder, f"pid-{{os.getpid()}}"), "w").close()
            time.sleep(600)
        launched(job, {str(tmp_path)!r}, 2)
    """))
    caller = subprocess.Popen([sys.executable, str(script)], env={**os.environ, "OMP_NUM_THREADS": "1"},
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 180
    while len(list(tmp_path.glob("pid-*"))) < 2 and time.time() < deadline and caller.poll() is None: time.sleep(0.5)
    pids = [int(p.name[4:]) for p in tmp_path.glob("pid-*")]
    assert len(pids) == 2, f"the two launched processes did not start (caller exit {caller.poll()})"
    caller.kill()
    caller.wait()
    deadline = time.time() + 60
    while any(map(_alive, pids)) and time.time() < deadline: time.sleep(0.5)
    left = [p for p in pids if _alive(p)]
    for p in left: os.kill(p, 9)
    assert not left, f"launched processes {left} outlived their caller"
