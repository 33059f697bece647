"""Talking to a device: frames, the wire schema, links, targets, the client and its errors."""
