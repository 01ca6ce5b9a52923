"""The static REVIEW scan (courseware.grading.scan): the red team's evasions are flagged, honest answers are not.

Every case in EVASIONS got no flag at all from the scan before it learnt to follow
aliases, getattr, star imports, private entry points and bindings in a class's scope;
each must now get a flag whose plain words name what to look at. HONEST holds answers an
honest student could write, and every master solution of the book: none may be flagged.
The scan runs in the grader's own process, so the last tests hold it to linear time and
to a flag, never an exception, for a cell too large or too deep to read.
"""
import time
from pathlib import Path

import nbformat
import pytest

from courseware.checks import CHECKS
from courseware.exercises import coding_exercises
from courseware.grading.scan import review_flags

CHAPTERS = Path(__file__).resolve().parents[2] / "chapters"
SDPA = CHECKS["check_attention_backward"].forbidden
LAYER_NORM = ("torch.autograd", "torch.func", ".backward", "torch.nn.functional.layer_norm", "torch.nn.LayerNorm",
              "torch.layer_norm")  # an exercise that forbids torch's layer norm (none does now)
RNN = CHECKS["check_rnn_last_state"].forbidden
LSTM = CHECKS["check_lstmp_layer"].forbidden
GRU = CHECKS["check_gru_jacobian"].forbidden
CROSS_ENTROPY = CHECKS["check_cross_entropy_grad"].forbidden
GELU_GRAD = CHECKS["check_gelu_grad"].forbidden
F = "import torch\nimport torch.nn.functional as F\n"
MODULE_VALUE = "uses the module torch.nn.functional as a value"


