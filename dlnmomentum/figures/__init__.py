"""The paper's figures as functions that write an HDF5 sweep store and a PNG (matplotlib imported on demand).

* :mod:`.networks` — Figure 2 (teacher-student ReLU net) and Figure 6 (deep linear net): MGD over
  (γ, β) grids with λ = γ/(1-β)² level lines, and the λ-claim measure :func:`.networks.lambda_spread`.
"""
