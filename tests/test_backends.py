"""Generation backends: HF log-probabilities and left padding, vLLM (GPU only), and the OpenAI-compatible HTTP
client against local stub servers and a real `transformers serve` on 127.0.0.1."""
# tolerances: a reloaded model is compared bit for bit (same weights, kernels, shapes); log-probabilities from two ways of
# computing them, within the rounding of the model's sums in another order (`calirl.runtime.assert_order_close`); vLLM's
# (GPU, its own kernels and precision) within 2e-2, a check that it scores the tokens it drew, not a rounding bound
import http.server, importlib.util, json, logging, os, shutil, signal, socket, subprocess, threading, time, traceback, types, urllib.request
import pytest, torch
from conftest import BIN, free_port
from transformers.utils import logging as hf_logging
from calirl.models import build_tiny_model, load_model, save_model, train_tokenizer, with_role
from calirl import backends
from calirl.backends import BackendError, Completion, HFBackend, OpenAIBackend, VLLMBackend, chat_prompt_ids

hf_logging.set_verbosity_error(); hf_logging.disable_progress_bar()
KEY = "sk-test-secret-4242"
CORPUS = [f"i have {a} apples and get {b} more . {a} + {b} = {a + b} ." for a in range(1, 25) for b in range(1, 12)]

def scramble(model, seed=0, std=0.3):
    "Large random weights, so that every output depends on the whole context (std-0.02 tiny models repeat tokens)."
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1: p.copy_(torch.randn(p.shape, generator=g) * std)
    return model

@pytest.fixture(scope="module")
def tok():
    return train_tokenizer(CORPUS, vocab_size=300)

@pytest.fixture(scope="module", params=["qwen2", "gemma3"])
def backend(request, tok):
    model, ptok = build_tiny_model(tok, request.param, hidden=32, layers=2, role="policy", seed=0)
    return HFBackend(scramble(model), ptok)

def _prompts(tok):
    return [tok(t).input_ids for t in ("i have 12 apples", "12 + 7 =", "how many ?", "i have 3 apples and get 4 more . 3 + 4 =")]

def _forward_logprobs(model, prompt, completion, T):
    x = torch.tensor([prompt + completion])                                  # (1, P + C)
    with torch.no_grad(): z = model(x).logits[0, len(prompt) - 1:-1].float() / T   # (C, V)
    return torch.log_softmax(z, -1).gather(-1, torch.tensor(completion)[:, None]).squeeze(-1)  # (C,)

# --- the tiny-model builder: a saved tokenizer reloads as itself (the tokenizer trap) -----------------

@pytest.mark.parametrize("arch", ["qwen2", "gemma3"])
@pytest.mark.parametrize("role", ["policy", "simulator"])
def test_saved_model_and_tokenizer_reload_as_themselves(tmp_path, tok, arch, role):
    from transformers import AutoTokenizer, PreTrainedTokenizerFast
    model, rtok = build_tiny_model(tok, arch, hidden=32, layers=1, role=role, seed=0)
    path = save_model(model, rtok, tmp_path / "m")
    assert not list(path.glob("*.bin")) and (path / "model.safetensors").exists()
    loaded, ltok = load_model(path, device="cpu")
    chat = [{"role": "user", "content": "i have 12 apples"}, {"role": "assistant", "content": "12 + 7 = 19 ?"}]
    for t in (rtok, ltok, AutoTokenizer.from_pretrained(path), PreTrainedTokenizerFast.from_pretrained(path)):
        assert t("12 + 7 = 19 [[TERMINATE CHAT]]").input_ids == tok("12 + 7 = 19 [[TERMINATE CHAT]]").input_ids
        assert t.apply_chat_template(chat, return_dict=False) == rtok.apply_chat_template(chat, return_dict=False)
    x = torch.tensor([tok("12 + 7 = 19").input_ids])                       # (1, T)
    with torch.no_grad(): torch.testing.assert_close(loaded(x).logits, model(x).logits, rtol=0, atol=0)   # (1, T, V): bit for bit

