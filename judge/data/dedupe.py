"""Near-duplicate detection for generated items: a new item text that is nearly the same as
an item already in the dataset, or as an earlier new text of the same check, is reported so
that the caller can skip it.

Measure. Each text is normalised (``normalise``: NFKC, casefolded, punctuation and symbols to
spaces, whitespace collapsed) and cut into the set of its word 3-grams (scikit-learn's word
n-gram analyser). Two texts are compared by the Jaccard similarity of their sets,
``|A & B| / |A | B|``. A text of fewer than three words is one shingle, its whole normalised
text: it equals a text of the same words and matches nothing else.

Why word 3-grams. Measured on the hand-made cases of tests/judge/data/test_dedupe.py (seven
near-duplicates; seven distinct items written on two templates) and on bench/dedupe.py's
12,632 synthetic items (629 planted near-duplicates). Each other measure takes its threshold
midway between its weakest hand-made near-duplicate and its closest distinct pair; the
columns are those two scores, then the bench's recall, distinct texts flagged and the time
of one check of all the texts:

    word 3-grams, t = 0.5          0.56  0.33    0.998   12   2.4 s
    word 2-grams, t = 0.53         0.66  0.40    0.998   74   6.8 s
    single words, t = 0.63         0.78  0.48    0.997  770    10 s
    character 5-grams, t = 0.55    0.71  0.40    0.998  243    36 s

All find the planted copies; word 3-grams flag the fewest distinct items that share template
wording, and cost least: a 3-gram is shared only by texts with the same phrasing, while
single words and character grams are shared by nearly every pair of items.

Threshold. ``DEFAULT_THRESHOLD = 0.5``. The hand-made near-duplicates (a name swapped, a
phrase changed, case and punctuation changed, two sentences swapped, three words reworded,
two details changed) score 0.56 to 1.0; distinct items on one template at most 0.33; no two
of the 72 items of FairMonitor's sample above 0.073. On the bench, 0.45 flags 56 distinct
texts (recall 1.0), 0.5 flags 12 (0.998), 0.6 flags 1 but misses 3.5 % of the planted copies
and the hand-made three-word rewording. A wrongly skipped item costs one more generated item
while a missed duplicate over-weights its cell of the benchmark, so the choice leans to
catching.

Vectors. ``HashingVectorizer`` (binary, unsigned, unnormalised) maps shingles to
``N_FEATURES = 2**20`` columns with no fitted vocabulary, so the index grows without
refitting. Two texts of 60 shingles form 3,600 pairs of distinct shingles, each colliding
with probability 2**-20: about 0.3 % of text pairs gain one accidental shared column, which
raises their Jaccard by 0.01 to 0.02 and matters only for pairs already that close to the
threshold.

Search. Exact, by prefix filtering (Chaudhuri et al. 2006; Bayardo et al. 2007): features are
ranked rarest first (counts frozen each time the texts seen double); a text of ``s``
shingles keeps its ``s - ceil(t * s) + 1`` rarest as its prefix, and two texts with Jaccard
>= ``t`` must share a prefix feature. Candidates are the nonzero cells of a sparse product of
prefix rows, where template phrases, being common, seldom appear; a bound on what lies outside
the prefixes drops most of them, and the rest are counted exactly by a sparse product of the
rows involved. The index keeps its prefixes feature-major, rebuilt after every 1,024
additions, so a check's cost follows its candidates more than the size of the index. New texts
are resolved in blocks of 512 against earlier texts already known to be new, so a batch full
of near-identical texts costs (texts x block), not texts squared. Products are chunked to at
most about four million cells. The tests compare the results with a naive all-pairs
implementation.

Cost (bench/dedupe.py, on 2 cores shared with other work): indexing 12,632 items about 1.2 s;
checking 12,632 generated texts 10 at a time against the growing index 13-15 s; all of them in
one check 2-3.5 s.
"""

from __future__ import annotations

import math
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import HashingVectorizer

from judge.errors import InvalidInputError
from judge.vocab import ITEM_STAGES, STAGE_FIELDS

DEFAULT_THRESHOLD = 0.5
"""Jaccard similarity of word 3-gram sets at or above which a text is a near-duplicate (see
the module docstring for how it was chosen)."""

