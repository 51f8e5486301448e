r"""Network problems beyond diagonal nets: a ReLU teacher-student network and a deep linear network.

The paper's Appendix "Additional Experiments" (Figures 2 and 6) checks that λ = γ/(1-β)²
governs MGD on these too. A :class:`NetworkProblem` holds the train/test data, the
architecture and the initial parameters of the student as one flat float64 vector, in the
layout of :mod:`dlnmomentum.kernels.networks` (layer ``l``: ``W_l`` of shape ``(m_l, m_{l+1})``
row-major, then its bias when it has one). Run it with :func:`dlnmomentum.mgd`.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .kernels import networks as KN
from .problem import _check_storable, sparse_regression
from .validate import MAX_ENTRIES, ParameterValueError, as_array, as_bool, as_float, as_int, as_seed, check_entries

#: Activations of the hidden layers.
ACTIVATIONS = ("relu", "linear")


def _frozen(arr, dtype=np.float64):
    arr = np.ascontiguousarray(arr, dtype=dtype)
    arr.setflags(write=False)
    return arr


def _sequence(name, value):
    """A 1-D sequence of entries (list, tuple, 1-D array), refused by name otherwise (``biases=True``, a str)."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (Sequence, np.ndarray)) \
            or np.ndim(value) != 1:
        raise TypeError(f"{name} must be a sequence (tuple, list or 1-D array), one entry per layer, got {value!r}")
    return value


def parameter_layout(widths, biases):
    """``(w_off, b_off, n_params)``: offsets of every ``W_l`` and ``b_l`` (-1: no bias) in the flat vector."""
    w_off, b_off = [], []
    pos = 0
    for layer in range(len(widths) - 1):
        w_off.append(pos)
        pos += widths[layer] * widths[layer + 1]
        if biases[layer]:
            b_off.append(pos)
            pos += widths[layer + 1]
        else:
            b_off.append(-1)
    return np.array(w_off, dtype=np.int64), np.array(b_off, dtype=np.int64), pos


