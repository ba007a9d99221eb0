/* The character scans of the BM25 tokenizer (text/tokenize.py), compiled: the same answers as its
 * regular expressions, several times faster (the regex engine tests Unicode classes char by char).
 *
 * Character classes, as Python's `re` defines them for str patterns:
 *   \w   Py_UNICODE_ISALNUM(c) || c == '_'        \d   Py_UNICODE_ISDECIMAL(c)
 *   CJK  the ranges of tokenize._CJK; a CJK-run character is one of them that is also \w
 *   WCHAR   [^\W_{CJK}]   a word character that is neither '_' nor CJK
 *   LETTER  [^\W\d_]      a word character that is neither a digit nor '_' (CJK included)
 *
 * tokens(folded, c) == the tokens of the pieces tokenize._PIECE.findall(folded) finds, each from
 *                      the piece cache c, and where an acronym may join the number after it
 * lang_counts(...)  == the counting loop of tokenize.detect_language
 * term_ids(...)     == the term-id loop of sparse.SparseIndex._bulk_add
 * tests/test_scan.py compares each with its Python twin, over every code point and random text.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static inline int is_word(Py_UCS4 c) {
    if (c < 128) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    return Py_UNICODE_ISALNUM(c);
}

static inline int is_cjk(Py_UCS4 c) {
    return (c >= 0x3040 && c <= 0x30ff) || (c >= 0x3400 && c <= 0x4dbf) || (c >= 0x4e00 && c <= 0x9fff) ||
           (c >= 0xf900 && c <= 0xfaff) || (c >= 0xac00 && c <= 0xd7af);
}

static inline int is_digit(Py_UCS4 c) { return c < 128 ? (c >= '0' && c <= '9') : Py_UNICODE_ISDECIMAL(c); }
static inline int is_cjk_char(Py_UCS4 c) { return c >= 0x3040 && is_cjk(c) && is_word(c); }
static inline int is_wchar(Py_UCS4 c) { return c != '_' && is_word(c) && !(c >= 0x3040 && is_cjk(c)); }
static inline int is_letter(Py_UCS4 c) { return c != '_' && is_word(c) && !is_digit(c); }

static inline int is_joiner(Py_UCS4 c) {
    switch (c) {
    case '-': case '_': case '.': case '/': case ':': case '@': case '#': case '+':
        return 1;
    default:
        return 0;
    }
}

static inline int is_space(Py_UCS4 c) {
    if (c < 128) return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
    return Py_UNICODE_ISSPACE(c);
}

/* The next piece of text at or after *at: [start, end), whether it is all letters and all digits.
 * Returns 0 at the end of the text. */
typedef struct {
    int kind;
    const void *data;
    Py_ssize_t n;
} Text;

static int next_piece(const Text *t, Py_ssize_t *at, Py_ssize_t *start, Py_ssize_t *end, int *alpha, int *digits) {
    const int kind = t->kind;
    const void *data = t->data;
    const Py_ssize_t n = t->n;
    Py_ssize_t i = *at;
    while (i < n) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        Py_ssize_t j = i;
        if (is_cjk_char(c)) {
            *alpha = 1;
            *digits = 0;
            while (j < n) {
                Py_UCS4 d = PyUnicode_READ(kind, data, j);
                if (!is_cjk_char(d)) break;
                if (is_digit(d)) *alpha = 0; /* never an acronym: the caller matches pieces against its set */
                j++;
            }
        } else if (is_wchar(c)) {
            *alpha = *digits = 1;
            for (;;) {
                while (j < n) {
                    Py_UCS4 d = PyUnicode_READ(kind, data, j);
                    if (!is_wchar(d)) break;
                    /* in a WORD piece (no '_', no CJK) a letter is exactly a character that is not a digit */
                    if (is_digit(d)) *alpha = 0;
                    else *digits = 0;
                    j++;
                }
                Py_ssize_t k = j;
                while (k < n && is_joiner(PyUnicode_READ(kind, data, k))) k++;
                if (k > j && k < n && is_wchar(PyUnicode_READ(kind, data, k))) {
                    *alpha = *digits = 0;
                    j = k;
                    continue;
                }
                break;
            }
        } else {
            i++;
            continue;
        }
        *start = i;
        *end = *at = j;
        return 1;
    }
    *at = n;
    return 0;
}

