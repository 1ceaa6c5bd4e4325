"""The wire format below every layer that moves tensors: frames, state dicts, activations."""
