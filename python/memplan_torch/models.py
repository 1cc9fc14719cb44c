"""The models the command line knows: every torchvision classification model
by name, and `transformer`, a 4-layer nn.TransformerEncoder classifier."""

import torch
import torch.nn.functional as F


class TransformerClassifier(torch.nn.Module):
    """Token ids [batch, seq] -> class logits: embedding, a 4-layer
    nn.TransformerEncoder (post-norm, ReLU, dropout 0.1), mean pooling, a linear head."""

    def __init__(self, vocab=1000, d_model=256, heads=4, layers=4, classes=10):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d_model)
        layer = torch.nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=4 * d_model, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers)
        self.head = torch.nn.Linear(d_model, classes)

    def forward(self, ids):
        return self.head(self.encoder(self.embed(ids)).mean(dim=1))


def classification_models():
    import torchvision
    return sorted(n for n in torchvision.models.list_models(module=torchvision.models)) \
        if hasattr(torchvision.models, "list_models") else sorted(
            n for n, f in vars(torchvision.models).items()
            if callable(f) and n[0].islower() and not n.startswith("_") and n not in ("get_weight",))


def build(name, batch, seq_len=128, resolution=None):
    """(model, inputs, target, loss_fn) for `name` at `batch`; seeded, CPU."""
    torch.manual_seed(0)
    if batch < 1:
        raise ValueError(f"batch: {batch} is not a positive number of samples")
    if name == "transformer":
        model = TransformerClassifier()
        inputs = torch.randint(0, 1000, (batch, seq_len))
        return model, (inputs,), torch.randint(0, 10, (batch,)), F.cross_entropy
    import torchvision
    factory = getattr(torchvision.models, name, None)
    if factory is None or not callable(factory) or name not in classification_models():
        raise ValueError(f"model: '{name}' is neither a torchvision classification model nor 'transformer'")
    kwargs = {"aux_logits": False, "init_weights": True} if name in ("inception_v3", "googlenet") else {}
    model = factory(**kwargs)
    size = resolution or (299 if name == "inception_v3" else 224)
    images = torch.randn(batch, 3, size, size)
    return model, (images,), torch.randint(0, 1000, (batch,)), F.cross_entropy


def sgd(model):
    """SGD with momentum, one tensor at a time (foreach=False: one op per parameter, as the zoo's updates)."""
    return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, foreach=False)
