"""Tests for lib/part3_words/softmax_approx.py.

References: torch's log_softmax and cross_entropy (the full softmax and its
exact gradient, by autograd), the class softmax written class by class,
many seeded importance-sampling estimates against the exact gradient (within a
few standard errors), binary_cross_entropy_with_logits for NCE, and the NCE
optimum found by minimising the exact (population) objective.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.part3_words.softmax_approx import (
    ClassSoftmax,
    dot_products,
    equal_classes,
    frequency_classes,
    importance_sampled_loss,
    importance_weights,
    nce_logits,
    nce_loss,
    output_scores,
    rows,
)
from lib.part3_words.tree_softmax import all_log_probs, balanced_tree, huffman_tree, path_log_prob

FAST = settings(max_examples=25, deadline=None, database=None)


# ---- classes -------------------------------------------------------------------------------------
@FAST
@given(st.integers(1, 300), st.data())
def test_equal_classes_have_V_over_k_words(vocab_size, data):
    # The notes say each of the k groups has |V|^k words; it is |V| / k (rounded: sizes differ by <= 1).
    k = data.draw(st.integers(1, vocab_size))
    sizes = torch.bincount(equal_classes(vocab_size, k), minlength=k)
    assert len(sizes) == k and sizes.sum() == vocab_size
    assert sizes.max() - sizes.min() <= 1 and sizes.max() == math.ceil(vocab_size / k)
    assert (equal_classes(vocab_size, k).diff() >= 0).all()  # consecutive blocks


def test_frequency_classes_by_hand():
    # Masses before each word: 0, 5/17, 9/17, 12/17, ...; times k = 3: 0, 0.88, 1.59, 2.12.
    assert frequency_classes([5, 4, 3, 2, 1, 1, 1], 3).tolist() == [0, 0, 1, 2, 2, 2, 2]
    # A dominant word would skip classes; none is left empty.
    assert frequency_classes([100, 1, 1, 1, 1], 3).tolist() == [0, 1, 2, 2, 2]
    # The order of the counts does not matter, only the counts.
    assert frequency_classes([1, 3, 5, 2, 4, 1, 1], 3).tolist() == [2, 1, 0, 2, 0, 2, 2]


@FAST
@given(st.lists(st.integers(1, 1000), min_size=2, max_size=60), st.data())
def test_frequency_classes_fill_every_class_in_frequency_order(counts, data):
    k = data.draw(st.integers(1, len(counts)))
    classes = frequency_classes(counts, k)
    assert set(classes.tolist()) == set(range(k))
    order = torch.sort(torch.tensor(counts), descending=True, stable=True).indices
    assert (classes[order].diff() >= 0).all() and (classes[order].diff() <= 1).all()


def test_frequency_classes_errors():
    with pytest.raises(TypeError, match=r"(?s)parameter 'counts'.*Actual value: \[3, 0, 1\].*is_above_0"):
        frequency_classes([3, 0, 1], 2)
    with pytest.raises(ValueError, match="counts must be positive finite numbers; found values from 0 to 3"):
        frequency_classes(torch.tensor([3, 0, 1]), 2)
    with pytest.raises(ValueError, match="counts must be positive finite numbers; found NaN$"):
        frequency_classes(torch.tensor([3.0, math.nan, 1.0]), 2)
    with pytest.raises(ValueError, match="counts must hold V >= num_classes = 4 numbers; found 3"):
        frequency_classes([3, 2, 1], 4)
    with pytest.raises(ValueError, match="vocab_size must be at least num_classes = 4; found 3"):
        equal_classes(3, 4)


# ---- the two-level softmax -----------------------------------------------------------------------
@pytest.mark.parametrize("word_class", [equal_classes(11, 3), frequency_classes(list(range(11, 0, -1)), 4),
                                        torch.tensor([2, 0, 1, 0, 2, 2, 1, 0, 0, 1, 2])])
def test_class_softmax_is_a_distribution_and_fast_equals_reference(word_class):
    torch.manual_seed(0)
    layer = ClassSoftmax(5, word_class).double()
    hidden = torch.randn(4, 5, dtype=torch.float64)
    reference = layer.all_log_probs(hidden)  # (B, V)
    torch.testing.assert_close(torch.logsumexp(reference, 1), torch.zeros(4, dtype=torch.float64))
    for word in range(11):
        words = torch.full((4,), word)
        torch.testing.assert_close(layer.log_prob(hidden, words), reference[:, word])
    # Gradients of the fast path equal those of the reference.
    words = torch.tensor([0, 5, 10, 3])
    grads_fast = torch.autograd.grad(layer.log_prob(hidden, words).sum(), list(layer.parameters()))
    grads_ref = torch.autograd.grad(reference.gather(1, words[:, None]).sum(), list(layer.parameters()),
                                    allow_unused=True)
    for fast, ref in zip(grads_fast, grads_ref):
        torch.testing.assert_close(fast, ref)


def test_class_softmax_extremes_are_ordinary_softmaxes():
    torch.manual_seed(1)
    hidden = torch.randn(3, 4, dtype=torch.float64)
    one_class = ClassSoftmax(4, torch.zeros(6, dtype=torch.long)).double()
    torch.testing.assert_close(one_class.all_log_probs(hidden), F.log_softmax(one_class.word_layer(hidden), -1))
    own_class = ClassSoftmax(4, torch.arange(6)).double()
    torch.testing.assert_close(own_class.all_log_probs(hidden), F.log_softmax(own_class.class_layer(hidden), -1))
    assert one_class.class_sizes() == [6] and own_class.class_sizes() == [1] * 6


def test_class_softmax_errors():
    with pytest.raises(ValueError, match=r"every class 0 .. k - 1 at least once; found the classes \[0, 2\]"):
        ClassSoftmax(3, torch.tensor([0, 2, 2]))
    with pytest.raises(ValueError, match=r"every class 0 .. k - 1 at least once; found the classes \[-1, 0\]"):
        ClassSoftmax(3, torch.tensor([0, -1]))
    with pytest.raises(ValueError, match=r"every class 0 .. k - 1 at least once; found the classes \[\]"):
        ClassSoftmax(3, torch.zeros(0, dtype=torch.long))
    with pytest.raises(TypeError, match=r"(?s)parameter 'word_class'.*Actual value: \[0, 1\].*Int64\[Tensor, 'V'\]"):
        ClassSoftmax(3, [0, 1])
    layer = ClassSoftmax(3, equal_classes(6, 2))
    with pytest.raises(ValueError, match=r"words must be word ids in \[0, 6\); found 6..6"):
        layer.log_prob(torch.zeros(1, 3), torch.tensor([6]))
    with pytest.raises(ValueError, match="hidden must have D = 3 features; found 4"):
        layer.all_log_probs(torch.zeros(1, 4))
    with pytest.raises(TypeError, match=r"hidden must have the dtype of layer \(torch.float32\); found torch.float64"):
        layer.log_prob(torch.zeros(1, 3, dtype=torch.float64), torch.tensor([0]))
    with pytest.raises(TypeError, match=r"(?s)parameter 'words'.*Actual value: i64\[2\].*B=1"):
        layer.log_prob(torch.zeros(1, 3), torch.tensor([0, 1]))


def test_the_tree_softmax_sums_to_one_over_the_vocabulary():
    torch.manual_seed(2)
    counts = [50, 20, 10, 9, 5, 3, 2, 1]
    hidden = torch.randn(3, 4, dtype=torch.float64)
    for tree in (huffman_tree(counts), balanced_tree(len(counts))):
        node_vectors = torch.randn(len(counts) - 1, 4, dtype=torch.float64)
        table = all_log_probs(hidden, node_vectors, tree)
        torch.testing.assert_close(table.exp().sum(1), torch.ones(3, dtype=torch.float64))
        words = torch.tensor([0, 4, 7])
        torch.testing.assert_close(path_log_prob(hidden, node_vectors, tree, words), table.gather(1, words[:, None])[:, 0])


# ---- costs ---------------------------------------------------------------------------------------------
def test_dot_products_by_hand():
    assert dot_products("full", 10_000) == 10_000
    assert dot_products("classes", 10_000) == 200  # k = 100 classes of 100 words
    assert dot_products("classes", 10, num_classes=3) == pytest.approx(3 + (4 * 4 + 3 * 3 + 3 * 3) / 10)
    assert dot_products("tree", 1024) == 10  # log2 |V| for a balanced tree
    assert dot_products("tree", 4, tree=huffman_tree([5, 1, 1, 1])) == pytest.approx((1 + 2 + 3 + 3) / 4)
    # k + |V| / k is smallest near k = sqrt(|V|).
    costs = {k: dot_products("classes", 400, num_classes=k) for k in range(1, 401)}
    assert min(costs, key=costs.get) == 20 and costs[20] == 40


def test_cost_errors():
    with pytest.raises(TypeError, match=r"(?s)parameter 'method'.*Actual value: 'sampled'.*Literal\['full', 'classes', 'tree'\]"):
        dot_products("sampled", 10)
    with pytest.raises(ValueError, match="tree must cover the 5 words; found a tree over 4"):
        dot_products("tree", 5, tree=balanced_tree(4))
    with pytest.raises(ValueError, match="vocab_size must be at least 2; found 1"):
        dot_products("full", 1)



# ---- importance sampling -------------------------------------------------------------------------------
def output_layer(vocab_size=6, dim=3, seed=0):
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(vocab_size, dim, generator=generator, dtype=torch.float64)
    bias = 0.5 * torch.randn(vocab_size, generator=generator, dtype=torch.float64)
    hidden = torch.randn(1, dim, generator=generator, dtype=torch.float64)
    return hidden, weight, bias


def estimates_for_one_context(hidden, weight, bias, target, proposal, num_samples, repeats, self_normalised,
                              seed=0):
    """``repeats`` independent gradient estimates with respect to ``h`` (one per batch row)."""
    rows = hidden.expand(repeats, -1).clone().requires_grad_()  # (R, D): the same context R times
    targets = torch.full((repeats,), target)
    loss = importance_sampled_loss(rows, weight, bias, targets, proposal, num_samples,
                                   torch.Generator().manual_seed(seed), self_normalised)
    (grad,) = torch.autograd.grad(loss, rows)
    return grad * repeats  # (R, D): the loss is a mean over the rows


def exact_gradient(hidden, weight, bias, target):
    h = hidden.clone().requires_grad_()
    loss = F.cross_entropy(h @ weight.T + bias, torch.tensor([target]))
    return torch.autograd.grad(loss, h)[0][0]


def test_importance_sampling_with_the_exact_partition_function_is_unbiased():
    hidden, weight, bias = output_layer()
    proposal = torch.tensor([0.3, 0.1, 0.2, 0.15, 0.15, 0.1], dtype=torch.float64)
    estimates = estimates_for_one_context(hidden, weight, bias, 2, proposal, 3, 20_000, self_normalised=False)
    mean, standard_error = estimates.mean(0), estimates.std(0) / math.sqrt(len(estimates))
    assert ((mean - exact_gradient(hidden, weight, bias, 2)).abs() < 4 * standard_error).all()


def test_importance_weights_use_exp_of_scores_not_scores():
    # The notes write p(v_k | h) = s(v_k, h) / Z; with those weights the estimate is far off.
    hidden, weight, bias = output_layer()
    proposal = torch.full((6,), 1 / 6, dtype=torch.float64)
    samples = torch.multinomial(proposal, 20_000 * 3, replacement=True,
                                generator=torch.Generator().manual_seed(0)).view(-1, 3)
    scores = output_scores(hidden.expand(len(samples), -1), weight, bias, samples)  # (R, K)
    log_z = torch.logsumexp(hidden @ weight.T + bias, 1).expand(len(samples))
    exact = exact_gradient(hidden, weight, bias, 2)

    def estimate(omega):
        per_row = -weight[2] + (omega[:, :, None] * weight[samples]).sum(1)  # (R, D)
        return per_row.mean(0), per_row.std(0) / math.sqrt(len(per_row))

    right, right_se = estimate(importance_weights(scores, proposal.log()[samples], log_z))
    assert ((right - exact).abs() < 4 * right_se).all()
    wrong, wrong_se = estimate(scores / log_z.exp()[:, None] / proposal[samples] / 3)
    assert ((wrong - exact).abs() > 10 * wrong_se).any()


def test_importance_weights_by_hand():
    scores = torch.tensor([[0.0, math.log(2.0)]], dtype=torch.float64)
    log_q = torch.log(torch.tensor([[0.5, 0.25]], dtype=torch.float64))
    # r = exp(s) / q = (2, 8): self-normalised weights (0.2, 0.8).
    torch.testing.assert_close(importance_weights(scores, log_q), torch.tensor([[0.2, 0.8]], dtype=torch.float64))
    # With Z = 4: p = (1/4, 1/2), weights p / (K q) = (1/4, 1).
    torch.testing.assert_close(importance_weights(scores, log_q, torch.tensor([math.log(4.0)], dtype=torch.float64)),
                               torch.tensor([[0.25, 1.0]], dtype=torch.float64))


def test_importance_weights_carry_no_gradient():
    scores = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    log_q = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    assert not importance_weights(scores, log_q).requires_grad
    assert not importance_weights(scores, log_q, torch.zeros(2, dtype=torch.float64)).requires_grad


def test_importance_weights_errors():
    scores = torch.zeros(2, 3)
    with pytest.raises(TypeError, match=r"sample_log_q must have the dtype of sample_scores \(torch.float32\); found torch.float64"):
        importance_weights(scores, scores.double())
    with pytest.raises(TypeError, match=r"log_partition must have the dtype of sample_scores \(torch.float32\); found torch.float64"):
        importance_weights(scores, scores, torch.zeros(2, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"sample_scores must hold K >= 1 samples per row; found shape \(2, 0\)"):
        importance_weights(torch.zeros(2, 0), torch.zeros(2, 0))


def test_self_normalised_importance_sampling_is_biased_but_consistent():
    hidden, weight, bias = output_layer(seed=3)
    proposal = torch.full((6,), 1 / 6, dtype=torch.float64)
    exact = exact_gradient(hidden, weight, bias, 4)
    errors = {}
    for k in (1, 8, 200):
        estimates = estimates_for_one_context(hidden, weight, bias, 4, proposal, k, 4000, self_normalised=True)
        errors[k] = float((estimates.mean(0) - exact).norm())
        if k == 1:  # one sample: the estimate is u_v - u_x with v ~ q, whatever p is
            assert ((estimates.mean(0) - exact).abs() > 5 * estimates.std(0) / math.sqrt(4000)).any()
    assert errors[1] > 3 * errors[8] > 3 * errors[200]


def test_importance_sampled_loss_gradient_reaches_the_output_layer():
    # With q = p itself and exact Z every weight is 1 / K; with K = 1 the gradient of the
    # output layer is the formula -(e_x - e_v) h^T for the one sample v drawn.
    hidden, weight, bias = output_layer()
    weight, bias = weight.clone().requires_grad_(), bias.clone().requires_grad_()
    p = torch.softmax(hidden @ weight.T + bias, 1)[0].detach()
    loss = importance_sampled_loss(hidden, weight, bias, torch.tensor([1]), p, 1,
                                   torch.Generator().manual_seed(5), self_normalised=False)
    loss.backward()
    v = int(torch.multinomial(p, 1, replacement=True, generator=torch.Generator().manual_seed(5)))
    expected = torch.zeros_like(weight)
    expected[1] -= hidden[0]
    expected[v] += hidden[0]
    torch.testing.assert_close(weight.grad, expected)


def test_importance_sampling_errors():
    hidden, weight, bias = output_layer()
    with pytest.raises(ValueError, match="probability distribution over the 6 words; found values from 1 to 1 summing to 6"):
        importance_sampled_loss(hidden, weight, bias, torch.tensor([0]), torch.ones(6, dtype=torch.float64), 2)
    # A negative value in a proposal that sums to 1 shows in the message.
    negative = torch.tensor([-0.2, 0.4, 0.2, 0.2, 0.2, 0.2], dtype=torch.float64)
    with pytest.raises(ValueError, match="over the 6 words; found values from -0.2 to 0.4 summing to 1"):
        importance_sampled_loss(hidden, weight, bias, torch.tensor([0]), negative, 2)
    # NaN fails every comparison: it must not pass as "not negative" (torch: invalid multinomial distribution).
    with_nan = torch.tensor([math.nan, 0.2, 0.2, 0.2, 0.2, 0.2], dtype=torch.float64)
    with pytest.raises(ValueError, match="proposal must be a probability distribution over the 6 words; found NaN"):
        importance_sampled_loss(hidden, weight, bias, torch.tensor([0]), with_nan, 2)
    # An out-of-range target is named as importance_sampled_loss's targets, not output_scores' words.
    uniform = torch.full((6,), 1 / 6, dtype=torch.float64)
    for targets, found in (([0, 6], "0..6"), ([0, -1], "-1..0")):
        with pytest.raises(ValueError, match=rf"targets must be word ids in \[0, 6\); found {found}"):
            importance_sampled_loss(hidden.expand(2, -1), weight, bias, torch.tensor(targets), uniform, 2)
    with pytest.raises(TypeError, match=r"(?s)parameter 'targets'.*Actual value: f32\[1\].*Int64\[Tensor, 'B'\]"):
        importance_sampled_loss(hidden, weight, bias, torch.tensor([0.0]), torch.ones(6) / 6, 2)
    with pytest.raises(TypeError, match=r"(?s)parameter 'weight'.*Actual value: f64\[6,2\].*D=3"):
        output_scores(hidden, weight[:, :2], bias, torch.tensor([0]))
    with pytest.raises(ValueError, match=r"words must be word ids in \[0, 6\); found 0..6"):
        output_scores(hidden, weight, bias, torch.tensor([[0, 6]]))
    with pytest.raises(TypeError, match=r"weight must have the dtype of hidden \(torch.float64\); found torch.float32"):
        output_scores(hidden, weight.float(), bias, torch.tensor([0]))
    with pytest.raises(ValueError, match="targets must hold B >= 1 words; found none"):
        importance_sampled_loss(hidden[:0], weight, bias, torch.zeros(0, dtype=torch.long), torch.ones(6) / 6, 2)


# ---- noise-contrastive estimation ------------------------------------------------------------------------
def test_nce_by_hand():
    # s = 1, q = 0.1, K = 5: logit 1 - log(0.5) = 1.6931.
    assert nce_logits(torch.tensor(1.0), torch.tensor(math.log(0.1)), 5).item() == pytest.approx(1 + math.log(2))
    # B = 1, K = 2, q = 1/4 everywhere: exp(s) / (exp(s) + 2 q) with exp(s) = 1/2 for the data word -> 1/2;
    # noise words with exp(s) = 1/2 and 1/6 have P(noise) = 1/2 and 3/4.
    q = math.log(0.25)
    loss = nce_loss(torch.tensor([math.log(0.5)]), torch.tensor([[math.log(0.5), math.log(1 / 6)]]),
                    torch.tensor([q]), torch.tensor([[q, q]]))
    assert loss.item() == pytest.approx(-(math.log(0.5) + math.log(0.5) + math.log(0.75)) / 3)


def test_nce_equals_binary_cross_entropy_and_the_probability_form():
    generator = torch.Generator().manual_seed(0)
    data, noise = torch.randn(7, generator=generator), torch.randn(7, 4, generator=generator)
    q_data, q_noise = -3 * torch.rand(7, generator=generator), -3 * torch.rand(7, 4, generator=generator)
    logits = torch.cat([nce_logits(data, q_data, 4), nce_logits(noise, q_noise, 4).flatten()])
    labels = torch.cat([torch.ones(7), torch.zeros(28)])
    expected = F.binary_cross_entropy_with_logits(logits, labels)
    torch.testing.assert_close(nce_loss(data, noise, q_data, q_noise), expected)
    # p(y = 1 | x) = p_theta / (p_theta + K q) with p_theta = exp(s).
    p_data = data.exp() / (data.exp() + 4 * q_data.exp())
    p_noise = noise.exp() / (noise.exp() + 4 * q_noise.exp())
    by_hand = -(p_data.log().sum() + (1 - p_noise).log().sum()) / 35
    torch.testing.assert_close(nce_loss(data, noise, q_data, q_noise), by_hand)


def test_nce_population_optimum_is_the_data_distribution():
    # Minimise the exact NCE objective over free scores s_v: exp(s) must equal p_r, normalised for free.
    p_r = torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05], dtype=torch.float64)
    q = torch.tensor([0.1, 0.3, 0.2, 0.2, 0.2], dtype=torch.float64)
    K = 3
    s = torch.zeros(5, dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.LBFGS([s], max_iter=200, tolerance_grad=1e-12, tolerance_change=1e-14)

    def objective():
        optimizer.zero_grad()
        logits = nce_logits(s, q.log(), K)
        loss = -((p_r * F.logsigmoid(logits)).sum() + K * (q * F.logsigmoid(-logits)).sum()) / (K + 1)
        loss.backward()
        return loss

    optimizer.step(objective)
    torch.testing.assert_close(s.exp().detach(), p_r, atol=1e-6, rtol=0)


def test_nce_with_samples_recovers_the_data_distribution():
    p_r = torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05])
    q = torch.full((5,), 0.2)
    generator = torch.Generator().manual_seed(0)
    s = torch.zeros(5, requires_grad=True)
    optimizer = torch.optim.SGD([s], lr=2.0)
    for _ in range(200):
        data = torch.multinomial(p_r, 512, replacement=True, generator=generator)
        noise = torch.multinomial(q, 512 * 4, replacement=True, generator=generator).view(512, 4)
        loss = nce_loss(s[data], s[noise], q.log()[data], q.log()[noise])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    found = s.detach().exp()
    assert (found - p_r).abs().max() < 0.03 and abs(float(found.sum()) - 1) < 0.05


def test_nce_errors():
    with pytest.raises(TypeError, match=r"(?s)parameter 'noise_scores'.*Actual value: f32\[2,4\].*B=3"):
        nce_loss(torch.zeros(3), torch.zeros(2, 4), torch.zeros(3), torch.zeros(2, 4))
    with pytest.raises(ValueError, match=r"noise_scores must hold B >= 1 rows of K >= 1 noise words; found shape \(2, 0\)"):
        nce_loss(torch.zeros(2), torch.zeros(2, 0), torch.zeros(2), torch.zeros(2, 0))
    with pytest.raises(TypeError, match=r"noise_scores must have the dtype of data_scores \(torch.float16\); found torch.float32"):
        nce_loss(torch.zeros(2, dtype=torch.float16), torch.zeros(2, 4), torch.zeros(2), torch.zeros(2, 4))
    with pytest.raises(TypeError, match=r"noise_log_noise must have the dtype of data_scores \(torch.float32\); found torch.float64"):
        nce_loss(torch.zeros(2), torch.zeros(2, 4), torch.zeros(2), torch.zeros(2, 4, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"(?s)parameter 'num_noise'.*Actual value: 0.*is_at_least_1"):
        nce_logits(torch.zeros(1), torch.zeros(1), 0)
    with pytest.raises(TypeError, match=r"(?s)parameter 'log_noise'.*Actual value: f32\[2\]"):
        nce_logits(torch.zeros(3), torch.zeros(2), 1)


def test_tree_decisions_depend_on_the_whole_prefix_not_only_the_last_bit():
    # The notes write p(b_j | b_1, ..., b_{j-1}, h) = p(b_j | b_{j-1}, h). In a balanced tree over 8
    # words, words 3 and 7 have codes 011 and 111: the same previous bit before their last decision,
    # but different nodes, hence different decision probabilities.
    tree = balanced_tree(8)
    assert tree.codes[3] == (0, 1, 1) and tree.codes[7] == (1, 1, 1)
    assert tree.nodes[3][2] != tree.nodes[7][2]
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(1, 4, generator=generator, dtype=torch.float64)
    node_vectors = torch.randn(7, 4, generator=generator, dtype=torch.float64)
    last = [torch.sigmoid(-(hidden[0] @ node_vectors[tree.nodes[w][2]])) for w in (3, 7)]  # p(b_3 = 1 | node)
    assert not torch.isclose(last[0], last[1])
    by_path = [sum(F.logsigmoid((1 - 2 * b) * (hidden[0] @ node_vectors[n])) for b, n in zip(tree.codes[w], tree.nodes[w]))
               for w in (3, 7)]
    torch.testing.assert_close(torch.stack(by_path), all_log_probs(hidden, node_vectors, tree)[0, [3, 7]])


# ---- sparse gradients ----------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(7,), (7, 3)])
def test_rows_sparse_gradient_equals_the_dense_one(shape):
    table = torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(0), requires_grad=True)
    index = torch.tensor([[0, 3], [3, 6]])  # row 3 twice: its gradients add up
    weights = torch.randn(*index.shape, *shape[1:], dtype=torch.float64)
    dense = torch.autograd.grad((rows(table, index) * weights).sum(), table)[0]
    sparse = torch.autograd.grad((rows(table, index, sparse=True) * weights).sum(), table)[0]
    assert sparse.layout == torch.sparse_coo
    torch.testing.assert_close(sparse.to_dense(), dense)
    torch.testing.assert_close(rows(table, index, sparse=True), table[index])


def test_rows_rejects_bad_input():
    with pytest.raises(TypeError, match=r"(?s)parameter 'table'.*Actual value: f32\[2,2,2\]"):
        rows(torch.zeros(2, 2, 2), torch.tensor([0]))
    with pytest.raises(TypeError, match=r"(?s)parameter 'index'.*Actual value: f32\[1\].*Int64"):
        rows(torch.zeros(2), torch.tensor([0.0]))
    with pytest.raises(TypeError, match=r"(?s)parameter 'sparse'.*Actual value: 'yes'.*bool"):
        rows(torch.zeros(2), torch.tensor([0]), sparse="yes")
    with pytest.raises(ValueError, match=r"index must hold row ids in \[0, 2\) of table; found -1..0"):
        rows(torch.zeros(2), torch.tensor([0, -1]))


def test_class_softmax_sparse_gradients_equal_the_dense_ones():
    torch.manual_seed(0)
    dense_layer = ClassSoftmax(4, frequency_classes([50, 20, 9, 8, 5, 3, 2, 1], 3)).double()
    sparse_layer = ClassSoftmax(4, dense_layer.word_class, sparse=True).double()
    sparse_layer.load_state_dict(dense_layer.state_dict())
    hidden = torch.randn(6, 4, dtype=torch.float64)
    words = torch.tensor([0, 1, 4, 4, 7, 2])
    dense = torch.autograd.grad(dense_layer.log_prob(hidden, words).sum(), list(dense_layer.parameters()))
    sparse = torch.autograd.grad(sparse_layer.log_prob(hidden, words).sum(), list(sparse_layer.parameters()))
    for d, s in zip(dense, sparse):
        torch.testing.assert_close(s.to_dense() if s.is_sparse else s, d)
    assert sum(s.is_sparse for s in sparse) == 2  # the word layer's weight and bias
    with pytest.raises(TypeError, match=r"(?s)parameter 'sparse'.*Actual value: None.*bool"):
        ClassSoftmax(4, dense_layer.word_class, sparse=None)
