"""``dlnm network``: MGD / SMGD on the paper's small networks (teacher-student ReLU, deep linear), one run or a
(β, γ) sweep, optionally stored and resumed."""

import argparse
import inspect
import os
import sys

from ..api import mgd, networks_sweep, repair_left_open_sweep, resume_sweep
from ..networks import deep_linear, teacher_student
from ..store.files import command
from ..store.kinds import resume_or_overwrite, store_kind, wrong_kind
from ..store.network_sweep import read as read_network_sweep
from ..sweeps.networks import config_differences as network_config_differences
from ..sweeps.networks import is_network_sweep
from ..sweeps.networks import make_config as make_network_config
from ..validate import as_int
from .common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    add_record_arguments,
    data_seed,
    grid_option,
    option_table,
    parse_int,
    print_result,
    print_sweep_json,
    progress_wanted,
    record_from_args,
    rows_left_in_store,
    seed_option,
)

ARCHITECTURES = ("teacher-student", "deep-linear")
#: dm.teacher_student's defaults of the choices the paper leaves open (the problem of dlnmomentum 0.6).
TEACHER_STUDENT_DEFAULTS = {name: inspect.signature(teacher_student).parameters[name].default
                            for name in ("init_scale", "hidden_bias", "output_bias")}


def _spec(args):
    """The generator arguments of ``args`` (a sweep spec without the seed)."""
    if args.architecture == "teacher-student":
        spec = {"generator": "teacher_student", "n": args.n if args.n is not None else 15,
                "d": args.d if args.d is not None else 2, "teacher_width": args.teacher_width,
                "student_width": args.student_width, "n_test": args.n_test}
        return _with_choices(spec, {"init_scale": args.init_scale, "hidden_bias": not args.no_hidden_bias,
                                    "output_bias": args.output_bias})
    given = [option for option, v in (("--init-scale", args.init_scale != TEACHER_STUDENT_DEFAULTS["init_scale"]),
                                      ("--no-hidden-bias", args.no_hidden_bias), ("--output-bias", args.output_bias))
             if v]
    if given:
        raise ValueError(f"{given[0]} is an option of teacher-student networks, not of deep-linear ones")
    widths = args.widths or [30, 60, 120, 60, 1]
    return {"generator": "deep_linear", "widths": widths, "init_std": args.init_std,
            "n": args.n if args.n is not None else 20, "d": args.d if args.d is not None else widths[0],
            "s": args.s, "mu": args.mu, "sigma": args.sigma, "n_test": args.n_test}


def _with_choices(spec, choices):
    """``spec`` with the choices of dm.teacher_student the paper leaves open, each only where it differs from the
    function's default (so a store written before these options existed compares equal on ``--resume``)."""
    out = {k: v for k, v in spec.items() if k not in TEACHER_STUDENT_DEFAULTS}
    out.update({k: v for k, v in choices.items() if v != TEACHER_STUDENT_DEFAULTS[k]})
    return out


def _problem(args):
    spec = dict(_spec(args))
    generator = {"teacher_student": teacher_student, "deep_linear": deep_linear}[spec.pop("generator")]
    return generator(**spec, seed=args.data_seed)


def _widths(text):
    """``--widths 30,60,1``: layer widths, each an integer >= 1 (read as every integer option is); a malformed entry
    is named."""
    items = str(text).split(",")
    out = []
    for i, item in enumerate(items):
        try:
            out.append(as_int(f"--widths[{i}]", parse_int(item), low=1))
        except (argparse.ArgumentTypeError, TypeError, ValueError):
            raise argparse.ArgumentTypeError(f"--widths must be layer widths 'm0,m1,...,1', integers >= 1; got "
                                             f"{text!r} (entry {i + 1}, {item.strip()!r})") from None
    return out


#: Options that only one architecture reads: destination -> (option, its architecture).
_ARCHITECTURE_OPTIONS = {"teacher_width": ("--teacher-width", "teacher-student"),
                         "student_width": ("--student-width", "teacher-student"),
                         "widths": ("--widths", "deep-linear"), "init_std": ("--init-std", "deep-linear"),
                         "s": ("--s", "deep-linear"), "mu": ("--mu", "deep-linear"),
                         "sigma": ("--sigma", "deep-linear")}
