"""Trainable surrogates of U; each trained surrogate is a Potential."""
from .._network import RandomNetwork
from .random_network import train_random_network, fit_output_weights
from .gp import fit_gp, fit_fitc, gp_potential, GPSurrogate

__all__ = ["RandomNetwork", "train_random_network", "fit_output_weights", "fit_gp",
           "fit_fitc", "gp_potential", "GPSurrogate"]
