"""A DLRM-style click-through-rate model and the synthetic click data it
learns (ferry's demo and training tests).

Data: each sample has ``dense`` float features and ``features`` sparse
features of ``bag`` ids each (drawn with a power-law popularity). The
planted ground truth is a logistic model: every (feature, id) has a hidden
weight, the dense features have hidden weights, and the label is a
Bernoulli draw of sigmoid(sum of them + bias). A fixed seed makes the data,
and so the loss curve, reproducible; the truth's own AUC on the held-out
set (``oracle_auc``) is the ceiling a model can reach.

Model: a bottom MLP over the dense features, one embedding bag per sparse
feature (all features in one table: key = feature * ids + id), DLRM's
pairwise dot-product interaction, and a top MLP. ``make_model(embedding)``
takes the embedding module: ``torch.nn.EmbeddingBag`` for a local model,
``ferry.ps.torch.EmbeddingBag`` (or the same module over the torch.distributed.rpc baseline's worker)
for a parameter server: that is the one line that changes.
"""

import dataclasses

import numpy as np
import torch
from torch import nn


@dataclasses.dataclass(frozen=True)
class DataSpec:
    features: int = 8
    ids: int = 5000  # per feature
    dense: int = 13
    bag: int = 2
    train: int = 120_000
    test: int = 20_000
    skew: float = 1.05
    seed: int = 20240601

    @property
    def rows(self):
        return self.features * self.ids


@dataclasses.dataclass
class Dataset:
    dense: np.ndarray   # [n, dense] float32
    keys: np.ndarray    # [n, features, bag] int64 (table keys: feature * ids + id)
    labels: np.ndarray  # [n] float32
    logits: np.ndarray  # [n] float32, the truth's (for oracle_auc)

    def __len__(self):
        return len(self.labels)

    def batches(self, batch, start=0, stop=None, stride=1):
        """(dense, keys, labels) torch batches of rows start, start+stride, ... (worker sharding)."""
        idx = np.arange(start, len(self) if stop is None else stop, stride)
        for b in range(0, len(idx) - batch + 1, batch):
            sel = idx[b:b + batch]
            yield (torch.from_numpy(self.dense[sel]), torch.from_numpy(self.keys[sel]),
                   torch.from_numpy(self.labels[sel]))


def generate(spec=DataSpec()):
    """(train, test) with the planted truth; a pure function of spec."""
    rng = np.random.default_rng(spec.seed)
    id_weight = rng.normal(0.0, 0.7, size=(spec.features, spec.ids)).astype(np.float32)
    dense_weight = rng.normal(0.0, 0.5, size=spec.dense).astype(np.float32)
    popularity = 1.0 / np.power(np.arange(1, spec.ids + 1), spec.skew)
    cdf = np.cumsum(popularity) / popularity.sum()
    # A random permutation per feature, so popular ids are not the small ones.
    perm = np.stack([rng.permutation(spec.ids) for _ in range(spec.features)])
    n = spec.train + spec.test
    ranks = np.minimum(np.searchsorted(cdf, rng.random((n, spec.features, spec.bag))), spec.ids - 1)
    ids = perm[np.arange(spec.features)[None, :, None], ranks]  # rank r of feature f is id perm[f, r]
    dense = rng.normal(0.0, 1.0, size=(n, spec.dense)).astype(np.float32)
    feat = np.arange(spec.features)[None, :, None]
    logits = id_weight[feat, ids].sum(axis=(1, 2)) + dense @ dense_weight - 1.0
    labels = (rng.random(n) < 1.0 / (1.0 + np.exp(-logits))).astype(np.float32)
    keys = (feat * spec.ids + ids).astype(np.int64)
    cut = spec.train
    return (Dataset(dense[:cut], keys[:cut], labels[:cut], logits[:cut].astype(np.float32)),
            Dataset(dense[cut:], keys[cut:], labels[cut:], logits[cut:].astype(np.float32)))


def auc(labels, scores):
    """Area under the ROC curve (Mann-Whitney, ties averaged)."""
    labels = np.asarray(labels, dtype=np.float64)
    scores = np.asarray(scores, dtype=np.float64)
    order = np.argsort(scores, kind="mergesort")
    s = scores[order]
    ranks = np.empty(len(s), dtype=np.float64)
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[i:j + 1] = (i + j) / 2.0 + 1.0
        i = j + 1
    r = np.empty_like(ranks)
    r[order] = ranks
    pos = labels > 0.5
    n_pos, n_neg = pos.sum(), (~pos).sum()
    if n_pos == 0 or n_neg == 0:
        return 0.5
    return float((r[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def oracle_auc(test):
    return auc(test.labels, test.logits)


def mlp(sizes):
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


class DLRM(nn.Module):
    """bottom MLP (dense) + embedding bags (sparse) + dot interaction + top MLP."""

    def __init__(self, spec, embedding, dim=16, bottom=(32,), top=(64, 32)):
        super().__init__()
        self.spec = spec
        self.dim = dim
        self.embedding = embedding
        self.dense_part = nn.ModuleDict({
            "bottom": mlp((spec.dense,) + tuple(bottom) + (dim,)),
            "top": mlp((dim + (spec.features + 1) * spec.features // 2,) + tuple(top) + (1,)),
        })
        iu = torch.triu_indices(spec.features + 1, spec.features + 1, offset=1)
        self.register_buffer("iu0", iu[0], persistent=False)
        self.register_buffer("iu1", iu[1], persistent=False)

    def forward(self, dense, keys, rows=None):
        b = dense.shape[0]
        x = torch.relu(self.dense_part["bottom"](dense))                   # [B, dim]
        bags = keys.reshape(b * self.spec.features, self.spec.bag)         # one bag per (sample, feature)
        e = self.embedding(bags) if rows is None else self.embedding(bags, rows=rows)
        z = torch.cat([x.unsqueeze(1), e.view(b, self.spec.features, self.dim)], 1)  # [B, F+1, dim]
        inter = torch.bmm(z, z.transpose(1, 2))[:, self.iu0, self.iu1]    # pairwise dots
        return self.dense_part["top"](torch.cat([x, inter], 1)).squeeze(1)


def make_model(spec, embedding, dim=16, seed=7):
    """The model with its dense weights initialised from `seed` (same seed, same weights)."""
    torch.manual_seed(seed)
    return DLRM(spec, embedding, dim=dim)


def dense_size(spec, dim=16):
    m = DLRM(spec, nn.Identity(), dim=dim)
    return sum(p.numel() for p in m.dense_part.parameters())
