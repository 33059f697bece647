"""The operator's side of many devices: keys of their own (keystore), provisioned images
(provision), flashing a board (flash), and a registry of their authenticated state (registry,
written by sync, read through status). docs/fleet.md describes each part."""