@dataclass(frozen=True, eq=False)
class NetworkProblem:
    """Square-loss regression ``L(w) = ‖f_w(X) - y‖²/(2n)`` for a fully connected network ``f_w``.

    Parameters
    ----------
    X, y : arrays (n, m_0), (n,)
        Training data (finite).
    X_test, y_test : arrays (n_test, m_0), (n_test,), optional
        Held-out data (both or neither).
    widths : tuple of int
        Layer widths ``(m_0, ..., m_L)``, at least two, each >= 1, ``m_L = 1``.
    biases : tuple of bool
        Whether layer ``l`` (``W_l``, ``l < L``) has a bias.
    activation : {"relu", "linear"}
        Activation of the hidden layers (the output layer is linear).
    params0 : array (n_params,)
        Initial parameters (the student's initialisation).
    teacher : array, optional
        Parameters of the teacher network (same activation and biases), when there is one.
    teacher_widths : tuple of int, optional
        Its widths.
    params : dict
        Generator parameters (stored with results).
    """

    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray | None
    y_test: np.ndarray | None
    widths: tuple
    biases: tuple
    activation: str
    params0: np.ndarray
    teacher: np.ndarray | None = None
    teacher_widths: tuple | None = None
    params: dict = field(default_factory=dict)

    def __post_init__(self):
        # every entry checked by name, none coerced: bool("no") is True, int(2.7) is 2
        widths = tuple(as_int(f"widths[{i}]", w, low=1) for i, w in enumerate(_sequence("widths", self.widths)))
        if len(widths) < 2:
            raise ValueError(f"widths must have at least 2 entries (input and output), got {widths}")
        if widths[-1] != 1:
            raise ValueError(f"widths[-1] (the output width) must be 1, got {widths[-1]}")
        biases = tuple(as_bool(f"biases[{i}]", b) for i, b in enumerate(_sequence("biases", self.biases)))
        if len(biases) != len(widths) - 1:
            raise ValueError(f"biases must have len(widths) - 1 = {len(widths) - 1} entries, got {len(biases)}")
        if not isinstance(self.activation, str) or self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {self.activation!r}")
        X = as_array("X", self.X, ndim=2, shape=(None, widths[0]))
        if X.shape[0] < 1:
            raise ValueError("X must have at least one row")
        y = as_array("y", self.y, ndim=1, shape=(X.shape[0],))
        if (self.X_test is None) != (self.y_test is None):
            raise ValueError("X_test and y_test must be given together (both or neither)")
        if self.X_test is not None:
            X_test = as_array("X_test", self.X_test, ndim=2, shape=(None, widths[0]))
            y_test = as_array("y_test", self.y_test, ndim=1, shape=(X_test.shape[0],))
        else:
            X_test, y_test = np.zeros((0, widths[0])), np.zeros(0)
        _, _, n_params = parameter_layout(widths, biases)
        params0 = as_array("params0", self.params0, ndim=1, shape=(n_params,))
        teacher, tw = self._teacher(widths, biases)
        if not isinstance(self.params, Mapping) or not all(isinstance(k, str) for k in self.params):
            raise TypeError(f"params must be a dict with str keys (generator parameters, stored as JSON), got "
                            f"{type(self.params).__name__}")
        _check_storable("params", self.params)
        object.__setattr__(self, "widths", widths)
        object.__setattr__(self, "biases", biases)
        object.__setattr__(self, "X", _frozen(X))
        object.__setattr__(self, "y", _frozen(y))
        object.__setattr__(self, "X_test", _frozen(X_test))
        object.__setattr__(self, "y_test", _frozen(y_test))
        object.__setattr__(self, "params0", _frozen(params0))
        object.__setattr__(self, "teacher", teacher)
        object.__setattr__(self, "teacher_widths", tw)
        object.__setattr__(self, "params", dict(self.params))

    def _teacher(self, widths, biases):
        """(teacher, teacher_widths) validated: both or neither (a store keeps both, and writes neither alone), the
        teacher a net of the student's input, output, depth and biases, its length that of its layout."""
        if (self.teacher is None) != (self.teacher_widths is None):
            raise ValueError("teacher and teacher_widths must be given together (both or neither), got "
                             + ("teacher without teacher_widths" if self.teacher is not None
                                else "teacher_widths without teacher"))
        if self.teacher is None:
            return None, None
        tw = tuple(as_int(f"teacher_widths[{i}]", w, low=1)
                   for i, w in enumerate(_sequence("teacher_widths", self.teacher_widths)))
        if len(tw) != len(widths) or tw[0] != widths[0] or tw[-1] != 1:
            raise ValueError(f"teacher_widths must have len(widths) = {len(widths)} entries (the teacher has the "
                             f"student's biases), start with widths[0] = {widths[0]} and end with 1, got {tw}")
        _, _, n_teacher = parameter_layout(tw, biases)
        teacher = as_array("teacher", self.teacher, ndim=1, shape=(n_teacher,))
        return _frozen(teacher), tw

    # -- shape -------------------------------------------------------------------------------
    @property
    def n(self):
        return self.X.shape[0]

    @property
    def d(self):
        """Input dimension ``m_0``."""
        return self.X.shape[1]

    @property
    def n_test(self):
        return self.X_test.shape[0]

    @property
    def relu(self):
        return self.activation == "relu"

    @cached_property
    def layout(self):
        """``(widths int64, w_off, b_off)`` as the kernels take them."""
        w_off, b_off, _ = parameter_layout(self.widths, self.biases)
        return _frozen(self.widths, np.int64), _frozen(w_off, np.int64), _frozen(b_off, np.int64)

    @property
    def n_params(self):
        return int(self.params0.shape[0])

    def _flat(self, flat):
        """``flat`` checked as this net's parameters: a finite real vector of ``n_params`` entries (a longer one was
        read by its first entries, complex input by its real part, NaN gave a NaN loss, a matrix a Numba error).
        The input itself when it already is a C-contiguous float64 vector (views of it stay views), else a copy."""
        checked = as_array("flat", flat, ndim=1, shape=(self.n_params,))
        if isinstance(flat, np.ndarray) and flat.dtype == np.float64 and flat.flags.c_contiguous \
                and not isinstance(flat, np.ma.MaskedArray):
            return flat
        return checked

    def unflatten(self, flat):
        """``[(W_0, b_0 or None), ...]`` views of a flat parameter vector (``n_params`` finite reals)."""
        flat = self._flat(flat)
        widths, w_off, b_off = self.layout
        out = []
        for layer in range(len(widths) - 1):
            fi, fo = int(widths[layer]), int(widths[layer + 1])
            W = flat[w_off[layer]:w_off[layer] + fi * fo].reshape(fi, fo)
            b = flat[b_off[layer]:b_off[layer] + fo] if b_off[layer] >= 0 else None
            out.append((W, b))
        return out

    # -- losses ------------------------------------------------------------------------------
    def output(self, flat, X=None):
        """f_w(X) by NumPy (a reference; the kernels compute their own); ``X`` of shape (rows, m_0), default the
        training inputs."""
        a = self.X if X is None else as_array("X", X, ndim=2, shape=(None, self.d))
        layers = self.unflatten(flat)
        for k, (W, b) in enumerate(layers):
            a = a @ W + (0.0 if b is None else b)
            if k < len(layers) - 1 and self.relu:
                a = np.maximum(a, 0.0)
        return a[:, 0]

    def train_loss(self, flat):
        """L(w) = ‖f_w(X) - y‖²/(2n) (the kernels' own evaluation) of finite parameters of shape (n_params,)."""
        widths, w_off, b_off = self.layout
        return float(KN._net_loss(self._flat(flat), widths, w_off, b_off, self.relu, self.X, self.y))

    def test_loss(self, flat):
        """Same loss on the test set (NaN without one); ``flat`` is checked as in :meth:`train_loss`."""
        widths, w_off, b_off = self.layout
        return float(KN._net_loss(self._flat(flat), widths, w_off, b_off, self.relu, self.X_test, self.y_test))

    def summary(self):
        shown = {"n", "n_test", "widths"}
        extra = "".join(f", {k}={v}" for k, v in self.params.items() if k not in shown)
        return (f"NetworkProblem(widths={self.widths}, activation={self.activation}, n={self.n}, "
                f"n_test={self.n_test}, n_params={self.n_params}{extra})")

    def __repr__(self):
        return self.summary()

    # -- stores ------------------------------------------------------------------------------
    def store_arrays(self):
        """Name -> (array, axis names) of everything a store keeps of this problem (see :meth:`from_store`)."""
        out = {"X": (self.X, ["sample", "input"]), "y": (self.y, ["sample"]),
               "X_test": (self.X_test, ["test_sample", "input"]), "y_test": (self.y_test, ["test_sample"]),
               "widths": (np.asarray(self.widths, dtype=np.int64), ["layer"]),
               "biases": (np.asarray(self.biases, dtype=np.int8), ["weight_layer"]),
               "params0": (self.params0, ["parameter"])}
        if self.teacher is not None:
            out["teacher"] = (self.teacher, ["teacher_parameter"])
            out["teacher_widths"] = (np.asarray(self.teacher_widths, dtype=np.int64), ["teacher_layer"])
        return out

    def store_attrs(self):
        return {"activation": self.activation,
                "description": "network problem: L(w) = ||f_w(X) - y||^2 / (2n), f_w a fully connected network "
                               f"with widths {list(self.widths)}, {self.activation} hidden layers"}

    @classmethod
    def from_store(cls, arrays, attrs, params):
        """The problem from :meth:`store_arrays` / :meth:`store_attrs` as read back from a store."""
        has_test = arrays["X_test"].shape[0] > 0
        teacher = arrays.get("teacher")
        return cls(arrays["X"], arrays["y"], arrays["X_test"] if has_test else None,
                   arrays["y_test"] if has_test else None, tuple(int(w) for w in arrays["widths"]),
                   tuple(bool(b) for b in arrays["biases"]), str(attrs["activation"]), arrays["params0"],
                   teacher=teacher,
                   teacher_widths=None if teacher is None else tuple(int(w) for w in arrays["teacher_widths"]),
                   params=params)


