"""User models and judges are components named by the profile: every role of every shipped profile resolves to the
component it names (the paper's without loading a model), an unknown name is one line listing the valid ones, and
no notebook picks a user, judge or annotator by branching on the world."""
import ast, importlib.util, json, os, signal, subprocess, time, urllib.request
import pytest
from conftest import BIN, ROOT
from calirl import components as C
from calirl.settings import ProfileError, load_profile
from calirl.pipeline import list_notebooks

QWEN3, QWEN25 = "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "Qwen/Qwen2.5-7B-Instruct"
TINY = {"oracle": ("scripted-human", None), "evaluation": ("scripted-human", None), "naive": ("naive-simulator", None),
        "calibrated": ("lm-simulator", None), "judge": ("verifier", None)}
EXPECTED = {"tiny": TINY, "smoke": TINY,
            "paper": {"oracle": ("prompted", QWEN3), "evaluation": ("prompted", QWEN3), "naive": ("prompted", QWEN25),
                      "calibrated": ("lm-simulator", None), "judge": ("llm-judge", QWEN3)}}

@pytest.fixture
def run_dir(tmp_path):
    "A run folder holding a Phase I simulator and two DIAL iterations (empty model folders: nothing is loaded)."
    for sub in ("simulator_sft", "dial/it0", "dial/it1"):
        d = tmp_path / "artifacts" / "models" / sub
        d.mkdir(parents=True)
        (d / "config.json").write_text("{}")
    return tmp_path

@pytest.fixture
def no_loading(monkeypatch):
    "Fail the test if anything builds a generation backend or loads a model."
    def refuse(*a, **kw): raise AssertionError("a spec was built, not only resolved")
    monkeypatch.setattr(C, "generation_backend", refuse)
    monkeypatch.setattr("calirl.models.load_model", refuse)

@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_profile_resolves_each_role_to_the_component_it_names(name, run_dir, no_loading):
    prof = load_profile(name, ROOT / "settings.ini")
    specs = {**{r: C.user_spec(r, prof, run_dir) for r in C.ROLES}, "judge": C.judge_spec(prof)}
    assert {r: (s["kind"], s.get("model")) for r, s in specs.items()} == EXPECTED[name]
    assert specs["calibrated"]["source"] == str(run_dir / "artifacts" / "models" / "simulator_sft")
    assert (specs["calibrated"]["temperature"], specs["calibrated"]["max_new_tokens"]) == (prof.sim_temperature, prof.max_new_tokens)
    if name == "paper":
        for r in ("oracle", "evaluation", "judge"):
            assert (specs[r]["backend"], specs[r]["base_url"]) == ("openai", prof.openai_base_url), r
        assert (specs["evaluation"]["temperature"], specs["evaluation"]["name"]) == (prof.eval_temperature, f"eval:{QWEN3}")
        assert (specs["judge"]["temperature"], specs["judge"]["max_new_tokens"]) == (0.0, 512)
        assert (specs["naive"]["backend"], specs["calibrated"]["backend"], specs["naive"]["device"]) == ("hf", "hf", "cuda")

def test_phase2_dial_resolves_to_the_dial_iteration_07_chose(run_dir, no_loading):
    prof = load_profile("tiny", ROOT / "settings.ini", {"phase2_simulator": "dial"})
    dial = run_dir / "artifacts" / "models" / "dial"
    assert C.user_spec("calibrated", prof, run_dir)["source"] == str(dial / "it1")        # no choice recorded: the last
    (dial / "CHOSEN").write_text("it0\n")
    assert C.user_spec("calibrated", prof, run_dir)["source"] == str(dial / "it0")

def test_the_tiny_roles_build_todays_users(run_dir):
    from calirl.users import naive_simulator, scripted_human
    prof = load_profile("smoke", ROOT / "settings.ini")
    human = scripted_human(wrong_patience=prof.human_wrong_patience)
    assert [C.user_for(r, prof) for r in ("oracle", "evaluation", "naive")] == [human, human, naive_simulator()]
    assert C.judge_for(prof) == "verifier"

