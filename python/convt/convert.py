"""``convt.convert(model)``: run a model's transposed convolutions on convt."""

from __future__ import annotations

import warnings

from torch import nn

from . import nn as convt_nn

__all__ = ["convert"]

# Exactly these classes are replaced; subclasses (which may override forward) are not.
_REPLACEMENTS = {
    nn.ConvTranspose1d: convt_nn.ConvTranspose1d,
    nn.ConvTranspose2d: convt_nn.ConvTranspose2d,
    nn.ConvTranspose3d: convt_nn.ConvTranspose3d,
}


def _converted(module: nn.Module, name: str) -> nn.Module:
    """The convt module for ``module`` (a zero-padded nn.ConvTranspose*d), or ``module``."""
    target = _REPLACEMENTS.get(type(module))
    if target is None:
        return module
    if module.padding_mode != "zeros":
        warnings.warn(
            f"convt.convert: left {name or 'the model'} ({type(module).__name__} with "
            f"padding_mode={module.padding_mode!r}) unchanged: convt handles padding_mode='zeros' only",
            stacklevel=3,
        )
        return module
    # The new module takes over the old one's state: the same Parameter and buffer objects,
    # hooks and attributes (the dicts are copied, their contents shared), without a
    # constructor call, so no random numbers are drawn.
    new = target.__new__(target)
    new.__dict__.update({k: (v.copy() if isinstance(v, dict) else v) for k, v in module.__dict__.items()})
    return new


def convert(model: nn.Module) -> nn.Module:
    """Replace every zero-padded ``nn.ConvTranspose1d/2d/3d`` in ``model`` by its convt module.

    The replacements share the originals' Parameter objects (an optimizer built on the
    model keeps working), hooks and training mode, and compute the same function. Modules
    with another ``padding_mode`` are left alone with a warning. Subclasses of the PyTorch
    modules are left alone too, since they may change ``forward``.

    Returns ``model``, converted in place — or, when ``model`` itself is a transposed
    convolution, its replacement.
    """
    replaced = {}  # id(old module) -> its replacement: a module used twice stays shared
    for name, parent in list(model.named_modules()):
        for child_name, child in list(parent._modules.items()):
            if child is None:
                continue
            if id(child) not in replaced:
                replaced[id(child)] = _converted(child, f"{name}.{child_name}" if name else child_name)
            parent._modules[child_name] = replaced[id(child)]
    return _converted(model, "")