# --- HFBackend -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("T", [1.0, 0.7])
def test_hf_logprobs_equal_a_separate_forward_pass(backend, tok, T):
    outs = backend.generate(_prompts(tok), max_new_tokens=10, temperature=T, seed=3)
    for p, o in zip(_prompts(tok), outs):
        assert isinstance(o, Completion) and len(o.token_ids) == len(o.logprobs) > 0
        backends.assert_logprobs_close(backend.model, [p], [o], o.logprobs, _forward_logprobs(backend.model, p, o.token_ids, T), T)

def test_hf_batched_greedy_equals_one_at_a_time(backend, tok):
    batched = backend.generate(_prompts(tok), max_new_tokens=12, temperature=0.0)
    single = [backend.generate([p], max_new_tokens=12, temperature=0.0)[0] for p in _prompts(tok)]
    assert [o.token_ids for o in batched] == [o.token_ids for o in single]
    for p, b, s in zip(_prompts(tok), batched, single): backends.assert_logprobs_close(backend.model, [p], [b], b.logprobs, s.logprobs)

def test_hf_small_batches_equal_one_big_batch(backend, tok):
    big = backend.generate(_prompts(tok), max_new_tokens=8, temperature=0.0)
    backend.max_batch_size = 3
    try: small = backend.generate(_prompts(tok), max_new_tokens=8, temperature=0.0)
    finally: backend.max_batch_size = 64
    assert [o.token_ids for o in small] == [o.token_ids for o in big]

def test_hf_seeded_sampling_is_reproducible_and_leaves_global_rng_alone(backend, tok):
    torch.manual_seed(123); before = torch.rand(1)
    torch.manual_seed(123)
    a = backend.generate(_prompts(tok), 10, temperature=1.0, seed=7)
    assert torch.equal(torch.rand(1), before)                           # generate did not consume the global RNG
    b = backend.generate(_prompts(tok), 10, temperature=1.0, seed=7)
    c = backend.generate(_prompts(tok), 10, temperature=1.0, seed=8)
    assert [o.token_ids for o in a] == [o.token_ids for o in b] != [o.token_ids for o in c]

def test_hf_cuts_at_the_first_stop_token_and_strips_padding(backend, tok):
    prompts = _prompts(tok)
    g = backend.generate(prompts[:1], 12, temperature=0.0)[0].token_ids
    stop = g[2]
    outs = backend.generate(prompts, 12, temperature=0.0, stop_token_ids=[stop])
    k = g.index(stop) + 1
    assert (outs[0].token_ids, outs[0].finish_reason, len(outs[0].logprobs)) == (g[:k], "stop", k)
    for p, o in zip(prompts, outs):
        alone = backend.generate([p], 12, temperature=0.0, stop_token_ids=[stop])[0]
        assert o.token_ids == alone.token_ids and o.finish_reason == alone.finish_reason
        assert stop not in o.token_ids[:-1]                              # nothing after the stop token
        assert o.finish_reason == ("stop" if o.token_ids[-1] == stop else "length")
        assert o.text == backend.tokenizer.decode(o.token_ids, skip_special_tokens=True)
    assert all(len(o.token_ids) == 12 for o in outs if o.finish_reason == "length")

def test_hf_generate_chat_uses_the_role_template(tok):
    model, stok = build_tiny_model(tok, "qwen2", 32, 1, role="simulator", seed=0)
    sim = HFBackend(scramble(model), stok)
    msgs = [{"role": "user", "content": "i have 12 apples"}, {"role": "assistant", "content": "how many more ?"}]
    ids = chat_prompt_ids(stok, msgs)
    assert stok.decode(ids).endswith("<|im_start|>user\n")
    assert sim.generate_chat([msgs], 6, temperature=0.0)[0].token_ids == sim.generate([ids], 6, temperature=0.0)[0].token_ids