@pytest.mark.parametrize("call,says", [
    (lambda: C.make_user("gpt-user"), "unknown user model 'gpt-user'; valid: scripted-human, naive-simulator, artifact-simulator, lm-simulator, prompted"),
    (lambda: C.make_judge("gpt-4o"), "unknown judge 'gpt-4o'; valid: verifier, llm-judge"),
    (lambda: C.user_spec("critic", {}), "unknown user role 'critic'; valid: oracle, evaluation, naive, calibrated"),
    (lambda: C.generation_backend("m", "tgi"), "unknown generation backend 'tgi'; valid: hf, vllm, openai"),
    (lambda: C.make_user("scripted-human", sycophancy=1.0), "unknown user knob 'sycophancy'; valid: vagueness, deflect,"),
    (lambda: C.user_spec("naive", {**vars(load_profile("tiny", ROOT / "settings.ini")), "naive_simulator": "gpt"}),
     "unknown naive_simulator 'gpt'; valid: naive-simulator, artifact-simulator, prompted"),
    (lambda: C.user_spec("naive", {"seed": 0}), "the naive user reads profile key(s) `naive_simulator`, `simulator_model`"),
])
def test_an_unknown_name_is_one_line_listing_the_valid_ones(call, says):
    with pytest.raises(C.ComponentError) as e: call()
    assert says in str(e.value) and "\n" not in str(e.value)

def test_a_profile_with_an_unknown_naive_simulator_is_refused_when_loaded():
    with pytest.raises(ProfileError, match="`naive_simulator` = 'gpt' is not allowed; choose from naive-simulator, artifact-simulator, prompted"):
        load_profile("tiny", ROOT / "settings.ini", {"naive_simulator": "gpt"})

def _code_cells(nb):
    return ["".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code"]

def test_no_notebook_branches_on_the_world_to_pick_a_component():
    "`world` chooses the data source (`tasks.load_items`) and which stages may run (`stages.world_refusal`), nothing else."
    hits = []
    for nb in list_notebooks(ROOT):
        for src in _code_cells(nb):
            for node in ast.walk(ast.parse("\n".join(l for l in src.splitlines() if not l.startswith(("%", "!"))))):
                if isinstance(node, ast.Compare) and any(isinstance(x, ast.Name) and x.id == "world" for x in [node.left, *node.comparators]):
                    hits.append(f"{nb.name}: {ast.unparse(node)}")
    assert all(h.startswith(("02_tasks.ipynb:", "00f_stages.ipynb:")) for h in hits), hits

def test_notebooks_hand_roles_their_profile():
    "A role reads its keys from the notebook's typed profile (`prof`), never from a mapping a notebook builds by hand."
    calls = {"user_for": 1, "user_spec": 1, "judge_for": 0, "judge_spec": 0, "endpoint_for": 0}   # helper -> where its keys go
    checked = 0
    for nb in list_notebooks(ROOT):
        for src in _code_cells(nb):
            for node in ast.walk(ast.parse("\n".join(l for l in src.splitlines() if not l.startswith(("%", "!"))))):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in calls): continue
                if nb.name == "05a_components.ipynb": continue                  # its demos try mappings and other profiles on purpose
                if src.startswith("#| export"): continue                          # package code: its functions take the profile as an argument
                keys = node.args[calls[node.func.id]]
                assert isinstance(keys, ast.Name) and keys.id == "prof", f"{nb.name}: {ast.unparse(node)} does not read the notebook's profile"
                checked += 1
    assert checked >= 10, checked

# --- the OpenAI-compatible path against a real local server: `transformers serve` ------------------------------

