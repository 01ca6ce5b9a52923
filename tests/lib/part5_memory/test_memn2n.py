"""Tests for lib/part5_memory/memn2n.py and lib/part5_memory/babi.py: the position encoding by hand and
by the paper's formula, the forward pass against a plain per-example loop (both kinds of
weight tying), the tying itself, masking, linear start, training, and the story generator's
answers against an independent re-reading of each story."""
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lib.part5_memory.babi import OBJECTS, PEOPLE, PLACES, VOCABULARY, WORD_ID, Stories, Story, generate
from lib.part5_memory.memn2n import (
    MemN2N, MemN2NConfig, accuracy, position_encoding, support_weights, train_memn2n,
)

FAST = settings(max_examples=25, deadline=None, database=None)


pytestmark = pytest.mark.usefixtures("one_thread")  # see tests/conftest.py


def small_model(tying="adjacent", hops=3, seed=0):
    torch.manual_seed(seed)
    return MemN2N(MemN2NConfig(len(VOCABULARY), embed_dim=6, hops=hops, max_sentences=4, tying=tying)).double()


def some_stories(task="two", n=5, seed=0):
    return Stories.from_stories(generate(task, n, seed=seed, max_sentences=4), max_sentences=4)


# ---------------------------------------------------------------------------
# Position encoding.
# ---------------------------------------------------------------------------


def test_position_encoding_by_hand():
    # J = 2, d = 2: word 1 has j/J = 0.5, so l = 0.5 - (k/d) * 0 = 0.5; word 2 has j/J = 1, so l = k/d.
    torch.testing.assert_close(position_encoding(2, 2), torch.tensor([[0.5, 0.5], [0.5, 1.0]]))


def test_position_encoding_is_the_papers_formula():
    J, d = 5, 7
    expected = torch.tensor([[(1 - j / J) - (k / d) * (1 - 2 * j / J) for k in range(1, d + 1)]
                             for j in range(1, J + 1)])
    torch.testing.assert_close(position_encoding(J, d), expected)


def test_position_encoding_makes_word_order_matter():
    model = small_model()
    forward = torch.tensor([WORD_ID[w] for w in "mary went to the kitchen".split()])
    backward = torch.tensor([WORD_ID[w] for w in "kitchen went to the mary".split()])
    table = model.word_tables[0]
    assert not torch.allclose(model.embed(table, forward), model.embed(table, backward))
    torch.testing.assert_close(table(forward).sum(0), table(backward).sum(0))  # a bag of words could not tell


# ---------------------------------------------------------------------------
# The forward pass against a loop over examples, hops and sentences.
# ---------------------------------------------------------------------------


def reference(model, data):
    """MemN2N written out for one story at a time, with an explicit softmax over the real sentences."""
    config = model.config
    encoding = position_encoding(config.sentence_length, config.embed_dim).double()

    def embed(table, words):
        return sum(encoding[j] * table.weight[w] for j, w in enumerate(words.tolist()))

    all_logits, all_weights = [], []
    for b in range(len(data)):
        n = int(data.lengths[b])
        u = embed(model.B, data.question[b])  # q^(1)
        weights = torch.zeros(config.hops, data.story.shape[1], dtype=torch.float64)
        for k in range(config.hops):
            m = [embed(model.A[k], data.story[b, i]) + model.T_A[k][n - 1 - i] for i in range(n)]
            c = [embed(model.C[k], data.story[b, i]) + model.T_C[k][n - 1 - i] for i in range(n)]
            scores = torch.stack([u @ m_i for m_i in m])
            p = torch.exp(scores) / torch.exp(scores).sum()  # p_i = softmax(u^T m_i)
            r = sum(p[i] * c[i] for i in range(n))  # r = sum_i p_i c_i
            u = (model.H(u) if config.tying == "layerwise" else u) + r  # q^(k+1) = q^(k) + r^(k)
            weights[k, :n] = p
        logits = u @ model.C[-1].weight.T if config.tying == "adjacent" else model.W(u)  # f(q^(K) + r^(K))
        all_logits.append(logits)
        all_weights.append(weights)
    return torch.stack(all_logits), torch.stack(all_weights)


@pytest.mark.parametrize("tying", ["adjacent", "layerwise"])
@pytest.mark.parametrize("hops", [1, 3])
def test_forward_matches_a_per_example_loop(tying, hops):
    model, data = small_model(tying, hops), some_stories()
    logits, weights = model(data.story, data.question, data.lengths)
    expected_logits, expected_weights = reference(model, data)
    torch.testing.assert_close(logits, expected_logits)
    torch.testing.assert_close(weights, expected_weights)
    assert weights.shape == (5, hops, 4)