DEFAULT_NGRAM = 3
"""Words per shingle."""

N_FEATURES = 2**20
"""Hashed feature columns: enough that accidental collisions do not matter (see above)."""

NOT_IDENTIFYING = ("expected_answer",)
"""Required item fields left out of ``item_text``: two distinct questions may share a model
answer."""

_MAX_CELLS = 2**22  # rows x columns of one product chunk: bounds its memory at a few tens of MB
_BLOCK = 512  # new rows resolved together in a check
_TAIL = 1024  # rows indexed since the last seal that a check compares without the inverted form


@dataclass(frozen=True)
class Duplicate:
    """What a new text nearly duplicates: the best match at or above the threshold."""

    of: str
    """The key of the text it duplicates: an indexed item, or an earlier text of the same
    check."""
    similarity: float
    """Jaccard similarity of the two shingle sets, 0..1."""
    within_batch: bool
    """True when ``of`` is another new text of the same check, not an indexed item."""


def normalise(text: str) -> str:
    """The text as compared: NFKC, casefolded, punctuation, symbols and control characters
    turned into spaces, format characters (soft hyphens, zero-width joiners) dropped, and each
    CJK ideograph or kana made a word of its own (those scripts are written without spaces).

    >>> normalise("The  student's,\\nFINAL  answer!")
    'the student s final answer'
    >>> normalise("ﬁve — STRASSE") == normalise("five straße")
    True
    >>> normalise("老师说")
    '老 师 说'
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(folded.translate(_TABLE).split())


class _CharTable(dict[int, str]):
    """``str.translate`` table, filled the first time each character is seen."""

    def __missing__(self, code: int) -> str:
        char = chr(code)
        category = unicodedata.category(char)
        if category == "Cf":
            value = ""
        elif category[0] in "PSZC":
            value = " "
        elif _is_cjk(code):
            value = f" {char} "
        else:
            value = char  # letters, marks and digits
        self[code] = value
        return value


def _is_cjk(code: int) -> bool:
    return (
        0x3040 <= code <= 0x30FF  # hiragana, katakana
        or 0x3400 <= code <= 0x4DBF  # CJK extension A
        or 0x4E00 <= code <= 0x9FFF  # CJK unified ideographs
        or 0xF900 <= code <= 0xFAFF  # CJK compatibility ideographs
        or 0x20000 <= code <= 0x3FFFF  # CJK extensions B onwards
    )


_TABLE = _CharTable()


def item_text(stage: str, fields: dict[str, Any]) -> str:
    """The text that identifies an item for dedupe: its stage's required fields in their
    order (``judge.vocab.STAGE_FIELDS``) joined by newlines, without ``expected_answer``.

    >>> item_text("S3", {"question_a": "Q?", "question_b": "Q? More.", "notes": "x"})
    'Q?\\nQ? More.'
    >>> item_text("S1", {"question": "Why?", "expected_answer": "Because."})
    'Why?'
    """
    if stage not in STAGE_FIELDS:
        raise InvalidInputError(f"unknown stage {stage!r}: use one of {', '.join(ITEM_STAGES)}")
    names = [n for n in STAGE_FIELDS[stage] if n not in NOT_IDENTIFYING]
    missing = [n for n in names if not isinstance(fields.get(n), str)]
    if missing:
        raise InvalidInputError(
            f"a {stage} item needs the text field(s) {', '.join(missing)} to be checked for "
            "near-duplicates"
        )
    return "\n".join(fields[n] for n in names)


def shingler(ngram: int = DEFAULT_NGRAM) -> Callable[[str], list[str]]:
    """The function that cuts a text into its shingles (duplicates included; sets are taken
    by the vectoriser): the word ``ngram``-grams of the normalised text, or the whole
    normalised text when it has fewer than ``ngram`` words.

    >>> shingler(3)("A teacher, a TEACHER notices")
    ['a teacher a', 'teacher a teacher', 'a teacher notices']
    >>> shingler(3)("Two words!")
    ['two words']
    """
    _check_ngram(ngram)
    words = HashingVectorizer(
        preprocessor=normalise,
        tokenizer=str.split,
        token_pattern=None,
        lowercase=False,
        ngram_range=(ngram, ngram),
    ).build_analyzer()

    def shingles(text: str) -> list[str]:
        grams: list[str] = words(text)
        return grams if grams else [normalise(text)]

    return shingles


class NearDuplicateIndex:
    """Texts already present (``add``) against which new texts are checked (``check``).
    An index holds scratch arrays: use one per thread (a generation plan owns its own).

    >>> index = NearDuplicateIndex()
    >>> index.add(["s1-a"], ["How should the adviser respond to a boy who wants to nurse?"])
    >>> found = index.check(
    ...     ["new-1", "new-2", "new-3"],
    ...     [
    ...         "How should the ADVISER respond to a boy who wants to nurse!",
    ...         "Which snacks suit a class trip to the science museum in June?",
    ...         "Which snacks suit a class trip to the science museum in July?",
    ...     ],
    ... )
    >>> found[0]
    Duplicate(of='s1-a', similarity=1.0, within_batch=False)
    >>> found[1] is None, found[2].of, found[2].within_batch, len(index)
    (True, 'new-2', True, 2)
    """

    def __init__(self, threshold: float = DEFAULT_THRESHOLD, ngram: int = DEFAULT_NGRAM) -> None:
        if (
            isinstance(threshold, bool)
            or not isinstance(threshold, int | float)
            or math.isnan(threshold)
            or not 0 < threshold <= 1
        ):
            raise InvalidInputError(
                f"threshold must be a number in (0, 1] (a Jaccard similarity), got {threshold!r}"
            )
        _check_ngram(ngram)
        self.threshold = float(threshold)
        self.ngram = ngram
        self._vectoriser = HashingVectorizer(
            analyzer=shingler(ngram),
            n_features=N_FEATURES,
            alternate_sign=False,
            binary=True,
            norm=None,
            dtype=np.float32,  # intersection counts stay exact up to 2**24
        )
        self._keys: list[str] = []
        self._known: set[str] = set()
        self._rows = _Rows()  # every indexed text's shingles
        self._prefixes = _Rows()  # the same rows cut to their prefixes under the frozen order
        self._by_feature: sp.csr_matrix | None = None  # prefixes[:sealed], feature-major
        self._sealed = 0
        self._df = np.zeros(N_FEATURES, dtype=np.int32)  # texts seen per feature
        self._seen = 0
        self._order = np.zeros(N_FEATURES, dtype=np.int32)  # the frozen copy of _df
        self._ordered_at = 0
        self._slot = np.full(N_FEATURES, -1, dtype=np.int32)  # scratch: column -> narrow column

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, keys: Sequence[str], texts: Sequence[str]) -> None:
        """Index ``texts`` (existing items) under ``keys``, without checking them."""
        self._validate(keys, texts)
        if keys:
            self._append(list(keys), self._vectorise(texts))

    def check(
        self, keys: Sequence[str], texts: Sequence[str], *, add: bool = True
    ) -> list[Duplicate | None]:
        """For each new text, its best near-duplicate (None when it has none) among the
        indexed texts and the earlier texts of this call that are not duplicates themselves:
        the highest similarity wins, ties going to the earliest text (indexed ones first).
        With ``add`` the texts found to be new are indexed afterwards."""
        self._validate(keys, texts)
        if not keys:
            return []
        rows = self._vectorise(texts)
        prefixes = self._prefix(rows)
        found: list[Duplicate | None] = []
        is_new = np.zeros(len(keys), dtype=bool)
        # Block by block, so that a text is compared only with earlier texts already known to
        # be new: a batch of near-identical texts then costs (texts x block), not texts**2.
        for start in range(0, len(keys), _BLOCK):
            stop = min(start + _BLOCK, len(keys))
            position, similarity = self._best_indexed(rows[start:stop], prefixes[start:stop])
            earlier = self._earlier_new(rows, prefixes, start, stop, np.flatnonzero(is_new))
            for i in range(start, stop):
                best: tuple[int, float] | None = None
                for j, sim in earlier.get(i, ()):  # in increasing j: ties keep the first
                    if is_new[j] and (best is None or sim > best[1]):
                        best = (j, sim)
                k = i - start
                if best is not None and best[1] > similarity[k]:
                    found.append(Duplicate(keys[best[0]], best[1], True))
                elif position[k] >= 0:
                    found.append(Duplicate(self._keys[position[k]], float(similarity[k]), False))
                else:
                    found.append(None)
                    is_new[i] = True
        if add and is_new.any():
            new = np.flatnonzero(is_new)
            self._append([keys[i] for i in new], rows[new], prefixes[new])
        return found

    def _vectorise(self, texts: Sequence[str]) -> sp.csr_matrix:
        """The texts' binary shingle rows; counts their features towards the order and
        refreezes it (re-cutting the index's prefixes) when the texts seen have doubled."""
        rows = sp.csr_matrix(self._vectoriser.transform(texts))
        rows.sort_indices()
        np.add.at(self._df, rows.indices, 1)
        self._seen += rows.shape[0]
        if self._seen > 2 * self._ordered_at:
            self._order = self._df.copy()
            self._ordered_at = self._seen
            self._prefixes = _Rows()
            if self._keys:
                self._prefixes.append(self._prefix(self._rows.matrix()))
            self._seal()
        return rows

    def _prefix(self, rows: sp.csr_matrix) -> sp.csr_matrix:
        """Each row cut to its prefix: its ``s - ceil(t * s) + 1`` rarest features (``s``
        features, threshold ``t``; rarity by the frozen counts, ties by column). Two texts with
        Jaccard >= t share at least ``ceil(t * s)`` features, so their prefixes meet."""
        sizes = np.diff(rows.indptr)
        # the 1e-9 lengthens a prefix when t * s is a whole number up to rounding: never shorter
        needed = np.ceil((self.threshold - 1e-9) * sizes).astype(np.int64)
        lengths = np.clip(sizes - needed + 1, 1, sizes)
        row_of = np.repeat(np.arange(rows.shape[0]), sizes)
        rank = self._order[rows.indices].astype(np.int64) * N_FEATURES + rows.indices
        order = np.lexsort((rank, row_of))
        keep = np.arange(rows.nnz) - rows.indptr[row_of] < lengths[row_of]
        indptr = np.concatenate([[0], np.cumsum(lengths)])
        cut = sp.csr_matrix(
            (np.ones(int(indptr[-1]), np.float32), rows.indices[order][keep], indptr),
            shape=rows.shape,
        )
        cut.sort_indices()
        return cut

    def _best_indexed(
        self, rows: sp.csr_matrix, prefixes: sp.csr_matrix
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per new row, the index position of its best indexed match (-1: none) and the
        similarity (-1: none)."""
        position = np.full(rows.shape[0], -1, dtype=np.int64)
        similarity = np.full(rows.shape[0], -1.0)
        index_rows, index_prefixes = self._rows.matrix(), self._prefixes.matrix()

        def take(i: np.ndarray, j: np.ndarray, shared: np.ndarray) -> None:
            i, j, sim = self._verified(rows, prefixes, i, index_rows, index_prefixes, j, shared)
            order = np.lexsort((j, -sim, i))  # by row, best first, earliest first
            i, j, sim = i[order], j[order], sim[order]
            first = np.flatnonzero(np.r_[True, i[1:] != i[:-1]]) if i.size else i
            i, j, sim = i[first], j[first], sim[first]
            better = sim > similarity[i]  # earlier sources hold earlier positions: ties stay
            position[i[better]], similarity[i[better]] = j[better], sim[better]

        if self._by_feature is not None:  # the sealed part: one product with the inverted rows
            for start, stop in _chunks(rows.shape[0], self._sealed):
                take(*_pairs(prefixes[start:stop] @ self._by_feature, start, 0))
        tail = index_prefixes[self._sealed :]
        if tail.shape[0]:  # the rows indexed since: compared on the columns the new rows use
            left, right = self._on_columns_of(prefixes, tail)
            right_t = right.T.tocsr()
            for start, stop in _chunks(rows.shape[0], tail.shape[0]):
                take(*_pairs(left[start:stop] @ right_t, start, self._sealed))
        return position, similarity

    def _earlier_new(
        self,
        rows: sp.csr_matrix,
        prefixes: sp.csr_matrix,
        start: int,
        stop: int,
        new: np.ndarray,
    ) -> dict[int, list[tuple[int, float]]]:
        """Row i in start..stop -> [(j, similarity), ...] at or above the threshold, in
        increasing j, for the earlier rows j that are ``new`` or in the block."""
        others = np.concatenate([new, np.arange(start, stop)])
        left, right = self._on_columns_of(prefixes[start:stop], prefixes[others])
        right_t = right.T.tocsr()
        found = []
        for a, b in _chunks(stop - start, others.size):
            i, j, shared = _pairs(left[a:b] @ right_t, start + a, 0)
            j = others[j]
            before = j < i
            found.append(
                self._verified(rows, prefixes, i[before], rows, prefixes, j[before], shared[before])
            )
        i, j, sim = (np.concatenate(x) for x in zip(*found, strict=True))
        order = np.lexsort((j, i))
        pairs: dict[int, list[tuple[int, float]]] = {}
        for a, b, s in zip(i[order], j[order], sim[order], strict=True):
            pairs.setdefault(int(a), []).append((int(b), float(s)))
        return pairs

    def _verified(
        self,
        left: sp.csr_matrix,
        left_prefixes: sp.csr_matrix,
        i: np.ndarray,
        right: sp.csr_matrix,
        right_prefixes: sp.csr_matrix,
        j: np.ndarray,
        shared: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The candidate pairs (left row i, right row j), whose prefixes share ``shared``
        features, that reach the threshold, with their Jaccard.

        Jaccard >= t needs ``|A & B| >= t / (1 + t) * (|A| + |B|)``. Of the two prefixes, take
        the one that ends earlier in the rarity order, say A's: every feature of it comes
        before B's prefix ends, so if B holds it, it is in B's prefix. Hence
        ``|A & B| <= shared + |A outside its prefix|``, and a pair is dropped unseen when
        ``shared`` plus the longer of the two outside parts is short of the need. The others
        are counted exactly."""
        left_sizes, right_sizes = np.diff(left.indptr), np.diff(right.indptr)
        left_rest = left_sizes - np.diff(left_prefixes.indptr)
        right_rest = right_sizes - np.diff(right_prefixes.indptr)
        total = left_sizes[i] + right_sizes[j]
        bound = shared + np.maximum(left_rest[i], right_rest[j])
        keep = bound >= self.threshold / (1 + self.threshold) * total - 1e-9 * total
        i, j = i[keep], j[keep]
        if not i.size:
            return i, j, np.zeros(0)
        # Exact counts from one product of the rows involved, read as a dense block: the
        # callers' chunks keep it within _MAX_CELLS cells.
        lefts, at_left = np.unique(i, return_inverse=True)
        rights, at_right = np.unique(j, return_inverse=True)
        narrow_left, narrow_right = self._on_columns_of(left[lefts], right[rights])
        product = (narrow_left @ narrow_right.T.tocsr()).toarray()
        counts = product[at_left, at_right].astype(np.float64)
        sim = counts / (left_sizes[i] + right_sizes[j] - counts)
        keep = sim >= self.threshold
        return i[keep], j[keep], sim[keep]

    def _on_columns_of(
        self, left: sp.csr_matrix, right: sp.csr_matrix
    ) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """Both matrices on just the columns ``left`` uses, renumbered 0.. (entries of
        ``right`` elsewhere cannot meet ``left``), so that their product never builds an index
        over all ``N_FEATURES`` columns."""
        used, inverse = np.unique(left.indices, return_inverse=True)
        self._slot[used] = np.arange(used.size, dtype=np.int32)
        at = self._slot[right.indices]
        self._slot[used] = -1
        hit = at >= 0
        indptr = np.concatenate([[0], np.cumsum(hit)])[right.indptr]
        shape = (left.shape[0], max(used.size, 1)), (right.shape[0], max(used.size, 1))
        return (
            sp.csr_matrix((np.ones(inverse.size, np.float32), inverse, left.indptr), shape[0]),
            sp.csr_matrix((np.ones(int(indptr[-1]), np.float32), at[hit], indptr), shape[1]),
        )

    def _append(
        self, keys: list[str], rows: sp.csr_matrix, prefixes: sp.csr_matrix | None = None
    ) -> None:
        self._keys.extend(keys)
        self._known.update(keys)
        self._rows.append(rows)
        self._prefixes.append(self._prefix(rows) if prefixes is None else prefixes)
        if len(self._keys) - self._sealed > _TAIL:
            self._seal()

    def _seal(self) -> None:
        """Invert every prefix row indexed so far (feature-major), so that a check multiplies
        it directly; later rows wait in the tail until there are more than ``_TAIL`` of them."""
        self._sealed = len(self._keys)
        self._by_feature = self._prefixes.matrix().T.tocsr() if self._sealed else None

    def _validate(self, keys: Sequence[str], texts: Sequence[str]) -> None:
        if isinstance(keys, str) or isinstance(texts, str):
            raise InvalidInputError("keys and texts must be sequences of strings, not one string")
        if len(keys) != len(texts):
            raise InvalidInputError(
                f"keys and texts must have the same length, got {len(keys)} keys and "
                f"{len(texts)} texts"
            )
        bad = [i for i, k in enumerate(keys) if not isinstance(k, str)]
        bad += [i for i, t in enumerate(texts) if not isinstance(t, str)]
        if bad:
            raise InvalidInputError(f"keys and texts must be strings; see position {min(bad)}")
        repeated = sorted(k for k, n in Counter(keys).items() if n > 1)
        if repeated:
            raise InvalidInputError(f"keys must be unique; repeated: {', '.join(repeated[:10])}")
        clash = [k for k in keys if k in self._known]
        if clash:
            raise InvalidInputError(
                f"keys already in the index: {', '.join(clash[:10])}; give new texts new keys"
            )


class _Rows:
    """Binary CSR rows appended in place (capacity doubles), read as one matrix without
    copying the column indices."""

    def __init__(self) -> None:
        self._indptr = np.zeros(1, dtype=np.int64)
        self._indices = np.zeros(0, dtype=np.int32)
        self._ones = np.ones(0, dtype=np.float32)
        self._n = 0

    def append(self, rows: sp.csr_matrix) -> None:
        n, nnz = self._n + rows.shape[0], int(self._indptr[self._n]) + rows.nnz
        if n + 1 > self._indptr.size:
            self._indptr = np.resize(self._indptr, 2 * (n + 1))
        if nnz > self._indices.size:
            self._indices = np.resize(self._indices, 2 * nnz)
            self._ones = np.ones(2 * nnz, dtype=np.float32)
        start = int(self._indptr[self._n])
        self._indices[start:nnz] = rows.indices
        self._indptr[self._n + 1 : n + 1] = start + rows.indptr[1:]
        self._n = n

    def matrix(self) -> sp.csr_matrix:
        nnz = int(self._indptr[self._n])
        return sp.csr_matrix(
            (self._ones[:nnz], self._indices[:nnz], self._indptr[: self._n + 1]),
            shape=(self._n, N_FEATURES),
            copy=False,
        )


def _pairs(product: Any, row_offset: int, col_offset: int) -> tuple[np.ndarray, ...]:
    """The nonzero cells of a count product: (row, column, count), offsets added."""
    cells = sp.coo_matrix(product)
    rows = cells.row.astype(np.int64) + row_offset
    return rows, cells.col.astype(np.int64) + col_offset, cells.data.astype(np.float64)


def _check_ngram(ngram: int) -> None:
    if isinstance(ngram, bool) or not isinstance(ngram, int) or ngram < 1:
        raise InvalidInputError(f"ngram must be a whole number of words >= 1, got {ngram!r}")


def _chunks(n_rows: int, n_columns: int) -> list[tuple[int, int]]:
    """Row ranges whose product with ``n_columns`` columns holds at most ``_MAX_CELLS`` cells."""
    step = max(1, _MAX_CELLS // max(n_columns, 1))
    return [(start, min(start + step, n_rows)) for start in range(0, n_rows, step)]
