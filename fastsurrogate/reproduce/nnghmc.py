"""The NNgHMC paper (Li, Holbrook, Shahbaba & Baldi 2019, "Neural network
gradient Hamiltonian Monte Carlo", Comput. Stat. 34): section 4.1 (the
synthetic bananas and an ill-conditioned Gaussian), Figures 2-5 (eq. 23's
banana, the 30-d Gaussian, the prior swap, the block network's training
loss), Tables 1-2 (efficiency on logistic regression, GARCH, GP
regression), Figures 7-8 (GP regression), Table 3 and Figures 9-10
(Laplace-prior logistic regression against SGHMC), Table 5's census-income
row (a9a) and Table 4 (network against GP gradients).  The code lives in
``_nnghmc_toy``, ``_nnghmc_fig2`` ... ``_nnghmc_fig9`` (their shared pieces
in ``_nnghmc_figs``), ``_nnghmc_tables``, ``_nnghmc_table3``,
``_nnghmc_table5`` and ``_nnghmc_table4``.
"""
from ._plots import PlotSpec
from ._table import Table

PAPER = "NNgHMC paper (Li, Holbrook, Shahbaba & Baldi 2019)"

TABLES = [
    Table("nnghmc-4.1", PAPER + ", section 4.1", "synthetic examples: the banana, the twisted "
          "banana (eq. 23) and a 30-d ill-conditioned Gaussian; acceptance of NNgHMC beside "
          "exact HMC", "._nnghmc_toy", quick=dict(n_warmup=1000, n_draws=1500)),
    Table("nnghmc-fig2", PAPER + ", Figure 2", "the banana of eq. (23): exact HMC against "
          "NNgHMC (L = 5, step 0.1, h = 100): acceptance, gradient fields, draws, two long "
          "leapfrog trajectories", "._nnghmc_fig2",
          paper_figures="Section 4.1, the text beside Figure 2: HMC accepts 0.58 and NNgHMC "
                        "0.57 (5000 draws each, L = 5, step 0.1, h = 100 trained for 50 "
                        "epochs on the gradients of HMC's first 1000 draws). The figure "
                        "itself gives no numbers.",
          missing="The paper does not state eq. (23)'s A, B and C: the two settings run "
                  "here (A = 10, C = 10, B = 0.1 and 0.05) are this table's, and why is in "
                  "its header. The network is trained by the package's L-BFGS trainer with "
                  "early stopping on a held-out 10 %, not 50 epochs of Adam."),
    Table("nnghmc-fig3", PAPER + ", Figure 3", "the 30-d Gaussian with variances 0.1 to "
          "1000 (section 4.1): exact HMC against NNgHMC (L = 100, step 0.5, h = 100) in the "
          "two extreme dimensions", "._nnghmc_fig3", quick=dict(n_draws=1000),
          paper_figures="Section 4.1, the text beside Figure 3: exact HMC accepts about 0.7 "
                        "and NNgHMC about 0.5 (step 0.5, L = 100, h = 100 trained for 10 "
                        "epochs on the gradients up to 50 iterations after convergence). The "
                        "figure's scatter plots give no numbers; the paper does not say how "
                        "many draws it shows.",
          missing="The network is trained by the package's L-BFGS trainer with early "
                  "stopping, not 10 epochs of Adam; the number of draws (3000, --quick "
                  "1000) is this table's."),
    Table("nnghmc-fig4", PAPER + ", Figure 4", "prior swap on the 200-d logistic "
          "regression: a network trained under prior variance 10 reused under variance 0.1 "
          "by adding the prior-gradient difference, against exact HMC", "._nnghmc_fig4",
          quick=dict(n_obs=2000, dim=50, n_draws=500, n_record=100, burn_in=30),
          paper_figures="Section 4.2 and Figure 4's caption: the network is trained on HMC "
                        "draws under the prior N(0, 10 I) and reused under N(0, 0.1 I); the "
                        "figure's marginals give no numbers. The section's own run (50000 "
                        "rows, step 0.01, L = 20, 4000 training points from 200 draws) "
                        "accepts about 0.8 (HMC) and 0.6 (NNgHMC); the text does not say "
                        "under which prior, and gives no acceptance under the new one.",
          missing="--quick fits the first 50 of the 200 coefficients (the first 50 columns "
                  "of the same X) to the first 2000 rows: see the table's header for why. "
                  "The paper does not say how many draws Figure 4 shows (1000 here) or which "
                  "coefficients; the network starts from the package's affine start (the "
                  "paper's is random), then Adam as the paper's."),
    Table("nnghmc-fig5", PAPER + ", Figure 5", "training loss against epochs of three "
          "gradient networks for the 200-d logistic regression: one hidden layer of 200, one "
          "of 400, and 8 disjoint layers of 50 over 25-d blocks (Remark 1)", "._nnghmc_fig5",
          quick=dict(n_obs=5000, n_record=100, epochs=30, burn_in=20),
          paper_figures="Remark 1 (section 4.2): the single large network (400 hidden) has "
                        "160,000 weights, the single small one (200) half as many, the block "
                        "network (8 x 50 over 25-d blocks) 90,000; Figure 5 shows the block "
                        "network's training loss matching the large one's and below the "
                        "small one's, without numbers.",
          missing="The paper does not say how many epochs Figure 5 runs or on which points "
                  "(this table: the 4000-odd leapfrog points of 200 exact iterations, 100 "
                  "epochs; --quick 5000 rows, 100 iterations, 30 epochs)."),
    Table("nnghmc-tables", PAPER + ", Tables 1-2", "efficiency (ESS/s, training included) on "
          "a 200-d logistic regression, GARCH(2, 1) and GP regression", "._nnghmc_tables",
          quick=dict(problems=["garch", "gpreg"]),
          missing="Table 5's census-income row (a9a, UCI Adult) is the table nnghmc-table5; "
                  "Table 5's other real-data rows need data we do not have."),
    Table("nnghmc-fig6", PAPER + ", Figure 6", "the GARCH(2, 1) series of section 4.3 "
          "(1000 observations, the one nnghmc-tables fits): summary statistics beside the "
          "model's, and the series with its conditional sd", "._nnghmc_fig6",
          paper_figures="The paper plots the series and gives no number; it does not state "
                        "the coefficients it simulated with."),
    Table("nnghmc-fig7", PAPER + ", Figure 7", "GP regression (section 4.3): the "
          "hyper-parameters' posteriors under exact HMC and NNgHMC", "._nnghmc_fig7",
          quick=dict(n_obs=200, n_draws=300, burn_in=30, n_record=30, thin=5),
          paper_figures="Table 2 (beside Figure 7): HMC accepts 0.83 and NNgHMC 0.84 (10000 "
                        "draws, step 0.05, L = 20, h = 100). Figure 7's histograms give no "
                        "numbers.",
          missing="The data are simulated here as in nnghmc-tables (the paper's polynomial "
                  "pattern is not given); 3000 draws (--quick: 300, on the first 200 of the 500 rows), "
                  "not 10000, and the "
                  "network trains on the leapfrog points of 30 exact iterations after the "
                  "burn-in, not the gradients of the first 1000 draws."),
    Table("nnghmc-fig8", PAPER + ", Figure 8", "GP regression (section 4.3): the posterior "
          "predictive mean along one direction under exact HMC and NNgHMC", "._nnghmc_fig7",
          entry="fig8_", quick=dict(n_obs=200, n_draws=300, burn_in=30, n_record=30, thin=5),
          paper_figures="Figure 8 shows the predictions of both posteriors along one "
                        "direction without numbers; the paper does not say which direction.",
          missing="The direction (the first input's axis) is this table's; the run is "
                  "nnghmc-fig7's (the same cached samples when both run in one command)."),
    Table("nnghmc-table3", PAPER + ", Table 3", "Bayesian logistic regression with a "
          "Laplace prior (Bank Marketing in place of Cover Type): NNgHMC against SGHMC with "
          "and without the Metropolis correction and exact HMC", "._nnghmc_table3",
          needs=("bank_marketing.npz",),
          quick=dict(n_draws=200, burn_in=120, explore=100, trainings=1, n_hidden=50,
                     max_train=1000, n_steps=20),
          missing="The paper's data set, Cover Type (581012 rows, 54 features), is not in the "
                  "data folder: Bank Marketing (40197 rows, 24 standardised features), the "
                  "largest data set here that an identity-metric sampler (SGHMC has no mass "
                  "matrix) can explore (a9a's one-hot columns give posterior sds from 0.006 "
                  "to 10), stands in, with a held-out 20 % as the test set. The paper's "
                  "step size, L, batch size and friction for Cover Type are not quoted in "
                  "this project's texts: this table's are stated in its header."),
    Table("nnghmc-fig9", PAPER + ", Figure 9", "Laplace-prior logistic regression (Bank "
          "Marketing in place of Cover Type): marginal posteriors of exact HMC, SGHMC and "
          "NNgHMC, from nnghmc-table3's runs", "._nnghmc_fig9", needs=("bank_marketing.npz",),
          quick=dict(n_draws=200, burn_in=120, explore=100, trainings=1, n_hidden=50,
                     max_train=1000, n_steps=20),
          paper_figures="Figure 9 shows two coefficients' histograms for Cover Type without "
                        "numbers (SGHMC at step sizes 5e-6 to 5e-8).",
          missing="Cover Type is not in the data folder (see nnghmc-table3); SGHMC runs at "
                  "HMC's step, not the paper's 5e-6 to 5e-8; the paper does not say which two "
                  "coefficients it shows (the first two after the intercept here)."),
    Table("nnghmc-fig10", PAPER + ", Figure 10", "Laplace-prior logistic regression (Bank "
          "Marketing in place of Cover Type): mixing (ESS, autocorrelation, traces) of NNgHMC "
          "and SGHMC with the Metropolis test, from nnghmc-table3's runs", "._nnghmc_fig9",
          entry="fig10_", needs=("bank_marketing.npz",),
          quick=dict(n_draws=200, burn_in=120, explore=100, trainings=1, n_hidden=50,
                     max_train=1000, n_steps=20),
          paper_figures="Table 3 (Cover Type), beside Figure 10's traces: acceptance 0.80 "
                        "(HMC), 0.67 (NNgHMC), 0.33 (SGHMC with MH); ESS (min, median, max) "
                        "(73, 143, 10,000), (57, 186, 7174), (49, 59, 246).",
          missing="Cover Type is not in the data folder (see nnghmc-table3); the traces are "
                  "of the first chosen coefficient (the paper does not say which)."),
    Table("nnghmc-table5", PAPER + ", Table 5 (census income)", "efficiency (min ESS/s, "
          "training included) of Bayesian logistic regression on census income (a9a, UCI "
          "Adult): exact HMC against NNgHMC", "._nnghmc_table5", needs=("a9a.libsvm.gz",),
          quick=dict(n_draws=300, burn_in=100, explore=150, trainings=1, max_train=1500),
          missing="Only the census-income row: census income is UCI Adult, which is a9a "
                  "(in the data folder). This project's texts do not name Table 5's other "
                  "real-data rows or quote any of its figures; those data sets are not in "
                  "the data folder (bank_marketing.npz, a9a, cancer_mortality.csv and the "
                  "posteriordb sets are all it holds), so no other row is run. The paper's "
                  "preprocessing, prior, step size and L for census income are not quoted "
                  "either: all 123 features with an intercept, prior N(0, 100 I), a dense "
                  "Laplace metric and a step adapted in HMC's burn-in are this table's "
                  "choices."),
    Table("nnghmc-table4", PAPER + ", Table 4", "acceptance of HMC driven by the network "
          "gradient against a GP gradient, N(0, I_d), d = 10, 20, 40", "._nnghmc_table4",
          quick=dict(dims=[10, 20], points=[500, 1000]),
          plots=(PlotSpec("acceptance", "Table 4: acceptance against d (NN random start)",
                          "d", (1, 2, 3, 4), ylabel="acceptance"),
                 PlotSpec("acceptance-gp", "Table 4: acceptance against d (GP)",
                          "d", (1, 2, 3, 4), pick=2, ylabel="acceptance"))),
]