def test_adjacent_tying_shares_tables_between_neighbouring_hops():
    model = small_model("adjacent", hops=3)
    assert len(model.word_tables) == 4 and model.B is model.A[0]
    for k in range(2):
        assert model.A[k + 1] is model.C[k] and model.T_A[k + 1] is model.T_C[k]


def test_layerwise_tying_uses_one_a_and_one_c_for_every_hop():
    model = small_model("layerwise", hops=3)
    assert all(a is model.A[0] for a in model.A) and all(c is model.C[0] for c in model.C)
    assert model.A[0] is not model.C[0] and model.B is not model.A[0]
    assert model.H.weight.shape == (6, 6)


def test_padding_slots_get_no_weight_and_do_not_change_the_answer():
    model, data = small_model(), some_stories()
    logits, weights = model(data.story, data.question, data.lengths)
    for b, n in enumerate(data.lengths.tolist()):
        assert bool((weights[b, :, n:] == 0).all())
    torch.testing.assert_close(weights.sum(-1), torch.ones(5, 3, dtype=torch.float64))
    scribbled = data.story.clone()
    for b, n in enumerate(data.lengths.tolist()):
        scribbled[b, n:] = WORD_ID["kitchen"]  # junk beyond each story's length
    torch.testing.assert_close(model(scribbled, data.question, data.lengths)[0], logits)


def test_linear_start_uses_raw_scores_instead_of_the_softmax():
    model, data = small_model(hops=1), some_stories()
    _, weights = model(data.story, data.question, data.lengths, linear=True)
    u = model.embed(model.B, data.question)  # (B, d)
    ago = (data.lengths[:, None] - 1 - torch.arange(4)).clamp(min=0)
    m = model.embed(model.A[0], data.story) + model.T_A[0][ago]  # (B, N, d)
    scores = (m @ u[:, :, None]).squeeze(-1) * (torch.arange(4) < data.lengths[:, None])
    torch.testing.assert_close(weights[:, 0], scores)


def test_training_on_one_supporting_fact_learns_the_task():
    train = Stories.from_stories(generate("single", 1000, seed=1))
    test = Stories.from_stories(generate("single", 300, seed=2))
    torch.manual_seed(0)
    model = MemN2N(MemN2NConfig(len(VOCABULARY), embed_dim=16, hops=1))
    log = train_memn2n(model, train, epochs=6, batch_size=20, lr=0.01)
    assert len(log.losses) == len(log.seconds) == 6 and log.losses[-1] < 0.2 * log.losses[0]
    assert accuracy(model, test) > 0.9


def test_support_weights_average_each_hops_weight_on_each_supporting_sentence():
    data = Stories.from_stories(generate("two", 30, seed=4))
    torch.manual_seed(0)
    model = MemN2N(MemN2NConfig(len(VOCABULARY), embed_dim=8, hops=2))
    with torch.no_grad():
        _, weights = model(data.story, data.question, data.lengths)  # (B, K, N)
    expected = torch.tensor([[sum(float(weights[b, k, data.supporting[b, f]]) for b in range(30)) / 30
                              for f in range(2)] for k in range(2)])
    torch.testing.assert_close(support_weights(model, data), expected)
    single = Stories.from_stories(generate("single", 10, seed=4))  # one fact: the second column is -1 everywhere
    model = MemN2N(MemN2NConfig(len(VOCABULARY), embed_dim=8, hops=2))
    assert support_weights(model, single)[:, 0].isfinite().all()


# ---------------------------------------------------------------------------
# The story generator.
# ---------------------------------------------------------------------------


def reread(story):
    """Answer a story by simulating the world it describes, independently of the generator."""
    where, holder = {}, {}
    for sentence in story.sentences:
        move = re.fullmatch(r"(\w+) (?:went|moved|journeyed|travelled) to the (\w+)", sentence)
        take = re.fullmatch(r"(\w+) (?:picked up|got|grabbed) the (\w+)", sentence)
        assert move or take, sentence
        if move:
            where[move[1]] = move[2]
        else:
            holder[take[2]] = take[1]
    asked = story.question.split()[-1]
    return where[asked] if asked in PEOPLE else where[holder[asked]]


