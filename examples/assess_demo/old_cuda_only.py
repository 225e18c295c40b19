import torch
if __name__ == '__main__':
    torch.cuda.synchronize()
