"""The paper's code path (`world = collabllm`) end to end on CPU: `calirl reproduce --profile paper-mini` on stand-in models
of the paper's architectures (a Gemma-3 policy, a Qwen2 simulator) with the hub's chat templates, CollabLLM-schema data,
and the oracle and judge behind a real `transformers serve` that the notebooks start and stop. The numbers are noise;
what is tested is which components ran."""
import json, re
from pathlib import Path
import pandas as pd
from calirl.models import STANDINS, load_tokenizer, trl_chat_template
from calirl.backends import answers
from calirl.pipeline import make_plan

RUN = Path("runs") / "paper-mini"

def _config(p:Path) -> dict: return json.loads((p / "config.json").read_text())

def test_paper_mini_runs_every_notebook_and_fills_table_2(paper_mini_reproduction):
    proj, r = paper_mini_reproduction
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    refused = {s.name: s.why for s in make_plan(proj, "paper-mini")[1] if s.action == "skip"}
    assert sorted(refused) == ["10a_calibration_on_policy", "12_validity", "13_ablation"]   # bound to the tiny world, each with its reason
    assert all(re.fullmatch(rf"{n} runs only in world = tiny: \S.+", w) for n, w in refused.items()), refused
    t2 = pd.read_csv(proj / "figures" / "paper-mini" / "table2.csv")
    assert set(t2.method) == {"Base", "CollabLLM", "Static Context", "Naive Interactive", "Calibrated Interactive", "Calibrated + DIAL", "Oracle"}
    assert (proj / "figures" / "paper-mini" / "report.md").is_file()

def test_paper_mini_trains_the_paper_architectures_on_the_hub_templates(paper_mini_reproduction):
    proj, r = paper_mini_reproduction
    st = proj / RUN / "standins"
    for name, (arch, family) in STANDINS.items():
        assert _config(st / name)["model_type"] == {"gemma3": "gemma3_text"}.get(arch, arch)
    models = proj / RUN / "artifacts" / "models"
    for v in ("naive", "calibrated", "static", "oracle", "collabllm"):      # every trained policy is still a Gemma-3 on Gemma's template
        assert _config(models / f"policy_{v}")["model_type"] == "gemma3_text", v
        assert load_tokenizer(models / f"policy_{v}").chat_template == trl_chat_template("gemma3"), v
    sims = sorted(p.name for p in (models / "simulator_sft").iterdir())
    assert sims == ["docedit-chat", "math-chat"], sims                          # one Phase I simulator per task, as the paper trains them
    for task in sims:                                                           # each the Qwen2 stand-in, on TRL's training template
        assert _config(models / "simulator_sft" / task)["model_type"] == "qwen2", task
        assert "{% generation %}" in load_tokenizer(models / "simulator_sft" / task).chat_template, task

def test_paper_mini_constructs_no_tiny_world_component(paper_mini_reproduction):
    "Who trained and who judged, as the run recorded it: prompted and served models only, never a scripted or artifact user or the verifier."
    proj, r = paper_mini_reproduction
    st = (proj / RUN / "standins").resolve()
    logs = json.loads((proj / RUN / "artifacts" / "metrics" / "grpo_logs.json").read_text())
    users = logs["users"]
    assert (users["naive"]["kind"], users["naive"]["model"], users["naive"]["backend"]) == ("prompted", str(st / "simulator"), "hf")
    assert (users["oracle"]["kind"], users["oracle"]["model"], users["oracle"]["backend"]) == ("prompted", str(st / "oracle"), "transformers-serve")   # the kit's own server, asked to sample
    assert users["calibrated"]["kind"] == "lm-simulator" and users["calibrated"]["source"].endswith("simulator_sft")
    assert users["calibrated_dial"]["kind"] == "lm-simulator" and re.search(r"/dial/it\d+$", users["calibrated_dial"]["source"])   # the version 07 chose
    assert (logs["judge"]["kind"], logs["judge"]["model"], logs["judge"]["backend"]) == ("llm-judge", str(st / "oracle"), "transformers-serve")
    R = pd.read_parquet(proj / RUN / "artifacts" / "eval" / "results.parquet")
    assert set(R.user) == {f"eval:{st / 'oracle'}"} and set(R.judge) == {str(st / "oracle")}
    realism = json.loads((proj / RUN / "artifacts" / "metrics" / "realism.json").read_text())["table"]
    assert realism[0]["user"] == f"eval:{st / 'oracle'}"                      # 08's real user is the served one; its fixed assistant the base policy
    assert {row["user"] for row in realism[1:]} == {f"naive:{st / 'simulator'}", "sft-simulator", "dial-it0", "dial-it1"}
    # each reached the server it started; 09b is left out: its users run in-process, and its judge reads only episodes not
    # cut off at the token limit, which paper-mini's untrained policies need not produce
    for nb in ("05_rollout", "06_simulator_sft", "07_dial", "08_realism", "09_grpo", "09a_collabllm", "10_evaluate"):
        assert "POST /v1/chat/completions" in (proj / RUN / "logs" / f"serve-{nb}.log").read_text(), nb
    url = next(a for a in r.args if str(a).startswith("openai_base_url=")).split("=", 1)[1]
    assert not answers(url)                                                  # and stopped it
    tables = " ".join(p.read_text() for p in (proj / "figures" / "paper-mini").glob("*.csv")).lower()
    assert not [u for u in ("scripted-human", "scripted human", "artifact-simulator", "artifact simulator") if u in tables]

