"""Issue 22 from Python: PackedTokens (rows packed from whole documents,
by EOS id or offsets file; fields input, target, position_ids,
document_ids, cu_seqlens) and its exact, elastic resume."""
import numpy as np
import pytest

import pinwheel
from conftest import host_loader

EOS = 9
SEQ_LEN = 8
# Document lengths (each ends with the EOS token): 20, 8 and 9 fill or
# overflow a row; the rest pack together.
LENGTHS = [3, 5, 1, 20, 4, 8, 2, 2, 9, 6, 7, 1]
DOCUMENTS = [[100 * (d + 1) + j for j in range(n - 1)] + [EOS] for d, n in enumerate(LENGTHS)]


def write_corpus(tmp_path):
    """Token j of document d is 100 * (d + 1) + j, its last the EOS. Returns
    (tokens path, offsets path)."""
    tokens, offsets = [], [0]
    for document in DOCUMENTS:
        tokens += document
        offsets.append(len(tokens))
    path = tmp_path / "tokens.bin"
    np.array(tokens, np.uint16).tofile(path)
    offsets_path = tmp_path / "offsets.bin"
    np.array(offsets, "<u8").tofile(offsets_path)
    return path, offsets_path


def all_rows(data):
    """Every row of `data`, as a dict of numpy arrays, in index order."""
    with host_loader(data, batch_size=len(data)) as loader:
        batch = loader.next()
        return {name: np.array(batch[name]) for name in batch}


def test_rows_never_mix_positions_or_targets_across_documents(tmp_path):
    path, _ = write_corpus(tmp_path)
    packed = pinwheel.PackedTokens(path, SEQ_LEN, eos_id=EOS)
    assert packed.tokens == sum(LENGTHS) and packed.documents == len(LENGTHS)
    names = [name for name, _, _ in packed.fields]
    assert names == ["input", "target", "position_ids", "document_ids", "cu_seqlens"]
    rows = all_rows(packed)
    assert rows["input"].shape == (len(packed), SEQ_LEN)
    assert rows["cu_seqlens"].shape == (len(packed), SEQ_LEN + 1)
    assert rows["cu_seqlens"].dtype == np.int32
    seen = {}
    for r in range(len(packed)):
        inp, tgt = rows["input"][r], rows["target"][r]
        pos, doc, cu = rows["position_ids"][r], rows["document_ids"][r], rows["cu_seqlens"][r]
        filled = int((doc >= 0).sum())
        assert (doc[filled:] == -1).all() and (inp[filled:] == 0).all()
        assert (tgt[filled:] == -100).all()
        bounds = [0]
        for t in range(filled):
            d = int(doc[t])
            if t > 0 and (doc[t - 1] != d or pos[t] == 0):
                bounds.append(t)
            offset = int(pos[t]) + seen.get(d, 0)  # in the document
            assert inp[t] == DOCUMENTS[d][offset], (r, t)
            # The successor in the same document (across a split), never
            # the next document's first token.
            after = DOCUMENTS[d][offset + 1] if offset + 1 < LENGTHS[d] else -100
            assert tgt[t] == after, (r, t)
        for t in range(filled):
            if t + 1 == filled or doc[t + 1] != doc[t] or pos[t + 1] == 0:
                seen[int(doc[t])] = seen.get(int(doc[t]), 0) + int(pos[t]) + 1
        bounds.append(filled)
        assert list(cu[:len(bounds)]) == bounds, r
        assert (cu[len(bounds):] == filled).all()
    assert seen == {d: n for d, n in enumerate(LENGTHS)}  # every token once


def test_an_offsets_file_gives_the_same_rows_as_the_eos_id(tmp_path):
    path, offsets_path = write_corpus(tmp_path)
    by_eos = all_rows(pinwheel.PackedTokens(path, SEQ_LEN, eos_id=EOS))
    by_offsets = all_rows(pinwheel.PackedTokens(str(path), SEQ_LEN, offsets_path=offsets_path))
    for name in by_eos:
        np.testing.assert_array_equal(by_eos[name], by_offsets[name], err_msg=name)


