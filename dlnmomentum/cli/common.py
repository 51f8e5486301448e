"""What every ``dlnm`` command shares: problem and record options, exit codes, result output."""

import argparse
import decimal
import math
import re
import sys
import warnings

from ..problem import sparse_regression
from ..record import Record
from ..runs.points import CODED_FIELDS
from ..status import Status
from ..store.files import command, json_text, to_jsonable
from ..store.rows_left import rows_left_in_store  # noqa: F401 - the commands' one way to run a stored run
from ..sweeps.grid import parse_grid
from ..validate import MAX_SEED

#: Exit codes of ``dlnm`` (also listed by ``dlnm --help``).
EXIT_OK = 0           # finished: converged, used its budget or stalled; a sweep complete; a command done
EXIT_DIVERGED = 1     # the run diverged (its result and store are still written)
EXIT_ERROR = 2        # bad arguments or input, a missing, locked or damaged file (message on stderr)
EXIT_INTERRUPTED = 130  # stopped by Ctrl-C, SIGTERM or SIGHUP; the state is kept and can be resumed
EXIT_BROKEN_PIPE = 141  # the reader of stdout went away (`dlnm inspect X | head`): 128 + SIGPIPE, no message

EXIT_CODES_HELP = (f"exit codes: {EXIT_OK} finished (converged, budget used or stalled; sweep complete), "
                   f"{EXIT_DIVERGED} the run diverged, {EXIT_ERROR} bad input or an unusable file, "
                   f"{EXIT_INTERRUPTED} interrupted (Ctrl-C/SIGTERM/SIGHUP; resume with dlnm resume or "
                   f"dlnm sweep --resume), {EXIT_BROKEN_PIPE} the reader of the output went away (| head)")


def given_options(parser, argv):
    """The destinations of the options ``argv`` names itself (not left at their defaults), parsed by ``parser``
    (a fresh copy of the command line's parser, whose defaults this changes)."""
    parsers = [parser]
    while parsers:
        p = parsers.pop()
        for action in p._actions:  # (argparse has no public walk of its actions)
            action.default = argparse.SUPPRESS
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
    return {k for k, v in vars(parser.parse_args(argv)).items() if v is not argparse.SUPPRESS}


def option_table(parser, **api_names):
    """API parameter name -> the option of ``parser`` (one command) that gives it: every option's destination
    (``t_max`` -> ``--t-max``), and ``api_names`` where the API's name differs from the destination (``seed`` ->
    ``--data-seed`` in a sweep, ``every`` -> ``--record-every``). Set as the command's ``options`` default, which
    the error handler of :func:`dlnmomentum.cli.main` reads."""
    table = {a.dest: a.option_strings[-1] for a in parser._actions  # (argparse has no public walk of its actions)
             if a.option_strings and a.dest not in ("help", argparse.SUPPRESS)}
    table.update(api_names)
    return table


#: A name an error declares, where its message writes it: as a word (not in lam_central, --lam, every=h or a path such
#: as /tmp/store.h5), with an entry index (``betas[0]``) and optionally an API value after it (``replace=True``,
#: ``scheme='rk4'``, ``rho=100.0``, ``lams=...``). A name declared with a trailing ``=`` (``"scheme="``) is
#: rewritten only in that form: the word alone is English there ("the adaptive scheme").
_NAME = r"(?<![\w./=\-\[]){}(?:=(True|'[^']*'|-?[\d.]+(?:e[-+]?\d+)?|-?inf|nan|\.\.\.)|=(?!\w)){}(?![\w\[(]|\.\w)"
_ENTRY = re.compile(r"(\w+)\[(\d+|-1)\](?: (\w+))?")  # (betas[0]; widths[-1]; pairs[0] beta: a pair's beta)


