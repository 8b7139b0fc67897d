"""Does attention over the whole preallocated cache (masked) give the same bits as attention over the slice that
holds keys (what `calirl.backends.attend` does at decode time)? Over 720 shapes. Run: `python full_buffer_attention.py`."""
import torch, torch.nn.functional as F, itertools
torch.set_num_threads(1)
def cur(q,K,V,mask,T,scale):
    k,v=K[:,:,:T],V[:,:,:T]
    w=(q @ k.transpose(-1,-2))*scale
    w=w.masked_fill(~mask[..., :T], float("-inf")).softmax(-1)
    return w @ v
def full(q,K,V,mask,T,scale):
    w=(q @ K.transpose(-1,-2))*scale
    w=w.masked_fill(~mask, float("-inf")).softmax(-1)
    return w @ V
bad=0; n=0
g=torch.Generator().manual_seed(0)
for B,H,d,W in itertools.product([4,5,8,17,32,64],[1,4],[32,16],[40,77,160,300,513]):
    for T in sorted({1,2,W//3,W//2+1,W-5,W}):
        if T<1: continue
        K=torch.zeros(B,H,W,d); V=torch.zeros(B,H,W,d)
        K[:,:,:T]=torch.randn(B,H,T,d,generator=g); V[:,:,:T]=torch.randn(B,H,T,d,generator=g)
        q=torch.randn(B,H,1,d,generator=g)
        mask=torch.zeros(B,1,1,W,dtype=torch.bool); mask[...,:T]=torch.rand(B,1,1,T,generator=g)>0.2; mask[...,T-1]=True
        a=cur(q,K,V,mask,T,0.17); b=full(q,K,V,mask,T,0.17)
        n+=1
        if not torch.equal(a,b): bad+=1; print("DIFF",B,H,d,W,T,(a-b).abs().max().item())
print(f"{bad} of {n} differ")