/* only whitespace (str.strip()'s) in text[a, b) */
static int blank(const Text *t, Py_ssize_t a, Py_ssize_t b) {
    for (Py_ssize_t q = a; q < b; q++)
        if (!is_space(PyUnicode_READ(t->kind, t->data, q))) return 0;
    return 1;
}

static const char tokens_doc[] =
    "tokens(folded, cache, stopwords=None, stem=None, /) -> (tokens, joins)\n\n"
    "The tokens of the pieces of folded text (tokenize._PIECE.findall), each piece's from\n"
    "cache[piece] (a tuple of str; a dict, whose __missing__ makes it), and the places where an\n"
    "all-letter piece (len >= 2) has only whitespace before an all-digit one (len >= 2): (position\n"
    "in tokens of the number's first token, the letters piece, the number piece).\n"
    "With stopwords (a set), a piece of ASCII letters, digits and joiners missing from the cache\n"
    "is made here, as tokenize._piece_tokens makes it, and stored in the cache: a word or number\n"
    "() if a stopword, else (stem(piece),), or (piece,) when stem is None or the piece has a digit;\n"
    "an identifier itself, its version without the v, then its parts' tokens.";

static inline int ascii_letter(Py_UCS4 c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static inline int ascii_digit(Py_UCS4 c) { return c >= '0' && c <= '9'; }

/* text[a, b): 1 if ASCII letters only, 2 if ASCII letters and digits (a digit among them), 3 if
   ASCII letters and digits joined by joiners (an identifier: a piece never starts or ends with a
   joiner), else 0 */
static int ascii_alnum(const Text *t, Py_ssize_t a, Py_ssize_t b) {
    int digit = 0, joined = 0;
    for (Py_ssize_t q = a; q < b; q++) {
        Py_UCS4 c = PyUnicode_READ(t->kind, t->data, q);
        if (ascii_digit(c)) digit = 1;
        else if (is_joiner(c)) joined = 1;
        else if (!ascii_letter(c)) return 0;
    }
    return joined ? 3 : 1 + digit;
}

/* tokenize._V_VERSION: v, digits, then one or more of (a dot, digits) */
static int v_version(PyObject *piece) {
    const int kind = PyUnicode_KIND(piece);
    const void *data = PyUnicode_DATA(piece);
    const Py_ssize_t n = PyUnicode_GET_LENGTH(piece);
    if (n < 4 || PyUnicode_READ(kind, data, 0) != 'v') return 0;
    Py_ssize_t q = 1, groups = 0;
    for (;;) {
        Py_ssize_t d = q;
        while (q < n && ascii_digit(PyUnicode_READ(kind, data, q))) q++;
        if (q == d) return 0;
        groups++;
        if (q == n) return groups >= 2;
        if (PyUnicode_READ(kind, data, q) != '.') return 0;
        q++;
    }
}

/* one part's token, as tokenize._stem makes it: stemmed when it is letters only (new reference) */
static PyObject *stem_part(PyObject *part, int letters_only, PyObject *stem) {
    if (stem == Py_None || !letters_only) {
        Py_INCREF(part);
        return part;
    }
    PyObject *stemmed = PyObject_CallOneArg(stem, part);
    if (stemmed && !PyUnicode_Check(stemmed)) {
        PyErr_SetString(PyExc_TypeError, "tokens: stem must return a str");
        Py_CLEAR(stemmed);
    }
    return stemmed;
}

/* an ASCII identifier's tokens, as tokenize._piece_tokens makes them: the whole piece, a version
   without its v, then each part between joiners that is not a stopword (new reference) */
static PyObject *ident_tokens(PyObject *piece, PyObject *stopwords, PyObject *stem) {
    const int kind = PyUnicode_KIND(piece);
    const void *data = PyUnicode_DATA(piece);
    const Py_ssize_t n = PyUnicode_GET_LENGTH(piece);
    PyObject *out = PyList_New(0);
    if (!out || PyList_Append(out, piece) < 0) goto fail;
    if (v_version(piece)) {
        PyObject *bare = PyUnicode_Substring(piece, 1, n);
        if (!bare || PyList_Append(out, bare) < 0) { Py_XDECREF(bare); goto fail; }
        Py_DECREF(bare);
    }
    Py_ssize_t q = 0;
    while (q < n) {
        Py_ssize_t a = q;
        int letters = 1;
        while (q < n && !is_joiner(PyUnicode_READ(kind, data, q))) {
            if (!ascii_letter(PyUnicode_READ(kind, data, q))) letters = 0;
            q++;
        }
        PyObject *part = PyUnicode_Substring(piece, a, q);
        if (!part) goto fail;
        int stop = PySet_Contains(stopwords, part);
        PyObject *tok = stop == 0 ? stem_part(part, letters, stem) : NULL;
        Py_DECREF(part);
        if (stop < 0 || (stop == 0 && !tok)) goto fail;
        if (tok) {
            int rc = PyList_Append(out, tok);
            Py_DECREF(tok);
            if (rc < 0) goto fail;
        }
        while (q < n && is_joiner(PyUnicode_READ(kind, data, q))) q++;
    }
    PyObject *toks = PyList_AsTuple(out);
    Py_DECREF(out);
    return toks;
fail:
    Py_XDECREF(out);
    return NULL;
}

/* a plain word's or number's tokens, as tokenize._piece_tokens makes them (new reference, NULL on
   error); a piece with a digit is never stemmed */
static PyObject *word_tokens(PyObject *piece, int letters_only, PyObject *stopwords, PyObject *stem) {
    int stop = PySet_Contains(stopwords, piece);
    if (stop < 0) return NULL;
    if (stop) return PyTuple_New(0);
    PyObject *stemmed = stem_part(piece, letters_only, stem);
    if (!stemmed) return NULL;
    PyObject *toks = PyTuple_Pack(1, stemmed);
    Py_DECREF(stemmed);
    return toks;
}

static PyObject *tokens(PyObject *self, PyObject *args) {
    PyObject *text, *cache, *stopwords = Py_None, *stem = Py_None;
    if (!PyArg_ParseTuple(args, "UO!|OO:tokens", &text, &PyDict_Type, &cache, &stopwords, &stem)) return NULL;
    if (stopwords != Py_None && !PyAnySet_Check(stopwords)) {
        PyErr_SetString(PyExc_TypeError, "tokens: stopwords must be a set or None");
        return NULL;
    }
    Text t = {PyUnicode_KIND(text), PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text)};
    PyObject *out = PyList_New(0), *joins = PyList_New(0), *prev = NULL;
    if (!out || !joins) goto fail;
    Py_ssize_t at = 0, i, j, prev_end = -1;
    int alpha, digits;
    while (next_piece(&t, &at, &i, &j, &alpha, &digits)) {
        PyObject *piece = PyUnicode_Substring(text, i, j);
        if (!piece) goto fail;
        if (digits && j - i >= 2 && prev && blank(&t, prev_end, i)) {
            PyObject *join = Py_BuildValue("(nOO)", PyList_GET_SIZE(out), prev, piece);
            if (!join || PyList_Append(joins, join) < 0) { Py_XDECREF(join); Py_DECREF(piece); goto fail; }
            Py_DECREF(join);
        }
        PyObject *toks = PyDict_GetItemWithError(cache, piece); /* borrowed */
        if (toks) {
            Py_INCREF(toks);
        } else if (!PyErr_Occurred()) {
            int plain = stopwords != Py_None ? ascii_alnum(&t, i, j) : 0;
            if (plain) { /* the common misses, without Python frames */
                toks = plain == 3 ? ident_tokens(piece, stopwords, stem) : word_tokens(piece, plain == 1, stopwords, stem);
                if (toks && PyDict_SetItem(cache, piece, toks) < 0) Py_CLEAR(toks);
            } else {
                toks = PyObject_GetItem(cache, piece); /* the cache's __missing__ */
            }
        }
        if (!toks) { Py_DECREF(piece); goto fail; }
        if (!PyTuple_Check(toks)) {
            PyErr_SetString(PyExc_TypeError, "tokens: the cache must hold tuples");
            Py_DECREF(toks);
            Py_DECREF(piece);
            goto fail;
        }
        for (Py_ssize_t q = 0; q < PyTuple_GET_SIZE(toks); q++)
            if (PyList_Append(out, PyTuple_GET_ITEM(toks, q)) < 0) { Py_DECREF(toks); Py_DECREF(piece); goto fail; }
        Py_DECREF(toks);
        Py_XDECREF(prev);
        prev = NULL;
        if (alpha && j - i >= 2) prev = piece; /* keeps the reference */
        else Py_DECREF(piece);
        prev_end = j;
    }
    Py_XDECREF(prev);
    return Py_BuildValue("(NN)", out, joins);
fail:
    Py_XDECREF(prev);
    Py_XDECREF(out);
    Py_XDECREF(joins);
    return NULL;
}

