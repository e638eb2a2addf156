"""fastsurrogate: Hamiltonian Monte Carlo made cheap for expensive posteriors."""