def sdpa_from(owner):
    """A cell's answer that calls scaled_dot_product_attention taken from ``owner``."""
    return f"def my_attention(q, k, v):\n    return {owner}.scaled_dot_product_attention(q, k, v)\n"

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
    # ... softmin and log-sum-exp under other names, which ex-act-ce-grad's statement forbids
    "softmin-module": (
        "import torch\ndef f(logits, targets):\n    return torch.nn.Softmin(dim=1)(-logits)\n",
        CROSS_ENTROPY, "uses torch.nn.Softmin, which the exercise forbids"),
    "softmin-from-import": (
        "from torch.nn import Softmin\ndef f(logits, targets):\n    return Softmin(1)(-logits)\n",
        CROSS_ENTROPY, "uses torch.nn.Softmin, which the exercise forbids"),
    "softmin-module-internals": (
        "import torch\nsoftmin = torch.nn.modules.activation.Softmin(1)\n",
        CROSS_ENTROPY, "uses torch.nn.Softmin under another name (torch.nn.modules.activation.Softmin)"),
    "logaddexp-fold": (
        "import functools, torch\ndef f(logits, targets):\n"
        "    return functools.reduce(torch.logaddexp, logits.unbind(1))\n",
        CROSS_ENTROPY, "uses torch.logaddexp, which the exercise forbids"),
    "logaddexp2": (
        "import torch\ndef f(a, b):\n    return torch.logaddexp2(a, b)\n",
        CROSS_ENTROPY, "uses torch.logaddexp2, a variant of torch.logaddexp"),
    "logaddexp-method": (
        "def f(logits, targets):\n    return logits[:, 0].logaddexp(logits[:, 1])\n",
        CROSS_ENTROPY, "uses logaddexp, which the exercise forbids"),
    "logcumsumexp-last-column": (
        "import torch\ndef f(logits, targets):\n    return torch.logcumsumexp(logits, 1)[:, -1:]\n",
        CROSS_ENTROPY, "uses torch.logcumsumexp, which the exercise forbids"),
    "logcumsumexp-method": (
        "def f(logits, targets):\n    return logits.logcumsumexp(1)[:, -1:]\n",
        CROSS_ENTROPY, "uses logcumsumexp, which the exercise forbids"),
    "categorical-probs": (
        "from torch.distributions import Categorical\ndef f(logits, targets):\n"
        "    return Categorical(logits=logits).probs\n",
        CROSS_ENTROPY, "uses torch.distributions, which the exercise forbids"),
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
    # 6. a module bound in a class's scope below its body, where only K.m reaches it (red team, F1)
    "class-if": (
        F + "class K:\n    if True:\n        m = F\n" + sdpa_from("K.m"),
        SDPA, MODULE_VALUE),
    "class-try": (
        "import torch\nclass K:\n    try:\n        m = torch.nn.functional\n    except ImportError:\n"
        "        pass\n" + sdpa_from("K.m"),
        SDPA, MODULE_VALUE),
    "class-walrus": (
        "import torch\nclass K:\n    m = (n := torch.nn.functional)\n" + sdpa_from("K.n"),
        SDPA, MODULE_VALUE),
    "class-if-import": (
        "class K:\n    if True:\n        import torch.nn.functional as m\n" + sdpa_from("K.m"),
        SDPA, "imports inside the class K"),
    "class-if-submodule": (
        "import torch\nclass K:\n    if True:\n        nn = torch.nn\nlayer = K.nn.MultiheadAttention(8, 2)\n",
        SDPA, "uses the module torch.nn as a value"),
    "class-for": (
        F + "class K:\n    for _ in [0]:\n        m = F\n" + sdpa_from("K.m"),
        SDPA, MODULE_VALUE),
    "class-with": (
        F + "import contextlib\nclass K:\n    with contextlib.nullcontext():\n        m = F\n" + sdpa_from("K.m"),
        SDPA, MODULE_VALUE),
    "class-match": (
        F + "class K:\n    match 0:\n        case 0:\n            m = F\n" + sdpa_from("K.m"),
        SDPA, MODULE_VALUE),
    "class-in-a-class": (
        F + "class K:\n    class J:\n        if True:\n            m = F\n" + sdpa_from("K.J.m"),
        SDPA, MODULE_VALUE),
    "class-default-walrus": (  # a method's defaults run in the class's scope
        F + "class K:\n    def g(self, x=(m := F)):\n        pass\n" + sdpa_from("K.m"),
        SDPA, MODULE_VALUE),
    "class-annotation-walrus": (
        F + "class K:\n    def g(self) -> (m := F):\n        pass\n" + sdpa_from("K.m"),
        SDPA, MODULE_VALUE),
    "class-walrus-beside-lambda": (
        F + "class K:\n    h = (lambda: 0, (m := F))\n" + sdpa_from("K.m"),
        SDPA, MODULE_VALUE),
    "class-hides-os-system": (
        "import os\nclass K:\n    if True:\n        m = os\nK.m.system('true')\n",
        SDPA, "uses the module os as a value"),
    # ... and a walrus, followed as an alias, whose value is stored where no name reaches it
    "walrus-in-a-dict": (
        F + "d = {'x': (n := F)}\n" + sdpa_from("d['x']"),
        SDPA, MODULE_VALUE),
    "walrus-in-a-list": (
        F + "ms = [(n := F)]\n" + sdpa_from("ms[0]"),
        SDPA, MODULE_VALUE),
    "walrus-as-an-argument": (
        F + "ns = dict(x=(n := F))\n" + sdpa_from("ns['x']"),
        SDPA, MODULE_VALUE),
    # ... an attribute named like a forbidden name on anything at all: the last line of defence
    "attribute-of-a-parameter": (
        "def my_attention(q, k, v, ops):\n    return ops.scaled_dot_product_attention(q, k, v)\n",
        SDPA, "uses an attribute named scaled_dot_product_attention, like "
              "torch.nn.functional.scaled_dot_product_attention, which the exercise forbids"),
    "attribute-in-another-case": (
        "def f(ops):\n    return ops.Multihead_Attention(8, 2)\n",
        SDPA, "uses an attribute named Multihead_Attention, like torch.nn.MultiheadAttention"),
    # ... and the notebook's own namespace, where a followed alias is an attribute of a module
    "main-module": (
        "import os\nimport __main__\nG = os\n__main__.G.system('true')\n",
        SDPA, "imports __main__, which no exercise needs"),
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
    # Every other place a binding can hide (red team, F1) was followed or flagged already.
    "nested-function": (
        F + "def outer():\n    G = F\n    def inner(q, k, v):\n"
        "        return G.scaled_dot_product_attention(q, k, v)\n    return inner\n",
        SDPA, "uses torch.nn.functional.scaled_dot_product_attention, which the exercise forbids"),
    "method-local-alias": (
        F + "class K:\n    def g(self, q, k, v):\n        G = F\n"
        "        return G.scaled_dot_product_attention(q, k, v)\n",
        SDPA, "uses torch.nn.functional.scaled_dot_product_attention, which the exercise forbids"),
    "global-alias": (
        F + "def setup():\n    global G\n    G = F\nsetup()\n" + sdpa_from("G"),
        SDPA, "uses torch.nn.functional.scaled_dot_product_attention, which the exercise forbids"),
    "nonlocal-alias": (
        F + "def outer():\n    G = None\n    def set_it():\n        nonlocal G\n        G = F\n"
        "    set_it()\n    return G.scaled_dot_product_attention\n",
        SDPA, "uses torch.nn.functional.scaled_dot_product_attention, which the exercise forbids"),
    "walrus-alias-assigned": (
        "import torch\nm = (n := torch.nn.functional)\n" + sdpa_from("m"),
        SDPA, "uses torch.nn.functional.scaled_dot_product_attention, which the exercise forbids"),
    "comprehension-target": (F + "fs = [m for m in [F]]\n" + sdpa_from("fs[0]"), SDPA, MODULE_VALUE),
    "for-over-a-tuple": (F + "for m in (F,):\n    pass\n" + sdpa_from("m"), SDPA, MODULE_VALUE),
    "lambda-default": (F + "g = lambda m=F: m\n" + sdpa_from("g()"), SDPA, MODULE_VALUE),
    "decorator-returns-module": (
        F + "@(lambda f: F)\ndef m():\n    pass\n" + sdpa_from("m"), SDPA, MODULE_VALUE),
    "with-as": (
        F + "import contextlib\nwith contextlib.nullcontext(F) as m:\n    pass\n" + sdpa_from("m"),
        SDPA, MODULE_VALUE),
    "except-as": (
        F + "try:\n    raise ValueError(F)\nexcept ValueError as e:\n    m = e.args[0]\n" + sdpa_from("m"),
        SDPA, MODULE_VALUE),
    "match-as": (F + "match F:\n    case m:\n        pass\n" + sdpa_from("m"), SDPA, MODULE_VALUE),
    "augmented-assignment": (F + "m = []\nm += [F]\n" + sdpa_from("m[0]"), SDPA, MODULE_VALUE),
    "augmented-assignment-returning-it": (
        F + "class A:\n    def __iadd__(self, other):\n        return other\nm = A()\nm += F\n" + sdpa_from("m"),
        SDPA, MODULE_VALUE),
    "attribute-assignment": (F + "class K:\n    pass\nK.m = F\n" + sdpa_from("K.m"), SDPA, MODULE_VALUE),
    "dict-subscript": (F + "d = {'x': F}\n" + sdpa_from("d['x']"), SDPA, MODULE_VALUE),
    "conditional-expression": (F + "m = F if True else None\n" + sdpa_from("m"), SDPA, MODULE_VALUE),
    "starred-unpacking": (F + "m, *rest = F, 0\n" + sdpa_from("m"), SDPA, MODULE_VALUE),
    "setattr-on-a-class": (F + "class K:\n    pass\nsetattr(K, 'm', F)\n" + sdpa_from("K.m"), SDPA, MODULE_VALUE),
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
    "softmax-of-anything": (  # named like no forbidden name: .softmax is not scaled_dot_product_attention
        "def f(q, k, v):\n    return (q @ k.transpose(-2, -1)).softmax(-1) @ v\n",
        SDPA),
    "alias-inside-a-method": (
        "import torch\nclass Attention(torch.nn.Module):\n    def forward(self, q, k, v):\n"
        "        import math\n        F = torch.nn.functional\n"
        "        return F.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v\n",
        SDPA),
    "constants-in-a-class": (
        "import torch\nclass Config:\n    if torch.cuda.is_available():\n        eps = 1e-6\n"
        "    else:\n        eps = 1e-5\n    dtype = torch.float32\n",
        LAYER_NORM),
    "softmax-by-exp-and-max": (  # every row shifted by its own maximum, exponentiated, normalised
        "import torch\ndef f(logits, targets):\n"
        "    exps = (logits - logits.max(dim=1, keepdim=True).values).exp()\n"
        "    one_hot = torch.zeros_like(exps)\n    one_hot[torch.arange(len(targets)), targets] = 1.0\n"
        "    return (exps / exps.sum(dim=1, keepdim=True) - one_hot) / len(targets)\n",
        CROSS_ENTROPY),
    "walrus-in-a-condition": (
        "import torch\ndef f(xs):\n    if (n := len(xs)) > 0:\n        return torch.stack(xs).sum(0) / n\n",
        SDPA),
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