@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_traced_decoding_step_equals_the_eager_one_bit_for_bit(arch):
    "Grouped-query attention, both lean architectures, rows stopping at different steps, an in-place weight update between calls, and the model released."
    import gc, weakref
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM
    from calirl.runtime import one_thread
    Config, Model = {"qwen2": (Qwen2Config, Qwen2ForCausalLM), "llama": (LlamaConfig, LlamaForCausalLM)}[arch]
    torch.manual_seed(0)
    model = scramble(Model(Config(vocab_size=97, hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=6,
                                  num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=arch == "qwen2")).eval())
    prompts = [[(7 * i + j) % 90 + 3 for j in range(3 + i % 5)] for i in range(12)]
    out = {}
    with one_thread():
        for traced in (False, True):
            d = backends.LeanDecoder(model, traced=traced)
            torch.manual_seed(2)
            calls = [d.generate(prompts, 12, T, 1.0, [5, 11, 17], 0) for T in (1.0, 0.0)]
            w0 = model.lm_head.weight.detach().clone()
            with torch.no_grad(): model.lm_head.weight.mul_(1.01)        # an optimizer step: in place
            calls.append(d.generate(prompts, 6, 1.0, 1.0, [5], 0))
            with torch.no_grad(): model.lm_head.weight.copy_(w0)
            out[traced] = [t for c in calls for t in c] + [t for e in d.cache.entries for t in e[1:]]
    assert len(out[False]) == len(out[True]) > 6
    assert all(torch.equal(a, b) for a, b in zip(out[False], out[True]))
    assert model in backends._STEPS
    ref = weakref.ref(model)
    del model, d
    gc.collect()
    assert ref() is None and len(backends._STEPS) == 0                   # the trace does not keep its model alive

def test_hf_empty_prompt_is_refused(backend):
    with pytest.raises(ValueError, match="at least one token"): backend.generate([[]], 4)

# --- VLLMBackend -----------------------------------------------------------------------------------------------

def test_vllm_backend_logprobs(tmp_path, tok):
    if importlib.util.find_spec("vllm") is None or not torch.cuda.is_available():
        pytest.skip(f"vLLM not installed / no CUDA GPU: vllm importable={importlib.util.find_spec('vllm') is not None}, "
                    f"cuda={torch.cuda.is_available()}; VLLMBackend runs only on a CUDA machine with `pip install calirl[vllm]`")
    model, ptok = build_tiny_model(tok, "qwen2", 64, 2, role="policy", seed=0)
    path = save_model(scramble(model), ptok, tmp_path / "m")
    vb = VLLMBackend(str(path), gpu_memory_utilization=0.2, max_model_len=256, enforce_eager=True)
    prompts = _prompts(tok)
    outs = vb.generate(prompts, 8, temperature=1.0, seed=0)
    hf_model, _ = load_model(path, device="cuda", dtype="float32")
    for p, o in zip(prompts, outs):
        assert len(o.token_ids) == len(o.logprobs) > 0
        torch.testing.assert_close(torch.tensor(o.logprobs), _forward_logprobs(hf_model, p, o.token_ids, 1.0).cpu(), atol=2e-2, rtol=2e-2)

# --- OpenAIBackend: client behaviour against local stubs -------------------------------------------------------

class _Stub(http.server.BaseHTTPRequestHandler):
    "Answers with the next status in `plan` (200 = a chat completion); `delay` seconds before answering."
    plan, seen, delay, retry_after = [200], [], 0.0, None
    def log_message(self, *a): pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Stub.seen.append(dict(auth=self.headers.get("Authorization"), body=body))
        code = _Stub.plan[min(len(_Stub.seen), len(_Stub.plan)) - 1]
        time.sleep(_Stub.delay)
        msg = body["messages"][-1]["content"]
        out = json.dumps({"choices": [{"message": {"role": "assistant", "content": f"echo: {msg}"}, "finish_reason": "length"}]}
                         if code == 200 else {"error": {"message": f"nope, your key {KEY} is wrong"}}).encode()
        try:
            self.send_response(code); self.send_header("Content-Type", "application/json")
            if _Stub.retry_after: self.send_header("Retry-After", _Stub.retry_after)
            self.send_header("Content-Length", str(len(out))); self.end_headers(); self.wfile.write(out)
        except (BrokenPipeError, ConnectionResetError): pass

