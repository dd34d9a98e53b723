"""Models of the training benchmark.

``emulated``: layers whose compute is a timed wait (``time.sleep``) equal to a GPU time, so
that overlap is measurable on a 2-core machine where real compute of several ranks would
contend for the CPU. The times are derived, not measured: a dense layer of ``p`` parameters
on ``tokens`` tokens costs ``2 p tokens`` FLOP forward and twice that backward; at an
assumed sustained ``TFLOPS`` (a T4-class GPU: 8.1 TFLOP/s FP32 peak, about half sustained)
the forward takes ``2 p tokens / TFLOPS``. Each layer really holds ``p`` parameters, so the
gradients (and the bytes synchronized) are real.

``transformer``: a small real transformer encoder (real CPU compute).

``cnn``: a small convolutional net on 32x32 images (real CPU compute).
"""

from __future__ import annotations

import time
from typing import Any

import torch

TFLOPS = 4e12
TOKENS = 32_768  # batch 64 x sequence 512
LAYERS = [1 << 20] * 8  # parameters per layer: 8 x 4 MiB of float32 gradients


def layer_times(params: int, tokens: int = TOKENS, tflops: float = TFLOPS) -> tuple[float, float]:
    fwd = 2 * params * tokens / tflops
    return fwd, 2 * fwd


class TimedLayer(torch.nn.Module):
    """``params`` parameters; forward and backward wait their GPU times."""

    def __init__(self, params: int, fwd: float, bwd: float) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(params) * 0.01)
        self.fwd, self.bwd = fwd, bwd

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _TimedFn.apply(x, self.w, self.fwd, self.bwd)


class _TimedFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, fwd: float, bwd: float) -> torch.Tensor:
        ctx.bwd, ctx.n = bwd, w.numel()
        ctx.save_for_backward(x)
        time.sleep(fwd)
        return x * 1.0001 + w[0] * 1e-3

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[Any, ...]:
        (x,) = ctx.saved_tensors
        time.sleep(ctx.bwd)
        gw = torch.full((ctx.n,), float((g * x).mean()))
        gw[0] += float(g.sum()) * 1e-3
        return g * 1.0001, gw, None, None


# the testbed's links run at 50-400 Mbit/s: the same compute per layer (16.8 ms forward) on a
# 4x larger batch of a 4x narrower layer, so a quarter of the bytes
SMALL_LAYERS = [1 << 18] * 8
SMALL_TOKENS = 4 * TOKENS


def emulated(layers: list[int] = LAYERS, tokens: int = TOKENS) -> torch.nn.Module:
    torch.manual_seed(0)
    mods = []
    for p in layers:
        f, b = layer_times(p, tokens)
        mods.append(TimedLayer(p, f, b))
    return torch.nn.Sequential(*mods)


def emulated_small() -> torch.nn.Module:
    return emulated(SMALL_LAYERS, SMALL_TOKENS)


def declared_times(model_name: str) -> list[tuple[float, float]] | None:
    """(forward, backward) seconds per gradient in backward order, for emulated models."""
    if model_name == "emulated":
        return [layer_times(p) for p in LAYERS][::-1]
    if model_name == "emulated-small":
        return [layer_times(p, SMALL_TOKENS) for p in SMALL_LAYERS][::-1]
    return None


def emulated_batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(step * 1000 + rank)
    return torch.randn(4, 16, generator=g), torch.randn(4, 16, generator=g)


def transformer() -> torch.nn.Module:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(128, 4, 256, dropout=0.0, batch_first=True)
    return torch.nn.Sequential(
        torch.nn.Linear(32, 128),
        torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False),
        torch.nn.Linear(128, 32),
    )


def transformer_batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(step * 1000 + rank)
    return torch.randn(4, 32, 32, generator=g), torch.randn(4, 32, 32, generator=g)


def cnn() -> torch.nn.Module:
    """A small convolutional net (real CPU compute): 3 conv blocks on 32x32 RGB images, a
    linear head of 10 outputs; 0.24 M parameters in 10 gradient tensors."""
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, stride=2, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(64, 128, 3, stride=2, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(128, 128, 3, stride=2, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(128, 10),
    )


def cnn_batch(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(step * 1000 + rank)
    return torch.randn(8, 3, 32, 32, generator=g), torch.randn(8, 10, generator=g)


MODELS = {
    "emulated": (emulated, emulated_batch),
    "emulated-small": (emulated_small, emulated_batch),
    "transformer": (transformer, transformer_batch),
    "cnn": (cnn, cnn_batch),
}