def test_packed_rows_resume_exactly_and_on_another_world_size(tmp_path):
    path, _ = write_corpus(tmp_path)
    packed = pinwheel.PackedTokens(path, SEQ_LEN, eos_id=EOS)
    n = len(packed)

    def loader(**kwargs):
        return host_loader(packed, batch_size=2, shuffle=True, seed=3, num_workers=2, **kwargs)

    with loader() as whole:
        batches = [(b.indices, np.array(b["input"])) for b in whole]
    order = [i for indices, _ in batches for i in indices]
    assert sorted(order) == list(range(n))
    for k in range(len(batches)):
        with loader() as first:
            for _ in range(k):
                first.next()
            state = first.state_dict()
        # The same world: bit for bit (resume= and load_state_dict in turn).
        same = loader(resume=state) if k % 2 else loader()
        if k % 2 == 0:
            same.load_state_dict(state)
        with same:
            rest = [(b.indices, np.array(b["input"])) for b in same]
        assert [i for i, _ in rest] == [i for i, _ in batches[k:]]
        for (_, a), (_, b) in zip(rest, batches[k:]):
            np.testing.assert_array_equal(a, b)
        read = []
        for rank in range(2):  # two ranks: the rest of the epoch, each once
            with loader(rank=rank, world_size=2, resume=state) as half:
                read += [i for b in half for i in b.indices]
        remaining = order[2 * k:]
        assert sorted(set(read)) == sorted(remaining)
        assert len(read) == len(remaining) + len(remaining) % 2  # wrapped padding


def test_packed_token_arguments_are_checked_naming_them(tmp_path):
    path, offsets_path = write_corpus(tmp_path)
    cases = [
        (dict(seq_len=8), pinwheel.InvalidArgumentError, "exactly one of eos_id and offsets"),
        (dict(seq_len=8, eos_id=9, offsets_path=offsets_path), pinwheel.InvalidArgumentError,
         "exactly one"),
        (dict(seq_len=0, eos_id=9), pinwheel.InvalidArgumentError, "seq_len = 0"),
        (dict(seq_len=2.0, eos_id=9), TypeError, "seq_len"),
        (dict(seq_len=8, eos_id=-3), pinwheel.InvalidArgumentError, "eos_id = -3"),
        (dict(seq_len=8, eos_id=9, token_bytes=3), pinwheel.InvalidArgumentError,
         "token_bytes = 3"),
        (dict(seq_len=8, eos_id=9, token_bytes="2"), TypeError, "token_bytes"),
        (dict(seq_len=8, eos_id=9, signed_tokens=1), TypeError, "signed_tokens"),
        (dict(seq_len=8, offsets_path=3), TypeError, "offsets_path"),
    ]
    for kwargs, error, text in cases:
        with pytest.raises(error, match=text):
            pinwheel.PackedTokens(path, **kwargs)
    with pytest.raises(TypeError, match="path"):
        pinwheel.PackedTokens(7, 8, eos_id=9)
    with pytest.raises(pinwheel.NotFoundError):
        pinwheel.PackedTokens(tmp_path / "missing.bin", 8, eos_id=9)
    bad = tmp_path / "bad_offsets.bin"
    np.array([0, 5, 3, 57], "<u8").tofile(bad)
    with pytest.raises(pinwheel.DataLossError, match="offsets"):
        pinwheel.PackedTokens(path, 8, offsets_path=bad)


def test_two_packed_corpora_mix(tmp_path):
    path, _ = write_corpus(tmp_path)
    a = pinwheel.PackedTokens(path, SEQ_LEN, eos_id=EOS)
    b = pinwheel.PackedTokens(path, SEQ_LEN, eos_id=EOS, pad_id=1)
    mix = pinwheel.MixtureDataset([a, b], [0.5, 0.5], window=2)
    with host_loader(mix, batch_size=4) as loader:
        for batch in loader:
            assert batch["cu_seqlens"].shape == (batch.size, SEQ_LEN + 1)
        assert loader.stats()["samples_per_source"] == [len(a), len(b)]


def test_documents_skips_empty_documents_as_its_docstring_says(tmp_path):
    # Issue 35: offsets 0, 0, 0, 3, 3, 5, 5, 9 hold 3 documents with tokens
    # and 4 empty ones; .documents said 7.
    path = tmp_path / "t.bin"
    np.arange(1, 10, dtype=np.uint16).tofile(path)
    offsets = tmp_path / "o.bin"
    np.array([0, 0, 0, 3, 3, 5, 5, 9], "<u8").tofile(offsets)
    packed = pinwheel.PackedTokens(path, 4, offsets_path=offsets)
    assert packed.documents == 3
    assert "empty ones skipped" in pinwheel.PackedTokens.documents.__doc__
    ids = set(all_rows(packed)["document_ids"].ravel().tolist()) - {-1}
    assert ids == {2, 4, 6}  # the offsets file's numbering
