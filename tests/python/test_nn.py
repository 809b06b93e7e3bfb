"""convt.nn modules and convt.convert: PyTorch's constructor, parameters, initialisation
(the same random draws), state_dicts both ways, forward with output_size, and conversion
of whole models that share their Parameter objects."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import nn

import convt
from conftest import rel_error

MODULES = {1: (nn.ConvTranspose1d, convt.nn.ConvTranspose1d), 2: (nn.ConvTranspose2d, convt.nn.ConvTranspose2d), 3: (nn.ConvTranspose3d, convt.nn.ConvTranspose3d)}

CONSTRUCTIONS = [
    (1, (4, 6, 3), {}),
    (1, (4, 6, 5), dict(stride=3, padding=2, output_padding=1, groups=2, bias=False, dilation=2)),
    (2, (4, 6, 3), {}),
    (2, (4, 6, (3, 2)), dict(stride=(2, 1), padding=(1, 0), output_padding=(1, 0))),
    (2, (6, 6, 3), dict(groups=6, stride=2)),
    (2, (4, 8, 4), dict(stride=2, padding=1, bias=False)),
    (3, (2, 4, 3), {}),
    (3, (4, 4, (1, 3, 2)), dict(stride=(1, 2, 2), groups=2, dilation=(1, 1, 2))),
    (2, (3, 5, 3), dict(dtype=torch.float64)),
]


def _input(dims, channels, batch=2, size=5, dtype=torch.float32):
    return torch.randn((batch, channels) + (size,) * dims, dtype=dtype)


@pytest.mark.parametrize("dims,args,kwargs", CONSTRUCTIONS)
def test_same_parameters_under_the_same_seed(dims, args, kwargs):
    torch_cls, convt_cls = MODULES[dims]
    torch.manual_seed(1234)
    ref = torch_cls(*args, **kwargs)
    torch.manual_seed(1234)
    mod = convt_cls(*args, **kwargs)
    assert isinstance(mod, torch_cls)
    assert [n for n, _ in mod.named_parameters()] == [n for n, _ in ref.named_parameters()]
    for (name, p), (_, q) in zip(mod.named_parameters(), ref.named_parameters()):
        assert p.shape == q.shape and p.dtype == q.dtype, name
        assert torch.equal(p, q), name
    assert repr(mod) == repr(ref)
    # The next draw is the same too: both constructors consumed the same random numbers.
    assert torch.equal(torch.rand(3), (torch.manual_seed(1234), torch_cls(*args, **kwargs), torch.rand(3))[2])


@pytest.mark.parametrize("dims,args,kwargs", CONSTRUCTIONS)
def test_forward_matches_pytorch_module(dims, args, kwargs):
    torch_cls, convt_cls = MODULES[dims]
    torch.manual_seed(0)
    ref = torch_cls(*args, **kwargs)
    mod = convt_cls(*args, **kwargs)
    mod.load_state_dict(ref.state_dict())
    dtype = kwargs.get("dtype", torch.float32)
    for x in (_input(dims, args[0], dtype=dtype), _input(dims, args[0], batch=1, dtype=dtype)[0]):
        assert rel_error(mod(x), ref(x)) <= 1e-5


@pytest.mark.parametrize("dims,args,kwargs", CONSTRUCTIONS)
def test_state_dicts_load_both_ways(dims, args, kwargs):
    torch_cls, convt_cls = MODULES[dims]
    ref = torch_cls(*args, **kwargs)
    mod = convt_cls(*args, **kwargs)
    mod.load_state_dict(ref.state_dict())  # PyTorch -> convt
    for k, v in ref.state_dict().items():
        assert torch.equal(mod.state_dict()[k], v)
    with torch.no_grad():
        for p in mod.parameters():
            p.add_(1.0)
    ref.load_state_dict(mod.state_dict())  # convt -> PyTorch
    assert mod.state_dict().keys() == ref.state_dict().keys()
    for k, v in mod.state_dict().items():
        assert torch.equal(ref.state_dict()[k], v)


def test_state_dict_file_round_trip(tmp_path):
    ref = nn.ConvTranspose2d(3, 4, 3, stride=2)
    torch.save(ref.state_dict(), tmp_path / "ref.pt")
    mod = convt.nn.ConvTranspose2d(3, 4, 3, stride=2)
    mod.load_state_dict(torch.load(tmp_path / "ref.pt"))
    x = _input(2, 3)
    assert rel_error(mod(x), ref(x)) <= 1e-5


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_forward_output_size(dims):
    torch_cls, convt_cls = MODULES[dims]
    torch.manual_seed(0)
    ref = torch_cls(3, 2, 3, stride=3, padding=1)
    mod = convt_cls(3, 2, 3, stride=3, padding=1)
    mod.load_state_dict(ref.state_dict())
    x = _input(dims, 3, size=4)
    base = (4 - 1) * 3 - 2 + 3  # smallest output size per dimension
    for extra in range(3):
        size = [base + extra] * dims
        for output_size in (size, [2, 2] + size):
            out = mod(x, output_size=output_size)
            assert out.shape[2:] == tuple(size)
            assert rel_error(out, ref(x, output_size=output_size)) <= 1e-5
    # Unbatched input: output_size with the channel dimension.
    out = mod(x[0], output_size=[2] + [base + 1] * dims)
    assert rel_error(out, ref(x[0], output_size=[2] + [base + 1] * dims)) <= 1e-5


def test_training_step_matches_pytorch():
    torch.manual_seed(0)
    ref = nn.Sequential(nn.ConvTranspose2d(4, 3, 4, stride=2, padding=1), nn.ReLU(), nn.ConvTranspose2d(3, 2, 3))
    mod = copy.deepcopy(ref)
    convt.convert(mod)
    x = _input(2, 4)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt_mod = torch.optim.SGD(mod.parameters(), lr=0.1)
    for _ in range(3):
        for model, opt in ((ref, opt_ref), (mod, opt_mod)):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
    for p, q in zip(mod.parameters(), ref.parameters()):
        assert rel_error(p, q) <= 1e-5


class Decoder(nn.Module):
    """A small decoder: upsampling layers of every kind, a subclass, and other modules."""

    class CustomUp(nn.ConvTranspose2d):
        def forward(self, x, output_size=None):
            return super().forward(x, output_size) * 0.5

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.blocks = nn.ModuleList(
            [
                nn.Sequential(nn.ConvTranspose2d(8, 8, 4, stride=2, padding=1), nn.LeakyReLU(0.1)),
                nn.Sequential(nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1, groups=4), nn.ReLU()),
            ]
        )
        self.custom = Decoder.CustomUp(4, 4, 1)
        self.head = nn.ConvTranspose2d(4, 2, 3, padding=1, bias=False)
        self.audio = nn.ConvTranspose1d(2, 1, 8, stride=4, padding=2)
        self.volume = nn.ConvTranspose3d(2, 1, 2, stride=2)

    def forward(self, x):
        y = self.stem(x)
        for block in self.blocks:
            y = block(y)
        y = self.head(self.custom(y))
        return self.audio(y.flatten(2)).sum() + self.volume(y.unsqueeze(2)).mean()


def test_convert_decoder():
    torch.manual_seed(0)
    model = Decoder()
    reference = copy.deepcopy(model)
    params_before = {n: p for n, p in model.named_parameters()}
    hook_calls = []
    model.head.register_forward_hook(lambda m, i, o: hook_calls.append(o.shape))

    result = convt.convert(model)

    assert result is model
    assert type(model.blocks[0][0]) is convt.nn.ConvTranspose2d
    assert type(model.blocks[1][0]) is convt.nn.ConvTranspose2d
    assert type(model.head) is convt.nn.ConvTranspose2d
    assert type(model.audio) is convt.nn.ConvTranspose1d
    assert type(model.volume) is convt.nn.ConvTranspose3d
    assert type(model.custom) is Decoder.CustomUp  # subclasses are left alone
    assert type(model.stem) is nn.Conv2d
    # The same Parameter objects, under the same names.
    for n, p in model.named_parameters():
        assert p is params_before[n], n
    assert model.state_dict().keys() == reference.state_dict().keys()

    x = torch.randn(2, 3, 4, 4)
    model.eval(), reference.eval()
    assert rel_error(model(x), reference(x)) <= 1e-5
    assert hook_calls, "forward hooks of the converted module still run"
    model.train(), reference.train()
    model(x).backward()
    reference(x).backward()
    for (n, p), q in zip(model.named_parameters(), reference.parameters()):
        assert rel_error(p.grad, q.grad) <= 1e-4, n


def test_convert_module_itself_and_idempotence():
    m = nn.ConvTranspose2d(2, 2, 3)
    c = convt.convert(m)
    assert type(c) is convt.nn.ConvTranspose2d and c.weight is m.weight and c.bias is m.bias
    assert convt.convert(c) is c
    seq = nn.Sequential(nn.ConvTranspose1d(2, 2, 3))
    convt.convert(seq)
    before = seq[0]
    convt.convert(seq)
    assert seq[0] is before


def test_convert_keeps_shared_modules_shared():
    up = nn.ConvTranspose2d(2, 2, 3)
    model = nn.Sequential(up, nn.ReLU(), up)
    convt.convert(model)
    assert model[0] is model[2] and type(model[0]) is convt.nn.ConvTranspose2d
    assert model[0].weight is up.weight


def test_convert_leaves_other_padding_modes_with_a_warning():
    model = nn.Sequential(nn.ConvTranspose2d(2, 2, 3), nn.ConvTranspose2d(2, 2, 3))
    model[1].padding_mode = "circular"  # not constructible directly; set afterwards
    with pytest.warns(UserWarning, match="padding_mode='circular'"):
        convt.convert(model)
    assert type(model[0]) is convt.nn.ConvTranspose2d
    assert type(model[1]) is nn.ConvTranspose2d
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        convt.convert(nn.Sequential(nn.ConvTranspose2d(2, 2, 3)))


def test_convert_keeps_device_dtype_and_mode():
    model = nn.Sequential(nn.ConvTranspose2d(2, 2, 3).double()).eval()
    convt.convert(model)
    assert model[0].weight.dtype == torch.float64 and not model[0].training
    out = model(torch.randn(1, 2, 4, 4, dtype=torch.float64))
    assert out.dtype == torch.float64
