import torch
import torch.nn as nn

device = 'cuda' if torch.cuda.is_available() else 'cpu'

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(64, 32)
        self.out = nn.Linear(32, 64)

    def forward(self, x):
        return self.out(self.emb(x))

if __name__ == '__main__':
    model = Net().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randint(0, 64, (2, 8 + step), device=device)  # a new length every step
        loss = model(x).logsumexp(-1).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        print(step, loss.item())