def _wait_ready(url, proc, log, deadline):
    while time.time() < deadline:
        if proc.poll() is not None: pytest.fail(f"`transformers serve` exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=1) as r:
                if r.status == 200: return
        except OSError: time.sleep(0.3)
    pytest.fail(f"`transformers serve` did not answer in time:\n{log.read_text()[-3000:]}")

@pytest.mark.timeout(180)
def test_the_evaluation_user_and_judge_through_an_endpoint_answer_as_the_same_model_in_process(tmp_path):
    missing = [m for m in ("fastapi", "uvicorn", "openai") if importlib.util.find_spec(m) is None]
    if missing or not (BIN / "transformers").exists():
        pytest.skip(f"SKIPPED real-server test: `transformers serve` needs {missing or 'the transformers CLI'}; "
                    f"install with: pip install 'transformers[serving]'")
    import socket
    from calirl.models import build_tiny_model, save_model
    from calirl.tasks import tiny_items
    from calirl.users import world_corpus
    from calirl.models import train_tokenizer
    from test_backends import scramble                   # large random weights: every output depends on the whole context
    tok = train_tokenizer(world_corpus(tiny_items("math-chat", "train", 30, 0)), vocab_size=400)
    model, ptok = build_tiny_model(tok, "qwen2", 32, 1, role="policy", seed=0)
    path = save_model(scramble(model), ptok, tmp_path / "m")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "serve.log"
    with open(log, "w") as f:
        proc = subprocess.Popen([str(BIN / "transformers"), "serve", str(path), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"],
                                stdout=f, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"}, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}/v1"
        _wait_ready(url, proc, log, time.time() + 90)
        over = dict(eval_backend="openai", openai_base_url=url, oracle_model=str(path), human_wrong_patience=0, judge_model=str(path), eval_temperature=0.0,
                    max_new_tokens=6)
        prof = load_profile("smoke", ROOT / "settings.ini", {k: str(v) for k, v in over.items()})
        user, judge = C.user_for("evaluation", prof), C.judge_for(prof)
        local = C.build_prompted(path, "hf", device="cpu", dtype="float32", max_new_tokens=6, temperature=0.0)
        items = tiny_items("math-chat", "eval", 2, 0)
        served = [t.text for t in user.respond(items, [[], []], [{}, {}])]
        assert served == [t.text for t in local.respond(items, [[], []], [{}, {}])]    # greedy: the server's replies are our model's
        assert all(t.strip() for t in served), served
        assert user.name == f"eval:{path}" and isinstance(user.generate.backend, C.OpenAIBackend)
        assert judge.backend.base_url == url and (judge.max_new_tokens, judge.temperature) == (512, 0.0)
        short = C.make_judge(**{**C.judge_spec(prof), "max_new_tokens": 6})                  # the same spec, a short answer
        chats = [[{"role": "user", "content": "12 + 7 ="}], [{"role": "user", "content": "i have 3 apples"}]]
        texts = short(chats)
        assert texts == C.build_llm_judge(path, "hf", device="cpu", dtype="float32", max_new_tokens=6)(chats) and any(t.strip() for t in texts)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try: proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)

def test_the_worlds_human_has_one_patience_for_wrong_answers_in_every_role_that_plays_it(no_loading):
    "`human_wrong_patience` reaches the oracle, the evaluation user and the ablation's artifact users; at 0 the specs are unchanged."
    from dataclasses import replace
    from calirl.ablation import ablation_user
    from calirl.users import scripted_human
    tiny = replace(load_profile("tiny", ROOT / "settings.ini"), human_wrong_patience=0)
    assert [C.user_spec(r, tiny) for r in ("oracle", "evaluation")] == [dict(kind="scripted-human")] * 2
    patient = replace(tiny, human_wrong_patience=2)
    assert [C.user_for(r, patient) for r in ("oracle", "evaluation")] == [scripted_human(wrong_patience=2)] * 2
    assert [C.make_user(**ablation_user(s, 0.5, patient)).knobs.wrong_patience for s in ("real", "deflect", "leak_answer")] == [2, 2, 2]
    assert C.user_spec("naive", patient) == C.user_spec("naive", tiny)           # the naive simulator is not the human
    paper = replace(load_profile("paper", ROOT / "settings.ini"), human_wrong_patience=2)
    for role in ("oracle", "evaluation"):
        with pytest.raises(C.ComponentError, match="needs `oracle_model = scripted`"): C.user_spec(role, paper)

def test_a_profile_refuses_a_negative_patience():
    with pytest.raises(ProfileError, match="human_wrong_patience"):
        load_profile("tiny", ROOT / "settings.ini", {"human_wrong_patience": "-1"})
