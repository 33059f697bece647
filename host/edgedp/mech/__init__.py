"""The mechanism on the host: lattice and sampler tables, output modes, the discrete Laplace law,
the bit-exact reference of the device and a fast vectorised twin for experiments."""
