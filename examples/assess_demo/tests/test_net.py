from train import Net
import torch

def test_shape():
    assert Net()(torch.zeros(1, 4, dtype=torch.long)).shape == (1, 4, 64)
