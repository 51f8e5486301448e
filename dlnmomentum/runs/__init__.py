"""Run kinds: what one MGD/SMGD or flow run is (configuration, run object, result, derived fields).

A run object owns its state arrays and advances them with a kernel chunk by chunk; it knows
nothing of stores, sweeps or the command line (those import it, never the reverse).

* :mod:`.mgd` — heavy-ball MGD and SMGD;
* :mod:`.flow` — MGF(λ) and gradient flow on a fixed grid (RK4, exponential RK4), with :mod:`.stepping` the
  schemes' step-size policy and the ``auto`` choice; :mod:`.flow_adaptive` — the adaptive scheme (Rodas5P),
  and :func:`~.flow_adaptive.prepare_flow_run`, the one entry point of every flow; :mod:`.flow_from_mgd` — the
  flow of an MGD run (:func:`dlnmomentum.mgf_from_mgd`) on MGD's grid, and :func:`~.flow_from_mgd.mgd_time`;
* :mod:`.quadratic` — heavy ball and MGF on a quadratic (Figure 1);
* :mod:`.network` — MGD/SMGD on the small networks (teacher-student, deep linear);
* :mod:`.common` — argument checks, initial weights, the gradient-form rule;
* :mod:`.points` — the per-point fields of a sweep;
* :mod:`.registry` — the run families and the stable type names written into files.
"""