def option_message(exc, options):
    """The message of ``exc`` with each parameter it declares (``exc.parameters``: see
    :class:`dlnmomentum.validate.ParameterValueError`) written as the option in ``options`` (API name -> option)
    that gives it: ``t_max`` as ``--t-max``, ``betas[0]`` as ``--betas (entry 1)``, ``scheme='rk4'`` as
    ``--scheme rk4``, ``rho=100.0`` as ``--rho 100.0``. A name no option of the command gives is left as it is."""
    message = str(exc)
    for name in getattr(exc, "parameters", ()):
        assignment = name.endswith("=")
        name = name.rstrip("=")
        entry = _ENTRY.fullmatch(name)
        option = options.get(entry[1] if entry else name)
        if option is None:
            continue
        if entry:
            # (counted from 1, as the messages of --widths and --pairs count; -1 the last)
            index = int(entry[2])
            option = f"{option} ({f'entry {index + 1}' if index >= 0 else 'last entry'}" \
                     f"{', ' + entry[3] if entry[3] else ''})"

        def written(match, option=option):
            value = match[1]
            if not value or value == "True" or value == "...":
                return option
            return f"{option} {value[1:-1] if value.startswith(chr(39)) else value}"  # (scheme='rk4': --scheme rk4)

        message = re.sub(_NAME.format(re.escape(name), "" if assignment else "?"), written, message)
    return message


def exit_code(status):
    """The exit code of a run that ended with ``status``."""
    status = Status(int(status))
    if status == Status.DIVERGED:
        return EXIT_DIVERGED
    if status in (Status.INTERRUPTED, Status.RUNNING):
        return EXIT_INTERRUPTED
    return EXIT_OK


def progress_wanted(args):
    """``False`` with ``--no-progress``, else None: the package's one rule (:func:`dlnmomentum.progress.resolve`), a
    bar on a terminal for work estimated over ten seconds (a bar for every run on a terminal, two seconds ones
    included, was the command line's own rule before)."""
    return False if args.no_progress else None


def add_problem_arguments(parser):
    """The sparse-regression generator options shared by every sub-command."""
    g = parser.add_argument_group("problem (sparse regression, x ~ N(mu 1, sigma^2 I), y = <x, theta*>)")
    g.add_argument("--n", type=parse_int, default=20, help="number of training samples (default 20)")
    g.add_argument("--d", type=parse_int, default=30, help="dimension (default 30)")
    g.add_argument("--s", type=parse_int, default=5, help="sparsity of theta* (default 5)")
    g.add_argument("--mu", type=float, default=1.0, help="mean of the inputs (default 1)")
    g.add_argument("--sigma", type=float, default=1.0, help="std of the inputs (default 1)")
    g.add_argument("--n-test", type=parse_int, default=1000, help="test samples (default 1000)")
    g.add_argument("--data-seed", type=data_seed, default=0, help="seed of the data (default 0)")


def seed_option(option):
    """The argparse type of a seed option (``--seed``, ``--data-seed``): an integer as :func:`parse_int` reads it, in
    the one range of every seed, [0, 2**63 - 1] (``validate.MAX_SEED``), named with the option."""
    def parse(text):
        try:
            value = parse_int(text)
        except argparse.ArgumentTypeError:
            value = None
        if value is None or not 0 <= value <= MAX_SEED:
            raise argparse.ArgumentTypeError(f"{option} must be an integer in [0, {MAX_SEED}] (2**63 - 1), "
                                             f"got {text!r}")
        return value

    parse.__name__ = option
    return parse


#: ``--data-seed`` of every command (a sweep's rep r uses the seed + r: the API also checks the last rep's seed).
data_seed = seed_option("--data-seed")


def problem_from_args(args):
    return sparse_regression(n=args.n, d=args.d, s=args.s, mu=args.mu, sigma=args.sigma, n_test=args.n_test,
                             seed=args.data_seed)


#: The most digits of an integer option: every integer of the command line is below 2**63 (19 digits); a longer
#: number such as 1e1000000000 is refused before Python builds it (that takes minutes and gigabytes).
_INT_DIGITS = 19


