"""Seeded random weights for golden fixtures, as twinpath's `model init` draws them."""
import torch


def randomize(model, seed):
    """Seeded weights like twinpath's model init: U(+-1/sqrt(fan_in)); norms 1+-0.1 and +-0.1."""
    g = torch.Generator().manual_seed(seed)
    params = dict(model.named_parameters())
    for name, p in params.items():
        if "norm" in name:
            lo, hi = (0.9, 1.1) if name.endswith("weight") else (-0.1, 0.1)
        else:
            w = params[name[: -len("bias")] + "weight"] if name.endswith("bias") else p
            bound = (w[0].numel()) ** -0.5
            lo, hi = -bound, bound
        with torch.no_grad():
            p.copy_(torch.rand(p.shape, generator=g, dtype=torch.float64) * (hi - lo) + lo)