@pytest.fixture
def stub(monkeypatch):
    monkeypatch.setenv("CALIRL_TEST_KEY", KEY)
    _Stub.plan, _Stub.seen, _Stub.delay, _Stub.retry_after = [200], [], 0.0, None
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_port}/v1"
    srv.shutdown(); srv.server_close()

def _client(url, **kw):
    return OpenAIBackend(url, "stub", api_key_env="CALIRL_TEST_KEY", **{**dict(timeout=2, max_retries=3, backoff=0.01), **kw})

def test_openai_retries_429_and_5xx_then_succeeds(stub):
    _Stub.plan = [503, 429, 500, 200]
    o = _client(stub).generate_chat([[{"role": "user", "content": "hi"}]], 5, temperature=0.5, top_p=0.9, seed=4)[0]
    assert (o.text, o.token_ids, o.logprobs, o.finish_reason) == ("echo: hi", [], None, "length")
    assert len(_Stub.seen) == 4 and all(s["auth"] == f"Bearer {KEY}" for s in _Stub.seen)
    body = _Stub.seen[-1]["body"]
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["seed"], body["model"]) == (5, 0.5, 0.9, 4, "stub")

def test_openai_batch_keeps_order(stub):
    c = _client(stub, max_workers=4)
    outs = c.generate_chat([[{"role": "user", "content": str(i)}] for i in range(10)], 4)
    assert [o.text for o in outs] == [f"echo: {i}" for i in range(10)]

def test_openai_client_errors_fail_at_once_and_never_show_the_key(stub):
    _Stub.plan = [401]
    c = _client(stub)
    with pytest.raises(BackendError) as e: c.chat([{"role": "user", "content": "hi"}], 4)
    assert "HTTP 401" in str(e.value) and len(_Stub.seen) == 1
    for text in (str(e.value), repr(e.value), repr(c), str(vars(c))): assert KEY not in text, text
    assert "***" in str(e.value)                                            # the server echoed the key; it was masked

def test_openai_retries_end_with_a_bounded_error(stub, monkeypatch):
    _Stub.plan = [503]
    slept = []
    monkeypatch.setattr(backends, "time", types.SimpleNamespace(sleep=slept.append))   # the client's waits, recorded, not slept
    c = _client(stub, max_retries=3, backoff=0.5, max_backoff=1.5)
    with pytest.raises(BackendError, match="after 4 attempts: HTTP 503"): c.chat([{"role": "user", "content": "x"}], 4)
    assert len(_Stub.seen) == 4 and len(slept) == 3                          # no wait after the last attempt
    assert 0.5 <= slept[0] <= 0.625 and 1.0 <= slept[1] <= 1.25 and slept[2] == 1.5   # backoff · 2^k + ≤ 25 % jitter, capped
    _Stub.plan, _Stub.seen, slept[:] = [429], [], []
    _Stub.retry_after = "0.3"
    with pytest.raises(BackendError, match="HTTP 429"): _client(stub, max_retries=1).chat([{"role": "user", "content": "x"}], 4)
    assert slept == [0.3]                                                    # the server's Retry-After wins

def test_openai_timeout_is_retried_and_bounded(stub):
    _Stub.delay = 1.0
    t0 = time.time()
    with pytest.raises(BackendError, match="after 2 attempts.*timed out"): _client(stub, timeout=0.2, max_retries=1).chat([{"role": "user", "content": "x"}], 4)
    assert len(_Stub.seen) == 2                                              # each attempt reached the server and timed out
    print(f"two timed-out attempts in {time.time() - t0:.2f} s")

