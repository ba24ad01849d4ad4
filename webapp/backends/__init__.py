"""Adapters of the platform to heavy libraries (torch/torchvision, pynvml), imported inside."""