@FAST
@given(st.sampled_from(["single", "two"]), st.integers(0, 10_000))
def test_every_generated_answer_follows_from_the_story(task, seed):
    for story in generate(task, 5, seed=seed):
        assert reread(story) == story.answer
        assert 2 <= len(story.sentences) <= 10 and len(story.supporting) == (1 if task == "single" else 2)
        facts = [story.sentences[i] for i in story.supporting]
        assert story.answer in facts[-1] if task == "single" else story.answer in facts[1]
        if task == "two":
            thing = story.question.split()[-1]
            assert thing in OBJECTS and thing in facts[0] and facts[0].split()[0] == facts[1].split()[0]


def test_generation_is_deterministic_and_encoding_round_trips():
    stories = generate("two", 20, seed=3)
    assert stories == generate("two", 20, seed=3) and stories != generate("two", 20, seed=4)
    data = Stories.from_stories(stories)
    assert data.story.shape == (20, 10, 5) and len(data) == 20
    for b, story in enumerate(stories):
        for i, sentence in enumerate(story.sentences):
            words = [VOCABULARY[w] for w in data.story[b, i].tolist() if w != 0]
            assert " ".join(words) == sentence
        assert VOCABULARY[int(data.answer[b])] == story.answer and story.answer in PLACES
        assert data.supporting[b].tolist() == list(story.supporting)
        assert bool((data.story[b, len(story.sentences):] == 0).all())


def test_excluded_stories_never_come_back():
    train = generate("two", 2000, seed=1)
    plain = generate("two", 1000, seed=2)
    assert any(story in set(train) for story in plain)  # short stories do repeat by chance
    held_out = generate("two", 1000, seed=2, exclude=train)
    assert len(held_out) == 1000 and not set(held_out) & set(train)


def test_bad_input_is_rejected_with_a_message():
    with pytest.raises(TypeError, match=r"(?s)parameter 'task'.*Actual value: 'three'.*Literal\['single', 'two'\]"):
        generate("three", 3)
    with pytest.raises(ValueError, match="max_sentences must be an int >= min_sentences = 4; found 3"):
        generate("single", 3, min_sentences=4, max_sentences=3)
    with pytest.raises(ValueError, match="stories must hold at least one story; found 0"):
        Stories.from_stories([])
    with pytest.raises(ValueError, match="at most max_sentences = 4 sentences; found"):
        Stories.from_stories(generate("single", 5, min_sentences=6, max_sentences=6), max_sentences=4)
    model, data = small_model(), some_stories()
    with pytest.raises(TypeError, match=r"(?s)parameter 'story'.*Actual value: f64\[5,4,5\].*Int64\[Tensor, 'B N J'\]"):
        model(data.story.double(), data.question, data.lengths)
    with pytest.raises(ValueError, match=r"lengths must be in \[1, N = 4\]"):
        model(data.story, data.question, torch.zeros(5, dtype=torch.long))
    with pytest.raises(TypeError, match=r"(?s)parameter 'tying'.*Actual value: 'global'.*Literal\['adjacent', 'layerwise'\]"):
        MemN2NConfig(30, tying="global")
    with pytest.raises(ValueError, match="linear_epochs must be in"):
        train_memn2n(model, data, epochs=2, linear_epochs=3)



def test_word_ids_outside_the_vocabulary_are_named():
    model = MemN2N(MemN2NConfig(vocab_size=10, embed_dim=4, hops=1, max_sentences=3, sentence_length=2))
    story, question, lengths = torch.zeros(1, 3, 2, dtype=torch.long), torch.zeros(1, 2, dtype=torch.long), torch.tensor([3])
    story[0, 1, 0] = 10  # was an IndexError from inside the embedding
    with pytest.raises(ValueError, match=r"story must hold word ids in \[0, vocab_size = 10\); found ids from 0 to 10"):
        model(story, question, lengths)
    with pytest.raises(ValueError, match="question must hold word ids in"):
        model(torch.zeros(1, 3, 2, dtype=torch.long), question - 1, lengths)


def test_empty_stories_are_named():
    config = MemN2NConfig(len(VOCABULARY), embed_dim=4, hops=1)
    empty = some_stories()[torch.tensor([], dtype=torch.long)]
    with pytest.raises(ValueError, match="data must hold at least one story; found 0"):
        accuracy(MemN2N(config), empty)  # was a NaN
    with pytest.raises(ValueError, match="data must hold at least one story; found 0"):
        train_memn2n(MemN2N(config), empty, epochs=1)  # was a ZeroDivisionError