def test_openai_closed_port_retries_then_fails_without_the_key(monkeypatch):
    monkeypatch.setenv("CALIRL_TEST_KEY", KEY)
    c = _client(f"http://127.0.0.1:{free_port()}/v1", timeout=1, max_retries=2)
    t0 = time.time()
    with pytest.raises(BackendError, match="after 3 attempts") as e: c.chat([{"role": "user", "content": "hi"}], 4)
    print(f"gave up after 3 attempts in {time.time() - t0:.2f} s")
    assert KEY not in str(e.value) + repr(e.value) + repr(c)
    c.on_error = "mark"
    o = c.generate_chat([[{"role": "user", "content": "hi"}]], 4)[0]
    assert o.finish_reason.startswith("error: ") and o.text == "" and KEY not in o.finish_reason

def test_openai_token_prompts_are_refused():
    with pytest.raises(NotImplementedError, match="generate_chat"): OpenAIBackend("http://127.0.0.1:1/v1", "m").generate([[1]], 4)

# --- OpenAIBackend: the key never leaves the backend, whatever the server echoes ---------------------------------

class _Echo(http.server.BaseHTTPRequestHandler):
    "Answers `mode` (an error status, `malformed` or `badjson`), echoing the Authorization header in the reason phrase, a header and the body."
    mode = 401
    def log_message(self, *a): pass
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        auth = self.headers.get("Authorization") or ""
        if _Echo.mode == "malformed": code, out = 200, json.dumps({"choices": [{"message": auth}]})
        elif _Echo.mode == "badjson": code, out = 200, f"<html>{auth}</html>"
        else: code, out = _Echo.mode, "x" * 280 + f" {auth} " + json.dumps({"error": {"message": f"your key {auth} is wrong"}})
        self.send_response(code, f"Refused {auth}")                      # the reason phrase carries the key
        self.send_header("X-Echo", auth); self.send_header("WWW-Authenticate", auth)
        self.send_header("Content-Length", str(len(out.encode()))); self.end_headers(); self.wfile.write(out.encode())

@pytest.fixture
def echo(monkeypatch):
    monkeypatch.setenv("CALIRL_TEST_KEY", KEY)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_port
    srv.shutdown(); srv.server_close()

def _chain(e):
    "An exception and every exception chained to it."
    while e is not None: yield e; e = e.__cause__ or e.__context__

@pytest.mark.parametrize("mode,says", [(401, "HTTP 401"), (403, "HTTP 403"), (404, "HTTP 404"), (503, "after 2 attempts: HTTP 503"),
                                       ("malformed", "malformed answer"), ("badjson", "invalid JSON")])
@pytest.mark.parametrize("key_in_url", [False, True])
def test_openai_errors_and_logs_never_contain_the_key(echo, caplog, capsys, mode, says, key_in_url):
    _Echo.mode = mode
    caplog.set_level(logging.DEBUG)
    url = f"http://127.0.0.1:{echo}" + (f"/proxy/{KEY}" if key_in_url else "") + "/v1"
    c = _client(url, max_retries=1)
    with pytest.raises(BackendError) as e: c.chat([{"role": "user", "content": "hi"}], 4)
    c.on_error = "mark"
    marked = c.generate_chat([[{"role": "user", "content": "hi"}]], 4)[0].finish_reason
    assert says in str(e.value) and marked.startswith("error: ")
    if mode in (401, 503): assert "Refused Bearer ***" in str(e.value)  # the echoed reason phrase is there, masked
    seen = [marked, repr(c), caplog.text, *capsys.readouterr(), "".join(traceback.format_exception(e.value))]
    seen += [t for x in _chain(e.value) for t in (str(x), repr(x))]
    for text in seen:
        assert KEY not in text and KEY[:12] not in text, text          # neither the key nor a cut-off piece of it

