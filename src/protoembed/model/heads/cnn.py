"""``cnn`` head: a small convolutional network over the token states (Choi et al., Fig. 2).

Our reading of the figure (the paper's drawing is damaged, so this is a documented interpretation):

    token states (B, T, H) -> image (B, 1, T, H)
    repeat ``blocks`` times (default 2):
        conv 3x1 along the token axis (``channels`` = 128 out, zero "same" padding), tanh
        max pool 2x1 along the token axis (stride 2; a last odd token keeps a window of its own)
    conv 1x1 back to 1 channel, tanh                      -> (B, 1, T', H)
    average over the remaining token positions            -> (B, H)

The output keeps the backbone's width H. All pooling is max except the final average.

Padding never leaks: before every convolution the padded positions are set to zero (so a sentence
padded in a batch sees exactly the zeros it would see at its own edge alone), max pooling treats
them as ``-inf``, the mask is pooled alongside (a window with one real token is real), and the final
average counts real positions only. So a sentence gets the same vector alone or in any batch, and
inputs of a single token work (every pool keeps at least one position).

Computation (same outputs as the figure's layers run as written, at a fraction of the cost: the
(B, 128, T, H) feature maps make elementwise passes the bottleneck). Each 3x1 convolution mixes
channels at one token position and its two neighbours, the same way for every one of the H columns, so
in a time-major layout (T, B, H, channels) it is one matrix product per kernel tap over all
T * B * H positions at once (the neighbour taps read the map shifted by B * H rows, zero at the edges).
Max pooling comes before the tanh (tanh is increasing, so it commutes with the max and runs on half the
positions); padded positions get a large negative penalty instead of ``-inf`` masking (added inside the
first block's product as an extra input column); and :class:`ConvTanhPool` writes its own backward,
keeping only the block's input, the pooled output and which position of each window won, instead of
every intermediate map.
"""

from __future__ import annotations

from typing import Any

import torch
from sentence_transformers.base.modules.module import Module
from torch import nn
from torch.autograd.function import once_differentiable
from torch.nn import functional as F

#: Added to the convolution output at padded positions before max pooling: never the max of a window
#: that holds a real position, and finite, so that it multiplies zero gradients into zeros.
PENALTY = -1e30


def _shifted(rows: int, length: int, tap: int, half: int) -> tuple[slice, slice]:
    """(output rows, input rows) of kernel ``tap`` in a flat time-major map of ``length`` positions of
    ``rows`` rows each: output position t reads input position t + tap - half (zero outside)."""
    shift = tap - half
    start, stop = max(0, -shift), min(length, length - shift)
    return slice(start * rows, stop * rows), slice((start + shift) * rows, (stop + shift) * rows)


