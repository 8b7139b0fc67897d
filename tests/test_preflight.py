"""The preflight refuses, before any notebook runs, what a paper-scale run would fail on late: one line on stderr naming
the key and the fix, exit status 2. Each refusal is driven here through `calirl reproduce --dry-run` on CPU stand-ins."""
import http.server, json, threading
from pathlib import Path
import pytest
from conftest import ROOT, calirl
from calirl.tasks import tiny_items, write_collabllm_fixture

CPU = ("-p", "device=cpu", "-p", "offline=true", "-p", "rollout_backend=hf")   # [paper]'s settings, on this CPU, without the hub or vLLM

def _refusals(r) -> dict[str, str]:
    "The preflight's failures in a dry run's stderr: key -> line."
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.splitlines()
    assert lines and all(l.startswith("calirl: error: preflight: ") for l in lines), r.stderr
    return {l.split("`")[1]: l for l in lines}

@pytest.fixture
def endpoint():
    "A local stand-in for the oracle/judge server: `GET /v1/models` lists the models it is started with."
    servers = []
    def start(models):
        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.end_headers()
                self.wfile.write(json.dumps({"data": [{"id": m} for m in models]}).encode())
            def log_message(self, *a): pass
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}/v1"
    yield start
    for s in servers: s.shutdown()

def test_a_local_data_source_too_small_is_refused(tmp_path, endpoint):
    for t in ("math-chat", "docedit-chat"): write_collabllm_fixture(tmp_path / f"{t}.parquet", tiny_items(t, "train", 30, 0))
    url = endpoint(["Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"])
    r = calirl("reproduce", "--profile", "paper", "--dry-run", *CPU, "-p", f"openai_base_url={url}", "-p", f"data_source={tmp_path}",
               "-p", "n_eval_items=10", "-p", "oracle_per_item=1", "--root", ROOT, cwd=ROOT)
    got = _refusals(r)
    assert set(got) == {"n_train_items", "oracle_per_item"}, r.stderr        # 1,860 prompts and 1,860 items asked, 20 there
    assert "math-chat: 1,860 RL prompts asked for" in r.stderr and "set n_train_items ≤ 20" in got["n_train_items"], r.stderr
    assert "math-chat: 1,860 oracle trajectories at 1 per item need 1,860 items, there are 20; set oracle_per_item ≥ 93" in r.stderr, r.stderr
    ok = calirl("reproduce", "--profile", "paper", "--dry-run", *CPU, "-p", f"openai_base_url={url}", "-p", f"data_source={tmp_path}",
                "-p", "n_eval_items=10", "-p", "n_train_items=20", "--root", ROOT, cwd=ROOT)   # oracle_per_item = 0: as many per item as needed
    assert ok.returncode == 0 and ok.stderr == "", ok.stderr
    assert "math-chat: 30 conversations" in ok.stdout and "93 on each of 20 items" in ok.stdout, ok.stdout

def test_an_endpoint_serving_another_model_is_refused(endpoint):
    url = endpoint(["Qwen/Qwen2.5-72B-Instruct"])
    got = _refusals(calirl("reproduce", "--profile", "paper", "--dry-run", *CPU, "-p", f"openai_base_url={url}", "--root", ROOT, cwd=ROOT))
    assert set(got) == {"oracle_model", "judge_model"}, got
    assert "serves Qwen/Qwen2.5-72B-Instruct and does not answer as Qwen/Qwen3-235B-A22B-Instruct-2507-FP8" in got["oracle_model"], got

def test_a_batch_that_does_not_split_over_the_processes_is_refused(endpoint):
    url = endpoint(["Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"])
    got = _refusals(calirl("reproduce", "--profile", "paper", "--dry-run", *CPU, "-p", f"openai_base_url={url}", "-p", "processes=3",
                           "--root", ROOT, cwd=ROOT))
    assert set(got) == {"processes", "sft_batch_size"}, got                  # 8,192 rollouts ≠ 16 × 3 × k; 32 conversations ≠ 3 × k
    assert "grpo_batch = 8,192 in grpo_updates = 2 mini-batches of 4,096 is not micro_batch (16) × processes (3)" in got["processes"], got

def test_the_shipped_constraints_are_the_preflights_version_set():
    from calirl.preflight import PAPER_VERSIONS
    lines = (ROOT / "constraints" / "paper.txt").read_text().splitlines()
    assert {l.split("==")[0]: l.split("==")[1] for l in lines if "==" in l and not l.startswith("#")} == PAPER_VERSIONS