def test_paper_mini_leaves_nothing_in_the_temporary_folder(paper_mini_reproduction):
    "What the paper path's notebooks, servers and launched trainers put in the run's own temporary folder is gone with them."
    proj, r = paper_mini_reproduction
    assert r.returncode == 0, r.stderr[-3000:]
    left = sorted(p.name for p in (proj.parent / "tmp").iterdir())
    assert not left, left

def test_paper_path_runs_against_an_endpoint_the_user_started(paper_mini_reproduction, tmp_path):
    """`serve = false`: the oracle and judge are the user's to serve. This test starts `transformers serve` itself, pinned to
    the oracle stand-in as a user pins vLLM to the 235 B model, and runs 05_rollout against it in a copy of the paper-mini
    project: the preflight finds the model served, the notebook reaches the server, and calirl starts no server of its own."""
    import shutil, subprocess, sys, time
    from calirl.training import free_port
    proj, r = paper_mini_reproduction
    assert r.returncode == 0, r.stderr[-2000:]
    copy = tmp_path / "proj"
    shutil.copytree(proj, copy, ignore=shutil.ignore_patterns("*.ipynb_checkpoints"))
    oracle = str((copy / RUN / "standins" / "oracle").resolve())
    url = f"http://127.0.0.1:{free_port()}/v1"
    log = open(tmp_path / "serve.log", "w")
    server = subprocess.Popen([str(Path(sys.executable).parent / "transformers"), "serve", oracle, "--host", "127.0.0.1", "--port", url.split(":")[2].split("/")[0],
                               "--device", "cpu"], stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(240):
            if answers(url): break
            time.sleep(0.5)
        assert answers(url), (tmp_path / "serve.log").read_text()[-2000:]
        over = ["-p", "serve=false", "-p", f"openai_base_url={url}", "-p", f"oracle_model={oracle}", "-p", f"judge_model={oracle}"]
        dry = subprocess.run([str(Path(sys.executable).parent / "calirl"), "reproduce", "--profile", "paper-mini", "--dry-run", *over],
                             cwd=copy, capture_output=True, text=True)
        assert dry.returncode == 0 and f"ok          endpoint `oracle_model`: {oracle} is served at {url}" in dry.stdout, dry.stdout[-2000:] + dry.stderr
        (copy / RUN / "logs" / "serve-05_rollout.log").unlink(missing_ok=True)            # the log of the server the fixture's run started
        run = subprocess.run([str(Path(sys.executable).parent / "calirl"), "reproduce", "--profile", "paper-mini", "--only", "05_rollout", "--force", *over],
                             cwd=copy, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr[-3000:]
        assert "POST /v1/chat/completions" in (tmp_path / "serve.log").read_text()             # the notebook talked to the user's server
        assert not (copy / RUN / "logs" / "serve-05_rollout.log").exists()                       # and started none of its own
    finally:
        server.terminate()
        server.wait(timeout=30)