# ---- what the scan costs ---------------------------------------------------------------
def reverse_chain(links, last_line=""):
    """``a<links> = a<links-1>`` ... ``a2 = a1``, then ``a1 = torch``, under ``if False:``: each name
    is bound before the one it is bound to, which cost the old scan one pass per link."""
    lines = [f"    a{i} = a{i - 1}\n" for i in range(links, 1, -1)]
    return "import torch\nif False:\n" + "".join(lines) + "    a1 = torch\n" + last_line


def timed_flags(cell, forbidden=SDPA):
    """The scan's flags and the CPU seconds it took (this thread's: the scan is pure Python, so the
    old scan's quadratic seconds were CPU seconds; the wall clock also counts the other jobs of a
    loaded machine, and failed the 2 s bound below at 2.2 s while two cores ran ~13 processes)."""
    start = time.thread_time()
    flags = review_flags(cell, forbidden)
    return flags, time.thread_time() - start


def test_a_cell_too_large_is_one_flag_at_once():
    cell = reverse_chain(60_000)  # 1.2 MB: held the grader for about 16 minutes
    flags, seconds = timed_flags(cell)
    assert flags == [f"is too large to scan ({round(len(cell) / 1000)} KB): review it by hand"]
    assert seconds < 5, seconds  # well under a second; generous for a loaded machine


