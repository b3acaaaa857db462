"""convolution: conv1d/2d/3d (strided, dilated, grouped, depthwise, channels-last,
odd sizes, empty batches), transposed convolutions, pooling and upsampling."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stages.functional.catalog import Case, channels_last, randn

__all__ = ["cases"]


def cases() -> list[Case]:
    import torch.nn.functional as F

    def c(name: str, op: str, kind: str, make: Callable, call: Callable, **kw: Any) -> Case:
        return Case(f"convolution.{name}", "convolution", op, kind, make, call, **kw)

    def conv(x_shape: tuple[int, ...], w_shape: tuple[int, ...], bias: bool = True) -> Callable:
        def make(g: Any) -> tuple[Any, ...]:
            x, w = randn(g, *x_shape), randn(g, *w_shape)
            return (x, w, randn(g, w_shape[0])) if bias else (x, w)

        return make

    def tconv(x_shape: tuple[int, ...], w_shape: tuple[int, ...], groups: int = 1) -> Callable:
        # transposed conv weights are (C_in, C_out / groups, k...): bias has C_out entries
        return lambda g: (randn(g, *x_shape), randn(g, *w_shape), randn(g, w_shape[1] * groups))

    def img(*shape: int) -> Callable:
        return lambda g: (randn(g, *shape),)

    k = "conv"
    return [
        c("conv1d", "aten::convolution", k, conv((4, 6, 31), (8, 6, 3)), F.conv1d),
        c("conv1d.stride2", "aten::convolution", k, conv((2, 5, 40), (7, 5, 4)), lambda x, w, b: F.conv1d(x, w, b, 2)),
        c(
            "conv1d.dilated",
            "aten::convolution",
            k,
            conv((3, 4, 33), (6, 4, 3)),
            lambda x, w, b: F.conv1d(x, w, b, dilation=3, padding=3),
        ),
        c(
            "conv1d.grouped",
            "aten::convolution",
            k,
            conv((2, 8, 29), (12, 2, 5)),
            lambda x, w, b: F.conv1d(x, w, b, groups=4, padding=2),
        ),
        c(
            "conv1d.same",
            "aten::convolution",
            k,
            conv((2, 3, 27), (5, 3, 4), bias=False),
            lambda x, w: F.conv1d(x, w, padding="same"),
        ),
        c(
            "conv2d",
            "aten::convolution",
            k,
            conv((2, 3, 16, 16), (8, 3, 3, 3)),
            lambda x, w, b: F.conv2d(x, w, b, 1, 1),
        ),
        c(
            "conv2d.odd",
            "aten::convolution",
            k,
            conv((3, 5, 13, 17), (7, 5, 3, 3)),
            lambda x, w, b: F.conv2d(x, w, b, 1, 1),
        ),
        c(
            "conv2d.stride2",
            "aten::convolution",
            k,
            conv((2, 4, 15, 15), (8, 4, 3, 3)),
            lambda x, w, b: F.conv2d(x, w, b, 2, 1),
        ),
        c(
            "conv2d.dilated",
            "aten::convolution",
            k,
            conv((2, 4, 17, 17), (6, 4, 3, 3)),
            lambda x, w, b: F.conv2d(x, w, b, dilation=2, padding=2),
        ),
        c(
            "conv2d.grouped",
            "aten::convolution",
            k,
            conv((2, 8, 12, 12), (8, 2, 3, 3)),
            lambda x, w, b: F.conv2d(x, w, b, padding=1, groups=4),
        ),
        c(
            "conv2d.depthwise",
            "aten::convolution",
            k,
            conv((2, 6, 14, 14), (6, 1, 3, 3)),
            lambda x, w, b: F.conv2d(x, w, b, padding=1, groups=6),
        ),
        c(
            "conv2d.depthwise.multiplier",
            "aten::convolution",
            k,
            conv((2, 4, 11, 11), (8, 1, 5, 5)),
            lambda x, w, b: F.conv2d(x, w, b, padding=2, groups=4),
        ),
        c("conv2d.1x1", "aten::convolution", k, conv((4, 16, 7, 7), (24, 16, 1, 1)), F.conv2d),
        c(
            "conv2d.5x5",
            "aten::convolution",
            k,
            conv((2, 3, 19, 23), (4, 3, 5, 5)),
            lambda x, w, b: F.conv2d(x, w, b, padding=2),
        ),
        c(
            "conv2d.rect_kernel",
            "aten::convolution",
            k,
            conv((2, 4, 12, 9), (5, 4, 3, 1)),
            lambda x, w, b: F.conv2d(x, w, b, padding=(1, 0)),
        ),
        c(
            "conv2d.channels_last",
            "aten::convolution",
            k,
            conv((2, 8, 13, 13), (16, 8, 3, 3)),
            lambda x, w, b: F.conv2d(x, w, b, padding=1),
            layout=channels_last,
        ),
        c(
            "conv2d.channels_last.grouped",
            "aten::convolution",
            k,
            conv((2, 8, 10, 10), (8, 4, 3, 3)),
            lambda x, w, b: F.conv2d(x, w, b, padding=1, groups=2),
            layout=channels_last,
        ),
        c(
            "conv2d.noncontiguous",
            "aten::convolution",
            k,
            conv((2, 3, 20, 20), (4, 3, 3, 3)),
            lambda x, w, b: F.conv2d(x[..., ::2, ::2], w, b, padding=1),
        ),
        c(
            "conv2d.same.asymmetric",
            "aten::convolution",
            k,
            conv((1, 3, 10, 10), (4, 3, 4, 4), bias=False),
            lambda x, w: F.conv2d(x, w, padding="same"),
        ),
        c(
            "conv2d.empty_batch",
            "aten::convolution",
            k,
            conv((0, 3, 8, 8), (4, 3, 3, 3)),
            lambda x, w, b: F.conv2d(x, w, b, padding=1),
        ),
        c(
            "conv3d",
            "aten::convolution",
            k,
            conv((2, 3, 7, 8, 9), (4, 3, 3, 3, 3)),
            lambda x, w, b: F.conv3d(x, w, b, 1, 1),
        ),
        c(
            "conv3d.stride2.grouped",
            "aten::convolution",
            k,
            conv((1, 4, 9, 9, 9), (4, 2, 3, 3, 3)),
            lambda x, w, b: F.conv3d(x, w, b, 2, 1, groups=2),
        ),
        c("conv_transpose1d", "aten::convolution", k, tconv((2, 4, 15), (4, 3, 3)), F.conv_transpose1d),
        c("conv_transpose2d", "aten::convolution", k, tconv((2, 6, 9, 9), (6, 4, 3, 3)), F.conv_transpose2d),
        c(
            "conv_transpose2d.stride2",
            "aten::convolution",
            k,
            tconv((2, 4, 7, 8), (4, 3, 3, 3)),
            lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
        ),
        c(
            "conv_transpose2d.grouped.dilated",
            "aten::convolution",
            k,
            tconv((2, 4, 6, 6), (4, 2, 3, 3), groups=2),
            lambda x, w, b: F.conv_transpose2d(x, w, b, groups=2, dilation=2),
        ),
        c("conv_transpose3d", "aten::convolution", k, tconv((1, 3, 5, 6, 5), (3, 2, 3, 3, 3)), F.conv_transpose3d),
        c(
            "upsample_bilinear2d",
            "aten::upsample_bilinear2d",
            "conv",
            img(2, 3, 7, 9),
            lambda x: F.interpolate(x, size=(15, 20), mode="bilinear", align_corners=False),
        ),
        c(
            "upsample_bilinear2d.align_corners",
            "aten::upsample_bilinear2d",
            "conv",
            img(2, 3, 8, 5),
            lambda x: F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=True),
        ),
        c(
            "upsample_bilinear2d.channels_last",
            "aten::upsample_bilinear2d",
            "conv",
            img(2, 5, 6, 6),
            lambda x: F.interpolate(x, size=(11, 13), mode="bilinear"),
            layout=channels_last,
        ),
        c(
            "upsample_bilinear2d.downsample",
            "aten::upsample_bilinear2d",
            "conv",
            img(1, 2, 17, 19),
            lambda x: F.interpolate(x, size=(6, 7), mode="bilinear", antialias=False),
        ),
        c(
            "upsample_nearest2d",
            "aten::upsample_nearest2d",
            "exact",
            img(2, 3, 5, 7),
            lambda x: F.interpolate(x, scale_factor=3, mode="nearest"),
        ),
        c(
            "upsample_bicubic2d",
            "aten::upsample_bicubic2d",
            "conv",
            img(1, 3, 6, 6),
            lambda x: F.interpolate(x, size=(13, 9), mode="bicubic", align_corners=False),
        ),
        c(
            "max_pool2d",
            "aten::max_pool2d_with_indices",
            "exact",
            img(2, 3, 13, 11),
            lambda x: F.max_pool2d(x, 3, 2, 1),
        ),
        c(
            "avg_pool2d.ceil",
            "aten::avg_pool2d",
            "pointwise",
            img(2, 3, 13, 11),
            lambda x: F.avg_pool2d(x, 3, 2, ceil_mode=True, count_include_pad=False),
        ),
        c(
            "adaptive_avg_pool2d",
            "aten::_adaptive_avg_pool2d",
            "pointwise",
            img(2, 4, 13, 9),
            lambda x: F.adaptive_avg_pool2d(x, (5, 4)),
        ),
        c(
            "pixel_shuffle",
            "aten::pixel_shuffle",
            "exact",
            img(2, 8, 5, 3),
            lambda x: F.pixel_shuffle(x, 2),
        ),
        c("unfold.im2col", "aten::im2col", "exact", img(2, 3, 9, 8), lambda x: F.unfold(x, 3, dilation=2, padding=1)),
    ]