static const char lang_doc[] =
    "lang_counts(folded, table, maxlen, nlangs, /) -> (cjk, words, counts)\n\n"
    "cjk: the CJK-run characters of folded; words: its runs of letters ([^\\W\\d_]+); counts[l]:\n"
    "the runs of length >= 2 (and <= maxlen) whose table[run] (a bit mask) has bit l.";

static PyObject *lang_counts(PyObject *self, PyObject *args) {
    PyObject *text, *table;
    Py_ssize_t maxlen;
    int nlangs;
    if (!PyArg_ParseTuple(args, "UO!ni:lang_counts", &text, &PyDict_Type, &table, &maxlen, &nlangs)) return NULL;
    if (nlangs < 0 || nlangs > 32) {
        PyErr_SetString(PyExc_ValueError, "nlangs must be 0..32");
        return NULL;
    }
    const int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    Py_ssize_t counts[32] = {0}, cjk = 0, words = 0, i = 0;
    while (i < n) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (!is_letter(c)) {
            if (is_cjk_char(c)) cjk++;
            i++;
            continue;
        }
        Py_ssize_t j = i;
        while (j < n) {
            Py_UCS4 d = PyUnicode_READ(kind, data, j);
            if (!is_letter(d)) break;
            if (is_cjk_char(d)) cjk++;
            j++;
        }
        words++;
        if (j - i >= 2 && j - i <= maxlen) {
            PyObject *w = PyUnicode_Substring(text, i, j);
            if (!w) return NULL;
            PyObject *bits = PyDict_GetItemWithError(table, w);
            Py_DECREF(w);
            if (bits) {
                unsigned long mask = PyLong_AsUnsignedLong(bits);
                if (mask == (unsigned long)-1 && PyErr_Occurred()) return NULL;
                for (int l = 0; l < nlangs; l++)
                    if (mask & (1UL << l)) counts[l]++;
            } else if (PyErr_Occurred()) {
                return NULL;
            }
        }
        i = j;
    }
    PyObject *tup = PyTuple_New(nlangs);
    if (!tup) return NULL;
    for (int l = 0; l < nlangs; l++) {
        PyObject *v = PyLong_FromSsize_t(counts[l]);
        if (!v) { Py_DECREF(tup); return NULL; }
        PyTuple_SET_ITEM(tup, l, v);
    }
    return Py_BuildValue("(nnN)", cjk, words, tup);
}