#: Options of one run only, and of a sweep only: destination -> option.
_RUN_OPTIONS = {"seed": "--seed", "record_log": "--record-log", "record_every": "--record-every"}
_SWEEP_OPTIONS = {"reps": "--reps", "resume": "--resume", "log": "--log"}


def _refuse_unread_options(args, sweep):
    """Options given that this command would not read (another architecture's, a sweep's on one run and the other
    way round) are refused by name, not ignored."""
    given = getattr(args, "given", ())
    for dest, (option, architecture) in _ARCHITECTURE_OPTIONS.items():
        if dest in given and architecture != args.architecture:
            raise ValueError(f"{option} is an option of {architecture} networks, not of {args.architecture} ones")
    unread = _RUN_OPTIONS if sweep else _SWEEP_OPTIONS
    named = [option for dest, option in unread.items() if dest in given]
    if named:
        what = "a sweep (--gammas, --betas)" if sweep else "one run (--gamma, --beta)"
        raise ValueError(f"{', '.join(named)} {'is' if len(named) == 1 else 'are'} not read by {what}")


def _cmd_network(args):
    resume_or_overwrite(args.resume, args.overwrite, ("--resume", "--overwrite"))  # (--resume won: store kept)
    if (args.gamma is not None or args.beta is not None) and (args.gammas is not None or args.betas is not None):
        raise ValueError("give --gamma and --beta (one run) or --gammas and --betas (a sweep), not both: "
                         "--gamma/--beta would be ignored by a sweep")
    sweep = args.gammas is not None or args.betas is not None or (args.resume and args.gamma is None)
    _refuse_unread_options(args, sweep=sweep)
    if sweep:  # (the API's seed of a sweep is its data seed, rep r using seed + r: --seed is one run's batch seed)
        args.options = dict(args.options, seed="--data-seed")
    if args.resume and args.store and os.path.exists(args.store):
        repair_left_open_sweep(args.store)  # (before the stored configuration is read to compare the options)
        _refuse_other_arguments(args, args.store)
        return _finish_sweep(resume_sweep(args.store, log=_log(args)), args)
    if args.gammas is not None or args.betas is not None:
        if args.gammas is None or args.betas is None:
            raise ValueError("a network sweep needs both --gammas and --betas")
        sw = networks_sweep(_spec(args), gammas=args.gammas, betas=args.betas, steps=args.steps, reps=args.reps,
                            seed=args.data_seed, tol=args.tol, batch_size=args.batch_size, replace=args.replace,
                            store=args.store, resume=args.resume, overwrite=args.overwrite, log=_log(args))
        return _finish_sweep(sw, args)
    if args.gamma is None or args.beta is None:
        raise ValueError("dlnm network needs --gamma and --beta (one run) or --gammas and --betas (a sweep)")
    problem = _problem(args)
    with rows_left_in_store() as stored:  # (a stored run's rows are not read back: it prints none of them)
        result = mgd(problem, args.gamma, args.beta, steps=args.steps, batch_size=args.batch_size,
                     replace=args.replace, seed=args.seed, tol=args.tol, record=record_from_args(args),
                     progress=progress_wanted(args), store=args.store, overwrite=args.overwrite)
    return print_result(result, args, problem, stored=stored)


#: The options of ``dlnm network`` that define a sweep (its stored configuration): destination -> option.
DEFINING = {"gammas": "--gammas", "betas": "--betas", "steps": "--steps", "reps": "--reps", "tol": "--tol",
            "batch_size": "--batch-size", "replace": "--replace", "data_seed": "--data-seed", "n": "--n", "d": "--d",
            "teacher_width": "--teacher-width", "student_width": "--student-width", "widths": "--widths",
            "init_std": "--init-std", "s": "--s", "mu": "--mu", "sigma": "--sigma", "n_test": "--n-test",
            "init_scale": "--init-scale", "no_hidden_bias": "--no-hidden-bias", "output_bias": "--output-bias"}
