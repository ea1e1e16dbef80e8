"""GPU checks (CUDA only): HIRE's Bi-GRU on cuDNN against the exact step loop CPUs run, and padding on CUDA.

    python benchmarks/gpu_check.py [ENCODER] > benchmarks/results/gpu-h100/gpu_check.json

fp32 throughout. Prints the largest absolute differences: the Bi-GRU's outputs (real positions), final
states and gradients on the two paths; a HIRE model's logits for a sentence alone and padded in a batch of
two; and its logits on the two paths.
"""

import json
import sys

import torch

from hire import build_model, load_tokenizer
from hire.model.recurrent import BiGRU

out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
torch.manual_seed(0)
dev = "cuda"
g = BiGRU(48, 24, 2).to(dev)
x = torch.randn(7, 19, 48, device=dev, requires_grad=True)
lengths = torch.tensor([19, 3, 11, 1, 19, 7, 15])
res = {}
for path in (True, False):
    BiGRU.cudnn_on_cuda = path
    x.grad = None
    g.zero_grad()
    o, f = g(x, lengths)
    m = (torch.arange(19, device=dev)[None, :] < lengths.to(dev)[:, None]).float()[..., None]
    ((o * m).sum() + f.pow(2).sum()).backward()
    res[path] = (o * m, f, x.grad.clone(), [p.grad.clone() for p in g.parameters()])
a, b = res[True], res[False]
out["bigru_fp32_max_abs_diff"] = {
    "outputs": (a[0] - b[0]).abs().max().item(), "finals": (a[1] - b[1]).abs().max().item(),
    "input_grad": (a[2] - b[2]).abs().max().item(),
    "weight_grad": max((p - q).abs().max().item() for p, q in zip(a[3], b[3], strict=True))}
BiGRU.cudnn_on_cuda = True
enc = sys.argv[1] if len(sys.argv) > 1 else "all-MiniLM-L6-v2"
tok = load_tokenizer(enc)
model = build_model(enc, head="hire", num_labels=2).to(dev).eval()
texts = ["The cat sat.", "A considerably longer sentence, so that the short one is padded in a batch of two."]
with torch.no_grad():
    batch = tok(texts, padding=True, return_tensors="pt").to(dev)
    both = model(**batch).logits
    alone = model(**tok(texts[:1], return_tensors="pt").to(dev)).logits
    out["hire_padding_fp32_max_abs_diff"] = (both[0] - alone[0]).abs().max().item()
    BiGRU.cudnn_on_cuda = False
    loop = model(**batch).logits
    out["hire_cudnn_vs_loop_logits_fp32_max_abs_diff"] = (both - loop).abs().max().item()
print(json.dumps(out, indent=1))