static const char ids_doc[] =
    "term_ids(texts, vocab, /) -> (ids, lengths)\n\n"
    "Each text split on whitespace (str.split()); ids: bytes of int64, each token's id in vocab\n"
    "(a dict; a new token gets id len(vocab) and is added); lengths: each text's token count.";

static PyObject *term_ids(PyObject *self, PyObject *args) {
    PyObject *texts, *vocab;
    if (!PyArg_ParseTuple(args, "O!O!:term_ids", &PyList_Type, &texts, &PyDict_Type, &vocab)) return NULL;
    Py_ssize_t cap = 1024, used = 0;
    int64_t *ids = PyMem_Malloc(cap * sizeof(int64_t));
    PyObject *lengths = PyList_New(PyList_GET_SIZE(texts));
    if (!ids || !lengths) goto fail;
    for (Py_ssize_t t = 0; t < PyList_GET_SIZE(texts); t++) {
        PyObject *text = PyList_GET_ITEM(texts, t);
        if (!PyUnicode_Check(text)) {
            PyErr_SetString(PyExc_TypeError, "term_ids: texts must be str");
            goto fail;
        }
        const int kind = PyUnicode_KIND(text);
        const void *data = PyUnicode_DATA(text);
        const Py_ssize_t n = PyUnicode_GET_LENGTH(text);
        Py_ssize_t i = 0, count = 0;
        while (i < n) {
            if (is_space(PyUnicode_READ(kind, data, i))) { i++; continue; }
            Py_ssize_t j = i + 1;
            while (j < n && !is_space(PyUnicode_READ(kind, data, j))) j++;
            PyObject *tok = PyUnicode_Substring(text, i, j);
            if (!tok) goto fail;
            PyObject *id = PyDict_GetItemWithError(vocab, tok);
            int64_t v;
            if (id) {
                v = PyLong_AsLongLong(id);
                if (v == -1 && PyErr_Occurred()) { Py_DECREF(tok); goto fail; }
            } else if (PyErr_Occurred()) {
                Py_DECREF(tok);
                goto fail;
            } else {
                v = PyDict_GET_SIZE(vocab);
                PyObject *nid = PyLong_FromLongLong(v);
                if (!nid || PyDict_SetItem(vocab, tok, nid) < 0) { Py_XDECREF(nid); Py_DECREF(tok); goto fail; }
                Py_DECREF(nid);
            }
            Py_DECREF(tok);
            if (used == cap) {
                int64_t *grown = PyMem_Realloc(ids, 2 * cap * sizeof(int64_t));
                if (!grown) { PyErr_NoMemory(); goto fail; }
                ids = grown;
                cap *= 2;
            }
            ids[used++] = v;
            count++;
            i = j;
        }
        PyObject *len = PyLong_FromSsize_t(count);
        if (!len) goto fail;
        PyList_SET_ITEM(lengths, t, len);
    }
    PyObject *buf = PyBytes_FromStringAndSize((const char *)ids, used * (Py_ssize_t)sizeof(int64_t));
    PyMem_Free(ids);
    if (!buf) { Py_DECREF(lengths); return NULL; }
    return Py_BuildValue("(NN)", buf, lengths);
fail:
    PyMem_Free(ids);
    Py_XDECREF(lengths);
    return NULL;
}

