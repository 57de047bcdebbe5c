"""Baselines that need no neural network, reported beside every fine-tuned score so learning shows.

- majority: the most frequent training label, for every example (classification and pairs).
- tfidf_logreg: TF-IDF of word uni- and bigrams + logistic regression (scikit-learn). For sentence
  pairs the features are the element-wise product of the two TF-IDF vectors (shared words) and their
  absolute difference (words in one side only).
- most_frequent_tag: each word's most frequent training tag (exact form, then lowercased), else the
  most frequent tag overall (tagging).
- overlap_sentence: the context sentence sharing most normalised words with the question, as the
  answer (extractive QA; ties go to the earlier sentence).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np

from lmforge.finetune.metrics import normalize_answer


def majority(train_labels: Sequence[int], n_test: int) -> list[int]:
    label = Counter(train_labels).most_common(1)[0][0]
    return [label] * n_test


def tfidf_logreg(
    train_texts: Sequence[str],
    train_labels: Sequence[int],
    test_texts: Sequence[str],
    train_pairs: Sequence[str] | None = None,
    test_pairs: Sequence[str] | None = None,
    seed: int = 0,
) -> list[int]:
    from scipy.sparse import hstack
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    vectorizer = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1)
    vectorizer.fit([*train_texts, *(train_pairs or [])])

    def features(texts, pairs):
        a = vectorizer.transform(texts)
        if pairs is None:
            return a
        b = vectorizer.transform(pairs)
        return hstack([a.multiply(b), abs(a - b)]).tocsr()

    classifier = LogisticRegression(max_iter=2000, random_state=seed)
    classifier.fit(features(train_texts, train_pairs), np.asarray(train_labels))
    return classifier.predict(features(test_texts, test_pairs)).tolist()


def most_frequent_tag(
    train_words: Sequence[Sequence[str]],
    train_tags: Sequence[Sequence[int]],
    test_words: Sequence[Sequence[str]],
) -> list[list[int]]:
    by_word: dict[str, Counter] = defaultdict(Counter)
    by_lower: dict[str, Counter] = defaultdict(Counter)
    overall: Counter = Counter()
    for words, tags in zip(train_words, train_tags):
        for word, tag in zip(words, tags):
            by_word[word][tag] += 1
            by_lower[word.lower()][tag] += 1
            overall[tag] += 1
    fallback = overall.most_common(1)[0][0]

    def tag(word: str) -> int:
        for table, key in ((by_word, word), (by_lower, word.lower())):
            if key in table:
                return table[key].most_common(1)[0][0]
        return fallback

    return [[tag(w) for w in words] for words in test_words]


SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")


def overlap_sentence(question: str, context: str) -> str:
    sentences = [s for s in SENTENCE_END.split(context) if s.strip()] or [context]
    asked = set(normalize_answer(question).split())
    scores = [len(asked & set(normalize_answer(s).split())) for s in sentences]
    return sentences[scores.index(max(scores))]
