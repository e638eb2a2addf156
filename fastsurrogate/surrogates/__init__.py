"""Trainable surrogates of U; each trained surrogate is a Potential."""
from ._network import RandomNetwork
from .random_network import train_random_network, fit_output_weights
from .gp import fit_gp, fit_fitc, gp_potential, GPSurrogate
from .prior_swap import swap_prior
from ._mlp import GradientNetwork
from .gradient_network import fit_gradient_network

__all__ = ["RandomNetwork", "train_random_network", "fit_output_weights", "fit_gp",
           "fit_fitc", "gp_potential", "GPSurrogate", "swap_prior"]
__all__ += ["GradientNetwork", "fit_gradient_network"]
from .laplace import LaplaceApproximation, laplace_approximation, finite_difference_hessian
__all__ += ["LaplaceApproximation", "laplace_approximation", "finite_difference_hessian"]
from ._persist import save, load
__all__ += ["save", "load"]
