"""The static REVIEW scan (lib.grading.scan): the red team's evasions are flagged, honest answers are not.

Every case in EVASIONS got no flag at all from the scan before it learnt to follow
aliases, getattr, star imports and private entry points; each must now get a flag
whose plain words name what to look at. HONEST holds answers an honest student could
write, and every master solution of the book: none may be flagged.
"""
from pathlib import Path

import nbformat
import pytest

from lib.checks import CHECKS
from lib.exercises import coding_exercises
from lib.grading.scan import review_flags

CHAPTERS = Path(__file__).resolve().parents[1] / "chapters"
SDPA = CHECKS["check_scaled_dot_product_attention"].forbidden
LAYER_NORM = CHECKS["check_layer_norm"].forbidden
RNN = CHECKS["check_rnn_forward"].forbidden
LSTM = CHECKS["check_lstm_step"].forbidden
GRU = CHECKS["check_gru_step"].forbidden
CROSS_ENTROPY = CHECKS["check_cross_entropy"].forbidden
GELU_GRAD = CHECKS["check_gelu_grad"].forbidden
F = "import torch\nimport torch.nn.functional as F\n"

# id → (cell, forbidden, words one flag must contain)
EVASIONS = {
    # 1. dynamic attribute access on modules (and on objects, for forbidden methods)
    "getattr-concatenated-name": (
        F + "def f(q, k, v):\n    return getattr(F, 'scaled_dot_' + 'product_attention')(q, k, v)\n",
        SDPA, "uses torch.nn.functional.scaled_dot_product_attention, which the exercise forbids"),
    "getattr-name-from-variable": (
        F + "name = 'mron_reyal'[::-1]\ndef f(x):\n    return getattr(torch, name)(x, x.shape[-1:])\n",
        LAYER_NORM, "uses getattr on torch with a name computed at run time"),
    "getattr-on-submodule-path": (
        "import torch\nnorm = getattr(torch.nn.functional, 'layer' + '_norm')\n",
        LAYER_NORM, "uses torch.nn.functional.layer_norm, which the exercise forbids"),
    "getattr-f-string-name": (
        F + "part = 'norm'\nnorm = getattr(F, f'layer_{part}')\n",
        LAYER_NORM, "uses getattr on torch.nn.functional with a name computed at run time"),
    "vars-of-module": (
        F + "norm = vars(F)['layer' + '_norm']\n",
        LAYER_NORM, "vars"),
    "module-dict": (
        F + "norm = F.__dict__['layer' + '_norm']\n",
        LAYER_NORM, "Python's internals (__dict__)"),
    "operator-attrgetter": (
        "import operator, torch\nnorm = operator.attrgetter('nn.functional.layer' + '_norm')(torch)\n",
        LAYER_NORM, "looks up attributes by name (operator.attrgetter)"),
    "operator-methodcaller": (
        "import operator\ndef f(logits):\n"
        "    return operator.methodcaller('log_soft' + 'max', 1)(logits)\n",
        CROSS_ENTROPY, "calls methods by name (operator.methodcaller)"),
    "inspect-getmembers": (
        F + "import inspect\nnorm = dict(inspect.getmembers(F))['layer' + '_norm']\n",
        LAYER_NORM, "reaches into live objects and modules (inspect)"),
    "reduce-getattr": (
        "import functools, torch\n"
        "norm = functools.reduce(getattr, ['nn', 'functional', 'layer' + '_norm'], torch)\n",
        LAYER_NORM, "passes getattr around as a value"),
    "getattr-renamed": (
        F + "look = getattr\nnorm = look(F, 'layer' + '_norm')\n",
        LAYER_NORM, "passes getattr around"),
    "getattr-on-tensor-method": (
        "def f(logits, targets):\n    return getattr(logits, 'log_soft' + 'max')(1)\n",
        CROSS_ENTROPY, "uses log_softmax, which the exercise forbids"),
    "getattr-computed-on-tensor": (
        "def f(logits, targets):\n    return getattr(logits, 'xamtfos_gol'[::-1])(1)\n",
        CROSS_ENTROPY, "looks up an attribute whose name is computed at run time (getattr)"),
    # 2. star imports
    "star-import-functional": (
        "from torch.nn.functional import *\ndef f(q, k, v):\n"
        "    return scaled_dot_product_attention(q, k, v)\n",
        SDPA, "imports every name of torch.nn.functional (import *)"),
    "star-import-torch": (
        "from torch import *\ndef f(x):\n    return layer_norm(x, x.shape[-1:])\n",
        LAYER_NORM, "uses torch.layer_norm, which the exercise forbids"),
    # 3. private, native and back-door entry points, and public variants of a forbidden call
    "torch-C-nn": (
        "import torch\ndef f(q, k, v):\n    return torch._C._nn.scaled_dot_product_attention(q, k, v)\n",
        SDPA, "uses torch._C, a private part of torch"),
    "torch-C-nn-is-forbidden": (
        "import torch\nsdpa = torch._C._nn.scaled_dot_product_attention\n",
        SDPA, "under another name (torch._C._nn.scaled_dot_product_attention)"),
    "from-torch-import-C": (
        "from torch import _C\nsdpa = _C._nn.scaled_dot_product_attention\n",
        SDPA, "uses torch._C, a private part of torch"),
    "torch-VF": (
        "import torch\ndef f(x, h0, *weights):\n"
        "    return torch._VF.rnn_tanh(x, h0, weights, True, 1, 0.0, False, False, True)\n",
        RNN, "uses torch._VF, a private part of torch"),
    "torch-VF-is-a-variant": (
        "import torch\nrun = torch._VF.rnn_tanh\n",
        RNN, "uses torch._VF.rnn_tanh, a variant of torch.rnn_tanh"),
    "torch-ops-aten": (
        "import torch\ndef f(x):\n    return torch.ops.aten.layer_norm(x, x.shape[-1:])\n",
        LAYER_NORM, "calls torch's operators by name (torch.ops)"),
    "torch-native-layer-norm": (
        "import torch\ndef f(x):\n"
        "    return torch.native_layer_norm(x, x.shape[-1:], None, None, 1e-5)[0]\n",
        LAYER_NORM, "uses torch.native_layer_norm, one of torch's native kernels"),
    "torch-rnn-tanh-cell": (
        "import torch\ndef f(x, h, w_ih, w_hh, b_ih, b_hh):\n"
        "    return torch.rnn_tanh_cell(x, h, w_ih, w_hh, b_ih, b_hh)\n",
        RNN, "uses torch.rnn_tanh_cell, a variant of torch.rnn_tanh"),
    "rnn-base": (
        "import torch\nlayer = torch.nn.RNNBase('RNN_TANH', 4, 8)\n",
        RNN, "a variant of torch.nn.RNN"),
    "torch-lstm": (
        "import torch\nrun = torch.lstm\n",
        LSTM, "uses torch.lstm, a variant of torch.nn.LSTM"),
    "torch-gru": (
        "import torch\nrun = torch.gru\n",
        GRU, "uses torch.gru, a variant of torch.nn.GRU"),
    "multi-head-attention-forward": (
        F + "run = F.multi_head_attention_forward\n",
        SDPA, "a variant of torch.nn.MultiheadAttention"),
    "layer-norm-module-internals": (
        "import torch\nnorm = torch.nn.modules.normalization.LayerNorm(8)\n",
        LAYER_NORM, "uses torch.nn.LayerNorm under another name (torch.nn.modules.normalization.LayerNorm)"),
    "functional-through-torch-functional": (
        "import torch\nnorm = torch.functional.F.layer_norm\n",
        LAYER_NORM, "uses torch.nn.functional.layer_norm under another name"),
    "functional-through-loss-module": (
        "import torch\ndef f(logits, targets):\n"
        "    return torch.nn.modules.loss.F.cross_entropy(logits, targets)\n",
        CROSS_ENTROPY, "uses torch.nn.functional under another name"),
    "sdpa-through-activation-module": (
        "from torch.nn.modules.activation import F as G\nsdpa = G.scaled_dot_product_attention\n",
        SDPA, "uses torch.nn.functional.scaled_dot_product_attention under another name"),
    "functorch-grad": (
        "import functorch\ndef f(g):\n    return functorch.grad(g)\n",
        GELU_GRAD, "uses torch.func under another name (functorch), which the exercise forbids"),
    "autograd-through-grad-fn": (
        "import torch\ndef f(x):\n    x = x.clone().requires_grad_()\n    y = x * x\n"
        "    return y.grad_fn(torch.ones_like(y))\n",
        GELU_GRAD, "uses torch.autograd through grad_fn"),
    "autograd-keyword": (
        "import torch\nx = torch.zeros(3, requires_grad=True)\n",
        GELU_GRAD, "uses torch.autograd through requires_grad"),
    # 4. import-by-name helpers, code runners and Python's internals
    "pkgutil-resolve-name": (
        "import pkgutil\n"
        "sdpa = pkgutil.resolve_name('torch.nn.functional:scaled_dot_product_' + 'attention')\n",
        SDPA, "imports by name at run time (pkgutil)"),
    "runpy": (
        "import runpy\nspace = runpy.run_module('torch.nn.functional')\n",
        SDPA, "runs modules by name (runpy)"),
    "loader": (
        "torch = __loader__.load_module('torch')\n",
        SDPA, "Python's internals (__loader__)"),
    "private-imp": (
        "import _imp\n",
        SDPA, "imports _imp, a private module"),
    "sys-getframe": (
        "import sys\nspace = sys._getframe(0).f_globals\n",
        SDPA, "uses sys._getframe, a private part of sys"),
    "frame-globals": (
        "def f():\n    try:\n        raise ValueError\n    except ValueError as error:\n"
        "        return error.__traceback__.tb_frame.f_globals\n",
        SDPA, "reaches a running function's variables"),
    "subclasses": (
        "classes = object.__subclasses__()\n",
        SDPA, "Python's internals (__subclasses__)"),
    "function-globals": (
        "import math\nspace = getattr(math.sqrt, '__glo' + 'bals__')\n",
        SDPA, "__globals__"),
    "pickle": (
        "import pickle\nsdpa = pickle.loads(bytes.fromhex('8004'))\n",
        SDPA, "loads pickled objects"),
    "torch-load": (
        "import io, torch\nsdpa = torch.load(io.BytesIO(b''), weights_only=False)\n",
        SDPA, "(torch.load)"),
    "torchscript-from-string": (
        "import torch\nunit = torch.jit.CompilationUnit('def f(x):\\n    return x\\n')\n",
        SDPA, "(torch.jit)"),
    "timeit-runs-strings": (
        "import timeit\ntimeit.timeit('x = 1', number=1)\n",
        SDPA, "runs code from a string (timeit)"),
    "code-object": (
        "import types\ndef g():\n    pass\nh = types.FunctionType(g.__code__, {})\n",
        SDPA, "builds a function from a code object (types.FunctionType)"),
    "gc-objects": (
        "import gc\nobjects = gc.get_objects()\n",
        SDPA, "reaches every live object (gc)"),
    "torch-library": (
        "import torch\nlibrary = torch.library.Library('aten', 'IMPL')\n",
        SDPA, "(torch.library)"),
    "pydoc-locate": (
        "import pydoc\nnorm = pydoc.locate('torch.nn.functional.layer' + '_norm')\n",
        LAYER_NORM, "imports by name at run time (pydoc)"),
    "string-annotation": (
        "import typing\ndef g() -> 'torch.nn.functional.layer' + '_norm':\n    pass\n"
        "norm = typing.get_type_hints(g)['return']\n",
        LAYER_NORM, "evaluates annotations written as strings (typing.get_type_hints)"),
    "format-string-globals": (
        "import string, torch\n"
        "space = string.Formatter().get_field('0.__glob' 'als__', [torch.nn.functional.relu], {})[0]\n",
        LAYER_NORM, "Python's internals (__globals__)"),
    "code-from-strings-elsewhere": (
        "import logging.config\n"
        "norm = logging.config.BaseConfigurator({}).resolve('torch.nn.functional.layer' + '_norm')\n",
        LAYER_NORM, "imports logging, which no exercise needs"),
    "numpy-load-pickle": (
        "import io, numpy\nnorm = numpy.load(io.BytesIO(b''), allow_pickle=True)\n",
        LAYER_NORM, "(numpy.load)"),
    "code-in-an-annotation": (
        "import functools\n@functools.singledispatch\ndef g(x):\n    pass\n"
        "@g.register\ndef _(x: \"exec('import torch.nn.functional as F; my_norm = F.layer_norm') or int\"):\n"
        "    pass\n",
        LAYER_NORM, "uses torch.nn.functional.layer_norm, which the exercise forbids, in code written as a string"),
    # 5. aliases through assignment, and modules carried around as values
    "assignment-alias": (
        F + "G = F\ndef f(x):\n    return G.layer_norm(x, x.shape[-1:])\n",
        LAYER_NORM, "uses torch.nn.functional.layer_norm, which the exercise forbids"),
    "chained-alias": (
        F + "G = F\nH = G\nnorm = H.layer_norm\n",
        LAYER_NORM, "uses torch.nn.functional.layer_norm, which the exercise forbids"),
    "tuple-alias": (
        F + "G, T = F, torch\nnorm = G.layer_norm\n",
        LAYER_NORM, "uses torch.nn.functional.layer_norm, which the exercise forbids"),
    "walrus-alias": (
        F + "def f(x):\n    return (G := F).layer_norm(x, x.shape[-1:])\n",
        LAYER_NORM, "uses torch.nn.functional.layer_norm, which the exercise forbids"),
    "rebound-alias": (
        "import math, torch\nG = math\nG = torch.nn\ndef f(logits, targets):\n"
        "    return G.functional.cross_entropy(logits, targets)\n",
        CROSS_ENTROPY, "binds G to more than one module (math, torch.nn)"),
    "module-in-a-list": (
        F + "modules = [F]\ndef f(x):\n    return modules[0].layer_norm(x, x.shape[-1:])\n",
        LAYER_NORM, "uses the module torch.nn.functional as a value"),
    "module-as-default": (
        F + "def f(x, m=F):\n    return m.layer_norm(x, x.shape[-1:])\n",
        LAYER_NORM, "uses the module torch.nn.functional as a value"),
    "module-through-class": (
        F + "class Space:\n    G = F\nnorm = Space.G.layer_norm\n",
        LAYER_NORM, "uses the module torch.nn.functional as a value"),
    "match-class-pattern": (
        F + "match F:\n    case object(layer_norm=norm):\n        pass\n",
        LAYER_NORM, "uses the module torch.nn.functional as a value"),
    "import-in-a-class": (
        "class Space:\n    import torch.nn.functional as F\nnorm = Space.F.layer_norm\n",
        LAYER_NORM, "imports inside the class Space"),
    "module-returned-by-lambda": (
        F + "m = (lambda: F)()\nnorm = m.layer_norm\n",
        LAYER_NORM, "uses the module torch.nn.functional as a value"),
    "module-reached-through-torch": (
        "import torch\nspace = torch.sys.modules\ntorch.os.system('true')\n",
        SDPA, "touches sys.modules"),
    "setattr-on-module": (
        F + "setattr(F, 'softmax', lambda x, dim: x)\n",
        SDPA, "changes torch.nn.functional.softmax by name (setattr)"),
}