def parse_int(text):
    """The argparse type of every integer option: an exact integer, also written as 1e6 or 1_000_000, read exactly
    as written (as decimals: through a float, 9007199254740993 would become 9007199254740992); 1.5, 1e-3, nan and
    numbers of more than 19 digits are refused (the option's own range is checked where it is used)."""
    try:
        value = decimal.Decimal(str(text).strip())
    except decimal.InvalidOperation:
        value = None
    if value is None or not value.is_finite() or value.adjusted() >= _INT_DIGITS \
            or value != value.to_integral_value():
        raise argparse.ArgumentTypeError(f"expected an integer (such as 20, 1e6 or 1_000_000) of at most "
                                         f"{_INT_DIGITS} digits, got {text!r}")
    return int(value)


def add_checkpoint_argument(parser):
    """``--checkpoint-every S`` of the commands that write a run store (run, flow, resume)."""
    parser.add_argument("--checkpoint-every", type=float, default=60.0,
                        help="seconds between checkpoints of the stored run (default 60)")


def add_adaptive_arguments(parser):
    """``--rtol``, ``--atol`` and ``--max-steps``: the adaptive schemes' settings, of a flow and of a flow sweep's
    points (the ranges and defaults of :func:`dlnmomentum.mgf`)."""
    parser.add_argument("--rtol", type=float, default=None, help="rodas, ndf: relative tolerance in [1e-15, 1e-2] "
                        "(default 1e-9 for rodas, 1e-11 for ndf)")
    parser.add_argument("--atol", type=float, default=None,
                        help="rodas, ndf: absolute tolerance in [1e-300, 1] (default 1e-11 for rodas, for MGF scaled "
                             "down in proportion to --alpha below 0.01; 1e-13 for ndf)")
    parser.add_argument("--max-steps", type=parse_int, default=None, help="rodas, ndf: budget of accepted steps "
                        "(default 1e8)")


def grid_option(option):
    """The argparse type of a grid option: parse_grid's message (naming the option), not "invalid value"."""
    def parse(text):
        try:
            return parse_grid(text, option)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = option
    return parse


def add_record_arguments(parser, every_type, every_help, accepted=False):
    """``--record-log N`` or ``--record-every K`` (one of them: argparse refuses both); with ``accepted``
    (flows) also ``--record-accepted``."""
    g = parser.add_mutually_exclusive_group()
    g.add_argument("--record-log", type=parse_int, default=None, help="record ~N log-spaced iterates (N >= 1)")
    g.add_argument("--record-every", type=every_type, default=None, help=every_help)
    if accepted:
        g.add_argument("--record-accepted", action="store_true",
                       help="record the point of every accepted step of an adaptive scheme (rodas, ndf; auto takes "
                            "one)")


def record_from_args(args):
    """The Record of ``--record-log``/``--record-every``/``--record-accepted`` (None without any); 0 or less is
    an error (naming the option, see :func:`option_table`), never "record nothing"."""
    log, every = getattr(args, "record_log", None), getattr(args, "record_every", None)
    if getattr(args, "record_accepted", False):
        if log is not None or every is not None:
            raise ValueError("give at most one of --record-log, --record-every and --record-accepted")
        return Record(accepted=True)
    if log is not None and every is not None:
        raise ValueError("give at most one of --record-log and --record-every")
    if log is None and every is None:
        return None
    # (Record's errors name log and every: the commands' option tables make them --record-log and --record-every)
    return Record(**({"log": log} if log is not None else {"every": every}))


def print_json(value):
    """``value`` as one line of standard JSON on stdout (no NaN/Infinity tokens: :func:`finite_json`)."""
    print(json_text(value))


def print_sweep_json(result):
    """``--json`` of a sweep (``dlnm sweep``, ``dlnm network`` with a grid): its state and summary, and, without a
    store (nothing else keeps them), every point's fields (non-finite values are null)."""
    from ..sweeps.result import summary_dict

    out = {"complete": result.complete, "interrupted": bool(getattr(result, "interrupted", False)),
           "done": int(result.done.sum()), "points": int(result.done.size), "store": result.path,
           "summary": summary_dict(result)}
    if result.path is None:
        out.update(dims=list(result.dims), coords=result.coords, data=result.data, done_mask=result.done)
        # every coded field by name beside its codes (status_names, theory_reason_names): codes are shown by name
        out.update({f"{field}_names": result.names(field) for field in CODED_FIELDS if field in result.data})
    print_json(out)