# --- OpenAIBackend against a real server: `transformers serve` on 127.0.0.1 ------------------------------------

def _wait_ready(url, proc, log, deadline):
    while time.time() < deadline:
        if proc.poll() is not None: pytest.fail(f"`transformers serve` exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=1) as r:
                if r.status == 200: return json.loads(r.read())
        except OSError: time.sleep(0.3)
    pytest.fail(f"`transformers serve` did not answer GET /v1/models in time:\n{log.read_text()[-3000:]}")

@pytest.mark.timeout(90)
def test_openai_backend_against_transformers_serve(tmp_path, tok, monkeypatch):
    missing = [m for m in ("fastapi", "uvicorn", "openai") if importlib.util.find_spec(m) is None]
    if missing or not (BIN / "transformers").exists():
        pytest.skip(f"SKIPPED real-server test: `transformers serve` needs {missing or 'the transformers CLI'}; "
                    f"install with: pip install 'transformers[serving]'")
    model, ptok = build_tiny_model(tok, "qwen2", 32, 1, role="policy", seed=0)
    path = save_model(scramble(model), ptok, tmp_path / "tiny")
    ref = HFBackend(*load_model(path, device="cpu"))
    msgs = [[{"role": "user", "content": "i have 12 apples"}], [{"role": "user", "content": "12 + 7 ="}]]
    want = ref.generate_chat(msgs, 8, temperature=0.0)
    port, log = free_port(), tmp_path / "serve.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CALIRL_TEST_KEY": KEY}
    with open(log, "w") as f:
        proc = subprocess.Popen([str(BIN / "transformers"), "serve", str(path), "--host", "127.0.0.1", "--port", str(port),
                                 "--device", "cpu"], stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}/v1"
        listed = _wait_ready(url, proc, log, time.time() + 60)
        monkeypatch.setenv("CALIRL_TEST_KEY", KEY)
        c = OpenAIBackend(url, str(path), api_key_env="CALIRL_TEST_KEY", timeout=30, max_retries=2, backoff=0.2)
        assert str(path) in [m["id"] for m in listed["data"]] and str(path) in c.models()
        got = c.generate_chat(msgs, 8, temperature=0.0)                   # a real POST /v1/chat/completions
        assert all(o.finish_reason in ("stop", "length") and o.token_ids == [] and o.logprobs is None for o in got)
        assert [o.text for o in got] == [o.text for o in want]           # the server's greedy answer is our model's
        assert KEY not in log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try: proc.wait(10)
            except subprocess.TimeoutExpired: os.killpg(proc.pid, signal.SIGKILL); proc.wait(5)

@pytest.fixture(scope="module")
def local_server(tmp_path_factory):
    """`serve()`: the module's one `serve_locally` server (no model named at start; each request names a local folder),
    started on the first call: the two tests that serve local folders share its start (the imports of `transformers
    serve`). A server a test stopped is replaced on the next call; the last one left is stopped at the end."""
    from calirl.backends import serve_locally
    held = []
    def serve():
        if not held or held[-1].proc.poll() is not None:
            held.append(serve_locally(f"http://127.0.0.1:{free_port()}/v1", device="cpu", log=tmp_path_factory.mktemp("serve") / "serve.log"))
        return held[-1]
    yield serve
    for server in held: server.stop()

