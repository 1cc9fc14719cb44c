#!/usr/bin/env python3
"""Forward saved-tensor bytes of torchvision models, to compare with memplan's zoo.

Runs one training forward pass (train mode, cross-entropy loss) on the CPU
under torch.autograd.graph.saved_tensors_hooks and adds up the bytes of every
distinct storage autograd keeps for the backward pass, leaving out the
parameters (memplan counts those apart). memplan's side of the comparison is

    build-zoo/bench/bench_models --saved MODEL BATCH

which adds up the activation and input tensors that some backward op reads.

usage: python3 examples/pytorch/saved_tensors.py [--batch N] [MODEL ...]
"""
import argparse
import sys

import torch
import torchvision

MODELS = {
    "resnet50": lambda: torchvision.models.resnet50(),
    "resnet101": lambda: torchvision.models.resnet101(),
    "resnet152": lambda: torchvision.models.resnet152(),
    "resnext50": lambda: torchvision.models.resnext50_32x4d(),
    "vgg16": lambda: torchvision.models.vgg16(),
    "vgg19": lambda: torchvision.models.vgg19(),
    "densenet121": lambda: torchvision.models.densenet121(),
    "squeezenet": lambda: torchvision.models.squeezenet1_1(),
    "inception_v3": lambda: torchvision.models.inception_v3(aux_logits=True, init_weights=False),
}


def storage_of(t):
    """The storage behind `t` (untyped_storage() from PyTorch 2.0, storage() before)."""
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()


def saved_bytes(name, batch):
    model = MODELS[name]()
    model.train()
    size = 299 if name == "inception_v3" else 224
    images = torch.randn(batch, 3, size, size)
    labels = torch.randint(0, 1000, (batch,))
    params = {storage_of(p).data_ptr() for p in model.parameters()}
    storages = {}

    def pack(t):
        s = storage_of(t)
        if s.data_ptr() not in params:
            storages[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(images)
        if isinstance(out, tuple):  # inception_v3: (logits, aux_logits)
            loss = torch.nn.functional.cross_entropy(out[0], labels) + \
                0.4 * torch.nn.functional.cross_entropy(out[1], labels)
        else:
            loss = torch.nn.functional.cross_entropy(out, labels)
    n_params = sum(p.numel() for p in model.parameters())
    return sum(storages.values()), len(storages), n_params


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("models", nargs="*", default=list(MODELS))
    args = parser.parse_args()
    torch.manual_seed(0)
    print("| model | batch | parameters | saved storages | saved bytes |")
    print("|---|---:|---:|---:|---:|")
    for name in args.models:
        total, count, n_params = saved_bytes(name, args.batch)
        print(f"| {name} | {args.batch} | {n_params} | {count} | {total} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