def named_status(fields):
    """``fields`` (a run result's JSON-able fields) with ``status`` by name, as every ``--json`` of ``dlnm`` gives
    it (``inspect``'s ``status``, a sweep's ``summary.status``), the code beside it as ``status_code``, and
    ``status_name`` (what scripts of earlier versions read). Before, ``dlnm run --json`` gave ``"status": 2``
    where ``dlnm inspect --json`` gave ``"status": "max_steps"``."""
    out = {}
    for key, value in fields.items():
        if key == "status":
            out.update(status=Status(int(value)).label, status_code=int(value))
        elif key != "status_name":
            out[key] = value
    out["status_name"] = out["status"]
    return out


def print_result(result, args, problem=None, theorem=None, stored=None):
    """A run result as JSON (``--json``) or as its summary; returns the exit code.

    With ``--theory`` (``theorem``: 1 for flows, 2 for MGD) also Theorem ``theorem``'s prediction gap, the normalized
    distance to gradient flow at scale Delta_inf and (JSON) the predicted theta, in either form.
    ``stored``: the dict of :func:`~dlnmomentum.store.rows_left.rows_left_in_store` the run was made in: when it names a
    store, the recorded rows are there (not in ``result``), and the output gives the store and their count.
    """
    theory = {}
    if theorem is not None and getattr(args, "theory", False):
        with warnings.catch_warnings(record=True) as caught:  # (the API's warnings: a line each, not a source line)
            warnings.simplefilter("always")
            try:
                theory = {"prediction_gap": result.prediction_gap, "normalized_distance": result.normalized_distance,
                          "predicted_theta": result.predicted_theta}
            except ValueError as exc:  # no limit to predict (a diverged run, ...): said, not a failed command
                theory = {"prediction_gap": math.nan, "normalized_distance": math.nan, "theory_reason": str(exc)}
        for note in dict.fromkeys(str(w.message) for w in caught):
            print(f"dlnm {args.command}: note: {note}", file=sys.stderr)
    if args.json:
        out = named_status(to_jsonable(result.to_dict()))
        out["message"] = result.message
        if theory:
            out.update(to_jsonable(dict(theory, theorem=theorem)))
        if getattr(result, "trajectory", None) is not None:  # --record-*: the rows, field by field
            out["trajectory"] = to_jsonable(result.trajectory.fields())
        elif stored:  # a stored run: its rows are in the store (as JSON, 10⁶ rows at d = 30 were GBs of text)
            out.update(store=stored["path"], rows=int(stored["rows"]))
        # non-finite values (a diverged run) become null: name the fields that held them
        out["non_finite"] = sorted(k for k, v in out.items() if _non_finite(v))
        print_json(out)
    else:
        if problem is not None:
            print(problem.summary())
        summary = result.summary()
        print(summary)
        if stored and stored["rows"]:  # the line a run with its trajectory has in its summary, and where the rows are
            width = next((line.index(":") for line in summary.splitlines() if line.startswith("status")), 13)
            print(f"{'recorded'.ljust(width)}: {stored['rows']} rows, in {stored['path']}")
        if "theory_reason" in theory:
            print(f"prediction (Thm {theorem})          : not computed: {theory['theory_reason']}")
        elif theory:
            print(f"prediction gap (Thm {theorem})      : {theory['prediction_gap']:.3e}")
            print(f"normalized distance to GF_D : {theory['normalized_distance']:.3e}")
    code = exit_code(result.status)
    if code == EXIT_INTERRUPTED:  # say how to go on, as dlnm inspect does
        store = getattr(args, "store", None) or getattr(args, "path", None)
        print(f"dlnm {args.command}: interrupted after {result.steps_done} steps; "
              + (f"continue with: {command('resume', store)}" if store else
                 "nothing was kept (no --store): give --store FILE to make a run resumable"), file=sys.stderr)
    return code


def _non_finite(value):
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, (list, dict)):
        return any(_non_finite(v) for v in (value.values() if isinstance(value, dict) else value))
    return False
