"""The judge scores a batch of conversations in concurrent requests (`judge_concurrency`): against a stub OpenAI-compatible
endpoint that takes 100 ms per request, 64 conversations scored 16 at a time take a fraction of what one request after
another takes, with the same verdicts in the same (input) order, and an answer the judge model garbled is counted as
unscorable, never fatal. The stub is a real HTTP server on 127.0.0.1 that the test starts itself; the client, the
judge and `task_rewards` are the package's own. Times are compared as a ratio measured in this run, never as seconds."""
import http.server, json, re, threading, time
import pytest
from calirl.components import judge_for
from calirl.rewards import Score, task_rewards, unscorable
from calirl.settings import PROFILE_KEYS, load_profile
from calirl.tasks import TaskItem
from conftest import ROOT

N, DELAY = 64, 0.1

class _Judge(http.server.BaseHTTPRequestHandler):
    "A judge model: `DELAY` seconds per request; the verdict the answer in the prompt asks for (`ANSWER-i-right|wrong|garble`)."
    in_flight, peak, lock = 0, 0, threading.Lock()
    def log_message(self, *a): pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with _Judge.lock:
            _Judge.in_flight += 1
            _Judge.peak = max(_Judge.peak, _Judge.in_flight)
        time.sleep(DELAY)
        kind = re.search(r"ANSWER-\d+-(\w+)", body["messages"][-1]["content"]).group(1)
        text = {"right": '{"thought": "same", "accuracy": 1}', "wrong": '{"thought": "differs", "accuracy": 0}'}.get(kind, "no verdict here")
        out = json.dumps({"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}).encode()
        with _Judge.lock: _Judge.in_flight -= 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

@pytest.fixture
def endpoint():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Judge)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_port}/v1"
    srv.shutdown()
    srv.server_close()

def _judge(url:str, concurrency:int):
    "The judge the smoke profile names once its judge is a model behind `url`, sending `concurrency` requests at once."
    smoke = load_profile("smoke", ROOT / "settings.ini")
    keys = {k: getattr(smoke, k) for k in PROFILE_KEYS}
    return judge_for({**keys, "judge_model": "stub-judge", "eval_backend": "openai", "openai_base_url": url, "judge_concurrency": concurrency})

def _batch():
    "N paper-style math conversations (no structured goal: the judge reads the last assistant message) and the scores they must get."
    kinds = ["right", "wrong", "right", "garble"] * (N // 4)
    items = [TaskItem("math-chat", f"m{i}", f"question {i}", f"gold {i}") for i in range(N)]
    convs = [[{"role": "user", "content": it.x}, {"role": "assistant", "content": f"ANSWER-{i}-{k}"}] for i, (it, k) in enumerate(zip(items, kinds))]
    want = [Score(1.0) if k == "right" else Score(0.0) if k == "wrong" else unscorable("judge_unparseable") for k in kinds]
    return items, convs, want

def _timed_scores(url, concurrency):
    items, convs, want = _batch()
    judge = _judge(url, concurrency)
    task_rewards(items[:1], convs[:1], judge)                       # warm: the client library imported, a connection made
    _Judge.peak = 0
    t0 = time.perf_counter()
    got = task_rewards(items, convs, judge)
    return got, want, time.perf_counter() - t0, _Judge.peak

@pytest.mark.timeout(120)
def test_a_batch_is_judged_in_concurrent_requests_in_input_order(endpoint):
    one, want, t_one, peak_one = _timed_scores(endpoint, 1)
    many, _, t_many, peak_many = _timed_scores(endpoint, 16)
    assert one == want and many == want                             # the same verdicts, in input order; garbled ones counted
    assert peak_one == 1 and 1 < peak_many <= 16                     # requests in flight at once at the server: the check (the speed-up below is reported, not asserted)
    ratio = t_one / t_many
    print(f"{N} judged conversations, {DELAY * 1000:.0f} ms a request: one at a time {t_one:.2f} s, 16 at a time {t_many:.2f} s "
          f"-> {ratio:.1f}x faster (ideal 16x)")