#: The options of the teacher-student choices: destination -> (spec key, value of the option).
_CHOICES = {"init_scale": ("init_scale", lambda a: a.init_scale),
            "no_hidden_bias": ("hidden_bias", lambda a: not a.no_hidden_bias),
            "output_bias": ("output_bias", lambda a: a.output_bias)}
_SWEEP_ARGUMENTS = ("gammas", "betas", "steps", "reps", "tol", "batch_size", "replace")


def _refuse_other_arguments(args, path):
    """``--resume`` continues the stored sweep as it is: options given with it that describe another sweep (9 gammas
    where 8 are stored, ``--batch-size 5`` on a full-batch sweep, another architecture) are refused, named."""
    given = [d for d in DEFINING if d in getattr(args, "given", ())]
    if not is_network_sweep(path):  # (before: a diagonal sweep was continued by `dlnm network ... --resume`)
        raise wrong_kind(path, store_kind(path), "network-sweep", "resume")
    stored, _, _, _ = read_network_sweep(path)
    spec = stored.get("spec")
    generator = args.architecture.replace("-", "_")
    if spec is not None and spec["generator"] != generator:
        stored_arch = spec["generator"].replace("_", "-")
        raise ValueError(f"--store {path} holds a {stored_arch} sweep, not {args.architecture}; continue it with "
                         f"{command('network', stored_arch, '--store', path, '--resume')}, or give another --store")
    if not given:
        return
    how = (f"--resume continues the stored sweep as it is: drop them to continue it "
           f"({command('network', args.architecture, '--store', path, '--resume')}), or give another --store")
    data = [d for d in given if d not in _SWEEP_ARGUMENTS + ("data_seed",)]
    if spec is None:  # a sweep of a given NetworkProblem (Python API): the data options cannot describe it
        if data:
            raise ValueError(f"--store {path} holds a sweep of a given network problem, which "
                             f"{', '.join(DEFINING[d] for d in data)} cannot describe; {how}")
    else:
        spec = dict(spec, **{d: getattr(args, d) for d in data if d in _spec(args) and d not in _CHOICES})
        if spec["generator"] == "teacher_student":  # the choices given, over the stored ones or the defaults
            choices = {key: spec.get(key, TEACHER_STUDENT_DEFAULTS[key]) for key in TEACHER_STUDENT_DEFAULTS}
            choices.update({_CHOICES[d][0]: _CHOICES[d][1](args) for d in data if d in _CHOICES})
            spec = _with_choices(spec, choices)
    kw = {k: stored[k] for k in _SWEEP_ARGUMENTS}
    kw.update({d: getattr(args, d) for d in given if d in _SWEEP_ARGUMENTS})
    seed = args.data_seed if "data_seed" in given else stored["seed"]
    options = ", ".join(DEFINING[d] for d in given)
    try:
        requested, _ = make_network_config(spec if spec is not None else read_network_sweep(path)[1], seed=seed, **kw)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"--store {path} holds another sweep than {options} describe ({exc}); {how}") from None
    differ = network_config_differences(stored, requested)
    sources = {"seed": ("data_seed",), "spec": data, "fingerprint": data, "kind": ("batch_size",)}
    named = [d for d in given if any(d in sources.get(k, (k,)) for k in differ)]
    if named:
        raise ValueError(f"--store {path} holds a sweep made with other arguments: "
                         f"{', '.join(DEFINING[d] for d in named)} {'differs' if len(named) == 1 else 'differ'} "
                         f"from the stored sweep (in {', '.join(differ)}); {how}")


def _log(args):
    if not args.log:
        return None
    return lambda line: print(f"[dlnm network] {line}", file=sys.stderr, flush=True)