# Routes the scan already followed before (kept, so that they stay caught).
ALREADY_CAUGHT = {
    "from-import-as": (
        "from torch.nn import functional as F2\nnorm = F2.layer_norm\n",
        LAYER_NORM, "uses torch.nn.functional.layer_norm, which the exercise forbids"),
    "name-assigned": (
        F + "fn = torch.nn.functional.layer_norm\n",
        LAYER_NORM, "uses torch.nn.functional.layer_norm, which the exercise forbids"),
    "importlib": (
        "import importlib\nF = importlib.import_module('torch.nn.functional')\n",
        SDPA, "imports by name at run time (importlib)"),
    "sys-modules": (
        "import sys\nF = sys.modules['torch.nn.functional']\n",
        SDPA, "touches sys.modules"),
    "exec-base64": (
        "import base64\nexec(base64.b64decode(b'cHJpbnQoMSk='))\n",
        SDPA, "runs code from a string (exec)"),
    "tensor-method": (
        "def f(logits, targets):\n    return logits.log_softmax(1)\n",
        CROSS_ENTROPY, "uses log_softmax, which the exercise forbids"),
}


@pytest.mark.parametrize("cell, forbidden, words", EVASIONS.values(), ids=EVASIONS.keys())
def test_an_evasion_is_flagged_in_plain_words(cell, forbidden, words):
    flags = review_flags(cell, forbidden)
    assert any(words in flag for flag in flags), flags


