"""Drop-in replacements for ``torch.nn.ConvTranspose1d/2d/3d``.

Each class subclasses the PyTorch module it replaces and changes only ``forward``: the
constructor, the parameters (names, shapes, default initialisation — the same random
draws under the same seed), ``extra_repr`` and state_dicts are PyTorch's own, so weights
and state_dicts move between the two freely and ``isinstance(m, nn.ConvTranspose2d)``
still holds. ``forward(input, output_size=None)`` takes PyTorch's ``output_size``
argument and computes the result with convt.
"""

from __future__ import annotations

from typing import List, Optional

from torch import Tensor
from torch import nn

from . import functional as F

__all__ = ["ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]


class ConvTranspose1d(nn.ConvTranspose1d):
    """``torch.nn.ConvTranspose1d``, computed by convt.

    Same constructor arguments, parameters and initialisation as
    ``torch.nn.ConvTranspose1d`` (see its documentation); ``forward(input, output_size=None)``
    returns what PyTorch's module returns.
    """

    def forward(self, input: Tensor, output_size: Optional[List[int]] = None) -> Tensor:
        if self.padding_mode != "zeros":
            raise ValueError("Only `zeros` padding mode is supported for ConvTranspose1d")
        output_padding = self.output_padding
        if output_size is not None:
            output_padding = self._output_padding(
                input, output_size, self.stride, self.padding, self.kernel_size, 1, self.dilation
            )
        return F.conv_transpose1d(
            input, self.weight, self.bias, self.stride, self.padding, output_padding, self.groups, self.dilation
        )


class ConvTranspose2d(nn.ConvTranspose2d):
    """``torch.nn.ConvTranspose2d``, computed by convt.

    Same constructor arguments, parameters and initialisation as
    ``torch.nn.ConvTranspose2d`` (see its documentation); ``forward(input, output_size=None)``
    returns what PyTorch's module returns.
    """

    def forward(self, input: Tensor, output_size: Optional[List[int]] = None) -> Tensor:
        if self.padding_mode != "zeros":
            raise ValueError("Only `zeros` padding mode is supported for ConvTranspose2d")
        output_padding = self.output_padding
        if output_size is not None:
            output_padding = self._output_padding(
                input, output_size, self.stride, self.padding, self.kernel_size, 2, self.dilation
            )
        return F.conv_transpose2d(
            input, self.weight, self.bias, self.stride, self.padding, output_padding, self.groups, self.dilation
        )


class ConvTranspose3d(nn.ConvTranspose3d):
    """``torch.nn.ConvTranspose3d``, computed by convt.

    Same constructor arguments, parameters and initialisation as
    ``torch.nn.ConvTranspose3d`` (see its documentation); ``forward(input, output_size=None)``
    returns what PyTorch's module returns.
    """

    def forward(self, input: Tensor, output_size: Optional[List[int]] = None) -> Tensor:
        if self.padding_mode != "zeros":
            raise ValueError("Only `zeros` padding mode is supported for ConvTranspose3d")
        output_padding = self.output_padding
        if output_size is not None:
            output_padding = self._output_padding(
                input, output_size, self.stride, self.padding, self.kernel_size, 3, self.dilation
            )
        return F.conv_transpose3d(
            input, self.weight, self.bias, self.stride, self.padding, output_padding, self.groups, self.dilation
        )