@pytest.mark.timeout(150)
def test_served_models_sample_at_the_requested_temperature(tmp_path, tok, local_server):
    """`transformers serve` takes `do_sample` (and `top_k`, `repetition_penalty`, ...) from the model's generation config,
    not from the request. A stand-in (`build_standin` says `do_sample = true`, as the hub's chat models do) samples by
    itself; a model whose config does not say it answers greedily at any temperature unless the request carries
    `served_sampling()`, which `calirl.components` sends to the kit's own server. Both must answer a temperature-1
    request by sampling (the seed decides the reply) and a temperature-0 request greedily, as `HFBackend` does."""
    from transformers import GenerationConfig
    from calirl.backends import served_sampling
    from calirl.models import STANDINS, build_standin
    missing = [m for m in ("fastapi", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing or not (BIN / "transformers").exists():
        pytest.skip(f"SKIPPED real-server test: `transformers serve` needs {missing or 'the transformers CLI'}; "
                    f"install with: pip install 'transformers[serving]'")
    standin = build_standin(tok, *STANDINS["oracle"], tmp_path / "oracle", seed=0)
    plain = tmp_path / "plain"                                                   # the same model, its config without do_sample
    shutil.copytree(standin, plain)
    GenerationConfig.from_dict({k: v for k, v in GenerationConfig.from_pretrained(standin).to_dict().items() if k not in ("do_sample", "top_k")}).save_pretrained(plain)
    assert not GenerationConfig.from_pretrained(plain).do_sample and GenerationConfig.from_pretrained(standin).do_sample
    msgs = [[{"role": "user", "content": f"i have {k} apples"}] for k in range(8)]
    url = local_server().base_url                                               # the module's server (the next test stops it)
    as_is = OpenAIBackend(url, str(plain), timeout=30, max_retries=1)
    a, other = (as_is.generate_chat(msgs, 12, temperature=1.0, seed=s) for s in (0, 100))
    assert [o.text for o in a] == [o.text for o in other], "transformers serve now samples without do_sample in the model's config"
    for path, extra in ((standin, None), (plain, served_sampling())):
        c = OpenAIBackend(url, str(path), timeout=30, max_retries=1, extra_body=extra)
        a, b, other = (c.generate_chat(msgs, 12, temperature=1.0, seed=s) for s in (0, 0, 100))
        assert [o.text for o in a] == [o.text for o in b]                        # the same seeds, the same replies
        assert sum(x.text != y.text for x, y in zip(a, other)) >= 4, (path.name, [(x.text, y.text) for x, y in zip(a, other)])   # other seeds, other replies
        greedy = c.generate_chat(msgs[:2], 12, temperature=0.0)
        assert [o.text for o in greedy] == [o.text for o in HFBackend(*load_model(path, device="cpu")).generate_chat(msgs[:2], 12, temperature=0.0)]

@pytest.mark.timeout(120)
def test_serve_locally_starts_a_server_that_loads_models_by_path_and_stops_it(tmp_path, tok, local_server):
    """`serve_locally` (what `serve = true` runs): no model is named at start, each request names a local folder, the
    answers are that model's, a second call finds the server and leaves it alone, and `stop()` ends it."""
    from calirl.backends import answers, serve_locally
    missing = [m for m in ("fastapi", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing or not (BIN / "transformers").exists():
        pytest.skip(f"SKIPPED real-server test: `transformers serve` needs {missing or 'the transformers CLI'}; "
                    f"install with: pip install 'transformers[serving]'")
    paths = [save_model(scramble(build_tiny_model(tok, "qwen2", 32, 1, role="policy", seed=s)[0]), with_role(tok, "policy"), tmp_path / f"m{s}")
             for s in (0, 1)]
    msgs = [[{"role": "user", "content": "i have 12 apples"}]]
    server = local_server()                                                  # serve_locally's start, here or in the test above
    url = server.base_url
    try:
        assert server.owned and answers(url)
        again = serve_locally(url)
        assert not again.owned
        again.stop()
        assert answers(url)                                                  # found, not started: left running
        for p in paths:                                                      # two models, each loaded on its first request
            got = OpenAIBackend(url, str(p), timeout=30, max_retries=1).generate_chat(msgs, 8, temperature=0.0)
            assert [o.text for o in got] == [o.text for o in HFBackend(*load_model(p, device="cpu")).generate_chat(msgs, 8, temperature=0.0)]
    finally:
        server.stop()
    assert server.proc.poll() is not None and not answers(url)