@pytest.mark.parametrize("cell, forbidden, words", ALREADY_CAUGHT.values(), ids=ALREADY_CAUGHT.keys())
def test_what_was_caught_before_still_is(cell, forbidden, words):
    flags = review_flags(cell, forbidden)
    assert any(words in flag for flag in flags), flags


@pytest.mark.parametrize("chapter", sorted(CHAPTERS.glob("*.ipynb")), ids=lambda path: path.stem)
def test_no_master_solution_is_flagged(chapter):
    notebook = nbformat.read(chapter, as_version=4)
    cells = {cell.get("id"): cell for cell in notebook.cells}
    flagged = {}
    for exercise in coding_exercises(notebook):
        flags = review_flags(cells[exercise.solution_cell].source, CHECKS[exercise.checker].forbidden)
        if flags:
            flagged[exercise.id] = flags
    assert flagged == {}


HONEST = {
    "functional-softmax": (
        F + ("def f(q, k, v):\n    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5\n"
        "    return torch.nn.functional.softmax(scores, dim=-1) @ v\n"),
        SDPA),
    "alias-softmax": (
        F + "def f(q, k, v):\n    return F.softmax(q @ k.transpose(-2, -1), dim=-1) @ v\n",
        SDPA),
    "from-import-functional": (
        "from torch.nn import functional as F2\ndef f(x):\n    return F2.softmax(x, -1)\n",
        SDPA),
    "finfo-mask": (
        "import torch\ndef f(scores, mask):\n"
        "    return scores.masked_fill(~mask, torch.finfo(scores.dtype).min)\n",
        SDPA),
    "getattr-on-self": (
        "import torch\nclass Norm(torch.nn.Module):\n    def __init__(self, size):\n"
        "        super().__init__()\n        self.weight = torch.nn.Parameter(torch.ones(size))\n"
        "    def forward(self, x):\n        scale = getattr(self, 'weight')\n"
        "        bias = getattr(self, 'bias', None)\n        mean = x.mean(-1, keepdim=True)\n"
        "        var = x.var(-1, unbiased=False, keepdim=True)\n"
        "        return (x - mean) * torch.rsqrt(var + 1e-5) * scale\n",
        LAYER_NORM),
    "getattr-on-local-module": (
        "import torch\nlayer = torch.nn.Linear(3, 4)\nw = getattr(layer, 'weight')\n",
        LAYER_NORM),
    "dtype-alias": (
        "import torch\ndtype = torch.float64\ndef f(x):\n    return x.to(dtype)\n",
        SDPA),
    "math-functions": (
        "import math\nfrom math import sqrt\ndef f(xs):\n"
        "    return list(map(sqrt, xs)) + [math.log(2), math.pi]\n",
        SDPA),
    "isinstance-and-names": (
        "import torch\ndef f(x):\n    assert isinstance(x, torch.Tensor), type(x).__name__\n"
        "    return x\n",
        SDPA),
    "no-grad-in-jacobian": (
        "import torch\ndef f(x, w):\n    with torch.no_grad():\n        return torch.tanh(w @ x)\n",
        GELU_GRAD),
    "local-names-like-modules": (
        "def f(x):\n    code, profile, trace, gc = 1, 2, 3, 4\n"
        "    return x * code + profile - trace + gc\n",
        SDPA),
    "strings-that-are-not-code": (
        "import torch\ndef f(a, b):\n    \"\"\"Scores a @ b.T, then softmax(x) over the last axis.\"\"\"\n"
        "    return torch.einsum('bkd,bd->bk', a, b).masked_fill(a[..., 0] > 0, float('-inf'))\n",
        SDPA),
    "string-building": (
        "def f(words):\n    return ', '.join(['a', 'b']) + f'{len(words)} words'\n",
        SDPA),
    "usual-imports": (
        "import itertools\nimport numpy as np\nfrom collections import Counter\ndef f(words):\n"
        "    return Counter(itertools.chain(words)), np.zeros(3)\n",
        SDPA),
    "main-guard": (
        "import torch\ndef f(x):\n    return torch.tanh(x)\nif __name__ == '__main__':\n"
        "    print(f(torch.zeros(2)))\n",
        RNN),
    "tanh-rnn": (
        "import torch\ndef f(x, h, w_ih, w_hh, b):\n    return torch.tanh(x @ w_ih.T + h @ w_hh.T + b)\n",
        RNN),
}


@pytest.mark.parametrize("cell, forbidden", HONEST.values(), ids=HONEST.keys())
def test_an_honest_variant_is_not_flagged(cell, forbidden):
    assert review_flags(cell, forbidden) == []


def test_flags_are_plain_deduplicated_and_inputs_are_checked():
    flags = review_flags(F + "a = getattr(F, 'layer_norm')\nb = getattr(F, 'layer_norm')\n", LAYER_NORM)
    assert flags == ["uses torch.nn.functional.layer_norm, which the exercise forbids",
                     "looks up torch.nn.functional.layer_norm by name (getattr) instead of writing it out"]
    assert review_flags("def broken(:", LAYER_NORM) == []
    deep = "x = " + " + ".join(["'a'"] * 5000)  # crashed the scan with a RecursionError before
    assert review_flags(deep) == ["is nested too deeply for the scan to read: read it yourself"]
    with pytest.raises(TypeError, match="source must be a str"):
        review_flags(b"import torch")
    with pytest.raises(TypeError, match="forbidden must be a tuple of str; found"):
        review_flags("import torch", "torch.nn.functional")
