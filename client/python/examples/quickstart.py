import torch, ferry.ps as ps
from ferry.ps.torch import EmbeddingBag

tables = [ps.Embedding("emb", rows=100_000, dim=16, optimizer=ps.Adagrad(lr=0.3))]
shards = [ps.ShardServer(tables, i, 2).start() for i in range(2)]  # usually: python3 -m ferry.ps.server
worker = ps.Worker(tables, shards=2)           # shards elsewhere: target="HOST:PORT" of their ferryd
bag = EmbeddingBag(worker, "emb", mode="sum")  # was: torch.nn.EmbeddingBag(100_000, 16, mode="sum")
head = torch.nn.Linear(16, 1)
opt = torch.optim.SGD(head.parameters(), lr=0.1)
for step in range(200):
    ids = torch.randint(0, 1000, (256, 4))
    y = ((ids % 2).sum(1) >= 2).float()  # a label the embeddings can learn
    loss = torch.nn.functional.binary_cross_entropy_with_logits(head(bag(ids)).squeeze(1), y)
    opt.zero_grad()
    loss.backward()              # pushes the rows' gradients; the shards apply Adagrad
    opt.step()
    worker.synchronize()         # wait for this step's pushes (drop it to train asynchronously)
    if step % 50 == 0 or step == 199:
        print(f"step {step} loss {loss.item():.4f}")