static const char group_doc[] =
    "group_postings(ids, lengths, n_terms, base, /) -> (pos, tf, offsets)\n\n"
    "The postings of a block of chunks: ids (bytes of int64, each token's term id < n_terms, the\n"
    "chunks' tokens one after the other) and lengths (each chunk's token count). pos and tf: bytes\n"
    "of int32, grouped by term id and, within a term, by position (base + the chunk's index); for\n"
    "each chunk holding the term once, its position and the term's count in it. offsets: bytes of\n"
    "int64, n_terms + 1, term t's run is [offsets[t], offsets[t + 1]). (What numpy's unique of\n"
    "term * chunks + chunk gives, in two linear passes.)";

static PyObject *group_postings(PyObject *self, PyObject *args) {
    Py_buffer ids;
    PyObject *lengths;
    Py_ssize_t n_terms, base;
    if (!PyArg_ParseTuple(args, "y*O!nn:group_postings", &ids, &PyList_Type, &lengths, &n_terms, &base)) return NULL;
    PyObject *result = NULL;
    const int64_t *tok = ids.buf;
    const Py_ssize_t n_tok = ids.len / (Py_ssize_t)sizeof(int64_t), n_chunks = PyList_GET_SIZE(lengths);
    int64_t *last = NULL, *offsets = NULL;
    int32_t *slot_tf = NULL, *pair_term = NULL, *pair_tf = NULL, *pos = NULL, *tf = NULL, *pair_chunk = NULL;
    if (n_terms < 0 || base < 0 || base + n_chunks > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "group_postings: n_terms and base out of range");
        goto done;
    }
    last = PyMem_Malloc((n_terms + 1) * sizeof(int64_t));
    offsets = PyMem_Calloc(n_terms + 1, sizeof(int64_t));
    slot_tf = PyMem_Malloc((n_terms + 1) * sizeof(int32_t)); /* the pair index of a term in the chunk */
    pair_term = PyMem_Malloc((n_tok + 1) * sizeof(int32_t));
    pair_chunk = PyMem_Malloc((n_tok + 1) * sizeof(int32_t));
    pair_tf = PyMem_Malloc((n_tok + 1) * sizeof(int32_t));
    if (!last || !offsets || !slot_tf || !pair_term || !pair_chunk || !pair_tf) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t t = 0; t < n_terms; t++) last[t] = -1;
    Py_ssize_t at = 0, pairs = 0;
    for (Py_ssize_t c = 0; c < n_chunks; c++) {
        Py_ssize_t len = PyLong_AsSsize_t(PyList_GET_ITEM(lengths, c));
        if (len < 0 || at + len > n_tok) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "group_postings: lengths do not match ids");
            goto done;
        }
        for (Py_ssize_t q = at; q < at + len; q++) {
            int64_t t = tok[q];
            if (t < 0 || t >= n_terms) {
                PyErr_SetString(PyExc_ValueError, "group_postings: a term id outside n_terms");
                goto done;
            }
            if (last[t] == c) {
                pair_tf[slot_tf[t]]++;
            } else {
                last[t] = c;
                slot_tf[t] = (int32_t)pairs;
                pair_term[pairs] = (int32_t)t;
                pair_chunk[pairs] = (int32_t)c;
                pair_tf[pairs] = 1;
                offsets[t + 1]++;
                pairs++;
            }
        }
        at += len;
    }
    if (at != n_tok) {
        PyErr_SetString(PyExc_ValueError, "group_postings: lengths do not match ids");
        goto done;
    }
    for (Py_ssize_t t = 0; t < n_terms; t++) offsets[t + 1] += offsets[t];
    pos = PyMem_Malloc((pairs + 1) * sizeof(int32_t));
    tf = PyMem_Malloc((pairs + 1) * sizeof(int32_t));
    if (!pos || !tf) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t t = 0; t < n_terms; t++) last[t] = offsets[t]; /* now each term's cursor */
    for (Py_ssize_t k = 0; k < pairs; k++) { /* in chunk order: positions ascend within a term */
        int64_t dst = last[pair_term[k]]++;
        pos[dst] = (int32_t)(base + pair_chunk[k]);
        tf[dst] = pair_tf[k];
    }
    result = Py_BuildValue("(y#y#y#)", (const char *)pos, pairs * (Py_ssize_t)sizeof(int32_t), (const char *)tf,
                           pairs * (Py_ssize_t)sizeof(int32_t), (const char *)offsets,
                           (n_terms + 1) * (Py_ssize_t)sizeof(int64_t));