def _gaussian_params(rng, widths, biases, std, bias_std):
    """Flat parameters with ``W_l ~ N(0, std(l)²)`` and biases ``~ N(0, bias_std²)`` (layer order, W then b)."""
    parts = []
    for layer in range(len(widths) - 1):
        s = std(layer)
        parts.append(s * rng.standard_normal(widths[layer] * widths[layer + 1]))
        if biases[layer]:
            parts.append(bias_std * rng.standard_normal(widths[layer + 1]))
    return np.concatenate(parts)


def _check_finite_init(name, value, params0):
    """The student's initial parameters finite, or a ValueError naming the scale that made them overflow (it was
    reported as ``params0`` not finite, a name the caller never gave)."""
    if not np.all(np.isfinite(params0)):
        raise ParameterValueError(f"{name} = {value!r} gives initial weights that overflow float64 (they are {name} "
                                  "times standard normal draws, over the square root of the fan-in for init_scale): "
                                  f"choose a smaller {name}", name)


def teacher_student(n=15, d=2, teacher_width=5, student_width=20, n_test=1000, seed=0, init_scale=1.0,
                    hidden_bias=True, output_bias=False):
    r"""The paper's teacher-student problem (Figure 2): one-hidden-layer ReLU networks on Gaussian inputs.

    Inputs :math:`x \sim \mathcal N(0, I_d)`; targets :math:`y = f_{\text{teacher}}(x)` with
    :math:`f(x) = \sum_j a_j\,\mathrm{relu}(\langle w_j, x\rangle + b_j) + c`.

    The paper fixes the widths, the inputs and the square loss; the rest are this function's choices:

    - ``hidden_bias``, ``output_bias`` (default: hidden biases ``b_j``, no output bias ``c``): one choice
      for teacher and student alike (widths ``(d, width, 1)``, flat layout ``W_0 (d, width)``, then
      ``b_0 (width)`` if ``hidden_bias``, ``W_1 (width, 1)``, then ``b_1 (1)`` if ``output_bias``).
    - Teacher: every weight and bias ~ N(0, 1).
    - Student initialisation: ``W_0 ~ N(0, s²/d)``, ``W_1 ~ N(0, s²/width)``, every bias ~ N(0, s²/d),
      with ``s = init_scale`` (> 0; default 1).
    - Everything (data, test data, teacher, student initialisation) is fixed by ``seed``, drawn in that
      order from ``numpy.random.default_rng(seed)``. The defaults give the problem of dlnmomentum 0.6
      bit for bit; a bias choice changes how many numbers the teacher takes from the stream, so the
      student's initialisation with it differs from the default one even at ``init_scale = 1``.

    ``params`` (kept by stores) records every argument.
    """
    n = as_int("n", n, low=1, high=MAX_ENTRIES)
    d = as_int("d", d, low=1, high=MAX_ENTRIES)
    teacher_width = as_int("teacher_width", teacher_width, low=1, high=MAX_ENTRIES)
    student_width = as_int("student_width", student_width, low=1, high=MAX_ENTRIES)
    n_test = as_int("n_test", n_test, low=0, high=MAX_ENTRIES)
    seed = as_seed("seed", seed)
    init_scale = as_float("init_scale", init_scale, low=0.0, low_open=True)
    hidden_bias = as_bool("hidden_bias", hidden_bias)
    output_bias = as_bool("output_bias", output_bias)
    # refused before any allocation (n = 10**9 was a MemoryError): the inputs, the hidden layer of either network
    # on them (the teacher's makes y; the student's is what a run computes) and the parameters
    width = max(teacher_width, student_width)
    check_entries("the inputs X and X_test ((n + n_test) x d)", {"n": n, "n_test": n_test, "d": d}, (n + n_test) * d)
    check_entries("the hidden activations ((n + n_test) x max(teacher_width, student_width))",
                  {"n": n, "n_test": n_test, "teacher_width": teacher_width, "student_width": student_width},
                  (n + n_test) * width)
    check_entries("the parameters of a network ((d + 3) x width)", {"d": d, "teacher_width": teacher_width,
                                                                    "student_width": student_width}, (d + 3) * width)
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X_test = rng.standard_normal((n_test, d))
    biases = (hidden_bias, output_bias)
    t_widths = (d, teacher_width, 1)
    teacher = _gaussian_params(rng, t_widths, biases, lambda layer: 1.0, 1.0)
    s_widths = (d, student_width, 1)
    # (init_scale multiplies the standard deviations: at 1 the draws are those of 0.6, unscaled)
    with np.errstate(over="ignore", invalid="ignore"):
        params0 = _gaussian_params(rng, s_widths, biases, lambda layer: init_scale / np.sqrt(s_widths[layer]),
                                   init_scale / np.sqrt(d))
    _check_finite_init("init_scale", init_scale, params0)
    t = NetworkProblem(X, np.zeros(n), None, None, t_widths, biases, "relu", teacher)
    y = t.output(teacher)
    y_test = t.output(teacher, X_test) if n_test else None
    params = dict(generator="teacher_student", n=n, d=d, teacher_width=teacher_width,
                  student_width=student_width, n_test=n_test, seed=seed, init_scale=init_scale,
                  hidden_bias=hidden_bias, output_bias=output_bias)
    return NetworkProblem(X, y, X_test if n_test else None, y_test, s_widths, biases, "relu", params0,
                          teacher=teacher, teacher_widths=t_widths, params=params)