def _finish_sweep(sw, args):
    if args.json:
        print_sweep_json(sw)
    else:
        print(sw.summary())
    if getattr(sw, "interrupted", False) or not sw.complete:
        print(f"dlnm network: interrupted; {int(sw.done.sum())}/{sw.done.size} points done"
              + (f"; continue with: {command('network', args.architecture, '--resume', '--store', sw.path)}"
                 if sw.path else ""),
              file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK


def register(subparsers):
    """Add ``dlnm network``."""
    p = subparsers.add_parser(
        "network", help="MGD/SMGD on a teacher-student ReLU or deep linear network (one run or a sweep)",
        description="Heavy-ball MGD/SMGD on the paper's small networks (Figures 2 and 6): one run (--gamma, --beta) "
                    "or a (beta, gamma) grid (--gammas, --betas; rep r uses data seed --data-seed + r), optionally "
                    "streamed to a resumable HDF5 store. Example (the problem of dlnm figure teacher-student): "
                    "dlnm network teacher-student --init-scale 0.5 --gammas 1e-2:3e-1:20:log --betas 0:0.9:20 "
                    "--steps 1e6 --tol 1e-5 --store ts.h5")
    p.add_argument("architecture", choices=ARCHITECTURES)
    p.add_argument("--gamma", type=float, default=None, help="step size of one run")
    p.add_argument("--beta", type=float, default=None, help="momentum of one run, in [0, 1)")
    p.add_argument("--gammas", type=grid_option("--gammas"), default=None, help="step sizes of a sweep")
    p.add_argument("--betas", type=grid_option("--betas"), default=None, help="momenta of a sweep")
    p.add_argument("--steps", type=parse_int, default=1000, help="updates per run (default 1000), e.g. 2e5")
    p.add_argument("--reps", type=parse_int, default=1, help="data replications of a sweep (default 1)")
    p.add_argument("--tol", type=float, default=None, help="stop a run when its train loss is <= tol (status "
                   "converged); without it every run uses its whole budget and none reports converged")
    p.add_argument("--batch-size", type=parse_int, default=None, help="SMGD batch size (default: full batch)")
    p.add_argument("--replace", action="store_true", help="SMGD batches with replacement")
    p.add_argument("--seed", type=seed_option("--seed"), default=0, help="batch seed of one run")
    add_record_arguments(p, parse_int, "record every K steps (K >= 1)")
    p.add_argument("--store", default=None, help="HDF5 file for the run or the sweep")
    p.add_argument("--resume", action="store_true", help="continue the sweep in --store")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --store")
    p.add_argument("--log", action="store_true", help="a line on stderr whenever finished points are written")
    p.add_argument("--json", action="store_true", help="print the result as JSON (a sweep: as dlnm sweep --json does)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    g = p.add_argument_group("problem")
    g.add_argument("--n", type=parse_int, default=None, help="training samples (15 teacher-student, 20 deep linear)")
    g.add_argument("--d", type=parse_int, default=None,
                   help="input dimension (2 teacher-student, widths[0] deep linear)")
    g.add_argument("--teacher-width", type=parse_int, default=5, help="teacher hidden units (default 5)")
    g.add_argument("--student-width", type=parse_int, default=20, help="student hidden units (default 20)")
    g.add_argument("--init-scale", type=float, default=TEACHER_STUDENT_DEFAULTS["init_scale"],
                   help="teacher-student: the student's initial scale (default 1, the problem of dlnmomentum 0.6; "
                        "dlnm figure teacher-student uses 0.5, on which every point of its grid interpolates)")
    g.add_argument("--no-hidden-bias", action="store_true", help="teacher-student: no hidden-layer biases")
    g.add_argument("--output-bias", action="store_true", help="teacher-student: an output bias")
    g.add_argument("--widths", type=_widths, default=None,
                   help="deep linear layer widths, comma separated (default 30,60,120,60,1)")
    g.add_argument("--init-std", type=float, default=0.1, help="deep linear initialisation std (default 0.1)")
    g.add_argument("--s", type=parse_int, default=5, help="deep linear: sparsity of theta* (default 5)")
    g.add_argument("--mu", type=float, default=1.0, help="deep linear: input mean (default 1)")
    g.add_argument("--sigma", type=float, default=1.0, help="deep linear: input std (default 1)")
    g.add_argument("--n-test", type=parse_int, default=1000, help="test samples (default 1000)")
    g.add_argument("--data-seed", type=data_seed, default=0, help="data (and student) seed (default 0)")
    # (seed: --seed of one run; a sweep's seed is --data-seed, set in _cmd_network)
    p.set_defaults(func=_cmd_network, options=option_table(p, every="--record-every", log="--record-log"))