done:
    PyBuffer_Release(&ids);
    PyMem_Free(last);
    PyMem_Free(offsets);
    PyMem_Free(slot_tf);
    PyMem_Free(pair_term);
    PyMem_Free(pair_chunk);
    PyMem_Free(pair_tf);
    PyMem_Free(pos);
    PyMem_Free(tf);
    return result;
}

static const char views_doc[] =
    "postings_views(posts, names, runs, pos, tf, /) -> taken\n\n"
    "For each run (term id, start, end) of runs (a list of int triples), posts[names[id]] =\n"
    "(pos[start:end], tf[start:end]) (slices of the two buffers, e.g. memoryviews) when posts has\n"
    "no such term; taken: the indexes into runs of the terms posts already had (left as they are).";

static PyObject *postings_views(PyObject *self, PyObject *args) {
    PyObject *posts, *names, *runs, *pos, *tf;
    if (!PyArg_ParseTuple(args, "O!O!O!OO:postings_views", &PyDict_Type, &posts, &PyList_Type, &names,
                          &PyList_Type, &runs, &pos, &tf))
        return NULL;
    PyObject *taken = PyList_New(0);
    if (!taken) return NULL;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(runs); k++) {
        Py_ssize_t tid, a, b;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(runs, k), "nnn:postings_views", &tid, &a, &b)) goto fail;
        if (tid < 0 || tid >= PyList_GET_SIZE(names)) {
            PyErr_SetString(PyExc_IndexError, "postings_views: a term id outside names");
            goto fail;
        }
        PyObject *name = PyList_GET_ITEM(names, tid); /* borrowed */
        int has = PyDict_Contains(posts, name);
        if (has < 0) goto fail;
        if (has) {
            PyObject *ix = PyLong_FromSsize_t(k);
            if (!ix || PyList_Append(taken, ix) < 0) { Py_XDECREF(ix); goto fail; }
            Py_DECREF(ix);
            continue;
        }
        PyObject *ps = PySequence_GetSlice(pos, a, b), *ts = ps ? PySequence_GetSlice(tf, a, b) : NULL;
        PyObject *pair = ts ? PyTuple_Pack(2, ps, ts) : NULL;
        Py_XDECREF(ps);
        Py_XDECREF(ts);
        if (!pair) goto fail;
        int rc = PyDict_SetItem(posts, name, pair);
        Py_DECREF(pair);
        if (rc < 0) goto fail;
    }
    return taken;
fail:
    Py_DECREF(taken);
    return NULL;
}

static PyMethodDef methods[] = {
    {"postings_views", postings_views, METH_VARARGS, views_doc},
    {"group_postings", group_postings, METH_VARARGS, group_doc},
    {"tokens", tokens, METH_VARARGS, tokens_doc},
    {"lang_counts", lang_counts, METH_VARARGS, lang_doc},
    {"term_ids", term_ids, METH_VARARGS, ids_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", "The tokenizer's character scans.", -1, methods};

PyMODINIT_FUNC PyInit__scan(void) { return PyModule_Create(&module); }