def deep_linear(widths=(30, 60, 120, 60, 1), init_std=0.1, n=20, d=30, s=5, mu=1.0, sigma=1.0, n_test=1000,
                seed=0):
    r"""The paper's deep linear network (Figure 6) on its sparse regression data.

    :math:`f(x) = x W_0 W_1 \cdots W_{L-1}` with no biases, every weight ~ N(0, init_std²)
    (fixed by ``seed`` through ``numpy.random.default_rng(seed + 2**32)``, independent of the
    data stream), data from :func:`dlnmomentum.sparse_regression` ``(n, d, s, mu, sigma, n_test, seed)``.
    ``widths[0]`` must equal ``d`` and ``widths[-1]`` be 1.
    """
    widths = tuple(widths)
    if len(widths) < 2:
        raise ParameterValueError(f"widths must have at least 2 entries (input and output), got {widths}", "widths")
    widths = tuple(as_int(f"widths[{i}]", w, low=1, high=MAX_ENTRIES) for i, w in enumerate(widths))
    init_std = as_float("init_std", init_std, low=0.0)
    d = as_int("d", d, low=1, high=MAX_ENTRIES)
    if widths[0] != d:
        raise ParameterValueError(f"widths[0] (the input width) must equal d = {d}, got {widths[0]}", "widths[0]", "d")
    if widths[-1] != 1:
        raise ParameterValueError(f"widths[-1] (the output width) must be 1, got {widths[-1]}", "widths[-1]")
    seed = as_seed("seed", seed)  # (seed + 2**32 below: default_rng takes any non-negative int)
    # refused before any allocation: the parameters, and the activations of the widest layer on the data
    named = {f"widths[{i}]": w for i, w in enumerate(widths)}
    check_entries("the parameters (sum of widths[l] * widths[l + 1])", named,
                  sum(a * b for a, b in zip(widths[:-1], widths[1:], strict=True)))
    n_all = as_int("n", n, low=1, high=MAX_ENTRIES) + as_int("n_test", n_test, low=0, high=MAX_ENTRIES)
    check_entries("the activations ((n + n_test) x max(widths))", {"n": n, "n_test": n_test, "max(widths)":
                                                                    max(widths)}, n_all * max(widths))
    data = sparse_regression(n=n, d=d, s=s, mu=mu, sigma=sigma, n_test=n_test, seed=seed)
    biases = (False,) * (len(widths) - 1)
    rng = np.random.default_rng(seed + 2**32)
    with np.errstate(over="ignore", invalid="ignore"):
        params0 = _gaussian_params(rng, widths, biases, lambda layer: init_std, 0.0)
    _check_finite_init("init_std", init_std, params0)
    params = dict(data.params, generator="deep_linear", widths=list(widths), init_std=init_std)
    return NetworkProblem(data.X, data.y, data.X_test if data.n_test else None,
                          data.y_test if data.n_test else None, widths, biases, "linear", params0,
                          params=params)