def test_a_long_chain_of_aliases_is_followed_in_linear_time():
    # 105 KB, 30,000 nodes: below the caps. The old scan took about 10 s (4,000 links took 4.4 s).
    cell = reverse_chain(6000, sdpa_from("a6000.nn.functional"))
    flags, seconds = timed_flags(cell)
    assert flags == ["uses torch.nn.functional.scaled_dot_product_attention, which the exercise forbids"]
    assert seconds < 2, seconds


def test_too_many_nodes_is_too_large():
    cell = "x = [" + ", ".join(["0"] * 60_000) + "]\n"  # 180 KB, 60,000 nodes
    assert review_flags(cell) == ["is too large to scan (180 KB): review it by hand"]


@pytest.mark.parametrize("cell", [
    "x = " + "-" * 150_000 + "1",  # the parser runs out of memory (MemoryError)
    "x = " + "-" * 3000 + "1",  # the parser runs out of stack (RecursionError)
    "import torch\nx = torch" + ".nn.functional.torch" * 60 + "\n",  # a dotted name of 241 parts
], ids=["memory", "recursion", "dotted-name"])
def test_a_cell_too_deep_is_a_flag_not_an_exception(cell):
    flags, seconds = timed_flags(cell)
    assert flags == ["is nested too deeply for the scan to read: read it yourself"]
    assert seconds < 5, seconds


def test_the_code_in_strings_is_capped_together():
    # 300 strings "a+a+...": each part of the sum is a string too, 9 MB of code that does not parse
    cell = "x = " + " + ".join([repr("a+" * 100)] * 300) + "\n"
    flags, seconds = timed_flags(cell)
    assert flags == ["holds more code in strings than the scan reads: review it by hand"]
    # 20,000 strings of one name each: 80,000 nodes of code in strings
    cell = "".join(f"'x{i}'\n" for i in range(20_000))
    more_flags, more_seconds = timed_flags(cell)
    assert more_flags == ["holds more code in strings than the scan reads: review it by hand"]
    assert seconds + more_seconds < 5, (seconds, more_seconds)