def test_a_story_built_by_hand_is_checked_item_by_item():
    good = ("mary went to the garden", "john got the milk")
    assert Story(good, "where is mary", "garden", (0,)).supporting == (0,)
    Story(good, "where is the milk", "garden", (1, 0))  # two facts, the last sentence
    for _ in range(10):  # every sentence: the signature's draw may miss it, the body not
        with pytest.raises(TypeError, match=r"(?s)sentences.*7"):
            Story((*good, 7), "where is mary", "garden", (0,))
    with pytest.raises(ValueError, match=r"sentences\[1\] must use words of VOCABULARY; found 'bob'"):
        Story((good[0], "bob went to the garden"), "where is mary", "garden", (0,))
    with pytest.raises(ValueError, match=r"question must use words of VOCABULARY; found 'who'"):
        Story(good, "who is mary", "garden", (0,))
    with pytest.raises(ValueError, match=r"answer must be a word of VOCABULARY; found 'paris'"):
        Story(good, "where is mary", "paris", (0,))
    for bad in ((-1,), (2,), (), (0, 1, 1), (True,)):
        with pytest.raises(ValueError, match=rf"supporting must be one or two indices in \[0, 2\) \(the sentences\); found {re.escape(repr(bad))}"):
            Story(good, "where is mary", "garden", bad)


def test_stories_refuse_ids_and_indices_out_of_range():
    data = some_stories()
    fields = {name: getattr(data, name) for name in ("story", "question", "answer", "lengths", "supporting")}
    assert Stories(**fields).lengths.tolist() == data.lengths.tolist()
    words = len(VOCABULARY)
    for name in ("story", "question", "answer"):
        for bad in (words, -1):
            ids = fields[name].clone()
            ids.view(-1)[0] = bad
            low, high = int(ids.min()), int(ids.max())
            assert bad in (low, high)
            with pytest.raises(ValueError, match=rf"{name} must hold word ids in \[0, {words}\); found ids from {low} to {high}"):
                Stories(**{**fields, name: ids})
    lengths = fields["lengths"].clone()
    for bad, message in ((5, "from .* to 5"), (0, "from 0 to")):
        lengths[0] = bad
        with pytest.raises(ValueError, match=rf"lengths must lie in \[1, N\] = \[1, 4\]; found values {message}"):
            Stories(**{**fields, "lengths": lengths})
    for row, value in ((0, -1), (0, 4), (1, -2), (1, 4)):
        supporting = fields["supporting"].clone()
        supporting[0, row] = value
        with pytest.raises(ValueError, match=r"supporting must hold sentence indices below each story's length \(the second may be -1, none\)"):
            Stories(**{**fields, "supporting": supporting})
    one_fact = Stories.from_stories(generate("single", 3, max_sentences=4), max_sentences=4)
    assert (one_fact.supporting[:, 1] == -1).all()  # -1: no second fact
    assert len(data[torch.tensor([-5, 4])]) == 2 and len(data[1:3]) == 2
    for index, found in (([0, 5], "from 0 to 5"), ([-6], "from -6 to -6")):
        with pytest.raises(ValueError, match=rf"index must hold stories in \[-B, B\) = \[-5, 5\); found values {found}"):
            data[torch.tensor(index)]


def test_embed_and_answer_logits_called_by_hand_name_what_is_wrong():
    model = small_model()  # float64, d = 6, J = 5
    words = torch.tensor([[1, 2, 0, 0, 0]])
    assert model.embed(model.B, words).shape == (1, 6)
    model.embed(model.B, torch.full((1, 5), len(VOCABULARY) - 1))  # the last id is a word
    for bad, found in ((len(VOCABULARY), rf"from 0 to {len(VOCABULARY)}"), (-1, "from -1 to 2")):
        with pytest.raises(ValueError, match=rf"words must hold word ids in \[0, {len(VOCABULARY)}\); found ids {found}"):
            model.embed(model.B, torch.tensor([[bad, 2, 0, 0, 0]]))
    with pytest.raises(ValueError, match=r"words must have shape \(\*batch, J\) with J = 5; found \(1, 6\)"):
        model.embed(model.B, torch.zeros(1, 6, dtype=torch.long))
    u = torch.zeros(2, 6, dtype=torch.float64)
    assert model.answer_logits(u).shape == (2, len(VOCABULARY))
    for bad, found in ((u.float(), r"torch.float32 of shape \(2, 6\)"), (u.half(), "torch.float16"),
                       (torch.zeros(2, 7, dtype=torch.float64), r"torch.float64 of shape \(2, 7\)")):
        with pytest.raises(TypeError, match=rf"u must be \(B, d\) with d = 6 and the model's dtype torch.float64; found {found}"):
            model.answer_logits(bad)
