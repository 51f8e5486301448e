"""Run kinds: what one MGD/SMGD or flow run is (configuration, run object, result, derived fields).

A run object owns its state arrays and advances them with a kernel chunk by chunk; it knows
nothing of stores, sweeps or the command line (those import it, never the reverse).

* :mod:`.mgd` — heavy-ball MGD and SMGD;
* :mod:`.flow` — MGF(λ) and gradient flow by fixed-step RK4, with :mod:`.stepping` its step-size policy;
* :mod:`.quadratic` — heavy ball on a quadratic (Figure 1);
* :mod:`.common` — argument checks, initial weights, the gradient-form rule;
* :mod:`.registry` — the run families and the stable type names written into files.
"""
