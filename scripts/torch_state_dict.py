"""A PyTorch module's state_dict as a safetensors file that sg::train::load_state_dict reads (stdlib/include/sg/train.h).

sg::nn layers name and lay out their parameters and buffers as torch's, so a torch model's state_dict loads into the
same model written with sg::nn. The `safetensors` Python package is not needed (Debian does not package it): the
format is an 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}} and the raw
little-endian data (https://github.com/huggingface/safetensors, "Format").

Every tensor is written as F32: shadergrad's parameters and buffers are f32, and BatchNorm's num_batches_tracked
(torch's int64) is a float counter there (exact up to 2^24 steps).

    import torch, sys; sys.path.insert(0, 'scripts'); from torch_state_dict import save_state_dict
    save_state_dict(torch.nn.LSTM(16, 32, 2, batch_first=True), 'lstm.safetensors')
    # C++: sg::train::load_state_dict("lstm.safetensors", lstm, backend);

As a command: python3 scripts/torch_state_dict.py MODEL.pt OUT.safetensors  (MODEL.pt holds a state_dict or a module
saved with torch.save).
"""
import json
import struct
import sys

import torch


def save_state_dict(module_or_state_dict, path):
    """Writes the state_dict (a torch.nn.Module's, or a dict of tensors) to `path`, every tensor as F32."""
    sd = module_or_state_dict.state_dict() if hasattr(module_or_state_dict, 'state_dict') else module_or_state_dict
    header, blobs, offset = {}, [], 0
    for name, t in sd.items():
        data = t.detach().to(torch.float32).contiguous().cpu().numpy().astype('<f4').tobytes()
        header[name] = {'dtype': 'F32', 'shape': list(t.shape), 'data_offsets': [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(',', ':')).encode()
    text += b' ' * ((8 - len(text) % 8) % 8)  # the data starts 8-byte aligned
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(text)) + text + b''.join(blobs))


if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit('usage: torch_state_dict.py MODEL.pt OUT.safetensors')
    save_state_dict(torch.load(sys.argv[1], map_location='cpu'), sys.argv[2])
