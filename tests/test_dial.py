"""DIAL's discriminator (`calirl.dial.train_discriminator`) on the smoke run's Phase I simulator: started from the
simulator's weights or, with `fresh=True`, from random ones, and the same for one seed whatever the process ran before."""
import torch
from calirl.dial import p_real, train_discriminator
from calirl.models import load_model

CHAT = [{"role": "user", "content": "hi ."}, {"role": "assistant", "content": "how many ?"}, {"role": "user", "content": "5 more ."}]
SIM = CHAT[:2] + [{"role": "user", "content": "i want 5 more ."}]


def _embeddings(model) -> torch.Tensor:
    return model.get_input_embeddings().weight.detach().clone()


def test_fresh_discriminators_start_from_random_weights(smoke_reproduction):
    project, r = smoke_reproduction
    assert r.returncode == 0, r.stderr[-2000:]
    path = project / "runs" / "smoke" / "artifacts" / "models" / "simulator_sft" / "math-chat"
    sim, tok = load_model(path, device="cpu", dtype="float32")
    w_sim = _embeddings(sim)
    kw = dict(epochs=1, lr=1e-3, batch_size=4, seed=0, threads=1)     # 8 sessions, batch 4: two Adam steps of about lr each
    pre = train_discriminator(path, tok, [CHAT] * 4, [SIM] * 4, **kw)
    fresh = train_discriminator(path, tok, [CHAT] * 4, [SIM] * 4, fresh=True, **{**kw, "seed": 5})   # seed 0 may be the one the smoke model was built with
    assert (_embeddings(pre) - w_sim).abs().max() < 1e-2              # the simulator's weights, one step on
    assert (_embeddings(fresh) - w_sim).abs().max() > 1e-2            # not the simulator's weights
    torch.manual_seed(123)                                            # another global random state before the same seed
    again = train_discriminator(path, tok, [CHAT] * 4, [SIM] * 4, fresh=True, **{**kw, "seed": 5})
    assert torch.equal(_embeddings(again), _embeddings(fresh))
    assert [p.tolist() for p in p_real(again, tok, [CHAT, SIM])] == [p.tolist() for p in p_real(fresh, tok, [CHAT, SIM])]