class ConvTanhPool(torch.autograd.Function):
    """One block of the head on a time-major map, forward and backward written out.

    ``apply(x, mask, weight, bias, mask_input)``: ``x`` (T, B, H, Cin), ``mask`` (T, B) of 0/1,
    ``weight`` (C, Cin, k), ``bias`` (C,) -> (``out`` (ceil(T/2), B, H, C), pooled mask (ceil(T/2), B)),
    ``out = m' * tanh(maxpool_2(conv_k(m * x) + penalty(m)))`` with zero "same" padding along T, the
    input masked first when ``mask_input`` (the block's input is not already zero at padded positions).
    Runs in the weight's dtype with autocast off; the gradient of ``x`` comes back in ``x``'s dtype.
    """

    @staticmethod
    def forward(ctx, x, mask, weight, bias, mask_input: bool):  # noqa: D102 - see the class
        in_dtype, dtype = x.dtype, weight.dtype
        with torch.autocast(device_type=x.device.type, enabled=False):
            length, batch, hidden, cin = x.shape
            channels, _, k = weight.shape
            half, even, rows = k // 2, length + length % 2, batch * hidden
            m = mask.new_zeros(even, batch, dtype=dtype)
            m[:length] = mask
            if cin == 1:  # one product: the k taps and the penalty as k + 1 input columns
                xp = x.new_zeros(even + k - 1, batch, hidden, dtype=dtype)
                xp[half : half + length] = x[..., 0]
                if mask_input:
                    xp[half : half + length] *= m[:length, :, None]
                saved = xp
                taps = [xp[j : j + even] for j in range(k)]
                penalty = ((1 - m) * PENALTY)[:, :, None].expand(even, batch, hidden)
                columns = torch.stack([*taps, penalty], dim=-1).view(-1, k + 1)
                matrix = torch.cat([weight[:, 0, :], weight.new_ones(channels, 1)], dim=1).t()
                z = torch.addmm(bias, columns, matrix)
            else:
                saved = x.to(dtype).contiguous()
                if mask_input:
                    saved = saved * m[:length, :, None, None]
                flat = saved.view(-1, cin)
                start = ((1 - m) * PENALTY)[:, :, None, None] + bias  # (even, B, 1, C): bias and penalty
                z = start.expand(even, batch, hidden, channels).contiguous().view(-1, channels)
                for j in range(k):
                    out_rows, in_rows = _shifted(rows, length, j, half)
                    z[out_rows].addmm_(flat[in_rows], weight[:, :, j].t())
            pairs = z.view(even // 2, 2, batch, hidden, channels)
            take_first = pairs[:, 0] >= pairs[:, 1]
            pooled_mask = torch.maximum(m[0::2], m[1::2])
            out = torch.maximum(pairs[:, 0], pairs[:, 1]).tanh_().mul_(pooled_mask[:, :, None, None])
        ctx.save_for_backward(saved, m, weight, take_first, out, pooled_mask)
        ctx.layout = (length, batch, hidden, cin, k, mask_input, in_dtype)
        ctx.mark_non_differentiable(pooled_mask)
        return out, pooled_mask

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out, _grad_mask):  # noqa: D102 - see the class
        saved, m, weight, take_first, out, pooled_mask = ctx.saved_tensors
        length, batch, hidden, cin, k, mask_input, in_dtype = ctx.layout
        channels = weight.shape[0]
        half, even, rows = k // 2, length + length % 2, batch * hidden
        need_x, need_w, need_b = ctx.needs_input_grad[0], ctx.needs_input_grad[2], ctx.needs_input_grad[3]
        # through the mask and the tanh (d tanh = 1 - tanh^2), then to the window's max
        g = out.square().neg_().add_(1).mul_(grad_out.to(out.dtype)).mul_(pooled_mask[:, :, None, None])
        gz = g.new_empty(even // 2, 2, batch, hidden, channels)
        torch.mul(g, take_first, out=gz[:, 0])
        torch.mul(g, ~take_first, out=gz[:, 1])
        gz = gz.view(-1, channels)
        grad_x = grad_w = grad_b = None
        if need_b:
            grad_b = gz.sum(0)
        if cin == 1:
            columns = torch.stack([saved[j : j + even] for j in range(k)], dim=-1).view(-1, k)
            if need_w:
                grad_w = (gz.t() @ columns).unsqueeze(1)
            if need_x:
                gcolumns = (gz @ weight[:, 0, :]).view(even, batch, hidden, k)
                gxp = saved.new_zeros(saved.shape)
                for j in range(k):
                    gxp[j : j + even] += gcolumns[..., j]
                grad_x = gxp[half : half + length].unsqueeze(-1)
        else:
            flat = saved.view(-1, cin)
            if need_w:
                grad_w = torch.stack(
                    [gz[o].t() @ flat[i] for o, i in (_shifted(rows, length, j, half) for j in range(k))],
                    dim=-1,
                )
            if need_x:
                grad_x = saved.new_zeros(saved.shape)
                gflat = grad_x.view(-1, cin)
                for j in range(k):
                    out_rows, in_rows = _shifted(rows, length, j, half)
                    gflat[in_rows].addmm_(gz[out_rows], weight[:, :, j])
        if need_x:
            if mask_input:
                grad_x = grad_x * m[:length, :, None, None]
            grad_x = grad_x.to(in_dtype)
        return grad_x, None, grad_w, grad_b, None


class CNNHead(Module):
    """token_embeddings (B, T, H) + attention_mask (B, T) -> sentence_embedding (B, H).

    Args:
        embedding_dimension: H, the backbone's hidden size (also the output width).
        channels: feature maps of each 3x1 convolution (128 in the paper's figure).
        blocks: number of (convolution, tanh, max pool) blocks.
        kernel_size: height of the convolutions along the token axis (odd).
    """

    config_keys = ["embedding_dimension", "channels", "blocks", "kernel_size"]

    def __init__(
        self, embedding_dimension: int, channels: int = 128, blocks: int = 2, kernel_size: int = 3
    ) -> None:
        super().__init__()
        if kernel_size % 2 == 0 or blocks < 1 or channels < 1:
            raise ValueError(
                f"cnn head: need an odd kernel_size, blocks >= 1, channels >= 1; got {kernel_size}, {blocks}, {channels}"
            )
        self.embedding_dimension = int(embedding_dimension)
        self.channels, self.blocks, self.kernel_size = int(channels), int(blocks), int(kernel_size)
        self.convs = nn.ModuleList(
            nn.Conv2d(1 if i == 0 else channels, channels, (kernel_size, 1), padding=(kernel_size // 2, 0))
            for i in range(blocks)
        )
        self.project = nn.Conv2d(channels, 1, kernel_size=1)

    def forward(self, features: dict[str, torch.Tensor], **kwargs: Any) -> dict[str, torch.Tensor]:
        """Adds ``sentence_embedding`` (see the module docstring)."""
        if torch.onnx.is_in_onnx_export():
            return self._forward_layers(features)
        states = features["token_embeddings"]
        weight = self.project.weight
        mask = features["attention_mask"].to(states.device, weight.dtype).t()  # (T, B)
        x = states.transpose(0, 1).unsqueeze(-1)  # (T, B, H, 1): time-major
        for i, conv in enumerate(self.convs):
            x, mask = ConvTanhPool.apply(x, mask, conv.weight[..., 0], conv.bias, i == 0)
        length, batch, hidden, channels = x.shape
        bias = self.project.bias.expand(length * batch * hidden)
        y = torch.tanh(torch.addmv(bias, x.reshape(-1, channels), weight[0, :, 0, 0])).view(
            length, batch, hidden
        )
        y = y * mask[:, :, None]  # (T', B, H); the 1x1 projection and tanh at real positions only
        features["sentence_embedding"] = (y.sum(0) / mask.sum(0).clamp(min=1)[:, None]).to(states.dtype)
        return features

    def _forward_layers(self, features: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The same outputs as :meth:`forward`, layer by layer on (B, C, T, H) maps with standard operators
        (``conv2d``, ``max_pool2d``, masking), for graph export: an ONNX graph cannot hold
        :class:`ConvTanhPool`'s written-out backward and in-place writes."""
        states = features["token_embeddings"]
        x = states.unsqueeze(1)  # (B, 1, T, H)
        mask = features["attention_mask"].to(states.device, states.dtype)[:, None, :, None]  # (B, 1, T, 1)
        for conv in self.convs:
            x = torch.tanh(conv(x * mask))
            x = F.max_pool2d(x.masked_fill(mask == 0, float("-inf")), (2, 1), (2, 1), ceil_mode=True)
            mask = F.max_pool2d(mask, (2, 1), (2, 1), ceil_mode=True)
            x = x.masked_fill(mask == 0, 0.0)
        x = torch.tanh(self.project(x)) * mask  # (B, 1, T', H)
        features["sentence_embedding"] = x.sum(dim=(1, 2)) / mask.sum(dim=(1, 2)).clamp(min=1)
        return features

    def get_embedding_dimension(self) -> int:
        """Width of the output vectors (the backbone's hidden size)."""
        return self.embedding_dimension

    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs: Any) -> None:
        """Write ``config.json`` and the weights (``model.safetensors``)."""
        self.save_config(output_path)
        self.save_torch_weights(output_path, safe_serialization=safe_serialization)

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", **kwargs: Any) -> CNNHead:
        """Rebuild from :meth:`save`'s folder (config, then weights)."""
        hub = {k: kwargs[k] for k in ("token", "cache_folder", "revision", "local_files_only") if k in kwargs}
        config = cls.load_config(model_name_or_path, subfolder=subfolder, **hub)
        model = cls(**config)
        return cls.load_torch_weights(model_name_or_path, subfolder=subfolder, model=model, **hub)


def cnn_pooler(hidden: int) -> CNNHead:
    """A freshly initialised :class:`CNNHead` keeping the backbone's width."""
    return CNNHead(hidden)
